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

// tileList is a GEMM work list of the PerOp lowering: (expert, first row)
// pairs of bm-row tiles, in expert order, written by the scan.
type tileList struct {
	bm           int
	tiles, count *moe.Buffer
	// done (nil: none) is the counters of FC1's row tiles that FC2 waits
	// for (a chained kernel's, planChain; the persistent forward's FC2
	// phase's, planHSignals), u32 per tile, which the kernel writing the
	// list zeroes (tileCounters).
	done *moe.Buffer
	// gathered (nil: none) is the counters of the chunks of each tile's
	// rows that FC1's store warps have gathered (the persistent forward's
	// gather beside FC1, planStoreGather), u32 per tile, which the kernel
	// writing the list zeroes (gatherCounters).
	gathered *moe.Buffer
}

// counters is the list's counters that the kernel writing it zeroes
// (done, gathered: those it has).
func (t tileList) counters() []*moe.Buffer {
	return slices.DeleteFunc([]*moe.Buffer{t.done, t.gathered}, func(c *moe.Buffer) bool { return c == nil })
}

// listFor returns the work list of bm-row tiles, adding it if new: list i
// is the scratch pair tiles<i+1>, ntiles<i+1>.
func (lw *perOp) listFor(bm int) tileList {
	for _, t := range lw.lists {
		if t.bm == bm {
			return t
		}
	}
	i := len(lw.lists) + 1
	K, E, BM := int64(lw.d.K), int64(lw.d.E), int64(bm)
	t := tileList{bm: bm,
		tiles: &moe.Buffer{Name: fmt.Sprintf("tiles%d", i), Kind: moe.Scratch, DType: moe.I32,
			Shape: []launch.Expr{{A: K, B: E * BM, D: BM, Min: 1}, launch.Const(2)}},
		count: &moe.Buffer{Name: fmt.Sprintf("ntiles%d", i), Kind: moe.Scratch, DType: moe.I32,
			Shape: []launch.Expr{launch.Const(1)}},
	}
	lw.lists = append(lw.lists, t)
	lw.describeLists()
	return t
}

// describeLists documents which GEMMs read each work list.
func (lw *perOp) describeLists() {
	s := lw.sched
	for _, t := range lw.lists {
		var users string
		add := func(bm int, who string) {
			if bm != t.bm {
				return
			}
			if users != "" {
				users += " and "
			}
			users += who
		}
		add(s.FC1.M, "FC1")
		add(s.FC2.M, "FC2")
		if lw.hasVariant {
			add(lw.variant.FC1.M, "the GEMM variant")
		}
		if lw.hasDecode {
			add(lw.decode.FC1.M, "the decode tiles")
		}
		if r := s.FC2Large; r.Set() {
			add(r.Tile.M, "FC2's large-rows kernel")
		}
		t.tiles.Doc = fmt.Sprintf("%s tile list (%d rows per tile): (expert, first row) pairs", users, t.bm)
		t.count.Doc = users + " tile count"
	}
}

// lowerGEMM emits a grouped GEMM op through the target's engine: one kernel,
// or for dispatched rows under a schedule with a GEMM variant, the base
// kernel for T outside the variant's token range and "_<Variant.Name>"
// (e.g. moe_fc1_mid) inside it; the register-fed FC2's base kernel is
// split again by the schedule's FC2Large (gemmKernels).
func (lw *perOp) lowerGEMM(g moe.GEMM) error {
	if split, err := lw.lowerSplitKGEMM(g); split || err != nil {
		return err
	}
	if g.BMajor == moe.NMajor && !lw.readsNMajorB(g) {
		g = lw.transposeB(g)
	}
	bg := lw.baseForm(g).(moe.GEMM) // g, or its register-fed form (K-major: never transposed)
	for _, k := range lw.gemmKernels(g) {
		form := g
		if k.baseForm {
			form = bg
		}
		if err := lw.emitGEMM(form, k.suffix, k.s, k.tokens, fused{}); err != nil {
			return err
		}
	}
	return nil
}

// gemmKernel is one kernel of a GEMM op: the schedule it takes, its name
// suffix, the token counts it runs at (nil: every T) and whether it runs
// the op's base form (baseForm: the register-fed one where the program has
// it) rather than the op as it is (the variant's).
type gemmKernel struct {
	s        schedule.Schedule
	suffix   string
	tokens   []launch.TokenRange
	baseForm bool
}

