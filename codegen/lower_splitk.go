package codegen

import (
	"fmt"
	"slices"

	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"

	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/launch"
	"github.com/mokc/mokc/moe"
	"github.com/mokc/mokc/schedule"
)

// Split-K for the dense GEMMs (the shared experts) at decode sizes.
//
// A dense GEMM over T <= BM token rows has one row tile, so its work items
// are its column blocks: deepseek-v3's shared FC1 (N = 2*2048 B rows, K =
// 7168) has 16 with 256-row B tiles, qwen2-57b-a14b's shared FC2 (N =
// 3584, K = 20480) 14, on 132 SMs, and each streams its whole B tile
// through one SM (docs/perf.md, run 25 call 2 and run 30: 0.03-0.17 ms,
// 1-2 TB/s). In that token range the lowering splits the reduction in S
// parts (GemmSpec.SplitK): moe_<op>_splitk computes the GEMM as a plain
// one over the weights' rows as stored (gate and up rows alike) and stores
// each part's f32 sums in <op>_part (f32 [S*maxT, BRows], maxT the largest
// T it runs at: part s at rows s*T..), and moe_<op>_reduce adds the S
// parts of each output in order s = 0, 1, ... and applies the GEMM's
// epilogue (Epilogue: the gated activation, the bf16 rounding), one thread
// per 4 outputs. The order of the additions is fixed, so the results are
// deterministic; they are not the unsplit kernel's bits (another order of
// the same f32 sums). In the token range of the forward's decode tiles the
// GEMM takes them (gemmKernels) and its split forms are named with their
// suffix (moe_<op>_splitk_decode, moe_<op>_reduce_decode,
// <op>_part_decode); there the split may go on over further 64-row tiles
// while the cost model still gains (splitKFor).

// splitKCost is the cost model of a split (splitKFor) in bytes moved at
// HBM speed: each of the waves of items (ceil(items*S/sms) rounds of sms
// SMs) streams one item's B tile over K/S, and the parts are written and
// read once (2*S*rows*bRows f32).
func splitKCost(items, splits, sms int, tileBytes, partBytes int64) int64 {
	waves := int64((items*splits + sms - 1) / sms)
	return waves*int64(sms)*tileBytes/int64(splits) + 2*int64(splits)*partBytes
}

// splitKMinBlocks is the fewest K blocks a part keeps: the ring's fill at
// the start of an item is not hidden behind fewer.
const splitKMinBlocks = 4

