//go:build cuda

package codegen_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/mokc/mokc/codegen"
	"github.com/mokc/mokc/driver"
	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/layouts"
	"github.com/mokc/mokc/ptx"
	"github.com/mokc/mokc/target"
)

// TestSM90MXGemmGPU runs the sm_90a MXFP8 GEMM (e4m3 A and B with UE8M0
// scales per 32 along K) on fresh random data quantized on the host
// (layouts.Quantize, rows of a random magnitude each, so the scales vary)
// and checks C against the float64 GEMM of the dequantized values: plain
// bf16 C (the staged epilogue), gated f32 C (halves and interleaved with
// bias, as FC1 of an mxfp8 layer writes h), ragged experts, a K tail;
// poisoned C with canary rows; each case run both ways (promoted per
// block, and by expansion to bf16: GemmSpec.MXExpand), a promoted one
// of a 72-row B tile with odd scale rows (sm90MXWholeCases), 32-row
// tiles with the operand swap (sm90MXSwapCases, some reading their rows
// from token rows by slot: GatherK) and the register-fed GEMMs
// (sm90MXRegFedCases: A the bf16 values of its quantization).
func TestSM90MXGemmGPU(t *testing.T) {
	ctx, eng := engineOnGPU(t, target.SM90a, 90)
	cases := append(codegen.SM90MXCases(), codegen.SM90MXWholeCases()...)
	cases = append(cases, codegen.SM90MXExpandCases()...)
	cases = append(cases, codegen.SM90MXSwapCases()...)
	cases = append(cases, codegen.SM90MXRegFedCases()...)
	text, infos := buildMXKernels(t, eng, "mx", cases)
	r := rand.New(rand.NewPCG(rand.Uint64(), 23))
	for i, c := range cases {
		t.Run(c.Spec.Name, func(t *testing.T) { runMXGemm(t, ctx, r, text, c, infos[i]) })
	}
}

// TestSM90RoundOddGPU runs each register-fed case that stores C as bf16
// rounded to odd (GemmSpec.CRoundOdd) beside its f32 twin (COutF32, the
// same K loop) on the same random inputs and requires every stored bf16
// to be the f32 output rounded to odd, bit for bit (codegen.RoundOddBF16):
// the epilogues' packing (Builder.PackBF16RoundOdd) and their column
// bookkeeping exactly, which the tolerance of TestSM90MXGemmGPU cannot
// tell from rounding to nearest.
func TestSM90RoundOddGPU(t *testing.T) {
	ctx, eng := engineOnGPU(t, target.SM90a, 90)
	var cases []codegen.GemmCase
	for _, c := range codegen.SM90MXRegFedCases() {
		if !c.Spec.CRoundOdd {
			continue
		}
		twin := c
		twin.Spec.Name += "_f32"
		twin.Spec.CRoundOdd, twin.Spec.COutF32 = false, true
		cases = append(cases, c, twin)
	}
	if len(cases) == 0 {
		t.Fatal("no CRoundOdd cases")
	}
	text, infos := buildMXKernels(t, eng, "odd", cases)
	seed := rand.Uint64()
	for i := 0; i < len(cases); i += 2 {
		t.Run(cases[i].Spec.Name, func(t *testing.T) {
			odd := runMXGemm(t, ctx, rand.New(rand.NewPCG(seed, 23)), text, cases[i], infos[i])
			f32 := runMXGemm(t, ctx, rand.New(rand.NewPCG(seed, 23)), text, cases[i+1], infos[i+1])
			for j := range odd {
				want := codegen.RoundOddBF16(float32(f32[j]))
				if got := uint16(math.Float32bits(float32(odd[j])) >> 16); got != want && !(math.IsNaN(odd[j]) && math.IsNaN(f32[j])) {
					t.Fatalf("C[%d][%d] = %#04x, the f32 output %v rounded to odd is %#04x", j/cases[i].Spec.N, j%cases[i].Spec.N, got, f32[j], want)
				}
			}
			t.Logf("%d outputs bit for bit", len(odd))
		})
	}
}