// gemmKernels are the kernels of g: one, or under a schedule with a GEMM
// variant for g (usesVariant) the base kernel outside the variant's token
// range and "_<Variant.Name>" inside it; the base kernel of the
// register-fed FC2 is split by the schedule's FC2Large (largeKernels);
// then, for every GEMM of a forward under a schedule with Decode tiles
// (hasDecode: the routed and the shared experts', so that at each T all
// GEMMs run blocks of one shape, the persistent lowering's one kernel per
// block shape, persistGroups), "_<Decode.Name>" in their token range,
// which the others leave out.
func (lw *perOp) gemmKernels(g moe.GEMM) []gemmKernel {
	var ks []gemmKernel
	if !lw.usesVariant(g) {
		ks = lw.largeKernels(g, gemmKernel{lw.sched, "", nil, true})
	} else {
		base, variant := lw.variantRanges()
		ks = append(lw.largeKernels(g, gemmKernel{lw.sched, "", base, true}),
			gemmKernel{lw.variant, "_" + lw.sched.Variant.Name, variant, false})
	}
	if !lw.hasDecode {
		return ks
	}
	lo, hi := lw.sched.Decode.VariantTokens(lw.d.K, lw.d.E)
	if lo > hi {
		return ks
	}
	dec := launch.TokenRange{Min: lo, Max: hi}
	var out []gemmKernel
	for _, k := range ks {
		tokens := k.tokens
		if tokens == nil {
			tokens = []launch.TokenRange{{Min: 1, Max: launch.MaxTokens}}
		}
		if k.tokens = without(tokens, dec); len(k.tokens) > 0 {
			out = append(out, k)
		}
	}
	return append(out, gemmKernel{lw.decode, "_" + lw.sched.Decode.Name, []launch.TokenRange{dec}, false})
}

// takesLarge reports whether g runs the schedule's FC2Large tile in its
// token ranges (largeTokens): an MXFP8 routed FC2 of the forward (dispatched rows, not
// gated, N = H and K = I; the backward's GEMMs of dispatched rows have
// other shapes: the FC1 recompute N = 2I, K = H, the data gradients
// N = I, K = H and N = H, K = 2I). Its base form is the register-fed one
// (FC2Large needs MXGemmRegFed).
func (lw *perOp) takesLarge(g moe.GEMM) bool {
	return lw.sched.FC2Large.Set() && (g.AScales != nil || g.ARegisterFed) &&
		g.Rows == moe.Dispatched && !g.Gated && g.N == lw.d.H && g.K == lw.d.I
}

// largeKernels splits the base kernel k of g where g takes FC2Large
// (takesLarge; not the backward's FC1 recompute, which also takes FC2's
// tile): moe_<g>_large (LargeSchedule) in the large tile's token ranges
// (largeTokens), k in the rest of its own. Else k.
func (lw *perOp) largeKernels(g moe.GEMM, k gemmKernel) []gemmKernel {
	large, _ := lw.sched.LargeSchedule()
	if !lw.takesLarge(g) {
		return []gemmKernel{k}
	}
	tokens := k.tokens
	if tokens == nil {
		tokens = []launch.TokenRange{{Min: 1, Max: launch.MaxTokens}}
	}
	far := lw.largeTokens()
	near, many := subtract(tokens, far), intersectAll(tokens, far)
	var out []gemmKernel
	if len(near) > 0 {
		out = append(out, gemmKernel{k.s, k.suffix, near, true})
	}
	if len(many) > 0 {
		out = append(out, gemmKernel{large, k.suffix + "_large", many, true})
	}
	return out
}

// largeTokens are the token ranges in which the schedule's FC2Large runs:
// its band (MidRows) and from MinRows on, either possibly absent.
func (lw *perOp) largeTokens() []launch.TokenRange {
	r := lw.sched.FC2Large
	var out []launch.TokenRange
	if r.MidRows.Set() {
		if lo, hi := r.MidRows.Tokens(lw.d.K, lw.d.E); lo <= hi {
			out = append(out, launch.TokenRange{Min: lo, Max: hi})
		}
	}
	if r.MinRows > 0 {
		out = append(out, launch.TokenRange{Min: r.MinTokens(lw.d.K, lw.d.E), Max: launch.MaxTokens})
	}
	return out
}

// variantRanges are the token ranges of the base kernels of a GEMM with a
// variant and of the variant's kernels: they partition T >= 1.
func (lw *perOp) variantRanges() (base, variant []launch.TokenRange) {
	lo, hi := lw.sched.Variant.VariantTokens(lw.d.K, lw.d.E)
	if lo > 1 {
		base = append(base, launch.TokenRange{Min: 1, Max: lo - 1})
	}
	base = append(base, launch.TokenRange{Min: hi + 1, Max: launch.MaxTokens})
	return base, []launch.TokenRange{{Min: lo, Max: hi}}
}

