package codegen

import (
	"fmt"
	"slices"

	llir "github.com/llir/llvm/ir"

	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/launch"
	"github.com/mokc/mokc/moe"
	"github.com/mokc/mokc/schedule"
)

// Program is a lowered MoE program of one layer on one target: one LLVM
// module holding every kernel, and the launch plan that runs it.
//
// The runtime executes it for T tokens as follows: allocate every Buffer of
// Kind scratch with Bytes.Eval(T) bytes (at least 1), bind the caller's
// input and output buffers by name, then launch Kernels in order on one
// stream, each with grid (Grid[i].Eval(T)), Block threads, SharedBytes of
// dynamic shared memory (raising CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
// above 48 KB), and its Params packed at their exact sizes: ParamPtr gets
// the device address of Buffer, ParamI32 gets Value.Eval(T). A kernel with
// SkipIfZeroT is not launched when T = 0, one with Tokens only for T in
// those ranges. No host synchronisation is needed between launches; after
// the last one, y holds the output and err the error word (0 = no error,
// else an OR of the Err* codes).
type Program struct {
	Layer   string       `json:"layer"`   // schedule.Layer.Name
	Target  string       `json:"target"`  // "sm_80", "sm_90a" or "sm_100a"
	Kernels []Kernel     `json:"kernels"` // in launch order
	Buffers []Buffer     `json:"buffers"` // the moe program's buffers, then the lowering's scratch
	Module  *llir.Module `json:"-"`       // LLVM IR module holding every kernel
	Source  *moe.Program `json:"-"`       // the program it lowers
	// PhaseKernels, under the Persistent lowering, is the per-op kernels
	// that are the persistent kernel's phases, in order, as that lowering
	// builds them (a row-wise kernel's grid is the virtual blocks its phase
	// runs; the gather and the combine take more work per block than
	// PerOp's, or are their bulk-copy forms of one block per SM:
	// bulkPhases); nil under PerOp.
	PhaseKernels []Kernel `json:"-"`
}

// Buffer returns the buffer named name, or nil.
func (p *Program) Buffer(name string) *Buffer {
	for i := range p.Buffers {
		if p.Buffers[i].Name == name {
			return &p.Buffers[i]
		}
	}
	return nil
}

// Build lowers the forward of layer l (moe.Forward, bf16 or mxfp8) with
// schedule s and the PerOp policy. Errors: an invalid layer or schedule,
// moe.Forward's refusals, and any lowering error (Lower: e.g. an mxfp8
// layer on a target whose engine has no MXFP8 GEMM).
func Build(l schedule.Layer, s schedule.Schedule) (*Program, error) {
	if err := s.Validate(l); err != nil {
		return nil, err
	}
	p, err := moe.Forward(l)
	if err != nil {
		return nil, err
	}
	return Lower(p, s, LoweringOf(s))
}

// LoweringOf is the lowering schedule s asks for (Schedule.Lowering).
func LoweringOf(s schedule.Schedule) Lowering {
	if s.Lowering == schedule.LoweringPersistent {
		return Persistent
	}
	return PerOp
}

// Lowering is a policy that turns a moe.Program into kernels.
type Lowering int

const (
	// PerOp launches one kernel per op, in op order, on one stream: the
	// routing and dispatch ops, each grouped GEMM through the target's
	// engine (two kernels split by token range when the schedule has a GEMM
	// variant, and the register-fed FC2's base kernel split again by
	// schedule.Schedule.FC2Large's token ranges: moe_fc2_large), and
	// combine.
	// The scan also writes one work list of (expert, first row) tiles per
	// distinct GEMM row tile, which the grouped GEMMs read.
	PerOp Lowering = iota
	// Persistent runs PerOp's kernels as the phases of one persistent
	// kernel per direction, moe_forward or moe_backward (fusePersistent;
	// schedule.LoweringPersistent): one launch, the same bits.
	Persistent
)

