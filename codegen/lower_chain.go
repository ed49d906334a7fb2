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

// chainPlan is a pair of GEMM ops lowered as chained kernels
// (schedule.ChainFC, Engine.ChainedGEMM) at the token counts where both
// run kernels of forms the engine chains: the forward's fc1 and the fc2
// right after it, which reads fc1's C. A form is a kernel-name suffix:
// the base kernels (""), the tile variant's ("_<name>") and fc1's
// gathering decode kernels ("_gathered", "_<name>_gathered"), each
// paired with fc2's kernel of the same tiles.
type chainPlan struct {
	first, second string // the ops' names
	// pairs maps each of fc1's forms the engine chains to fc2's form it
	// chains with.
	pairs map[string]string
	// held is fc1's kernels of those forms, held back by chainGEMM until
	// fc2's, which decide the token counts each pair shares.
	held map[string]*heldGEMM
}

// heldGEMM is a kernel of a GEMM op that emitGEMM has not emitted yet:
// the op, its schedule, its token counts and its fused work.
type heldGEMM struct {
	g      moe.GEMM
	s      schedule.Schedule
	tokens []launch.TokenRange
	f      fused
}

// planChain finds, under schedule.ChainFC, the gated GEMM over dispatched
// rows followed at once by the GEMM that reads its C (the forward's fc1
// and fc2), and the kernel forms whose kernels the engine chains
// (Engine.ChainsGEMMs): fc1's base, tile-variant and gathering kernels,
// each with fc2's of the same tiles. It gives each such form's tile list
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
	for i := range ops {
		g1, g2, q, ok := fcPair(ops, i)
		if !ok || g1.BMajor == moe.NMajor || g2.BMajor == moe.NMajor {
			continue
		}
		c := &chainPlan{first: g1.Name(), second: g2.Name(), pairs: map[string]string{}, held: map[string]*heldGEMM{}}
		var why error
		try := func(form, form2 string, s1, s2 GemmSpec) {
			if err := lw.eng.ChainsGEMMs(s1, s2); err != nil {
				why = cmp.Or(why, err)
				return
			}
			c.pairs[form] = form2
			lw.tileCounters(s1.Tile.BM, "moe_"+g1.Name()+"_"+g2.Name()+form)
		}
		for _, k := range lw.gemmKernels(g1) {
			if !slices.ContainsFunc(lw.gemmKernels(g2), func(k2 gemmKernel) bool { return k2.suffix == k.suffix }) {
				continue
			}
			f1, f2 := g1, g2
			if k.baseForm { // the base kernels run the program's register-fed form, if it has one
				f1, f2 = lw.baseForm(g1).(moe.GEMM), lw.baseForm(g2).(moe.GEMM)
			}
			s1, s2 := lw.gemmSpec(f1, k.s), lw.gemmSpec(f2, k.s)
			s1.Name, s2.Name = "moe_"+g1.Name()+k.suffix, "moe_"+g2.Name()+k.suffix
			if q != nil { // chained only where FC1's epilogue quantizes h (lowerQuantizedGEMM)
				if k.suffix == "" || !lw.quantizedPair(g1, *q) {
					continue
				}
				s1.QuantizeC, s1.QuantizeCOnly = true, lw.onlyReader(g1.C, *q)
			}
			try(k.suffix, k.suffix, s1, s2)
			if q == nil && lw.sched.Gather != schedule.GatherSeparate && lw.eng.GathersA(s1, lw.d.K) {
				s1.GatherK, s1.Name = lw.d.K, s1.Name+"_gathered"
				try(k.suffix+"_gathered", k.suffix, s1, s2)
			}
		}
		if len(c.pairs) == 0 {
			if why == nil { // no form was tried: an mxfp8 forward without the decode tiles
				why = fmt.Errorf("%s writes the MXFP8 form of %s in its epilogue only in the decode tiles' kernels (schedule.Schedule.Variant), which this schedule has none of; elsewhere a quantize kernel runs between the GEMMs", g1.Name(), g1.C.Name)
			}
			return fmt.Errorf("codegen: %s: Schedule.Chain %v: %s and %s run in one kernel in none of their kernel forms (they need the same schedule tile MxNxK, FC1's N counting its gate and up rows, and the same stages): %s", lw.src.Layer.Name, lw.sched.Chain, g1.Name(), g2.Name(), strings.TrimPrefix(why.Error(), "codegen: "))
		}
		lw.chain = c
		return nil
	}
	return nil
}

// fcPair reports whether ops[i] begins the forward's FC1 and FC2: a gated
// GEMM over dispatched rows (g1) followed by the GEMM over dispatched rows
// that reads its C (g2), at once or through the Quantize of it between
// them (q: an mxfp8 forward's quantize_h; nil: none).
func fcPair(ops []moe.Op, i int) (g1, g2 moe.GEMM, q *moe.Quantize, ok bool) {
	if i+1 >= len(ops) {
		return g1, g2, nil, false
	}
	g1, ok1 := ops[i].(moe.GEMM)
	g2, ok2 := ops[i+1].(moe.GEMM)
	if qq, isQ := ops[i+1].(moe.Quantize); isQ && i+2 < len(ops) {
		g2, ok2 = ops[i+2].(moe.GEMM)
		q = &qq
	}
	ok = ok1 && ok2 && g1.Gated && g1.Rows == moe.Dispatched && g2.Rows == moe.Dispatched &&
		(q == nil && g2.A == g1.C || q != nil && q.X == g1.C && q.Q != nil && g2.A == q.Q)
	return g1, g2, q, ok
}