// lowerQuantizedGEMM lowers a GEMM followed by the Quantize of its C (the
// MXFP8 forward's fc1 and quantize_h) with the quantization in the GEMM
// kernel's epilogue wherever the engine does it (Engine.QuantizesC): the
// decode variant's kernel (the sm_90a operand swap, writing e4m3 and
// codes: quantizedPair) and the base kernel (the register-fed GEMM of two
// blocks per SM, writing h's register-fed values: baseQuantizes). A fused
// kernel also writes the Quantize op's outputs (and leaves C unstored,
// GemmSpec.QuantizeCOnly, when no other op reads it); the quantize kernel
// runs only in the token ranges of the kernels that do not. It returns 2
// when it lowered both ops, 0 when no kernel fuses them.
func (lw *perOp) lowerQuantizedGEMM(ops []moe.Op) (int, error) {
	if len(ops) < 2 {
		return 0, nil
	}
	g, okG := ops[0].(moe.GEMM)
	q, okQ := ops[1].(moe.Quantize)
	if !okG || !okQ {
		return 0, nil
	}
	bg, bq := lw.baseForm(g).(moe.GEMM), lw.baseForm(q).(moe.Quantize)
	varFused, baseFused := lw.quantizedPair(g, q), lw.baseQuantizes(bg, bq)
	if !varFused && !baseFused {
		return 0, nil
	}
	if !lw.usesVariant(g) { // baseFused: one kernel at every T
		return 2, lw.emitGEMM(bg, "", lw.sched, nil, quantizing(true, bq))
	}
	base, variant := lw.variantRanges()
	if err := lw.emitGEMM(bg, "", lw.sched, base, quantizing(baseFused, bq)); err != nil {
		return 0, err
	}
	if err := lw.emitGEMM(g, "_"+lw.sched.Variant.Name, lw.variant, variant, quantizing(varFused, q)); err != nil {
		return 0, err
	}
	if !baseFused {
		if err := lw.lowerFor(bq, base); err != nil {
			return 0, err
		}
	}
	if !varFused {
		if err := lw.lowerFor(q, variant); err != nil {
			return 0, err
		}
	}
	return 2, nil
}

// quantizedPair reports whether GEMM g followed by the Quantize q of its C
// lowers as lowerQuantizedGEMM's pair: the decode variant's kernel
// quantizes C in its epilogue (Engine.QuantizesC), the base kernels run q
// after g.
func (lw *perOp) quantizedPair(g moe.GEMM, q moe.Quantize) bool {
	if q.X != g.C || q.K != g.N || g.BMajor == moe.NMajor || !lw.usesVariant(g) {
		return false
	}
	spec := lw.gemmSpec(g, lw.variant)
	spec.Name = "moe_" + g.Name() + "_" + lw.sched.Variant.Name
	return lw.eng.QuantizesC(spec)
}

// quantizing is the fused work of a GEMM kernel that writes q's outputs
// in its epilogue when ok, else none.
func quantizing(ok bool, q moe.Quantize) fused {
	if ok {
		return fused{quant: &q}
	}
	return fused{}
}

// baseQuantizes reports whether the base kernel of GEMM g (its register-fed
// form, baseForm) writes the values form of the Quantize q of its C (q.V)
// in its epilogue (Engine.QuantizesC with GemmSpec.QuantizeCValues): the
// sm_90a register-fed FC1 of two blocks per SM
// (Schedule.BlocksPerSM, where the engine builds it so).
func (lw *perOp) baseQuantizes(g moe.GEMM, q moe.Quantize) bool {
	if q.V == nil || q.X != g.C || q.K != g.N || g.BMajor == moe.NMajor || !g.ARegisterFed || lw.sched.BlocksPerSM < 2 { // (no chain: Validate refuses it with BlocksPerSM)
		return false
	}
	spec := lw.gemmSpec(g, lw.sched)
	spec.Name = "moe_" + g.Name()
	spec.QuantizeC, spec.QuantizeCValues, spec.Tile.BlocksPerSM = true, true, lw.sched.BlocksPerSM
	return lw.eng.QuantizesC(spec)
}

// gatherFC1Rows bounds the mean dispatched rows per expert, T*topk/E, up to
// which FC1 reads the rows from x itself (GemmSpec.GatherK): at decode
// sizes that saves the gather kernel's launch and round trip (qwen3-30b-a3b
// T = 64: 0.323 -> 0.310 ms on the H200), while at T = 4096 the copying
// threads' cp.async made FC1 1.4-1.5x slower than its TMA loads of the
// gathered rows (docs/perf.md, gather v1).
const gatherFC1Rows = 16

