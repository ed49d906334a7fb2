//go:build cuda

package codegen_test

import (
	_ "embed"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/mokc/mokc/codegen"
	"github.com/mokc/mokc/driver"
	"github.com/mokc/mokc/ir"
	mptx "github.com/mokc/mokc/ptx"
	"github.com/mokc/mokc/target"
)

//go:embed testdata/sm90/gemm.llc.ptx
var sm90GemmLLC string

// sm90OurPTX compiles a module with mokc's own ptx backend for sm_90a.
var sm90OurPTX = func(m *ir.Module) (string, error) { return mptx.Compile(m.IR, target.SM90a) }

// sm90GemmData is the host side of one grouped GEMM run.
type sm90GemmData struct {
	rows           int       // rows of A and C
	a, b           []uint16  // bf16 A [rows, K], B [E, BRows, K]
	bias           []float32 // [E, BRows] or nil
	offsets, tiles []int32
	ntiles         int32
	// x and aRows: with GatherK, the token rows [T, K] and each row's slot
	// (a holds x row aRows[r]/GatherK at row r, for the reference).
	x     []uint16
	aRows []int32
}

func sm90MakeData(r *rand.Rand, c codegen.GemmCase) sm90GemmData {
	s := c.Spec
	var d sm90GemmData
	d.offsets = []int32{0}
	for e, n := range c.Counts {
		for r0 := 0; r0 < n; r0 += s.Tile.BM {
			d.tiles = append(d.tiles, int32(e), int32(d.rows+r0))
		}
		d.rows += n
		d.offsets = append(d.offsets, int32(d.rows))
	}
	d.ntiles = int32(len(d.tiles) / 2)
	rnd := func(n int, scale float64) []uint16 {
		out := make([]uint16, n)
		for i := range out {
			out[i] = uint16(math.Float32bits(float32((2*r.Float64()-1)*scale)) >> 16)
		}
		return out
	}
	d.a = rnd(d.rows*s.K, 1)
	if g := s.GatherK; g > 0 {
		// Random slots of T tokens, repeats and unused tokens included;
		// T <= rows, the rows sm90GemmArgs gives x's tensor map.
		T := max(1, d.rows/g)
		d.x = rnd(T*s.K, 1)
		d.aRows = make([]int32, d.rows)
		for row := range d.aRows {
			d.aRows[row] = int32(r.IntN(T * g))
			tok := int(d.aRows[row]) / g
			copy(d.a[row*s.K:(row+1)*s.K], d.x[tok*s.K:(tok+1)*s.K])
		}
	}
	d.b = rnd(s.Experts*s.BRows()*s.K, 2/math.Sqrt(float64(s.K)))
	if s.Bias {
		d.bias = make([]float32, s.Experts*s.BRows())
		for i := range d.bias {
			d.bias[i] = float32(r.Float64() - 0.5)
		}
	}
	return d
}

func bf(h uint16) float64 { return float64(math.Float32frombits(uint32(h) << 16)) }

// sm90Reference is C in float64: the GEMM of each row with its expert's
// weights, bias, and the activation of the spec (Activate's formulas).
func sm90Reference(c codegen.GemmCase, d sm90GemmData) []float64 {
	out := make([]float64, d.rows*c.Spec.N)
	for row := 0; row < d.rows; row++ {
		for n := 0; n < c.Spec.N; n++ {
			out[row*c.Spec.N+n] = sm90ReferenceAt(c, d, row, n)
		}
	}
	return out
}

// sm90ReferenceAt is the float64 reference of C[row][n].
func sm90ReferenceAt(c codegen.GemmCase, d sm90GemmData, row, n int) float64 {
	s := c.Spec
	br := s.BRows()
	e := 0
	for e+1 < len(d.offsets)-1 && int(d.offsets[e+1]) <= row {
		e++
	}
	dot := func(r int) float64 {
		v := 0.0
		for k := 0; k < s.K; k++ {
			bi := (e*br+r)*s.K + k
			if s.BNMajor { // B_e [K, N]
				bi = (e*s.K+k)*br + r
			}
			v += bf(d.a[row*s.K+k]) * bf(d.b[bi])
		}
		if s.Bias {
			v += float64(d.bias[e*br+r])
		}
		return v
	}
	if s.Epilogue == codegen.EpiStore {
		return dot(n)
	}
	sig := func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
	gr, ur := n, s.N+n
	if s.Gate == codegen.GateInterleaved {
		gr, ur = 2*n, 2*n+1
	}
	g, u := dot(gr), dot(ur)
	switch s.Act.Kind {
	case codegen.ActClampedSwiGLU:
		g = math.Min(g, s.Act.Limit)
		u = math.Max(math.Min(u, s.Act.Limit), -s.Act.Limit)
		return g * sig(g) * u
	case codegen.ActGPTOSS:
		g = math.Min(g, s.Act.Limit)
		u = math.Max(math.Min(u, s.Act.Limit), -s.Act.Limit)
		return g * sig(s.Act.Alpha*g) * (u + 1)
	}
	return g * sig(g) * u
}