// Lower lowers program p with schedule s under policy how into one module
// (finished: ir.Module.Finish runs the builder checks and ir.Check) and its
// launch plan. The kernel parameters and the plan's buffers come from p's
// operands and buffers; the lowering adds only its own scratch (the GEMM
// work lists, K-major weight copies). An mxfp8 program under
// schedule.MXGemmRegFed is lowered in its register-fed form
// (moe.RegisterFed); with the schedule's decode variant (promote's) in
// both: the gather and quantize_h write the e4m3 rows in the variant's
// token range and the register-fed ones (gather_rf, quantize_h_rf) in the
// rest, each GEMM reading its range's form. how overrides s.Lowering
// (LoweringOf(s) keeps it). Errors: an unknown policy or op, a schedule
// the target's engine cannot build (an MXFP8 GEMM off sm_90a), more than
// three distinct GEMM row tiles (maxTileLists), under Persistent a
// kernel that cannot be a phase (fusePersistent).
func Lower(p *moe.Program, s schedule.Schedule, how Lowering) (*Program, error) {
	switch how {
	case PerOp:
		s.Lowering = schedule.LoweringPerOp
	case Persistent:
		s.Lowering = schedule.LoweringPersistent
	default:
		return nil, fmt.Errorf("codegen: unknown lowering %d", how)
	}
	eng, err := EngineFor(s.Target)
	if err != nil {
		return nil, err
	}
	if how == Persistent {
		s, _ = PersistentVariants(p, s)
	}
	var rf *moe.Program // the register-fed form, beside p's (regfed with a decode variant)
	if s.MXGemm == schedule.MXGemmRegFed && p.Layer.Precision == schedule.MXFP8 {
		if rf, err = moe.RegisterFed(p); err != nil {
			return nil, err
		}
		if s.Variant == nil {
			p, rf = rf, nil // one form at every T
		}
	}
	lw, err := newPerOp(p, s, eng)
	if err != nil {
		return nil, err
	}
	lw.addRegisterFed(rf)
	lw.planTokenQuant()
	lw.planRoundOdd()
	if err := lw.planChain(); err != nil {
		return nil, err
	}
	lw.planHSignals()
	lw.planStoreGather()
	for i := 0; i < len(p.Ops); {
		n, err := lw.lowerNext(p.Ops[i:])
		if err != nil {
			return nil, err
		}
		i += n
	}
	if err := lw.checkChain(); err != nil {
		return nil, err
	}
	if err := lw.checkSharesSM(); err != nil {
		return nil, err
	}
	if err := lw.checkCluster(); err != nil {
		return nil, err
	}
	if err := lw.checkStoreGather(); err != nil {
		return nil, err
	}
	if err := lw.prog.checkBuffers(); err != nil {
		return nil, err
	}
	if how == Persistent {
		if err := lw.bulkPhases(); err != nil {
			return nil, err
		}
		if err := lw.fusePersistent(); err != nil {
			return nil, err
		}
	}
	if err := lw.phaseTimes(); err != nil {
		return nil, err
	}
	if err := lw.programmaticLaunch(); err != nil { // its wait goes before the start records
		return nil, err
	}
	if _, err := lw.mod.Finish(); err != nil {
		return nil, fmt.Errorf("codegen: %s: %w", p.Layer.Name, err)
	}
	return lw.prog, nil
}

// lowerNext lowers the ops that begin ops and returns how many it took:
// the ops of the first lowering of several ops that matches
// (lowerSmallDispatch, lowerMXGatheredGEMM, lowerQuantizedGEMM, lowerGatheredGEMM: each returns 0
// when ops do not begin with its ops), else the first op alone (lower).
func (lw *perOp) lowerNext(ops []moe.Op) (int, error) {
	for _, several := range []func([]moe.Op) (int, error){lw.lowerSmallDispatch, lw.lowerMXGatheredGEMM, lw.lowerQuantizedGEMM, lw.lowerGatheredGEMM} {
		if n, err := several(ops); n > 0 || err != nil {
			return n, err
		}
	}
	return 1, lw.lower(ops[0])
}