// buildMXKernels builds the sm_90a kernels of cases into one module named
// name and returns its PTX and each case's KernelInfo.
func buildMXKernels(t *testing.T, eng codegen.Engine, name string, cases []codegen.GemmCase) (string, []codegen.KernelInfo) {
	t.Helper()
	m := ir.NewModule(name)
	var infos []codegen.KernelInfo
	for _, c := range cases {
		ki, err := eng.GroupedGEMM(m, c.Spec, 1)
		if err != nil {
			t.Fatal(err)
		}
		infos = append(infos, ki)
	}
	if _, err := m.Finish(); err != nil {
		t.Fatal(err)
	}
	text, err := ptx.Compile(m.IR, target.SM90a)
	if err != nil {
		t.Fatal(err)
	}
	return text, infos
}

// mxHostMatrix quantizes rows x k random values (each row's magnitude
// 2^e, e random in -12..12) and returns the e4m3 bytes, the scale codes and
// the dequantized values.
func mxHostMatrix(t *testing.T, r *rand.Rand, rows, k int) (data, scales []uint8, deq []float64) {
	src := make([]float32, rows*k)
	for i := 0; i < rows; i++ {
		sc := math.Ldexp(1, r.IntN(25)-12)
		for j := 0; j < k; j++ {
			src[i*k+j] = float32((2*r.Float64() - 1) * sc)
		}
	}
	q, err := layouts.Quantize(src, 1, rows, k, layouts.QuantizeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range q.Dequantize() {
		deq = append(deq, float64(v))
	}
	return q.Data, q.Scales, deq
}

// runMXGemm runs case c (kernel ki of text) on random inputs drawn from
// r, checks C against the float64 GEMM and returns C's rows (rows x N, as
// float64).
func runMXGemm(t *testing.T, ctx *driver.Context, r *rand.Rand, text string, c codegen.GemmCase, ki codegen.KernelInfo) []float64 {
	s := c.Spec
	br := s.BRows()
	var rows int
	offsets := []int32{0}
	var tiles []int32
	for e, n := range c.Counts {
		for r0 := 0; r0 < n; r0 += s.Tile.BM {
			tiles = append(tiles, int32(e), int32(rows+r0))
		}
		rows += n
		offsets = append(offsets, int32(rows))
	}
	aQ, aS, aD := mxHostMatrix(t, r, rows, s.K)
	var aRows []int32
	if g := s.GatherK; g > 0 {
		// The token rows' MXFP8 form, T of them, and random slots
		// (repeats and unused tokens included): row r of A is token
		// aRows[r]/g's, for the reference.
		T := max(1, rows/g)
		aQ, aS, aD = mxHostMatrix(t, r, T, s.K)
		aRows = make([]int32, rows)
		rowD := make([]float64, rows*s.K)
		for row := range aRows {
			aRows[row] = int32(r.IntN(T * g))
			tok := int(aRows[row]) / g
			copy(rowD[row*s.K:(row+1)*s.K], aD[tok*s.K:(tok+1)*s.K])
		}
		aD = rowD
	}
	bQ, bS, bD := mxHostMatrix(t, r, s.Experts*br, s.K)
	if strings.Contains(s.Name, "_nan") {
		// e4m3 NaN bytes (0x7F, 0xFF) at random places of B: their
		// columns' outputs are NaN in the float64 GEMM, and must be so
		// (not in the register-fed GEMM, which reads them as finite
		// values: GemmSpec.MXRegisterFed).
		for range 3 {
			i := r.IntN(len(bQ))
			bQ[i] = 0x7F | uint8(r.IntN(2))<<7
			bD[i] = math.NaN()
		}
	}
	var bias []float32
	if s.Bias {
		bias = make([]float32, s.Experts*br)
		for i := range bias {
			bias[i] = float32(r.Float64() - 0.5)
		}
	}
	// The reference: the float64 GEMM of the dequantized values, then the
	// epilogue (sm90Reference's formulas over those values).
	esize := 2
	if s.COutF32 {
		esize = 4
	}
	const canary = 3
	d := &dev{t: t, ctx: ctx}
	defer d.free()
	// The scale tensors' sizes rounded up to 4 bytes, as the runtime's are:
	// the kernels copy a row's codes by aligned 4-byte words, and the word
	// of a tensor's last code may reach past its end (mxCodeCopy).
	words := func(n int) int { return (n + 3) &^ 3 }
	var aBuf driver.DevicePtr
	if !s.MXRegisterFed {
		aBuf = d.put(aQ, len(aQ))
	} else {
		// A as the bf16 values of its MX quantization (exact), each row's
		// 32-wide blocks in layouts.RegisterFedOrder.
		a16 := make([]uint16, len(aD))
		for i := range a16 {
			v := aD[i-i%s.K+layouts.RegisterFedOrder(i%s.K)]
			a16[i] = layouts.BF16FromF32(float32(v))
			if float64(layouts.F32FromBF16(a16[i])) != v {
				t.Fatalf("A[%d] = %v is not a bf16 value", i, v)
			}
		}
		aBuf = d.put(a16, 2*len(a16))
	}
	bufs := map[string]driver.DevicePtr{
		codegen.RoleA: aBuf, codegen.RoleB: d.put(bQ, len(bQ)),
		codegen.RoleAScales: d.put(aS, words(len(aS))), codegen.RoleBScales: d.put(bS, words(len(bS))),
		codegen.RoleC:     d.put(nil, esize*(rows+canary)*s.N),
		codegen.RoleTiles: d.put(tiles, 4*len(tiles)+4), codegen.RoleOffsets: d.put(offsets, 4*len(offsets)),
		codegen.RoleNumTiles: d.put([]int32{int32(len(tiles) / 2)}, 4),
	}
	if s.Bias {
		bufs[codegen.RoleBias] = d.put(bias, 4*len(bias))
	}
	if s.GatherK > 0 {
		bufs[codegen.RoleARows] = d.put(aRows, 4*len(aRows))
	}
	if s.QuantizeCValues { // poisoned (0xFF) like C, canary rows included
		bufs[codegen.RoleCV] = d.put(nil, 2*(rows+canary)*s.N)
	} else if s.QuantizeC { // poisoned (0xFF) like C, canary rows included
		bufs[codegen.RoleCQ] = d.put(nil, (rows+canary)*s.N)
		bufs[codegen.RoleCScales] = d.put(nil, words((rows+canary)*s.N/32))
	}
	f := sm90Function(t, ctx, text, ki)
	args := sm90GemmArgs(t, ctx, ki, bufs, rows)
	grid := driver.Dim3{X: int(ki.Grid[0].Eval(int64(rows))), Y: int(ki.Grid[1].Eval(int64(rows))), Z: int(ki.Grid[2].Eval(int64(rows)))}
	if err := f.Launch(grid, driver.Dim3{X: ki.Block, Y: 1, Z: 1}, ki.SharedBytes, nil, args); err != nil {
		t.Fatal(err)
	}
	if err := ctx.Synchronize(); err != nil {
		t.Fatal(err)
	}
	got := readC(t, ctx, bufs[codegen.RoleC], (rows+canary)*s.N, s.COutF32)
	sig := func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
	bad := 0
	var rms float64
	ref, sum := make([]float64, rows*s.N), make([]float64, rows*s.N)
	for row := 0; row < rows; row++ {
		e := 0
		for e+1 < len(offsets)-1 && int(offsets[e+1]) <= row {
			e++
		}
		// dot is C's float64 value at column j and the sum of |products|,
		// which bounds the error of the tensor cores' e4m3 sums.
		dot := func(j int) (v, abs float64) {
			for k := 0; k < s.K; k++ {
				p := aD[row*s.K+k] * bD[(e*br+j)*s.K+k]
				v += p
				abs += math.Abs(p)
			}
			if s.Bias {
				v += float64(bias[e*br+j])
			}
			return v, abs
		}
		for n := 0; n < s.N; n++ {
			if s.Epilogue == codegen.EpiStore {
				ref[row*s.N+n], sum[row*s.N+n] = dot(n)
				continue
			}
			gr, ur := n, s.N+n
			if s.Gate == codegen.GateInterleaved && !s.BHalvesInPairs { // BHalvesInPairs: halves in memory
				gr, ur = 2*n, 2*n+1
			}
			g, sg := dot(gr)
			u, su := dot(ur)
			// The output and its first-order sensitivity to errors of sg
			// in g and su in u.
			var w, dg, du float64
			if s.Act.Kind == codegen.ActGPTOSS {
				g = math.Min(g, s.Act.Limit)
				u = math.Max(math.Min(u, s.Act.Limit), -s.Act.Limit)
				sa := sig(s.Act.Alpha * g)
				w = g * sa * (u + 1)
				dg, du = sa*(1+s.Act.Alpha*g*(1-sa))*(u+1), g*sa
			} else {
				sa := sig(g)
				w = g * sa * u
				dg, du = sa*(1+g*(1-sa))*u, g*sa
			}
			ref[row*s.N+n], sum[row*s.N+n] = w, math.Abs(dg)*sg+math.Abs(du)*su
		}
	}
	for _, v := range ref {
		if !math.IsNaN(v) {
			rms += v * v
		}
	}
	rms = math.Sqrt(rms / float64(len(ref)+1))
	tols := make([]float64, len(ref))
	for i, w := range ref {
		// Hopper's e4m3 wgmma sums a K block's products in less than f32
		// precision (DeepSeek-V3 technical report, section 3.3.2: about 14
		// bits kept on H800), so the bound is relative to the sum of the
		// products' magnitudes (sum: propagated through the activation),
		// 2^-12 of it, plus the f32 promotion and epilogue.
		tol := 0x1p-12*sum[i] + 1e-4*math.Abs(w) + 1e-5*rms + 1e-12
		if !s.COutF32 {
			tol += math.Abs(w)/128 + 1e-3*rms // and one bf16 rounding
		}
		tols[i] = tol
		if s.QuantizeCOnly { // C itself is never written
			if g := got[i]; !math.IsNaN(g) { // the poison bytes read as NaN
				t.Fatalf("C[%d][%d] = %v written with QuantizeCOnly", i/s.N, i%s.N, g)
			}
			continue
		}
		if g := got[i]; math.IsNaN(w) != math.IsNaN(g) || !math.IsNaN(w) && math.Abs(g-w) > tol {
			if bad++; bad < 5 {
				t.Errorf("C[%d][%d] = %v, want %v (tolerance %.3g)", i/s.N, i%s.N, g, w, tol)
			}
		}
	}
	for i := rows * s.N; i < len(got); i++ {
		if !math.IsNaN(got[i]) && !(s.COutF32 && math.Float32bits(float32(got[i])) == 0xFFFFFFFF) {
			t.Fatalf("canary C[%d][%d] overwritten (%v)", i/s.N, i%s.N, got[i])
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d outputs wrong", bad, len(ref))
	}
	if s.QuantizeC {
		var near []float64 // with QuantizeCOnly: no C to quantize, the reference and its tolerance instead
		if s.QuantizeCOnly {
			near = tols
		}
		if s.QuantizeCValues {
			checkQuantizedValues(t, ctx, bufs, got, ref, near, rows, canary, s.N)
		} else {
			checkQuantizedC(t, ctx, bufs, got, ref, near, rows, canary, s.N)
		}
	}
	t.Log(fmt.Sprintf("%d rows checked", rows))
	return got[:rows*s.N]
}

// checkQuantizedC requires the epilogue's c_q and c_scales (GemmSpec.
// QuantizeC) to be, byte for byte, layouts.Quantize of the kernel's own f32
// C rows (what moe_quantize_h makes of them), or, with tol (QuantizeCOnly:
// no C stored), their values to be within e4m3's rounding of the float64
// reference ref (tol: C's tolerance); and the canary rows to stay
// poisoned.
func checkQuantizedC(t *testing.T, ctx *driver.Context, bufs map[string]driver.DevicePtr, c, ref, tol []float64, rows, canary, n int) {
	t.Helper()
	q := make([]uint8, (rows+canary)*n)
	sc := make([]uint8, (rows+canary)*n/32)
	if err := ctx.CopyFromDevice(q, bufs[codegen.RoleCQ]); err != nil {
		t.Fatal(err)
	}
	if err := ctx.CopyFromDevice(sc, bufs[codegen.RoleCScales]); err != nil {
		t.Fatal(err)
	}
	if tol != nil {
		for i := 0; i < rows*n; i++ {
			amax := 0.0
			for j := i - i%32; j < i-i%32+32; j++ {
				amax = math.Max(amax, math.Abs(ref[j]))
			}
			g := float64(layouts.F32FromE4M3(q[i])) * float64(layouts.F32FromUE8M0(sc[i/32]))
			if !withinE4M3(g, ref[i], amax, tol[i]) {
				t.Fatalf("c_q[%d][%d] x scale = %v, want %v within e4m3 rounding (block amax %v)", i/n, i%n, g, ref[i], amax)
			}
		}
	} else {
		want := quantizeRows(t, c, rows, n)
		for i, w := range want.Data {
			if q[i] != w {
				t.Fatalf("c_q[%d][%d] = %#02x, want %#02x (C = %v, scale code %d)", i/n, i%n, q[i], w, c[i], want.Scales[i/32])
			}
		}
		for i, w := range want.Scales {
			if sc[i] != w {
				t.Fatalf("c_scales[%d][%d] = %d, want %d", i/(n/32), i%(n/32), sc[i], w)
			}
		}
	}
	for i := rows * n; i < len(q); i++ {
		if q[i] != 0xFF {
			t.Fatalf("canary c_q[%d][%d] overwritten (%#02x)", i/n, i%n, q[i])
		}
	}
	for i := rows * n / 32; i < len(sc); i++ {
		if sc[i] != 0xFF {
			t.Fatalf("canary c_scales[%d] overwritten (%d)", i, sc[i])
		}
	}
}

// checkQuantizedValues requires the epilogue's c_v (GemmSpec.
// QuantizeCValues) to be, bit for bit, the bf16 MXFP8 values of
// layouts.Quantize of the kernel's own f32 C rows in the register-fed
// order (what moe_quantize_h_rf makes of them), or, with tol
// (QuantizeCOnly: no C stored), within e4m3's rounding of the float64
// reference ref (tol: C's tolerance); and the canary rows to stay
// poisoned.
func checkQuantizedValues(t *testing.T, ctx *driver.Context, bufs map[string]driver.DevicePtr, c, ref, tol []float64, rows, canary, n int) {
	t.Helper()
	v := make([]uint16, (rows+canary)*n)
	if err := ctx.CopyFromDevice(v, bufs[codegen.RoleCV]); err != nil {
		t.Fatal(err)
	}
	var want []float32
	if tol == nil {
		want = quantizeRows(t, c, rows, n).Dequantize()
	}
	for i := 0; i < rows*n; i++ {
		e := i - i%32 + layouts.RegisterFedOrder(i%32) // the element at position i
		if tol == nil {
			if w := layouts.BF16FromF32(want[e]); v[i] != w {
				t.Fatalf("c_v[%d][%d] = %#04x, want %#04x (element %d, C = %v)", i/n, i%n, v[i], w, e%n, c[e])
			}
			continue
		}
		amax := 0.0
		for j := e - e%32; j < e-e%32+32; j++ {
			amax = math.Max(amax, math.Abs(ref[j]))
		}
		g := float64(layouts.F32FromBF16(v[i]))
		if !withinE4M3(g, ref[e], amax, tol[e]) {
			t.Fatalf("c_v[%d][%d] = %v, want %v within e4m3 rounding (element %d, block amax %v)", i/n, i%n, g, ref[e], e%n, amax)
		}
	}
	for i := rows * n; i < len(v); i++ {
		if v[i] != 0xFFFF {
			t.Fatalf("canary c_v[%d][%d] overwritten (%#04x)", i/n, i%n, v[i])
		}
	}
}

// quantizeRows is layouts.Quantize of the first rows x n values of c as
// f32: the MXFP8 form the quantize kernels make of a kernel's C.
func quantizeRows(t *testing.T, c []float64, rows, n int) *layouts.MXFP8 {
	t.Helper()
	src := make([]float32, rows*n)
	for i := range src {
		src[i] = float32(c[i])
	}
	q, err := layouts.Quantize(src, 1, rows, n, layouts.QuantizeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// withinE4M3 reports whether g, an MXFP8 value of the output want (its
// 32-wide block's largest magnitude amax, its own tolerance tol), lies
// within e4m3's rounding of it: half a step of 3 mantissa bits (1/16),
// the subnormal step of the block's scale, and twice the output's
// tolerance; never for a NaN g.
func withinE4M3(g, want, amax, tol float64) bool {
	return !math.IsNaN(g) && !(math.Abs(g-want) > math.Abs(want)/16+amax/448/256+2*tol)
}

// TestWidenE4M3GPU runs the MXExpand converters' widening (WidenKernel) on
// every e4m3 byte under scale codes across the UE8M0 range (the fast
// path's 0..134, the exact path's 135..254, NaN's 255) and requires every
// bf16 result to be bit for bit the round-to-nearest-even bf16 of the f32
// product e4m3 x 2^(code-127) (exact for codes >= 3,
// layouts.TestMXValuesInBF16; e4m3 subnormals included), a NaN where the
// byte or the scale is NaN, with poisoned outputs.
func TestWidenE4M3GPU(t *testing.T) {
	ctx := openGPU(t)
	m := ir.NewModule("widen")
	codegen.WidenKernel(m)
	if _, err := m.Finish(); err != nil {
		t.Fatal(err)
	}
	text, err := ptx.Compile(m.IR, target.SM90a)
	if err != nil {
		t.Fatal(err)
	}
	mod, err := ctx.LoadModule(text)
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Unload()
	f, err := mod.Function("widen_e4m3")
	if err != nil {
		t.Fatal(err)
	}
	codeSet := []uint8{0, 1, 2, 3, 7, 100, 118, 120, 127, 133, 134, 135, 140, 200, 253, 254, 255}
	// Every byte under every code, 16 to a chunk; then chunks of random
	// bytes with one NaN byte under an ordinary code (the slow path for a
	// chunk whose other bytes are ordinary).
	var in, codes []uint8
	for _, c := range codeSet {
		for x := 0; x < 256; x += 16 {
			for j := 0; j < 16; j++ {
				in = append(in, uint8(x+j))
			}
			codes = append(codes, c)
		}
	}
	r := rand.New(rand.NewPCG(rand.Uint64(), 29))
	for i := 0; i < 64; i++ {
		for j := 0; j < 16; j++ {
			b := uint8(r.IntN(256))
			if b&0x7F == 0x7F {
				b = 0x3C
			}
			in = append(in, b)
		}
		in[len(in)-16+r.IntN(16)] = 0x7F | uint8(r.IntN(2))<<7
		codes = append(codes, uint8(110+r.IntN(25)))
	}
	n := len(codes)
	d := &dev{t: t, ctx: ctx}
	defer d.free()
	dIn, dCodes, dOut := d.put(in, len(in)), d.put(codes, len(codes)), d.put(nil, 32*n)
	args := driver.NewArgs().Ptr(dIn).Ptr(dCodes).Ptr(dOut).I32(int32(n))
	if err := f.Launch(driver.Dim3{X: (n + 127) / 128, Y: 1, Z: 1}, driver.Dim3{X: 128, Y: 1, Z: 1}, 0, nil, args); err != nil {
		t.Fatal(err)
	}
	if err := ctx.Synchronize(); err != nil {
		t.Fatal(err)
	}
	out := make([]uint16, 16*n)
	if err := ctx.CopyFromDevice(out, dOut); err != nil {
		t.Fatal(err)
	}
	bad := 0
	for i, got := range out {
		x, c := in[i], codes[i/16]
		want := float32(float64(layouts.F32FromE4M3(x)) * float64(layouts.F32FromUE8M0(c)))
		g := layouts.F32FromBF16(got)
		ok := (math.IsNaN(float64(want)) && math.IsNaN(float64(g))) || got == layouts.BF16FromF32(want)
		if !ok {
			if bad++; bad <= 10 {
				t.Errorf("e4m3 %#02x x 2^(%d-127): got bf16 %#04x (%g), want %#04x (%g)", x, c, got, g, layouts.BF16FromF32(want), want)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d values wrong", bad, len(out))
	}
	t.Logf("%d values (%d chunks) bit for bit, NaN for NaN", len(out), n)
}