// sm90GemmBuffers allocates and fills the device buffers of a run (C
// poisoned, with canary rows) and returns them by GEMM role.
func sm90GemmBuffers(t *testing.T, ctx *driver.Context, c codegen.GemmCase, d sm90GemmData, canary int) map[string]driver.DevicePtr {
	t.Helper()
	s := c.Spec
	put := func(v any, bytes int) driver.DevicePtr {
		if bytes < 16 {
			bytes = 16
		}
		p, err := ctx.Alloc(bytes)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ctx.Free(p) })
		if v != nil {
			if err := ctx.CopyToDevice(p, v); err != nil {
				t.Fatal(err)
			}
		} else if err := ctx.Memset(p, 0xFF, bytes); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bufs := map[string]driver.DevicePtr{
		codegen.RoleC: put(nil, 2*(d.rows+canary)*s.N),
	}
	if s.GatherK > 0 {
		bufs[codegen.RoleA] = put(d.x, 2*len(d.x))
		bufs[codegen.RoleARows] = put(d.aRows, 4*len(d.aRows))
	} else {
		bufs[codegen.RoleA] = put(d.a, 2*len(d.a))
	}
	if s.B == codegen.BTable {
		// One allocation per expert, listed in a device pointer table.
		per := s.BRows() * s.K
		table := make([]uint64, s.Experts)
		for e := s.Experts - 1; e >= 0; e-- {
			table[e] = uint64(put(d.b[e*per:(e+1)*per], 2*per))
		}
		bufs[codegen.RoleB] = put(table, 8*len(table))
	} else {
		bufs[codegen.RoleB] = put(d.b, 2*len(d.b))
	}
	if s.Bias {
		bufs[codegen.RoleBias] = put(d.bias, 4*len(d.bias))
	}
	if s.A == codegen.ATiled {
		bufs[codegen.RoleTiles] = put(d.tiles, 4*len(d.tiles)+4)
		bufs[codegen.RoleOffsets] = put(d.offsets, 4*len(d.offsets))
		bufs[codegen.RoleNumTiles] = put([]int32{d.ntiles}, 4)
	}
	return bufs
}

// sm90GemmArgs packs the kernel arguments of ki (tensor maps encoded over
// the buffers) for rows rows.
func sm90GemmArgs(t *testing.T, ctx *driver.Context, ki codegen.KernelInfo, bufs map[string]driver.DevicePtr, rows int) *driver.Args {
	t.Helper()
	T := int64(rows) // rowsPerT = 1
	args := driver.NewArgs()
	for _, p := range ki.Params {
		switch p.Type {
		case codegen.ParamPtr:
			args.Ptr(bufs[p.Role])
		case codegen.ParamI32:
			args.I32(int32(rows))
		case codegen.ParamTmap:
			tm := p.TensorMap
			dims := make([]uint64, len(tm.Dims))
			for i, e := range tm.Dims {
				dims[i] = uint64(e.Eval(T))
			}
			strides := make([]uint64, len(tm.StrideBytes))
			for i, e := range tm.StrideBytes {
				strides[i] = uint64(e.Eval(T))
			}
			box := make([]uint32, len(tm.Box))
			for i, v := range tm.Box {
				box[i] = uint32(v)
			}
			dt := driver.TensorMapBF16
			if tm.DType == "u8" {
				dt = driver.TensorMapU8 // e4m3 data (MX)
			}
			swz, err := driver.SwizzleOfBytes(tm.Swizzle)
			if err != nil {
				t.Fatalf("%s: tensor map %s: %v", ki.Name, p.Name, err)
			}
			enc, err := ctx.EncodeTensorMapTiled(dt, len(dims), bufs[tm.Operand], dims, strides, box, nil,
				driver.InterleaveNone, swz, driver.L2Promotion256B, driver.OOBFillZero)
			if err != nil {
				t.Fatalf("%s: tensor map %s: %v", ki.Name, p.Name, err)
			}
			args.Bytes(enc[:])
		default:
			t.Fatalf("%s: parameter %s of type %s", ki.Name, p.Name, p.Type)
		}
	}
	return args
}