// lowerGatheredGEMM lowers a Gather of plain bf16 rows (no routing weight
// on them) followed by the GEMM that alone reads them (the forward's gather
// and fc1) with, at decode sizes (at most gatherFC1Rows mean rows per expert,
// T*topk/E), a second kernel of each of the GEMM's kernels that reads the
// rows from x by their slots (GemmSpec.GatherK, named
// moe_<gemm>[_<variant>]_gathered) where the engine does (Engine.GathersA)
// and the schedule lets it (schedule.Schedule.Gather is not GatherSeparate): the
// gather kernel and the plain GEMM kernels run only at the other token
// counts (xs stays planned for them). Under the persistent lowering
// (planStoreGather), from storeGatherFrom tokens on, a plain GEMM kernel
// whose store warps can gather (storesGather) has a form that reads x
// itself too (moe_<gemm>[_<variant>]_store_gathered), and the gather kernel
// runs at none of its token counts. bf16 layers only. It returns 2 when it
// lowered both ops, 0 when they do not qualify.
func (lw *perOp) lowerGatheredGEMM(ops []moe.Op) (int, error) {
	if lw.sched.Gather == schedule.GatherSeparate {
		return 0, nil
	}
	ga, g, ok := lw.gatherPair(ops)
	if !ok {
		return 0, nil
	}
	decode := launch.TokenRange{Min: 1, Max: int64(gatherFC1Rows * lw.d.E / lw.d.K)} // top-k <= E: at least 16
	rest := launch.TokenRange{Min: decode.Max + 1, Max: launch.MaxTokens}
	all := []launch.TokenRange{{Min: 1, Max: launch.MaxTokens}}
	type split struct {
		k                gemmKernel
		near, far, store []launch.TokenRange // the gathering kernel's tokens, the plain one's, the store-gathering one's
	}
	var splits []split
	var separate []launch.TokenRange // where the gather kernel runs
	gathers, stores := false, false
	for _, k := range lw.gemmKernels(g) {
		tokens := k.tokens
		if tokens == nil {
			tokens = all
		}
		spec := lw.gemmSpec(g, k.s)
		spec.Name = "moe_" + g.Name() + k.suffix + "_gathered"
		near, far := intersect(tokens, decode), intersect(tokens, rest)
		if len(near) == 0 || !lw.eng.GathersA(spec, lw.d.K) {
			near, far = nil, tokens
		}
		var store []launch.TokenRange
		if from := lw.storeGatherFrom; from > 0 && len(far) > 0 && lw.storesGather(g, k.s) {
			far, store = intersect(far, launch.TokenRange{Min: 1, Max: from - 1}), intersect(far, launch.TokenRange{Min: from, Max: launch.MaxTokens})
		}
		gathers, stores = gathers || len(near) > 0, stores || len(store) > 0
		separate = append(separate, far...)
		splits = append(splits, split{k, near, far, store})
	}
	if !gathers && !stores {
		return 0, nil
	}
	if len(separate) > 0 || !stores { // every T above decode where no store warps gather
		if err := lw.lowerFor(ga, merge(separate)); err != nil {
			return 0, err
		}
	}
	for _, sp := range splits {
		if len(sp.near) > 0 {
			if err := lw.emitGEMM(g, sp.k.suffix+"_gathered", sp.k.s, sp.near, fused{gather: &gatherSrc{x: ga.X, slots: ga.SrcSlot}}); err != nil {
				return 0, err
			}
		}
		if len(sp.far) > 0 {
			if err := lw.emitGEMM(g, sp.k.suffix, sp.k.s, sp.far, fused{}); err != nil {
				return 0, err
			}
		}
		if len(sp.store) > 0 {
			f := fused{storeGather: &gatherSrc{x: ga.X, slots: ga.SrcSlot}}
			if err := lw.emitGEMM(g, sp.k.suffix+"_store_gathered", sp.k.s, sp.store, f); err != nil {
				return 0, err
			}
		}
	}
	return 2, nil
}

// merge sorts token ranges and joins those that touch.
func merge(ranges []launch.TokenRange) []launch.TokenRange {
	rs := slices.Clone(ranges)
	slices.SortFunc(rs, func(a, b launch.TokenRange) int { return cmp.Compare(a.Min, b.Min) })
	var out []launch.TokenRange
	for _, r := range rs {
		if n := len(out); n > 0 && r.Min <= out[n-1].Max+1 {
			out[n-1].Max = max(out[n-1].Max, r.Max)
			continue
		}
		out = append(out, r)
	}
	return out
}

// intersect is the parts of ranges inside r.
func intersect(ranges []launch.TokenRange, r launch.TokenRange) []launch.TokenRange {
	var out []launch.TokenRange
	for _, t := range ranges {
		if lo, hi := max(t.Min, r.Min), min(t.Max, r.Max); lo <= hi {
			out = append(out, launch.TokenRange{Min: lo, Max: hi})
		}
	}
	return out
}

// allForms is the program's ops followed by their register-fed forms
// (addRegisterFed; none when the program has one form).
func (lw *perOp) allForms() []moe.Op {
	ops := append([]moe.Op{}, lw.src.Ops...)
	for _, op := range lw.rfOps {
		ops = append(ops, op)
	}
	return ops
}