// checkBuffers verifies that every pointer parameter names a buffer.
func (p *Program) checkBuffers() error {
	for _, k := range p.Kernels {
		for _, prm := range k.Params {
			if prm.Buffer != "" && p.Buffer(prm.Buffer) == nil {
				return fmt.Errorf("codegen: kernel %s parameter %s names buffer %q that the program lacks", k.Name, prm.Name, prm.Buffer)
			}
		}
	}
	return nil
}

// perOp is the state of a PerOp lowering.
type perOp struct {
	src   *moe.Program
	sched schedule.Schedule
	eng   Engine
	mod   *ir.Module
	prog  *Program
	d     dims
	lists []tileList // GEMM work lists, one per distinct row tile
	chain *chainPlan // the chained GEMM pair (planChain; nil: none)
	// variant is the T-range GEMM variant's schedule (hasVariant) and the
	// token ranges of the base and variant kernels.
	variant    schedule.Schedule
	hasVariant bool
	// decode is the schedule of the forward's GEMMs (the routed and the
	// shared experts') in the token range of the schedule's Decode tiles
	// (hasDecode: the schedule has them and the program is a forward;
	// gemmKernels).
	decode    schedule.Schedule
	hasDecode bool
	// rfOps are the register-fed forms of the ops that have one, by name,
	// when the program is lowered in both forms (addRegisterFed).
	rfOps map[string]moe.Op
	// tokenQuant is the per-token quantization of x that the MXFP8
	// forward's decode FC1 reads (planTokenQuant; nil: none).
	tokenQuant *tokenQuant
	// roundOdd are the f32 scratch buffers stored as bf16 rounded to odd
	// (planRoundOdd), by name.
	roundOdd map[string]bool
	// bulk are the gathers, combines and act_grads bulkPhases rebuilds
	// (persistent lowering).
	bulk []pendingBulk
	// hSigs are the persistent forward's counters of FC1's row tiles,
	// through which FC2's items wait instead of a grid barrier, one plan
	// per block shape of their kernels (planHSignals; none: no such wait).
	hSigs []*hSignal
	// storeGatherFrom is the least T at which FC1's store warps gather its
	// rows under the persistent lowering where their kernel form does
	// (planStoreGather; 0: at no T).
	storeGatherFrom int64
	// oneBlockPerSM is, under Schedule.BlocksPerSM > 1, why each GEMM
	// kernel the engine does not build so runs one block per SM
	// (Engine.SharesSM), by kernel name.
	oneBlockPerSM map[string]string
}

