package codegen

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/mokc/mokc/launch"
	"github.com/mokc/mokc/moe"
	"github.com/mokc/mokc/schedule"
)

// chainPlan is a pair of GEMM ops lowered as one chained kernel
// (schedule.ChainFC, Engine.ChainedGEMM) at the token counts where both
// run the same kernel form: the forward's fc1 and the fc2 right after it,
// which reads fc1's C, in their base kernels ("") and, under a schedule
// with a GEMM variant, in the variant's ("_<name>").
type chainPlan struct {
	first, second string // the ops' names
	// forms is the kernel-name suffixes of the forms the engine chains.
	forms map[string]bool
	// held is, per form, the first op's kernel, held back by chainGEMM
	// until the second's, which decides the token counts the pair shares.
	held map[string]*heldGEMM
}

// heldGEMM is a kernel of a GEMM op that emitGEMM has not emitted yet:
// the op, its schedule and its token counts.
type heldGEMM struct {
	g      moe.GEMM
	s      schedule.Schedule
	tokens []launch.TokenRange
}

// planChain finds, under schedule.ChainFC, the gated GEMM over dispatched
// rows followed at once by the GEMM that reads its C (the forward's fc1
// and fc2), and the kernel forms (base, variant) whose two kernels the
// engine chains (Engine.ChainsGEMMs); it gives each such form's tile list
// the counters the chained kernel signals through (tile_done<i>, u32 per
// tile, zeroed by the kernel that writes the list: writeTileLists). It
// runs before the ops are lowered, so that the kernels writing the lists
// take the counters. A program without the pair (the backward) is
// lowered as without the chain; a pair the engine chains in no form is
// an error naming the reason.
func (lw *perOp) planChain() error {
	if lw.sched.Chain != schedule.ChainFC {
		return nil
	}
	ops := lw.src.Ops
	for i := 0; i+1 < len(ops); i++ {
		g1, ok1 := ops[i].(moe.GEMM)
		g2, ok2 := ops[i+1].(moe.GEMM)
		if !ok1 || !ok2 || !g1.Gated || g1.Rows != moe.Dispatched || g2.Rows != moe.Dispatched || g2.A != g1.C ||
			g1.BMajor == moe.NMajor || g2.BMajor == moe.NMajor || lw.baseForm(g1).Name() != g1.Name() || lw.baseForm(g2).Name() != g2.Name() {
			continue
		}
		c := &chainPlan{first: g1.Name(), second: g2.Name(), forms: map[string]bool{}, held: map[string]*heldGEMM{}}
		var why error
		for _, k := range lw.gemmKernels(g1) {
			if !slices.ContainsFunc(lw.gemmKernels(g2), func(k2 gemmKernel) bool { return k2.suffix == k.suffix }) {
				continue
			}
			s1, s2 := lw.gemmSpec(g1, k.s), lw.gemmSpec(g2, k.s)
			s1.Name, s2.Name = "moe_"+g1.Name()+k.suffix, "moe_"+g2.Name()+k.suffix
			if err := lw.eng.ChainsGEMMs(s1, s2); err != nil {
				why = cmp.Or(why, err)
				continue
			}
			c.forms[k.suffix] = true
			lw.chainCounters(s1.Tile.BM, "moe_"+g1.Name()+"_"+g2.Name()+k.suffix)
		}
		if len(c.forms) == 0 {
			return fmt.Errorf("codegen: %s: Schedule.Chain %v: %s and %s share no kernel: %w", lw.src.Layer.Name, lw.sched.Chain, g1.Name(), g2.Name(), why)
		}
		lw.chain = c
		return nil
	}
	return nil
}