// onlyReader reports whether buf is scratch that no op of the program (in
// either form) reads but r, and not state a backward reads (moe.BufFC1Out,
// scratch of the forward and an input of the backward).
func (lw *perOp) onlyReader(buf *moe.Buffer, r moe.Op) bool {
	if buf.Kind != moe.Scratch || buf.Name == moe.BufFC1Out {
		return false
	}
	for _, op := range lw.allForms() {
		if op.Name() == r.Name() || op.Name() == lw.baseForm(r).Name() || lw.baseForm(op).Name() == r.Name() { // r in either form: each runs in its own token range
			continue
		}
		for _, o := range op.Operands() {
			if o.Buffer == buf && o.Reads() {
				return false
			}
		}
	}
	return true
}

// fused are the ops a GEMM kernel runs besides the GEMM (each nil: none):
// the Quantize of its C in the epilogue (GemmSpec.QuantizeC), the gather
// of its A rows in the producer (GemmSpec.GatherK); and the parts of its
// reduction (GemmSpec.SplitK), summed by a reduce kernel.
type fused struct {
	quant  *moe.Quantize
	gather *gatherSrc
	splitK int // the reduction's parts (GemmSpec.SplitK; 0: one)
	// storeGather: the rows its store warps gather beside the items
	// (GemmSpec.storeGatherK, planStoreGather; nil: a gather phase's)
	storeGather *gatherSrc
}

// gatherSrc is where a gathering GEMM (GemmSpec.GatherK) reads its A rows:
// the token rows x (bf16 [T, K], or the e4m3 rows of their per-token
// quantization with their scales [T, K/32]) at the token of each row's
// slot in slots (moe.Permute's SrcSlot).
type gatherSrc struct {
	x, scales, slots *moe.Buffer
}

// emitGEMM emits one kernel of g with schedule s, launched for tokens
// (nil: every T >= 1), binding the engine's parameter roles to g's operands
// and the work list of its row tile. With f.quant (the Quantize of g's C)
// the epilogue also writes its outputs (GemmSpec.QuantizeC), and stores C
// only if another op reads it (GemmSpec.QuantizeCOnly, onlyReader); with
// f.gather the kernel reads A's rows (and an MXFP8 A's scales) from the
// token rows by their slots (GemmSpec.GatherK). The kernels of a chained
// pair (planChain) go through chainGEMM.
func (lw *perOp) emitGEMM(g moe.GEMM, suffix string, s schedule.Schedule, tokens []launch.TokenRange, f fused) error {
	if lw.chain != nil && f.splitK == 0 {
		if held, err := lw.chainGEMM(g, suffix, s, tokens, f); held || err != nil {
			return err
		}
	}
	return lw.emitGEMMKernel(g, suffix, s, tokens, f)
}

// emitGEMMKernel is emitGEMM's kernel.
func (lw *perOp) emitGEMMKernel(g moe.GEMM, suffix string, s schedule.Schedule, tokens []launch.TokenRange, f fused) error {
	spec, bind, err := lw.gemmKernelSpec(g, suffix, s, f)
	if err != nil {
		return err
	}
	for _, k := range lw.prog.Kernels {
		if k.Name == spec.Name {
			return fmt.Errorf("codegen: two kernels named %s: a GEMM variant's kernels are named moe_<gemm>_<schedule.TileVariant.Name>, which must not be another kernel's name", spec.Name)
		}
	}
	ki, err := lw.eng.GroupedGEMM(lw.mod, spec, int64(g.RowsPerToken))
	if err != nil {
		return err
	}
	return lw.addGEMMKernel(ki, tokens, func(Param) map[string]string { return bind })
}