// sm90Function loads module text and returns kernel ki, with its dynamic
// shared memory limit raised.
func sm90Function(t *testing.T, ctx *driver.Context, text string, ki codegen.KernelInfo) *driver.Function {
	t.Helper()
	mod, err := ctx.LoadModule(text)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mod.Unload() })
	f, err := mod.Function(ki.Name)
	if err != nil {
		t.Fatal(err)
	}
	if ki.SharedBytes > 48*1024 {
		if err := f.SetMaxDynamicSharedBytes(ki.SharedBytes); err != nil {
			t.Fatal(err)
		}
	}
	if ki.BlocksPerSM > 1 {
		// Built for several blocks per SM: they fit at once (registers,
		// shared memory with the largest carveout), as the runtime's
		// grid assumes.
		if err := f.SetPreferredSharedCarveout(100); err != nil {
			t.Fatal(err)
		}
		n, err := f.MaxActiveBlocksPerSM(ki.Block, ki.SharedBytes)
		if err != nil {
			t.Fatal(err)
		}
		if n < ki.BlocksPerSM {
			t.Errorf("%s: %d blocks of %d threads and %d bytes of shared memory fit an SM, built for %d", ki.Name, n, ki.Block, ki.SharedBytes, ki.BlocksPerSM)
		}
	}
	return f
}

// sm90RunGemm runs kernel ki of module text on d and returns C (bf16 bits)
// with canary rows after the last row.
func sm90RunGemm(t *testing.T, ctx *driver.Context, text string, c codegen.GemmCase, ki codegen.KernelInfo, d sm90GemmData, canary int) []uint16 {
	t.Helper()
	f := sm90Function(t, ctx, text, ki)
	bufs := sm90GemmBuffers(t, ctx, c, d, canary)
	args := sm90GemmArgs(t, ctx, ki, bufs, d.rows)
	T := int64(d.rows)
	grid := driver.Dim3{X: int(ki.Grid[0].Eval(T)), Y: int(ki.Grid[1].Eval(T)), Z: int(ki.Grid[2].Eval(T))}
	if err := f.Launch(grid, driver.Dim3{X: ki.Block, Y: 1, Z: 1}, ki.SharedBytes, nil, args); err != nil {
		t.Fatal(err)
	}
	if err := ctx.Synchronize(); err != nil {
		t.Fatal(err)
	}
	out := make([]uint16, (d.rows+canary)*c.Spec.N)
	if err := ctx.CopyFromDevice(out, bufs[codegen.RoleC]); err != nil {
		t.Fatal(err)
	}
	return out
}

// sm90Check compares C with the reference: every element of the real rows
// written and within bf16 rounding plus fp32-accumulation and ex2.approx
// error, the canary rows untouched.
func sm90Check(t *testing.T, what string, c codegen.GemmCase, d sm90GemmData, got []uint16, ref []float64) {
	t.Helper()
	s := c.Spec
	var rms float64
	for _, v := range ref {
		rms += v * v
	}
	rms = math.Sqrt(rms / float64(len(ref)+1))
	bad := 0
	for i := 0; i < d.rows*s.N; i++ {
		g := bf(got[i])
		tol := math.Abs(ref[i])/128 + 1e-3*rms + 1e-6
		if got[i] == 0xFFFF || math.IsNaN(g) || math.Abs(g-ref[i]) > tol {
			if bad < 5 {
				t.Errorf("%s: C[%d][%d] = %v (0x%04x), want %v", what, i/s.N, i%s.N, g, got[i], ref[i])
			}
			bad++
		}
	}
	for i := d.rows * s.N; i < len(got); i++ {
		if got[i] != 0xFFFF {
			t.Fatalf("%s: canary C[%d][%d] overwritten (0x%04x)", what, i/s.N, i%s.N, got[i])
		}
	}
	if bad > 0 {
		t.Fatalf("%s: %d of %d outputs wrong", what, bad, d.rows*s.N)
	}
}

// engineOnGPU opens the device, skipping the test unless its compute
// capability is cc (90: 9.0), and returns it with tg's engine.
func engineOnGPU(t *testing.T, tg target.Target, cc int) (*driver.Context, codegen.Engine) {
	t.Helper()
	ctx := openGPU(t)
	if have := ctx.Device().ComputeCapability(); have != cc {
		t.Skipf("the %v engine needs compute capability %d.%d, device has %d", tg, cc/10, cc%10, have)
	}
	eng, err := codegen.EngineFor(tg)
	if err != nil {
		t.Fatal(err)
	}
	return ctx, eng
}