// splitKFor plans the split of a dense GEMM g at decode sizes in its
// kernel k (gemmKernels: the base tiles, or the decode tiles in their
// token range): the plain form's spec under k's schedule (the weights'
// rows as outputs, an f32 C named <op>_part<suffix>) with SplitK set, and
// the token counts of k's at which it runs: T <= BM (one row tile); in a
// bounded token range (the decode tiles') also the further row tiles,
// up to the range's end, while splitKCost still gains at their count. The
// parts buffer holds S times the largest of them rows. ok is false when g
// is not a dense bf16 GEMM without bias over grouped K-major weights, the
// schedule turns splitting off (schedule.SplitKOff), the engine does not
// split it, no split is cheaper by splitKCost at T = BM (S: a divisor of
// the K blocks leaving each part at least splitKMinBlocks of them), or
// none of k's token counts is in the split's range.
func (lw *perOp) splitKFor(g moe.GEMM, k gemmKernel) (plain moe.GEMM, spec GemmSpec, in []launch.TokenRange, ok bool) {
	if lw.sched.SplitK == schedule.SplitKOff || g.Rows != moe.Dense || g.Bias != nil || g.BMajor != moe.KMajor || g.Storage != moe.Stacked ||
		g.AScales != nil || g.ARegisterFed || g.C.DType != moe.BF16 || g.A.DType != moe.BF16 {
		return g, spec, nil, false
	}
	bRows := g.N
	if g.Gated {
		bRows = 2 * g.N
	}
	plain = g
	plain.Op, plain.N, plain.Gated = g.Op+"_splitk", bRows, false
	plain.C = &moe.Buffer{Name: g.Op + "_part" + k.suffix, Kind: moe.Scratch, DType: moe.F32}
	spec = lw.gemmSpec(plain, k.s)
	spec.Name = "moe_" + plain.Op + k.suffix
	bm, bn := spec.Tile.BM, spec.Tile.BN
	items := (bRows + bn - 1) / bn
	blocks := (g.K + spec.Tile.BK - 1) / spec.Tile.BK
	sms := gridCTAs(spec.Tile, k.s.Target.SMs())
	tileBytes := int64(bn) * int64(g.K) * int64(spec.ElemBytes())
	partBytes := int64(bm) * int64(bRows) * 4
	best, bestCost := 1, splitKCost(items, 1, sms, tileBytes, 0)
	for s := 2; blocks/s >= splitKMinBlocks; s++ {
		if blocks%s != 0 || !lw.eng.SplitsK(spec, s) {
			continue
		}
		if c := splitKCost(items, s, sms, tileBytes, partBytes); c < bestCost {
			best, bestCost = s, c
		}
	}
	if best == 1 {
		return g, spec, nil, false
	}
	tokens := everyT(k.tokens)
	hi := int64(bm)
	if end := tokens[len(tokens)-1].Max; end < launch.MaxTokens {
		for r := int64(2); (r-1)*int64(bm) < end; r++ {
			n := int(r) * items
			if splitKCost(n, best, sms, tileBytes, r*partBytes) >= splitKCost(n, 1, sms, tileBytes, 0) {
				break
			}
			hi = r * int64(bm)
		}
		hi = min(hi, end)
	}
	if in = intersect(tokens, launch.TokenRange{Min: 1, Max: hi}); len(in) == 0 {
		return g, spec, nil, false
	}
	maxT := in[len(in)-1].Max
	spec.SplitK = best
	plain.C.Shape = []launch.Expr{launch.Const(int64(best) * maxT), launch.Const(int64(bRows))}
	plain.C.Doc = fmt.Sprintf("the f32 parts of %s's reduction split in %d at T <= %d (part s at rows s*T..)", g.Op, best, maxT)
	return plain, spec, in, true
}

// lowerSplitKGEMM lowers a dense GEMM g that splitKFor splits in one of
// its kernels (gemmKernels): where it splits, the split kernel
// moe_<op>_splitk<suffix> and the reduce kernel moe_<op>_reduce<suffix>;
// g's kernel moe_<op><suffix> in the rest of that kernel's token counts.
// It reports whether it lowered g.
func (lw *perOp) lowerSplitKGEMM(g moe.GEMM) (bool, error) {
	type plan struct {
		k     gemmKernel
		plain moe.GEMM
		spec  GemmSpec
		in    []launch.TokenRange // where it splits (nil: nowhere)
	}
	var plans []plan
	for _, k := range lw.gemmKernels(g) {
		plain, spec, in, _ := lw.splitKFor(g, k)
		plans = append(plans, plan{k, plain, spec, in})
	}
	if !slices.ContainsFunc(plans, func(p plan) bool { return p.in != nil }) {
		return false, nil
	}
	for _, p := range plans {
		tokens := everyT(p.k.tokens)
		if p.in != nil {
			lw.prog.Buffers = append(lw.prog.Buffers, p.plain.C.Plan())
			if err := lw.emitGEMM(p.plain, p.k.suffix, p.k.s, p.in, fused{splitK: p.spec.SplitK}); err != nil {
				return false, err
			}
			epi := lw.gemmSpec(g, p.k.s)
			epi.Name = "moe_" + g.Op + "_reduce" + p.k.suffix
			rk, err := emitSplitReduce(lw.mod, epi, p.spec.SplitK, p.plain.C, g.C)
			if err != nil {
				return false, err
			}
			rk.Tokens = p.in
			lw.prog.Kernels = append(lw.prog.Kernels, rk)
			tokens = subtract(tokens, p.in)
		}
		if len(tokens) > 0 {
			if err := lw.emitGEMM(g, p.k.suffix, p.k.s, tokens, fused{}); err != nil {
				return false, err
			}
		}
	}
	return true, nil
}