func newPerOp(p *moe.Program, s schedule.Schedule, eng Engine) (*perOp, error) {
	l := p.Layer
	lw := &perOp{src: p, sched: s, eng: eng, mod: ir.NewModule("moe_" + l.Name)}
	lw.prog = &Program{Layer: l.Name, Target: s.Target.String(), Module: lw.mod.IR, Source: p}
	lw.d = dims{H: l.Hidden, I: l.Intermediate, E: l.Experts, K: l.TopK}
	lw.variant, lw.hasVariant = s.VariantSchedule()
	if s.Lowering == schedule.LoweringPersistent {
		lw.d.gatherPerWarp, lw.d.combinePerBlock = persistGatherPerWarp, persistCombinePerBlock
		lw.d.combineGradPerBlock = persistCombineGradRows
		threads := s.Threads()
		if lw.hasVariant {
			threads = max(threads, lw.variant.Threads())
		}
		lw.d.phaseRegs = launchRegs(threads)
		// act_grad's blocks (the backward's) take at most utilThreads, as
		// the other row-wise phases, and no more than its smallest GEMM
		// block, the base tiles' or the variant's (the decode tiles are
		// the forward's): a row-wise phase may not outgrow its persistent
		// kernel's block. On all 384 threads of the base GEMMs' block
		// racecheck reported RAW hazards between a warp below the eighth
		// and one above it across act_grad's bar.sync, in the CTAs that
		// ran a 256-thread phase on its named barrier before (run 55,
		// calls 4-7; docs/megakernel.md)
		lw.d.actGradThreads = min(utilThreads, s.Threads())
		if lw.hasVariant {
			lw.d.actGradThreads = min(lw.d.actGradThreads, lw.variant.Threads())
		}
	}
	if lw.hasVariant && lw.variant.FC1.M != lw.variant.FC2.M {
		return nil, fmt.Errorf("codegen: %s: the GEMM variant's FC1 and FC2 tiles must have the same rows (%d, %d)", l.Name, lw.variant.FC1.M, lw.variant.FC2.M)
	}
	if lw.decode, lw.hasDecode = s.DecodeSchedule(); lw.hasDecode && !forwardProgram(p) {
		lw.hasDecode = false // the backward's GEMMs keep the base tiles (schedule.Schedule.Decode)
	}
	rows := []int{s.FC1.M, s.FC2.M}
	if lw.hasVariant {
		rows = append(rows, lw.variant.FC1.M)
	}
	if lw.hasDecode {
		rows = append(rows, lw.decode.FC1.M)
	}
	if slices.ContainsFunc(p.Ops, func(op moe.Op) bool {
		g, ok := op.(moe.GEMM)
		return ok && lw.takesLarge(g)
	}) { // the forward's: the backward has no FC2 of dispatched rows
		rows = append(rows, s.FC2Large.Tile.M)
	}
	for _, bm := range rows {
		lw.listFor(bm)
	}
	if len(lw.lists) > maxTileLists {
		var bms []int
		for _, t := range lw.lists {
			bms = append(bms, t.bm)
		}
		return nil, fmt.Errorf("codegen: %s: the GEMMs use %d different tile row counts %v; at most %d are supported", l.Name, len(bms), bms, maxTileLists)
	}
	// The plan's buffers: the program's, with the work lists after offsets.
	for _, b := range p.Buffers {
		lw.prog.Buffers = append(lw.prog.Buffers, b.Plan())
		if b.Name == "offsets" {
			for _, t := range lw.lists {
				lw.prog.Buffers = append(lw.prog.Buffers, t.tiles.Plan(), t.count.Plan())
			}
		}
	}
	return lw, nil
}

// addRegisterFed records rf, the register-fed form of the program lowered
// (nil: none, or the program is that form): the ops it changes by name,
// and its new buffers (xs_rf, h_rf) in the plan.
func (lw *perOp) addRegisterFed(rf *moe.Program) {
	if rf == nil {
		return
	}
	lw.rfOps = map[string]moe.Op{}
	for i, op := range lw.src.Ops {
		if g, ok := rf.Ops[i].(moe.GEMM); rf.Ops[i].Name() != op.Name() || ok && g.ARegisterFed {
			lw.rfOps[op.Name()] = rf.Ops[i]
		}
	}
	for _, b := range rf.Buffers {
		if lw.prog.Buffer(b.Name) == nil {
			lw.prog.Buffers = append(lw.prog.Buffers, b.Plan())
		}
	}
}

// baseForm is op as the kernels outside the GEMM variant's token range
// run it: its register-fed form when the program has one (addRegisterFed),
// else op.
func (lw *perOp) baseForm(op moe.Op) moe.Op {
	if r, ok := lw.rfOps[op.Name()]; ok {
		return r
	}
	return op
}

// lower emits the kernels of one op; an op with a register-fed form
// (baseForm) twice: as it is in the GEMM variant's token range, in that
// form in the rest.
func (lw *perOp) lower(op moe.Op) error {
	if r := lw.baseForm(op); r.Name() != op.Name() {
		base, variant := lw.variantRanges()
		if err := lw.lowerFor(op, variant); err != nil {
			return err
		}
		return lw.lowerFor(r, base)
	}
	return lw.lowerOp(op)
}

// pendingBulk is a gather, combine or act_grad lowered row-wise under the
// persistent lowering, kernel i of the plan, which bulkPhases rebuilds in
// its bulk-copy form once the GEMMs, whose block shape it takes, are
// lowered.
type pendingBulk struct {
	i  int
	op moe.Op
}