// TestSM90GemmGPU runs the sm_90a engine's test kernels (llc-19's PTX from
// testdata, and mokc's backend when available) on fresh random data against
// the float64 reference; both PTX versions must agree bit for bit.
func TestSM90GemmGPU(t *testing.T) {
	ctx, eng := engineOnGPU(t, target.SM90a, 90)
	cases := codegen.SM90GemmCases("sm90t")
	m, infos := codegen.GemmModule(t, eng, append(cases, codegen.SM90PerfCases("sm90p")...))
	var ours string
	if sm90OurPTX != nil {
		var err error
		if ours, err = sm90OurPTX(m); err != nil {
			t.Fatalf("ptx backend: %v", err)
		}
	}
	if p := os.Getenv("MOKC_SM90_PTX"); p != "" {
		// A PTX file of the same kernels from elsewhere (e.g. an experimental
		// backend build) to compare against llc-19's instead of ptx.Compile's.
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		ours = string(b)
	}
	runGemmCases(t, ctx, rand.New(rand.NewPCG(rand.Uint64(), 90)), cases, infos, sm90GemmLLC, ours)
}

// TestSM90NMajorGPU runs the sm_90a GEMMs over N-major weights (mokc's PTX
// backend) on fresh random data against the float64 reference.
func TestSM90NMajorGPU(t *testing.T) {
	ctx, eng := engineOnGPU(t, target.SM90a, 90)
	cases := codegen.SM90NMajorCases("sm90n")
	m, infos := codegen.GemmModule(t, eng, cases)
	ours, err := sm90OurPTX(m)
	if err != nil {
		t.Fatalf("ptx backend: %v", err)
	}
	runGemmCases(t, ctx, rand.New(rand.NewPCG(rand.Uint64(), 91)), cases, infos, ours, "")
}

// TestSM80NMajorGPU runs the sm_80 engine's GEMMs over N-major weights
// (ldmatrix .trans; mokc's PTX backend) on fresh random data against the
// float64 reference, on any GPU from sm_80 on.
func TestSM80NMajorGPU(t *testing.T) {
	ctx := openGPU(t)
	eng, err := codegen.EngineFor(target.SM80)
	if err != nil {
		t.Fatal(err)
	}
	cases := codegen.SM80NMajorCases("sm80n")
	m, infos := codegen.GemmModule(t, eng, cases)
	ours, err := mptx.Compile(m.IR, target.SM80)
	if err != nil {
		t.Fatalf("ptx backend: %v", err)
	}
	runGemmCases(t, ctx, rand.New(rand.NewPCG(rand.Uint64(), 80)), cases, infos, ours, "")
}

// runGemmCases runs each case's kernel from llc-19's PTX llc and from
// mokc's PTX ours ("": llc-19's only) on fresh random data from r, checks
// both against the float64 reference and requires them to agree bit for
// bit.
func runGemmCases(t *testing.T, ctx *driver.Context, r *rand.Rand, cases []codegen.GemmCase, infos []codegen.KernelInfo, llc, ours string) {
	for i, c := range cases {
		t.Run(c.Spec.Name, func(t *testing.T) {
			d := sm90MakeData(r, c)
			ref := sm90Reference(c, d)
			got := sm90RunGemm(t, ctx, llc, c, infos[i], d, 3)
			sm90Check(t, "llc-19", c, d, got, ref)
			if ours == "" {
				t.Log("mokc ptx backend not wired in yet: llc-19 PTX checked only")
				return
			}
			got2 := sm90RunGemm(t, ctx, ours, c, infos[i], d, 3)
			sm90Check(t, "mokc ptx", c, d, got2, ref)
			for j := range got {
				if got[j] != got2[j] {
					t.Fatalf("element %d: 0x%04x (llc-19) vs 0x%04x (mokc ptx)", j, got[j], got2[j])
				}
			}
		})
	}
}