// gemmKernelSpec is the spec of g's kernel moe_<g><suffix> under schedule
// s with the fused work f (emitGEMM), and the buffers its parameter roles
// bind to; it adds the kernel's queue words with schedule.ItemsQueue.
func (lw *perOp) gemmKernelSpec(g moe.GEMM, suffix string, s schedule.Schedule, f fused) (GemmSpec, map[string]string, error) {
	spec := lw.gemmSpec(g, s)
	spec.Name = "moe_" + g.Name() + suffix
	if f.quant != nil {
		spec.QuantizeC, spec.QuantizeCValues, spec.QuantizeCOnly = true, f.quant.V != nil, lw.onlyReader(g.C, *f.quant)
	}
	if f.gather != nil {
		spec.GatherK = lw.d.K
	}
	if f.storeGather != nil {
		spec.storeGatherK = lw.d.K
	}
	spec.SplitK = f.splitK
	if lw.roundOdd[g.C.Name] && !spec.QuantizeCOnly {
		if !spec.MXRegisterFed {
			return spec, nil, fmt.Errorf("codegen: %s: %s is stored as bf16 rounded to odd, which only the register-fed GEMM writes (planRoundOdd)", spec.Name, g.C.Name)
		}
		spec.COutF32, spec.CRoundOdd = false, true
	}
	var queue *moe.Buffer
	if lw.queuesItems(spec) {
		var qw kernelQueue
		queue, qw = lw.workQueue(gemmQueueWords)
		spec.QueueItems, spec.QueueWord = true, int(qw.first)
	}
	bind := lw.gemmBind(g, spec)
	if f.quant != nil {
		if f.quant.V != nil {
			bind[RoleCV] = f.quant.V.Name
		} else {
			bind[RoleCQ], bind[RoleCScales] = f.quant.Q.Name, f.quant.S.Name
		}
	}
	if f.gather != nil {
		bind[RoleA], bind[RoleARows] = f.gather.x.Name, f.gather.slots.Name
		if f.gather.scales != nil {
			bind[RoleAScales] = f.gather.scales.Name
		}
	}
	if f.storeGather != nil {
		bind[RoleGatherX], bind[RoleGatherSlot] = f.storeGather.x.Name, f.storeGather.slots.Name
		bind[RoleGatherDone] = lw.gatherCounters(spec.Tile.BM).Name
	}
	if queue != nil {
		bind[RoleQueue] = queue.Name
	}
	lw.hSignals(g, &spec, bind, f)
	// The other forms were chosen without a cluster; the GEMM runs in
	// clusters where the engine builds it so.
	if lw.sched.Cluster > 1 && lw.eng.Clusters(spec) {
		spec.Tile.Cluster = lw.sched.Cluster
	}
	if lw.sched.BlocksPerSM > 1 {
		if err := lw.eng.SharesSM(spec); err != nil {
			if lw.oneBlockPerSM == nil {
				lw.oneBlockPerSM = map[string]string{}
			}
			lw.oneBlockPerSM[spec.Name] = strings.TrimPrefix(strings.TrimPrefix(err.Error(), "codegen: "), spec.Name+": ")
		} else {
			spec.Tile.BlocksPerSM = lw.sched.BlocksPerSM
		}
	}
	return spec, bind, nil
}

// queuesItems reports whether spec's kernel takes its work items from a
// queue (GemmSpec.QueueItems): under schedule.ItemsQueue, over dispatched
// rows, where the engine does (Engine.QueuesItems).
func (lw *perOp) queuesItems(spec GemmSpec) bool {
	return lw.sched.Items == schedule.ItemsQueue && spec.A == ATiled && lw.eng.QueuesItems(spec)
}

// checkCluster refuses a forward under a schedule with Cluster > 1 none
// of whose GEMMs the engine builds in clusters (Engine.Clusters): the
// setting would change nothing. A backward's GEMMs may all run without
// (the forward's check refuses an engine that never builds clusters).
func (lw *perOp) checkCluster() error {
	forward := slices.ContainsFunc(lw.src.Buffers, func(b *moe.Buffer) bool { return b.Name == moe.BufY && b.Kind == moe.Output })
	clustered := slices.ContainsFunc(lw.prog.Kernels, func(k launch.Kernel) bool { return k.Cluster > 1 })
	if lw.sched.Cluster <= 1 || clustered || !forward {
		return nil
	}
	return fmt.Errorf("codegen: %s: Schedule.Cluster %d: the %v engine builds none of this program's GEMMs in clusters (sm_90a: routed GEMMs over bf16 dispatched rows, bf16 or register-fed mxfp8, with grouped weights, an even number of column blocks, the fixed walk; a chained kernel where both of its GEMMs pair): leave the cluster setting at 1 (mokc: no --cluster)", lw.src.Layer.Name, lw.sched.Cluster, lw.sched.Target)
}

// checkSharesSM refuses a program (forward or backward) under a schedule
// with BlocksPerSM > 1 none of whose GEMMs the engine builds so
// (Engine.SharesSM): the setting would change nothing. The error gives
// each routed GEMM kernel's reason and tiles that fit.
func (lw *perOp) checkSharesSM() error {
	shared := slices.ContainsFunc(lw.prog.Kernels, func(k launch.Kernel) bool { return k.BlocksPerSM > 1 })
	if lw.sched.BlocksPerSM <= 1 || shared {
		return nil
	}
	// The reasons of the routed GEMMs' base kernels (the two shortest
	// names: moe_fc1 and moe_fc2, or the backward's moe_fc2_dgrad and
	// moe_fc1_dgrad), not of every variant.
	names := slices.DeleteFunc(slices.Sorted(maps.Keys(lw.oneBlockPerSM)), func(n string) bool { return !strings.HasPrefix(n, "moe_fc") })
	slices.SortStableFunc(names, func(a, b string) int { return cmp.Compare(len(a), len(b)) })
	var why []string
	for _, name := range names[:min(2, len(names))] {
		why = append(why, name+": "+lw.oneBlockPerSM[name])
	}
	hint := sharesSMHintBF16
	if lw.src.Layer.Precision == schedule.MXFP8 {
		hint = sharesSMHintMX
	}
	return fmt.Errorf("codegen: %s: --blocks-per-sm %d (Schedule.BlocksPerSM): no GEMM of this program fits two blocks per SM with this schedule's tiles (%s). Tiles that fit (one consumer warpgroup, within half an SM's registers and 113 KB of shared memory): %s; or leave --blocks-per-sm out",
		lw.src.Layer.Name, lw.sched.BlocksPerSM, strings.Join(why, "; "), hint)
}