// bulkPhases replaces each pending op's row-wise kernel by its bulk-copy
// form (emitGatherBulk, emitCombineBulk, emitActGradBulk) of the
// persistent GEMMs' grid, block, registers and shared memory, keeping its
// token ranges; without such a GEMM, or with blocks that cannot run the
// form (checkBulkShape), the row-wise kernels stay. Where the GEMMs run
// blocks of several shapes (gemmShapes: a variant of other warps, in a
// persistent kernel of its own), each shape's token counts take a form of
// that shape (moe_<op><suffix>), or the row-wise kernel where its blocks
// cannot run it. Errors: the bulk forms', gemmShapes'.
func (lw *perOp) bulkPhases() error {
	if len(lw.bulk) == 0 {
		return nil
	}
	sh, err := lw.gemmShapes(lw.prog.Kernels, persistentName(lw.src))
	if err != nil || len(sh.first) == 0 {
		return err
	}
	var out []Kernel
	next := 0 // the next pending op
	for i, old := range lw.prog.Kernels {
		if next == len(lw.bulk) || lw.bulk[next].i != i {
			out = append(out, old)
			continue
		}
		forms, err := lw.bulkForms(old, lw.bulk[next].op, sh)
		if err != nil {
			return err
		}
		out = append(out, forms...)
		next++
	}
	lw.prog.Kernels = out
	return nil
}

// bulkForms are the kernels that replace row-wise kernel old of op (a
// gather, a combine or an act_grad): per block shape of sh at whose
// token counts old may run, its bulk-copy form, or old itself, at those
// counts, where the shape's blocks cannot run the form (checkBulkShape;
// with one shape: old as it is; with several, old renamed with the suffix
// of the first such shape, so that the base shape's form takes old's
// name).
func (lw *perOp) bulkForms(old Kernel, op moe.Op, sh gemmShapes) ([]Kernel, error) {
	tokens := make([][]launch.TokenRange, len(sh.first)) // per shape: old's T there
	var rowWise []launch.TokenRange                      // where old stays
	keep := -1                                           // the first shape that keeps old
	for g, first := range sh.first {
		if tokens[g] = old.Tokens; len(sh.first) > 1 {
			tokens[g] = intersectAll(runRanges(old), sh.tokens[g])
		}
		if (len(sh.first) == 1 || len(tokens[g]) > 0) && checkBulkShape(op, lw.prog.Kernels[first]) != nil {
			rowWise = append(rowWise, tokens[g]...)
			if keep < 0 {
				keep = g
			}
		}
	}
	var forms []Kernel
	switch {
	case keep < 0:
		lw.mod.Remove(lw.mod.FuncNamed(old.Name))
	case len(sh.first) > 1:
		lw.mod.FuncNamed(old.Name).IR.SetName(old.Name + sh.suffix[keep])
		old.Name, old.Tokens = old.Name+sh.suffix[keep], merge(rowWise)
		fallthrough
	default:
		forms = append(forms, old)
	}
	for g, first := range sh.first {
		gk := lw.prog.Kernels[first]
		if len(tokens[g]) == 0 && len(sh.first) > 1 || checkBulkShape(op, gk) != nil {
			continue
		}
		regs, _ := lw.mod.Annotation(gk.Name, "maxnreg")
		var k Kernel
		var err error
		switch o := op.(type) {
		case moe.Gather:
			k, err = emitGatherBulk(lw.mod, sh.suffix[g], lw.d, o, gk.Grid[0], gk.Block, regs, gk.SharedBytes)
		case moe.Combine:
			k, err = emitCombineBulk(lw.mod, sh.suffix[g], lw.d, o, gk.Grid[0], gk.Block, regs, gk.SharedBytes)
		case moe.ActGrad:
			k, err = emitActGradBulk(lw.mod, sh.suffix[g], lw.d, o, gk.Grid[0], gk.Block, regs, gk.SharedBytes)
		default:
			err = fmt.Errorf("codegen: %s: no bulk-copy form", old.Name)
		}
		if err != nil {
			return nil, err
		}
		k.Tokens = tokens[g]
		forms = append(forms, k)
	}
	return forms, nil
}