// chainCounters gives the tile list of bm-row tiles the counters of the
// chained kernel name (once per list).
func (lw *perOp) chainCounters(bm int, name string) {
	for li, t := range lw.lists {
		if t.bm != bm || t.done != nil {
			continue
		}
		t.done = &moe.Buffer{Name: strings.Replace(t.tiles.Name, "tiles", "tile_done", 1), Kind: moe.Scratch, DType: moe.U32,
			Shape: []launch.Expr{t.tiles.Shape[0]},
			Doc:   fmt.Sprintf("%s: per tile of %s the FC1 items whose rows of h are stored, times their storing threads (zeroed with the list)", name, t.tiles.Name)}
		lw.lists[li] = t
		lw.prog.Buffers = append(lw.prog.Buffers, t.done.Plan())
	}
}

// chainGEMM is emitGEMM's part for the kernels of a chained pair in a
// form the engine chains (suffix): it holds back the first op's kernel
// (held true), and at the second's emits the first's kernel where the
// second's does not run, the chained kernel where both run, and the
// second's kernel where the first's does not, in that order. Other
// kernels: held false.
func (lw *perOp) chainGEMM(g moe.GEMM, suffix string, s schedule.Schedule, tokens []launch.TokenRange) (held bool, err error) {
	c := lw.chain
	if !c.forms[suffix] {
		return false, nil
	}
	switch g.Name() {
	case c.first:
		c.held[suffix] = &heldGEMM{g, s, tokens}
		return true, nil
	case c.second:
		if c.held[suffix] == nil {
			return false, nil
		}
	default:
		return false, nil
	}
	h := c.held[suffix]
	delete(c.held, suffix)
	t1, t2 := everyT(h.tokens), everyT(tokens)
	both := intersectAll(t1, t2)
	if len(both) == 0 {
		if err := lw.emitGEMMKernel(h.g, suffix, h.s, h.tokens, fused{}); err != nil {
			return true, err
		}
		return false, nil
	}
	if only := subtract(t1, both); len(only) > 0 {
		if err := lw.emitGEMMKernel(h.g, suffix, h.s, only, fused{}); err != nil {
			return true, err
		}
	}
	if err := lw.emitChained(h.g, h.s, g, s, suffix, both); err != nil {
		return true, err
	}
	if only := subtract(t2, both); len(only) > 0 {
		return true, lw.emitGEMMKernel(g, suffix, s, only, fused{})
	}
	return true, nil
}

// checkChain reports a first kernel still held once the program is
// lowered (its second never came: an internal error, as the kernel would
// launch after the ops that read it).
func (lw *perOp) checkChain() error {
	if lw.chain == nil || len(lw.chain.held) == 0 {
		return nil
	}
	return fmt.Errorf("codegen: %s: the chained pair's %s kernels %v were held for %s, which never came", lw.src.Layer.Name, lw.chain.first, slices.Sorted(maps.Keys(lw.chain.held)), lw.chain.second)
}

// emitChained emits the chained kernel moe_<first>_<second><suffix> of
// GEMMs g1 (under schedule s1) and g2 (s2), launched for tokens: the
// engine's parameters bound to g1's operands and its tile list, tile_done
// to the list's counters, and the second GEMM's (chainPrefix) to g2's.
func (lw *perOp) emitChained(g1 moe.GEMM, s1 schedule.Schedule, g2 moe.GEMM, s2 schedule.Schedule, suffix string, tokens []launch.TokenRange) error {
	spec1, spec2 := lw.gemmSpec(g1, s1), lw.gemmSpec(g2, s2)
	spec1.Name, spec2.Name = "moe_"+g1.Name()+suffix, "moe_"+g2.Name()+suffix
	ki, err := lw.eng.ChainedGEMM(lw.mod, "moe_"+g1.Name()+"_"+g2.Name()+suffix, spec1, spec2, int64(g1.RowsPerToken))
	if err != nil {
		return err
	}
	bind1, bind2 := lw.gemmBind(g1, spec1), lw.gemmBind(g2, spec2)
	bind1[RoleTileDone] = lw.listFor(spec1.Tile.BM).done.Name
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
