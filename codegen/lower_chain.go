package codegen

import (
	"fmt"
	"strings"

	"github.com/mokc/mokc/launch"
	"github.com/mokc/mokc/moe"
	"github.com/mokc/mokc/schedule"
)

// chainPlan is a pair of GEMM ops lowered as one chained kernel
// (schedule.ChainFC, Engine.ChainedGEMM) at the token counts where both
// run their base kernels: the forward's fc1 and the fc2 right after it,
// which reads fc1's C.
type chainPlan struct {
	first, second string   // the ops' names
	list          tileList // their tile list (with its done counters)
	// held is the first op's base kernel, held back by chainGEMM until the
	// second's, which decides the token counts the pair shares.
	held *heldGEMM
}

// heldGEMM is a base kernel of a GEMM op that emitGEMM has not emitted
// yet: the op, its schedule and its token counts.
type heldGEMM struct {
	g      moe.GEMM
	s      schedule.Schedule
	tokens []launch.TokenRange
}

// planChain finds, under schedule.ChainFC, the gated GEMM over dispatched
// rows followed at once by the GEMM that reads its C (the forward's fc1
// and fc2) whose base kernels the engine chains (Engine.ChainsGEMMs), and
// gives their tile list the counters the chained kernel signals through
// (tile_done<i>, u32 per tile, zeroed by the kernel that writes the list:
// writeTileLists). It runs before the ops are lowered, so that the kernels
// writing the list take the counters. No pair, or one the engine refuses,
// leaves the program as without the chain.
func (lw *perOp) planChain() {
	if lw.sched.Chain != schedule.ChainFC {
		return
	}
	ops := lw.src.Ops
	for i := 0; i+1 < len(ops); i++ {
		g1, ok1 := ops[i].(moe.GEMM)
		g2, ok2 := ops[i+1].(moe.GEMM)
		if !ok1 || !ok2 || !g1.Gated || g1.Rows != moe.Dispatched || g2.Rows != moe.Dispatched || g2.A != g1.C ||
			g1.BMajor == moe.NMajor || g2.BMajor == moe.NMajor || lw.baseForm(g1).Name() != g1.Name() || lw.baseForm(g2).Name() != g2.Name() {
			continue
		}
		s1, s2 := lw.gemmSpec(g1, lw.sched), lw.gemmSpec(g2, lw.sched)
		s1.Name, s2.Name = "moe_"+g1.Name(), "moe_"+g2.Name()
		if !lw.eng.ChainsGEMMs(s1, s2) {
			return
		}
		for li, t := range lw.lists {
			if t.bm != s1.Tile.BM {
				continue
			}
			if t.done == nil {
				t.done = &moe.Buffer{Name: strings.Replace(t.tiles.Name, "tiles", "tile_done", 1), Kind: moe.Scratch, DType: moe.U32,
					Shape: []launch.Expr{t.tiles.Shape[0]},
					Doc:   fmt.Sprintf("moe_%s_%s: per tile of %s the %s items whose output rows are stored (zeroed with the list)", g1.Name(), g2.Name(), t.tiles.Name, g1.Name())}
				lw.lists[li] = t
				lw.prog.Buffers = append(lw.prog.Buffers, t.done.Plan())
			}
			lw.chain = &chainPlan{first: g1.Name(), second: g2.Name(), list: t}
		}
		return
	}
}

// chainGEMM is emitGEMM's part for the base kernels of a chained pair: it
// holds back the first op's (held true), and at the second's emits the
// first's kernel where the second's does not run, the chained kernel
// where both run, and the second's kernel where the first's does not, in
// that order. Kernels of other ops: held false.
func (lw *perOp) chainGEMM(g moe.GEMM, s schedule.Schedule, tokens []launch.TokenRange) (held bool, err error) {
	c := lw.chain
	switch g.Name() {
	case c.first:
		c.held = &heldGEMM{g, s, tokens}
		return true, nil
	case c.second:
		if c.held == nil {
			return false, nil
		}
	default:
		return false, nil
	}
	h := c.held
	c.held = nil
	t1, t2 := everyT(h.tokens), everyT(tokens)
	both := intersectAll(t1, t2)
	if len(both) == 0 {
		if err := lw.emitGEMMKernel(h.g, "", h.s, h.tokens, fused{}); err != nil {
			return true, err
		}
		return false, nil
	}
	if only := subtract(t1, both); len(only) > 0 {
		if err := lw.emitGEMMKernel(h.g, "", h.s, only, fused{}); err != nil {
			return true, err
		}
	}
	if err := lw.emitChained(h.g, h.s, g, s, both); err != nil {
		return true, err
	}
	if only := subtract(t2, both); len(only) > 0 {
		return true, lw.emitGEMMKernel(g, "", s, only, fused{})
	}
	return true, nil
}

// flushChain emits a held first kernel whose second never came (the
// second op lowered another way): as emitGEMM would have.
func (lw *perOp) flushChain() error {
	if lw.chain == nil || lw.chain.held == nil {
		return nil
	}
	h := lw.chain.held
	lw.chain.held = nil
	return lw.emitGEMMKernel(h.g, "", h.s, h.tokens, fused{})
}

// emitChained emits the chained kernel moe_<first>_<second> of GEMMs g1
// and g2, launched for tokens: the engine's parameters bound to g1's
// operands and its tile list, tile_done to the list's counters, and the
// second GEMM's (chainPrefix) to g2's.
func (lw *perOp) emitChained(g1 moe.GEMM, s1 schedule.Schedule, g2 moe.GEMM, s2 schedule.Schedule, tokens []launch.TokenRange) error {
	spec1, spec2 := lw.gemmSpec(g1, s1), lw.gemmSpec(g2, s2)
	spec1.Name, spec2.Name = "moe_"+g1.Name(), "moe_"+g2.Name()
	ki, err := lw.eng.ChainedGEMM(lw.mod, "moe_"+g1.Name()+"_"+g2.Name(), spec1, spec2, int64(g1.RowsPerToken))
	if err != nil {
		return err
	}
	bind1, bind2 := lw.gemmBind(g1, spec1), lw.gemmBind(g2, spec2)
	bind1[RoleTileDone] = lw.chain.list.done.Name
	return lw.addGEMMKernel(ki, tokens, func(p Param) map[string]string {
		if strings.HasPrefix(p.Name, chainPrefix) {
			return bind2
		}
		return bind1
	})
}

// everyT is tokens, or every T >= 1 when nil (a kernel launched at every
// T).
func everyT(tokens []launch.TokenRange) []launch.TokenRange {
	if tokens == nil {
		return []launch.TokenRange{{Min: 1, Max: launch.MaxTokens}}
	}
	return tokens
}

// intersectAll is the token counts in both a and b (merged ranges).
func intersectAll(a, b []launch.TokenRange) []launch.TokenRange {
	var out []launch.TokenRange
	for _, r := range b {
		out = append(out, intersect(a, r)...)
	}
	return merge(out)
}

// subtract is the token counts of a outside b.
func subtract(a, b []launch.TokenRange) []launch.TokenRange {
	out := merge(a)
	for _, r := range b {
		var next []launch.TokenRange
		for _, t := range out {
			if t.Min < r.Min {
				next = append(next, launch.TokenRange{Min: t.Min, Max: min(t.Max, r.Min-1)})
			}
			if t.Max > r.Max {
				next = append(next, launch.TokenRange{Min: max(t.Min, r.Max+1), Max: t.Max})
			}
		}
		out = next
	}
	return out
}