// checkBulkShape says why op's bulk-copy form cannot run in the blocks of
// GEMM kernel gk (its threads, checkBulkBlock; for an act_grad, its
// shared memory, which must hold two stages: actGradBulkPlan), or nil.
func checkBulkShape(op moe.Op, gk Kernel) error {
	if err := checkBulkBlock(gk.Name, gk.Block); err != nil {
		return err
	}
	if o, ok := op.(moe.ActGrad); ok {
		_, stageBytes, S := actGradBulkPlan(o, gk.SharedBytes)
		return checkBulkStages(gk.Name, stageBytes, S, gk.SharedBytes)
	}
	return nil
}

// lowerOp emits the kernels of one op.
func (lw *perOp) lowerOp(op moe.Op) error {
	m, d := lw.mod, lw.d
	var k Kernel
	switch o := lw.roundOddForm(op).(type) {
	case moe.Init:
		k = emitInit(m, d, o)
	case moe.Route:
		k = emitRoute(m, d, o)
	case moe.Count:
		k = emitCount(m, d, o)
	case moe.Scan:
		k = emitScan(m, d, o, lw.lists)
	case moe.Permute:
		k = emitPermute(m, d, o)
	case moe.Gather:
		k = emitGather(m, d, o)
		if lw.sched.Lowering == schedule.LoweringPersistent && gatherBulkFits(lw.sched.Target, d, o) {
			lw.bulk = append(lw.bulk, pendingBulk{len(lw.prog.Kernels), o})
		}
	case moe.Combine:
		k = emitCombine(m, d, o)
		if lw.sched.Lowering == schedule.LoweringPersistent && combineBulkFits(lw.sched.Target, d, o) {
			lw.bulk = append(lw.bulk, pendingBulk{len(lw.prog.Kernels), o})
		}
	case moe.GEMM:
		return lw.lowerGEMM(o)
	case moe.Quantize:
		var err error
		if k, err = emitQuantize(m, o); err != nil {
			return err
		}
	case moe.Dequantize:
		var err error
		if k, err = emitDequantize(m, o); err != nil {
			return err
		}
	case moe.GateSigmoid:
		k = emitGateSigmoid(m, d, o)
	case moe.Activate:
		k = emitActivate(m, d, o)
	case moe.ActGrad:
		k = emitActGrad(m, d, o)
		if lw.sched.Lowering == schedule.LoweringPersistent && actGradBulkFits(lw.sched.Target, o) {
			lw.bulk = append(lw.bulk, pendingBulk{len(lw.prog.Kernels), o})
		}
	case moe.CombineGrad:
		k = emitCombineGrad(m, d, o)
	case moe.ScatterProbs:
		k = emitScatterProbs(m, d, o)
	case moe.WeightGrad:
		switch {
		case lw.sched.WGrad == schedule.WGradWGMMA && wgradOnWGMMA(lw.sched.Target, o):
			var err error
			if k, err = emitWeightGradWGMMA(m, o); err != nil {
				return err
			}
		case lw.sched.WGrad == schedule.WGradWS && wgradOnWGMMA(lw.sched.Target, o):
			var err error
			if k, err = emitWeightGradWS(m, o, lw.sched.Lowering == schedule.LoweringPersistent); err != nil {
				return err
			}
		case wgradOnTensorCores(o):
			k = emitWeightGradMMA(m, o)
		default:
			k = emitWeightGrad(m, o)
		}
		if o.Bias != nil {
			lw.prog.Kernels = append(lw.prog.Kernels, k)
			k = emitWeightGradBias(m, o)
		}
	default:
		return fmt.Errorf("codegen: PerOp cannot lower op %s (%T)", op.Name(), op)
	}
	lw.prog.Kernels = append(lw.prog.Kernels, k)
	return nil
}