// tileCounters gives the tile list of bm-row tiles (newPerOp made the
// lists) the counters through which FC2's items wait for FC1's row tiles
// of h, in the chained kernel name or in the persistent kernel's phases
// (planHSignals), once per list, and returns them (nil: no such list).
func (lw *perOp) tileCounters(bm int, name string) *moe.Buffer {
	return lw.listCounters(bm, func(t *tileList) **moe.Buffer { return &t.done }, "tile_done", func(tiles string) string {
		return fmt.Sprintf("the counters of FC2's wait for FC1's rows of h (%s, ...): per tile of %s, the signals of the FC1 warps or threads that have stored their part of the tile's rows, over all its column blocks (zeroed with the list)", name, tiles)
	})
}

// listCounters returns the u32 counters per tile of the tile list of
// bm-row tiles that field selects (tileList.done, tileList.gathered),
// adding them to the program once, named after the list's tiles with
// prefix in place of "tiles" and documented by doc of the tiles' name
// (nil: no such list). The kernel writing the list zeroes them.
func (lw *perOp) listCounters(bm int, field func(*tileList) **moe.Buffer, prefix string, doc func(tiles string) string) *moe.Buffer {
	for li := range lw.lists {
		t := &lw.lists[li]
		if t.bm != bm {
			continue
		}
		if c := field(t); *c == nil {
			*c = &moe.Buffer{Name: strings.Replace(t.tiles.Name, "tiles", prefix, 1), Kind: moe.Scratch, DType: moe.U32,
				Shape: []launch.Expr{t.tiles.Shape[0]}, Doc: doc(t.tiles.Name)}
			lw.prog.Buffers = append(lw.prog.Buffers, (*c).Plan())
		}
		return *field(t)
	}
	return nil
}

// chainGEMM is emitGEMM's part for the kernels of a chained pair: it
// holds back fc1's kernels of the forms the engine chains (held true),
// and at an fc2 kernel with held partners emits, for the token counts
// each partner shares with it, the chained kernel, after the partners'
// kernels where fc2's does not run and before fc2's kernel where no
// partner runs. Other kernels: held false.
func (lw *perOp) chainGEMM(g moe.GEMM, suffix string, s schedule.Schedule, tokens []launch.TokenRange, f fused) (held bool, err error) {
	c := lw.chain
	switch g.Name() {
	case c.first:
		if _, ok := c.pairs[suffix]; !ok {
			return false, nil
		}
		c.held[suffix] = &heldGEMM{g, s, tokens, f}
		return true, nil
	case c.second:
		if f != (fused{}) {
			return false, fmt.Errorf("codegen: %s: the chained pair's %s kernel %s fuses other work, which the chained kernel does not", lw.src.Layer.Name, c.second, suffix)
		}
	default:
		return false, nil
	}
	var forms []string // fc1's held forms that chain with this kernel
	for _, form := range slices.Sorted(maps.Keys(c.held)) {
		if c.pairs[form] == suffix {
			forms = append(forms, form)
		}
	}
	if len(forms) == 0 {
		return false, nil
	}
	rest := everyT(tokens)
	type chained struct {
		form string
		h    *heldGEMM
		both []launch.TokenRange
	}
	var cs []chained
	for _, form := range forms {
		h := c.held[form]
		delete(c.held, form)
		t1 := everyT(h.tokens)
		both := intersectAll(t1, rest)
		rest = subtract(rest, both)
		if only := subtract(t1, both); len(only) > 0 {
			if len(both) == 0 {
				only = h.tokens // as emitGEMM would have
			}
			// Held back, this kernel launches after the second op's
			// kernels lowered so far: none may run at its T.
			for _, k := range lw.prog.Kernels {
				if strings.HasPrefix(k.Name, "moe_"+c.second) && len(intersectAll(everyT(k.Tokens), everyT(only))) > 0 {
					return true, fmt.Errorf("codegen: %s: %s's held kernel moe_%s%s would launch after %s at T in %v", lw.src.Layer.Name, c.first, c.first, form, k.Name, intersectAll(everyT(k.Tokens), everyT(only)))
				}
			}
			if err := lw.emitGEMMKernel(h.g, form, h.s, only, h.f); err != nil {
				return true, err
			}
		}
		if len(both) > 0 {
			cs = append(cs, chained{form, h, both})
		}
	}
	for _, ch := range cs {
		if err := lw.emitChained(ch.h, g, s, suffix, ch.form, ch.both); err != nil {
			return true, err
		}
	}
	if len(rest) > 0 {
		if len(cs) == 0 {
			rest = tokens // as emitGEMM would have
		}
		return true, lw.emitGEMMKernel(g, suffix, s, rest, fused{})
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

// emitChained emits the chained kernel moe_<first>_<second><form> of fc1's
// held kernel h (of form form) and GEMM g2 (fc2's kernel of form suffix,
// under schedule s2), launched for tokens: the engine's parameters bound
// as h's and g2's kernels bind theirs (the second GEMM's with
// chainPrefix), tile_done to the list's counters.
func (lw *perOp) emitChained(h *heldGEMM, g2 moe.GEMM, s2 schedule.Schedule, suffix, form string, tokens []launch.TokenRange) error {
	spec1, bind1, err := lw.gemmKernelSpec(h.g, form, h.s, h.f)
	if err != nil {
		return err
	}
	spec2, bind2, err := lw.gemmKernelSpec(g2, suffix, s2, fused{})
	if err != nil {
		return err
	}
	if spec1.Tile.Cluster != spec2.Tile.Cluster { // one kernel: both GEMMs in clusters, or neither
		spec1.Tile.Cluster, spec2.Tile.Cluster = 1, 1
	}
	ki, err := lw.eng.ChainedGEMM(lw.mod, "moe_"+h.g.Name()+"_"+g2.Name()+form, spec1, spec2, int64(h.g.RowsPerToken))
	if err != nil {
		return err
	}
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