// sharesSMHintBF16 and sharesSMHintMX are how a bf16 and an mxfp8
// layer's tiles fit two blocks per SM on sm_90a.
const (
	sharesSMHintBF16 = "--mma-warps 4 --fc1-tile 64x192x64 --fc2-tile 64x192x64 --stages 3, or --mma-warps 4 --fc1-tile 64x256x64 --fc2-tile 64x256x64 --stages 2; with --producer-warps 1 (one producer warp, 168 registers per thread) --mma-warps 4 --fc1-tile 64x256x64 --fc2-tile 64x192x64 --stages 2"
	sharesSMHintMX   = "--mma-warps 4 --fc1-tile 128x128x128 --fc2-tile 128x128x128 --stages 2 (the forward of a layer without a shared expert), or --mma-warps 4 --fc1-tile 64x128x128 --fc2-tile 64x128x128 --stages 3"
)

// gemmBind maps the parameter roles of g's kernel (spec) to buffer names:
// g's operands and, for dispatched rows, the work list of its row tile.
func (lw *perOp) gemmBind(g moe.GEMM, spec GemmSpec) map[string]string {
	bind := map[string]string{}
	for _, o := range g.Operands() {
		bind[o.Role] = o.Buffer.Name
	}
	if g.Rows == moe.Dispatched {
		t := lw.listFor(spec.Tile.BM)
		bind[RoleTiles], bind[RoleNumTiles] = t.tiles.Name, t.count.Name
	}
	return bind
}

// addGEMMKernel adds the GEMM kernel ki, launched for tokens, to the
// program, each parameter bound by its role in the map bindFor gives it
// (a tensor map by its operand; rows to T times one, the wait limit to
// launch.DefaultWaitLimitNs, err to the program's error word).
func (lw *perOp) addGEMMKernel(ki KernelInfo, tokens []launch.TokenRange, bindFor func(Param) map[string]string) error {
	k := Kernel{Name: ki.Name, Block: ki.Block, Grid: ki.Grid, SharedBytes: ki.SharedBytes, SkipIfZeroT: true, Tokens: tokens,
		GridPerSM: ki.GridPerSM, CoResident: ki.CoResident, Phases: ki.Phases, Cluster: ki.Cluster,
		BlocksPerSM: ki.BlocksPerSM}
	for _, prm := range ki.Params {
		role := prm.Role
		if prm.Type == ParamTmap && prm.TensorMap != nil {
			role = prm.TensorMap.Operand
		}
		switch buf, ok := bindFor(prm)[role]; {
		case role == RoleRows:
			v := PerT(1, 0)
			prm.Value = &v
		case role == RoleWaitLimit:
			v := Const(launch.DefaultWaitLimitNs)
			prm.Value = &v
		case role == RoleErr:
			prm.Buffer = moe.BufErr
		case ok:
			prm.Buffer = buf
		default:
			return fmt.Errorf("codegen: %s: parameter %s has role %q that the lowering cannot bind", ki.Name, prm.Name, role)
		}
		k.Params = append(k.Params, prm)
	}
	lw.prog.Kernels = append(lw.prog.Kernels, k)
	return nil
}

// gemmQueueWords is the words of launch.BufWorkQueue a GEMM with
// GemmSpec.QueueItems uses: the next item number and the blocks done.
const gemmQueueWords = 2

// readsNMajorB reports whether the engine reads g's N-major B directly
// under every schedule g is emitted with (the base and, for dispatched
// rows, the variant).
func (lw *perOp) readsNMajorB(g moe.GEMM) bool {
	reads := func(s schedule.Schedule) bool {
		spec := lw.gemmSpec(g, s)
		spec.Name = "moe_" + g.Name()
		return lw.eng.ReadsNMajorB(spec)
	}
	return reads(lw.sched) && (!lw.usesVariant(g) || reads(lw.variant))
}

// usesVariant reports whether g runs the schedule's GEMM variant in its
// token range: a GEMM over dispatched rows, and an MXFP8 one when the
// variant is for those only (schedule.TileVariant.MXOnly).
func (lw *perOp) usesVariant(g moe.GEMM) bool {
	return lw.hasVariant && variantTakes(g, lw.sched)
}

