//go:build cuda

package codegen_test

import (
	"math"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/mokc/mokc/codegen"
	"github.com/mokc/mokc/driver"
	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/layouts"
	"github.com/mokc/mokc/ptx"
	"github.com/mokc/mokc/target"
)

// TestSM90MXRegFedPerf times qwen3-30b-a3b's routed GEMMs at T = 4096
// (128 experts of 256 rows: FC1 gate/up halves N = 768, K = 2048, f32 h;
// FC2 N = 2048, K = 768, bf16 out) three ways on one GPU: bf16 (the bf16
// layer's tiles), MXFP8 promoted per 32-wide block (the mxfp8 layer's
// default) and MXFP8 register-fed (GemmSpec.MXRegisterFed; B tiles of 128
// rows with one consumer warpgroup, and of 256 with two), bf16 and
// register-fed also with two blocks per SM (Tile.BlocksPerSM; FC1 also
// quantizing h into its register-fed values, QuantizeCValues, checked on
// 16 blocks within e4m3's rounding) and with 192 and 256 token rows
// (FC1's halves loaded as gate/up pairs, GemmSpec.BHalvesInPairs), and
// spot-checks 256 outputs of each against the float64 GEMM of its inputs.
// The inputs are random bytes (e4m3 without NaN, scale codes 112..119) and
// random bf16, not quantized data: the kernels' speed and sums do not
// depend on it (the register-fed A in layouts.RegisterFedOrder), but for
// the gated epilogue's division, which takes its slow path when the
// exponential overflows: the scales keep FC1's pre-activations O(1), as in
// a layer (with codes up to 127 they reached 10^4 and the MXFP8 FC1s spent
// a third of their time there; ncu, run 27). Only the
// variants whose names match MOKC_MXPERF (a regular expression; default
// all) run, for profiling one kernel. With MOKC_MXPERF_ROUTED set the
// 32768 rows fall to the experts as a random router sends 4096 tokens to
// 8 experts each (about 256 +- 16 per expert: each expert's last row tile
// ragged, as in the layer) instead of 256 each. Skipped with -short.
func TestSM90MXRegFedPerf(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	ctx, eng := engineOnGPU(t, target.SM90a, 90)
	const E, per = 128, 256
	r := rand.New(rand.NewPCG(rand.Uint64(), 41))
	counts := make([]int, E)
	for i := range counts {
		counts[i] = per
	}
	if os.Getenv("MOKC_MXPERF_ROUTED") != "" {
		// The layer's rows per expert: T = 4096 tokens, each routed to
		// 8 distinct experts drawn uniformly (as the random router of
		// mokc run and bench routes them): 32768 rows, each expert's
		// last row tile ragged.
		clear(counts)
		for range E * per / 8 {
			for _, e := range r.Perm(E)[:8] {
				counts[e]++
			}
		}
	}
	fc1 := codegen.GemmSpec{Name: "p_fc1", N: 768, K: 2048, Experts: E, A: codegen.ATiled, B: codegen.BGrouped,
		Epilogue: codegen.EpiGated, Gate: codegen.GateHalves, Act: codegen.Activation{Kind: codegen.ActSwiGLU}}
	fc2 := codegen.GemmSpec{Name: "p_fc2", N: 2048, K: 768, Experts: E, A: codegen.ATiled, B: codegen.BGrouped, Epilogue: codegen.EpiStore}
	type variant struct {
		name string
		spec codegen.GemmSpec
	}
	var vs []variant
	for _, g := range []codegen.GemmSpec{fc1, fc2} {
		bn := 128
		if g.Epilogue == codegen.EpiGated {
			bn = 64
		}
		bf := g
		bf.Name += "_bf16"
		bf.Tile = codegen.Tile{BM: 128, BN: 2 * bn, BK: 64, Stages: 4, Warps: 8}
		if g.Epilogue == codegen.EpiStore {
			bf.Tile.Stages = 3
		}
		mx := g
		mx.Name += "_promote"
		mx.MX, mx.COutF32 = true, g.Epilogue == codegen.EpiGated
		mx.Tile = codegen.Tile{BM: 128, BN: bn, BK: 128, Stages: 4, Warps: 8}
		rf := mx
		rf.Name = g.Name + "_regfed"
		rf.MXRegisterFed = true
		rf.Tile.Warps = 4
		rf2 := rf // two consumer warpgroups, each half of a 256-row B tile
		rf2.Name += "2"
		rf2.Tile.BN, rf2.Tile.Warps, rf2.Tile.Stages = 2*bn, 8, 3
		// Two blocks per SM (Tile.BlocksPerSM), each one consumer
		// warpgroup of 64 rows within 168 registers: one block's epilogue
		// beside the other's K loop (the layer's tiles of
		// docs/runs/run37/call2).
		bf2 := bf
		bf2.Name += "_2sm"
		bf2.Tile = codegen.Tile{BM: 64, BN: 2 * bn, BK: 64, Stages: 2, Warps: 4, BlocksPerSM: 2, ProducerWarps: 1}
		if g.Epilogue == codegen.EpiStore {
			bf2.Tile.BN = 192 // 256 columns spill at 168 registers
		}
		rfs := rf
		rfs.Name += "_2sm"
		rfs.Tile.BM, rfs.Tile.Stages, rfs.Tile.BlocksPerSM, rfs.Tile.ProducerWarps = 64, 3, 2, 1
		// Two blocks per SM of a producer warpgroup (setmaxnreg: the
		// consumers at 200-216 registers): bf16 B tiles of 192 rows and
		// of 256 (two wgmma of 128 a step), the register-fed one
		// warpgroup of 128 token rows, and that tile one per SM.
		bfw := bf
		bfw.Name += "_2smwg"
		bfw.Tile = codegen.Tile{BM: 64, BN: 192 * bn / 128, BK: 64, Stages: 3, Warps: 4, BlocksPerSM: 2, ProducerWarps: 4}
		bfs := bfw
		bfs.Name = bf.Name + "_split_2smwg"
		bfs.Tile.BN, bfs.Tile.Stages = 2*bn, 2
		rft := rf
		rft.Name += "_t128"
		rft.Tile.BM, rft.Tile.Stages = 128, 2
		rfw := rft
		rfw.Name += "_2smwg"
		rfw.Tile.BlocksPerSM, rfw.Tile.ProducerWarps = 2, 4
		vs = append(vs, variant{"bf16", bf}, variant{"promote", mx}, variant{"regfed", rf}, variant{"regfed, 2 warpgroups", rf2},
			variant{"bf16, 2 blocks per SM", bf2}, variant{"regfed, 2 blocks per SM", rfs},
			variant{"bf16, 2 blocks per SM, producer warpgroup", bfw}, variant{"bf16, 2 blocks per SM, producer warpgroup, 256 B-tile rows", bfs},
			variant{"regfed, 128 token rows, 1 warpgroup", rft},
			variant{"regfed, 128 token rows, 2 blocks per SM, producer warpgroup", rfw})
		if g.Epilogue == codegen.EpiGated { // FC1 quantizing h in its epilogue, as the layer's: h's values only
			rfq := rfs
			rfq.Name += "_q"
			rfq.QuantizeC, rfq.QuantizeCValues, rfq.QuantizeCOnly = true, true, true
			vs = append(vs, variant{"regfed, 2 blocks per SM, quantizing h", rfq})
		}
		// 256 token rows: two warpgroups of one slice each; FC1's gate/up
		// halves loaded as pairs (BHalvesInPairs), so a slice holds whole pairs.
		rf3 := rf
		rf3.Name += "3"
		rf3.Tile.BM, rf3.Tile.Warps, rf3.Tile.Stages = 256, 8, 2
		if g.Epilogue == codegen.EpiGated {
			rf3.Gate, rf3.BHalvesInPairs = codegen.GateInterleaved, true
		}
		rf4 := rf3 // 192 token rows: three stages fit where 256's two did
		rf4.Name = rf.Name + "4"
		rf4.Tile.BM, rf4.Tile.Stages = 192, 3
		vs = append(vs, variant{"regfed, 256 token rows", rf3}, variant{"regfed, 192 token rows", rf4})
	}
	if re := os.Getenv("MOKC_MXPERF"); re != "" {
		var keep []variant
		for _, v := range vs {
			if regexp.MustCompile(re).MatchString(v.spec.Name) {
				keep = append(keep, v)
			}
		}
		vs = keep
	}
	m := ir.NewModule("mxperf")
	infos := make([]codegen.KernelInfo, len(vs))
	for i, v := range vs {
		ki, err := eng.GroupedGEMM(m, v.spec, 1)
		if err != nil {
			t.Fatal(err)
		}
		infos[i] = ki
	}
	if _, err := m.Finish(); err != nil {
		t.Fatal(err)
	}
	text, err := ptx.Compile(m.IR, target.SM90a)
	if err != nil {
		t.Fatal(err)
	}
	rows := E * per
	offsets := []int32{0}
	expertOf := make([]int, 0, rows) // each row's expert
	for e, n := range counts {
		offsets = append(offsets, offsets[e]+int32(n))
		for range n {
			expertOf = append(expertOf, e)
		}
	}
	t.Logf("rows per expert %d..%d", slices.Min(counts), slices.Max(counts))
	d := &dev{t: t, ctx: ctx}
	defer d.free()
	for i, v := range vs {
		s := v.spec
		br := s.BRows()
		var tiles []int32
		for e := 0; e < E; e++ {
			for r0 := 0; r0 < counts[e]; r0 += s.Tile.BM {
				tiles = append(tiles, int32(e), offsets[e]+int32(r0))
			}
		}
		// Inputs: bf16 (random magnitudes 2^-4..2^0) or e4m3 bytes with
		// codes, and their float64 values.
		e4 := func(n int) ([]uint8, []float64) {
			q, f := make([]uint8, n), make([]float64, n)
			for j := range q {
				c := uint8(r.UintN(256))
				if c&0x7F == 0x7F {
					c ^= 1
				}
				q[j], f[j] = c, float64(layouts.F32FromE4M3(c))
			}
			return q, f
		}
		b16 := func(n int) ([]uint16, []float64) {
			h, f := make([]uint16, n), make([]float64, n)
			for j := range h {
				h[j] = layouts.BF16FromF32(float32((2*r.Float64() - 1) * math.Ldexp(1, -r.IntN(5))))
				f[j] = float64(layouts.F32FromBF16(h[j]))
			}
			return h, f
		}
		codes := func(n int) ([]uint8, []float64) {
			c, f := make([]uint8, (n+3)&^3), make([]float64, n)
			for j := range f {
				c[j] = uint8(112 + r.IntN(8))
				f[j] = float64(layouts.F32FromUE8M0(c[j]))
			}
			return c, f
		}
		var aVal, bVal, aSc, bSc []float64
		bufs := map[string]driver.DevicePtr{}
		if s.MX && !s.MXRegisterFed {
			q, f := e4(rows * s.K)
			c, fs := codes(rows * s.K / 32)
			bufs[codegen.RoleA], bufs[codegen.RoleAScales], aVal, aSc = d.put(q, len(q)), d.put(c, len(c)), f, fs
		} else {
			h, f := b16(rows * s.K)
			if s.MXRegisterFed { // each row's 32-wide blocks in layouts.RegisterFedOrder
				hp := make([]uint16, len(h))
				for j := range hp {
					hp[j] = h[j-j%s.K+layouts.RegisterFedOrder(j%s.K)]
				}
				h = hp
			}
			bufs[codegen.RoleA], aVal = d.put(h, 2*len(h)), f
		}
		if s.MX {
			q, f := e4(E * br * s.K)
			c, fs := codes(E * br * s.K / 32)
			bufs[codegen.RoleB], bufs[codegen.RoleBScales], bVal, bSc = d.put(q, len(q)), d.put(c, len(c)), f, fs
		} else {
			h, f := b16(E * br * s.K)
			bufs[codegen.RoleB], bVal = d.put(h, 2*len(h)), f
		}
		esize := 2
		if s.COutF32 {
			esize = 4
		}
		bufs[codegen.RoleC] = d.put(nil, esize*rows*s.N)
		if s.QuantizeCValues {
			bufs[codegen.RoleCV] = d.put(nil, 2*rows*s.N)
		}
		bufs[codegen.RoleTiles] = d.put(tiles, 4*len(tiles)+4)
		bufs[codegen.RoleOffsets] = d.put(offsets, 4*len(offsets))
		bufs[codegen.RoleNumTiles] = d.put([]int32{int32(len(tiles) / 2)}, 4)
		ki := infos[i]
		f := sm90Function(t, ctx, text, ki)
		args := sm90GemmArgs(t, ctx, ki, bufs, rows)
		grid := driver.Dim3{X: int(ki.Grid[0].Eval(int64(rows))), Y: int(ki.Grid[1].Eval(int64(rows))), Z: 1}
		launch := func() {
			if err := f.Launch(grid, driver.Dim3{X: ki.Block, Y: 1, Z: 1}, ki.SharedBytes, nil, args); err != nil {
				t.Fatal(err)
			}
		}
		const iters = 20
		ms := timeLaunchMs(t, ctx, launch, iters)
		flops := 2 * float64(rows) * float64(s.K) * float64(br)
		t.Logf("%s (%s): rows %d K %d B rows %d, tile %dx%dx%d, %d stages: %.1f µs, %.0f TFLOP/s", s.Name, v.name, rows, s.K, br,
			s.Tile.BM, s.Tile.BN, s.Tile.BK, s.Tile.Stages, 1e3*float64(ms)/iters, flops*iters/(float64(ms)*1e-3)/1e12)
		// Spot check: 256 outputs against the float64 GEMM of the inputs'
		// values (times the scales per 32-wide block).
		got := readC(t, ctx, bufs[codegen.RoleC], rows*s.N, s.COutF32)
		dot := func(row, j int) (v, abs float64) {
			e := expertOf[row]
			for k := 0; k < s.K; k++ {
				a, b := aVal[row*s.K+k], bVal[(e*br+j)*s.K+k]
				if aSc != nil {
					a *= aSc[row*s.K/32+k/32]
				}
				if bSc != nil {
					b *= bSc[(e*br+j)*s.K/32+k/32]
				}
				v += a * b
				abs += math.Abs(a * b)
			}
			return v, abs
		}
		out := func(row, col int) (w, tol float64) {
			var sum float64
			if s.Epilogue != codegen.EpiGated {
				w, sum = dot(row, col)
			} else {
				g, sg := dot(row, col)
				u, su := dot(row, s.N+col)
				sig := 1 / (1 + math.Exp(-g))
				w, sum = g*sig*u, math.Abs(sig*(1+g*(1-sig))*u)*sg+math.Abs(g*sig)*su
			}
			tol = 0x1p-12*sum + 1e-4*math.Abs(w) + 1e-9
			if !s.COutF32 {
				tol += math.Abs(w) / 128
			}
			return w, tol
		}
		if s.QuantizeCOnly {
			// No C: 16 (token row, 32-column block) pairs of c_v, each
			// value within e4m3's rounding of the block's float64 outputs.
			v := make([]uint16, rows*s.N)
			if err := ctx.CopyFromDevice(v, bufs[codegen.RoleCV]); err != nil {
				t.Fatal(err)
			}
			pos := make([]int, 32) // the position of each element of a block (layouts.RegisterFedOrder's inverse)
			for p := range pos {
				pos[layouts.RegisterFedOrder(p)] = p
			}
			for n := 0; n < 16; n++ {
				row, blk := r.IntN(rows), r.IntN(s.N/32)
				var ws, tols [32]float64
				amax := 0.0
				for j := range ws {
					ws[j], tols[j] = out(row, 32*blk+j)
					amax = math.Max(amax, math.Abs(ws[j]))
				}
				for j, w := range ws {
					g := float64(layouts.F32FromBF16(v[row*s.N+32*blk+pos[j]]))
					if !withinE4M3(g, w, amax, tols[j]) {
						t.Errorf("%s: c_v element C[%d][%d] = %v, want %v within e4m3 rounding (block amax %v)", s.Name, row, 32*blk+j, g, w, amax)
						break
					}
				}
			}
			continue
		}
		for n := 0; n < 256; n++ {
			row, col := r.IntN(rows), r.IntN(s.N)
			w, tol := out(row, col)
			if g := got[row*s.N+col]; math.IsNaN(g) || math.Abs(g-w) > tol {
				t.Errorf("%s: C[%d][%d] = %v, want %v (tolerance %.3g)", s.Name, row, col, g, w, tol)
				break
			}
		}
	}
}