// splitReduceRun is the outputs per thread of the reduce kernel.
const splitReduceRun = 4

// emitSplitReduce emits the reduce kernel of a split GEMM (name
// spec.Name; spec the GEMM's own, bf16 C [T, N]): thread i of the grid
// takes row i/(N/4), columns 4*(i%(N/4)).., loads their accumulator
// values from each of the splits parts of part (f32 [splits, T, BRows]:
// the column itself; gate and up at c and N+c, or 2c and 2c+1), adds them
// in part order and stores Epilogue's outputs to c. Grid ceil(T*N/4 /
// 256), parameters part, c, T. Errors: Epilogue's.
func emitSplitReduce(m *ir.Module, spec GemmSpec, splits int, part, c *moe.Buffer) (Kernel, error) {
	k := Kernel{Name: spec.Name, Block: utilThreads, SkipIfZeroT: true,
		Params: []Param{{Name: "part", Type: ParamPtr, Size: 8, Buffer: part.Name}, {Name: "c", Type: ParamPtr, Size: 8, Buffer: c.Name}}}
	v := PerT(1, 0)
	k.Params = append(k.Params, Param{Name: "T", Type: ParamI32, Size: 4, Value: &v})
	b := NewKernel(m, k.Name, utilThreads, ir.P("part", GPtr), ir.P("c", GPtr), ir.P("T", ir.I32))
	N, R := int64(spec.N), int64(spec.BRows())
	runs := N / splitReduceRun
	idx := b.Add(b.MulI(b.BlockIdx(ir.X), utilThreads), b.ThreadIdx(ir.X))
	row, col := b.UDiv(idx, ir.Int32(runs)), b.MulI(b.URem(idx, ir.Int32(runs)), splitReduceRun)
	T := b.Param("T")
	b.ReturnIf(b.ICmp(enum.IPredUGE, row, T))
	// load returns the f32 values of part s at B-row column r.. (n of them).
	load := func(s int, r value.Value, n int) []value.Value {
		e := b.Add(b.MulI(b.Wide(b.Add(b.MulI(T, int64(s)), row)), R), b.Wide(r))
		vec := b.LoadAt(ir.Vec(n, ir.F32), b.ByteOffset(b.Param("part"), b.MulI(e, 4)), 4*n)
		out := make([]value.Value, n)
		for i := range out {
			out[i] = b.ExtractElement(vec, i)
		}
		return out
	}
	// part s's accumulator values in Epilogue's order: the run's columns,
	// or their (gate, up) pairs.
	vals := func(s int) []value.Value {
		switch {
		case spec.Epilogue != EpiGated:
			return load(s, col, splitReduceRun)
		case spec.Gate == GateInterleaved: // the pairs as stored
			return append(load(s, b.MulI(col, 2), 4), load(s, b.AddI(b.MulI(col, 2), 4), 4)...)
		}
		g, u := load(s, col, splitReduceRun), load(s, b.AddI(col, N), splitReduceRun)
		out := make([]value.Value, 0, 2*splitReduceRun)
		for i := range g {
			out = append(out, g[i], u[i])
		}
		return out
	}
	acc := vals(0)
	for s := 1; s < splits; s++ {
		for i, x := range vals(s) {
			acc[i] = b.FAdd(acc[i], x)
		}
	}
	ep := NewEpilogue(spec, EpilogueArgs{C: b.Param("c"), RowEnd: T})
	if err := ep.Emit(b, row, col, acc); err != nil {
		return k, err
	}
	b.Ret(nil)
	k.Grid = grid1(Expr{A: runs, D: utilThreads, Min: 1})
	return k, nil
}