// TestSM90GemmPerf times the sm_90a engine on DeepSeek-V3-sized FC1 and FC2
// (llc-19 PTX), spot-checks outputs against the float64 reference, and logs
// TFLOP/s (dense bf16 ceiling of the H200: ~750-790).
func TestSM90GemmPerf(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	ctx, eng := engineOnGPU(t, target.SM90a, 90)
	all := append(codegen.SM90GemmCases("sm90t"), codegen.SM90PerfCases("sm90p")...)
	m, infos := codegen.GemmModule(t, eng, all)
	variants := []struct{ name, text string }{{"llc-19", sm90GemmLLC}}
	ours, err := sm90OurPTX(m)
	if err != nil {
		t.Fatalf("ptx backend: %v", err)
	}
	variants = append(variants, struct{ name, text string }{"mokc ptx", ours})
	if p := os.Getenv("MOKC_SM90_PTX"); p != "" {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		variants = append(variants, struct{ name, text string }{p, string(b)})
	}
	r := rand.New(rand.NewPCG(rand.Uint64(), 91))
	for i, c := range all {
		if !strings.HasPrefix(c.Spec.Name, "sm90p") {
			continue
		}
		ki := infos[i]
		d := sm90MakeData(r, c)
		bufs := sm90GemmBuffers(t, ctx, c, d, 0)
		args := sm90GemmArgs(t, ctx, ki, bufs, d.rows)
		T := int64(d.rows)
		grid := driver.Dim3{X: int(ki.Grid[0].Eval(T)), Y: int(ki.Grid[1].Eval(T)), Z: int(ki.Grid[2].Eval(T))}
		for _, v := range variants {
			f := sm90Function(t, ctx, v.text, ki)
			launch := func() {
				if err := f.Launch(grid, driver.Dim3{X: ki.Block, Y: 1, Z: 1}, ki.SharedBytes, nil, args); err != nil {
					t.Fatal(err)
				}
			}
			const iters = 20
			ms := timeLaunchMs(t, ctx, launch, iters)
			flops := 2 * float64(d.rows) * float64(c.Spec.K) * float64(c.Spec.BRows())
			t.Logf("%s (%s): rows %d K %d B rows %d: %.3f ms, %.0f TFLOP/s", c.Spec.Name, v.name, d.rows, c.Spec.K, c.Spec.BRows(),
				float64(ms)/iters, flops*iters/(float64(ms)*1e-3)/1e12)
			got := make([]uint16, d.rows*c.Spec.N)
			if err := ctx.CopyFromDevice(got, bufs[codegen.RoleC]); err != nil {
				t.Fatal(err)
			}
			sm90SpotCheck(t, c, d, got, r)
		}
	}
}

// sm90SpotCheck compares 256 random outputs with the float64 reference.
func sm90SpotCheck(t *testing.T, c codegen.GemmCase, d sm90GemmData, got []uint16, r *rand.Rand) {
	t.Helper()
	s := c.Spec
	one := codegen.GemmCase{Spec: s}
	for n := 0; n < 256; n++ {
		row, col := r.IntN(d.rows), r.IntN(s.N)
		// A one-row problem: the row's expert, its A row, the full B.
		e := 0
		for e+1 < len(d.offsets)-1 && int(d.offsets[e+1]) <= row {
			e++
		}
		dd := sm90GemmData{rows: 1, a: d.a[row*s.K : (row+1)*s.K], b: d.b[e*s.BRows()*s.K : (e+1)*s.BRows()*s.K], offsets: []int32{0, 1}}
		if s.Bias {
			dd.bias = d.bias[e*s.BRows() : (e+1)*s.BRows()]
		}
		one.Spec.Experts = 1
		ref := sm90ReferenceAt(one, dd, 0, col)
		g := bf(got[row*s.N+col])
		if math.IsNaN(g) || math.Abs(g-ref) > math.Abs(ref)/64+1e-2 {
			t.Fatalf("%s: C[%d][%d] = %v, want %v", s.Name, row, col, g, ref)
		}
	}
}

// timeLaunchMs runs launch 3 times to warm up, then iters times between two
// CUDA events, and returns the events' elapsed milliseconds.
func timeLaunchMs(t *testing.T, ctx *driver.Context, launch func(), iters int) float64 {
	t.Helper()
	for w := 0; w < 3; w++ {
		launch()
	}
	e0, _ := ctx.NewEvent()
	e1, _ := ctx.NewEvent()
	e0.Record(nil)
	for w := 0; w < iters; w++ {
		launch()
	}
	e1.Record(nil)
	if err := e1.Synchronize(); err != nil {
		t.Fatal(err)
	}
	ms, err := driver.ElapsedMs(e0, e1)
	if err != nil {
		t.Fatal(err)
	}
	return float64(ms)
}

// readC copies n elements of a GEMM's C from c (f32, else bf16) into
// float64; a bf16 0xFFFF (the poison's bits) reads as NaN.
func readC(t *testing.T, ctx *driver.Context, c driver.DevicePtr, n int, f32 bool) []float64 {
	t.Helper()
	got := make([]float64, n)
	if f32 {
		out := make([]float32, n)
		if err := ctx.CopyFromDevice(out, c); err != nil {
			t.Fatal(err)
		}
		for i, v := range out {
			got[i] = float64(v)
		}
		return got
	}
	out := make([]uint16, n)
	if err := ctx.CopyFromDevice(out, c); err != nil {
		t.Fatal(err)
	}
	for i, v := range out {
		got[i] = bf(v)
		if v == 0xFFFF {
			got[i] = math.NaN()
		}
	}
	return got
}