// variantTakes reports whether g runs schedule s's GEMM variant (which s
// has): a GEMM of routed rows, an MXFP8 one where the variant is MXOnly.
func variantTakes(g moe.GEMM, s schedule.Schedule) bool {
	return g.Rows != moe.Dense && (!s.Variant.MXOnly || gemmSpec(g, s).MX)
}

// gemmSpec is gemmSpec for the program's layer: in an mxfp8 layer the bf16
// GEMMs (the shared experts; the backward's data gradients and FC1·x) take
// half the schedule's K block, the same bytes per stage as the e4m3 tiles
// (schedule.Schedule.FC1), and a register-fed FC1 of gate/up halves loads
// them as pairs where the schedule says so (Schedule.FC1HalvesInPairs).
func (lw *perOp) gemmSpec(g moe.GEMM, s schedule.Schedule) GemmSpec {
	spec := gemmSpec(g, s)
	spec.phase = s.Lowering == schedule.LoweringPersistent
	if lw.src.Layer.Precision == schedule.MXFP8 && !spec.MX {
		spec.Tile.BK /= 2
	}
	if spec.Epilogue == EpiGated && spec.MXRegisterFed && s.FC1HalvesInPairs(lw.src.Layer, s.FC1) {
		spec.Gate, spec.BHalvesInPairs = GateInterleaved, true
	}
	return spec
}

// gemmSpec is the engine's description of g under schedule s: FC1's tile
// for a gated GEMM, FC2's for a plain one.
func gemmSpec(g moe.GEMM, s schedule.Schedule) GemmSpec {
	spec := GemmSpec{N: g.N, K: g.K, Experts: g.Experts, A: ATiled, B: BGrouped, Epilogue: EpiStore, Bias: g.Bias != nil,
		COutF32: g.C.DType == moe.F32, BNMajor: g.BMajor == moe.NMajor, MX: g.AScales != nil || g.ARegisterFed,
		MXRegisterFed: g.ARegisterFed}
	spec.MXExpand = spec.MX && !spec.MXRegisterFed && s.MXGemm == schedule.MXGemmExpand
	if g.Rows == moe.Dense {
		spec.A = ADense
	}
	if g.Storage == moe.Table {
		spec.B = BTable
	}
	t, bn := s.FC2, s.FC2.N
	if g.Gated {
		t, bn = s.FC1, s.FC1.N/2
		spec.Epilogue, spec.Gate, spec.Act = EpiGated, GateHalves, activation(g.Act)
		if g.GateUp == moe.GateUpInterleaved {
			spec.Gate = GateInterleaved
		}
	}
	spec.Tile = Tile{BM: t.M, BN: bn, BK: t.K, Stages: s.Stages, Warps: s.Warps.MMA,
		ProducerWarps: s.Warps.Producer, EpilogueWarps: s.Warps.Epilogue, Grid: s.GridCTAs, GroupM: s.GroupM} // Cluster: gemmKernelSpec
	return spec
}

// activation is the epilogue's form of a moe activation.
func activation(a moe.Activation) Activation {
	switch a.Kind {
	case schedule.ClampedSwiGLU:
		return Activation{Kind: ActClampedSwiGLU, Limit: a.Limit}
	case schedule.GPTOSS:
		return Activation{Kind: ActGPTOSS, Limit: a.Limit, Alpha: a.Alpha}
	}
	return Activation{Kind: ActSwiGLU}
}

// transposeB lowers a GEMM over N-major weights B_e [K, N] (the backward's
// data gradients): a kernel copies every B_e into a K-major [N, K] scratch
// tensor (the lowering's own buffer "<op>_bt", bf16 [E, N, K]) and the GEMM
// reads that with the target's engine. The copy costs one read and one
// write of the weights and their size in scratch.
func (lw *perOp) transposeB(g moe.GEMM) moe.GEMM {
	E, N, K := int64(g.Experts), int64(g.N), int64(g.K)
	bt := &moe.Buffer{Name: g.Op + "_bt", Kind: moe.Scratch, DType: moe.BF16,
		Shape: []launch.Expr{launch.Const(E), launch.Const(N), launch.Const(K)},
		Doc:   "K-major copy of " + g.B.Name + " for " + g.Op}
	lw.prog.Buffers = append(lw.prog.Buffers, bt.Plan())
	k := emitTranspose(lw.mod, "moe_"+g.Op+"_transpose", g.K, g.N, g.Experts, g.Storage == moe.Table, g.B, bt)
	lw.prog.Kernels = append(lw.prog.Kernels, k)
	g.B, g.BMajor, g.Storage = bt, moe.KMajor, moe.Stacked
	return g
}
