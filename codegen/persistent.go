package codegen

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	llir "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"

	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/launch"
	"github.com/mokc/mokc/moe"
	"github.com/mokc/mokc/schedule"
)

// The persistent lowering (schedule.LoweringPersistent, docs/megakernel.md):
// the per-op kernels of a program become the phases of one kernel, in
// launch order, each phase run at the token counts its kernel runs at
// (launch.Kernel.RunsAt's rules: Tokens, SkipIfZeroT, a row-wise grid
// with an empty extent; uniform tests of parameters) and separated from the next phase that runs by a grid-wide barrier,
// so that every dependency the stream order gave the kernels holds
// between the phases (but where a phase waits for the rows it reads
// through counters instead: the bf16 forward's FC2 after FC1,
// lower_phase_signals.go). The grid is one block per SM, every block resident
// (launch.Kernel.CoResident); a phase of a persistent GEMM (one block per
// SM, GridPerSM) runs with the block's own index, a phase of a row-wise
// kernel runs its grid's blocks as virtual blocks, block b of the
// persistent grid taking b, b + grid, ... (each one's %ctaid, %nctaid
// and %ntid.x replaced), on the first threads of the block (its bar.sync
// 0 becomes a named barrier of those threads, on which a virtual block
// that uses shared memory or barriers also ends, so that the next one
// does not overwrite what the slowest warps still read). Each phase
// computes what its kernel computes, in the same order: the same bits as
// the per-op kernels.
//
// The barrier after a phase: every thread fences the async proxy (its
// stores may be read by TMA), bar.sync, thread 0 adds one to a counter in
// the scratch work_queue (a release at gpu scope after a gpu-scope fence),
// polls it with acquire loads until it holds the blocks of every barrier
// so far (awaitCount: bounded by the wait limit, reported in the error
// words), bar.sync, and every thread fences the async proxy before the
// next phase's TMA loads read what the phase stored (PTX ISA, "Memory
// Consistency Model"). The last block to leave zeroes the counter and its
// own count of leaving blocks, so the next launch, and a CUDA graph's
// replays, start from zero.
//
// A GEMM phase (GemmSpec.phase) gives its roles' setmaxnreg registers back
// at its end, after a named barrier of the whole block (giveBack), and
// invalidates its mbarriers, so the next phase starts from the launch's
// registers and initialises barriers of its own in the same shared
// memory.

// The persistent kernel's words in launch.BufWorkQueue.
const (
	persistArrived = iota // blocks arrived at the grid barriers, all barriers so far
	persistLeft           // blocks that left the kernel
	persistWords
)

// persistentName is the persistent kernel of program p: moe_forward, or
// moe_backward for a program without a combine.
func persistentName(p *moe.Program) string {
	if forwardProgram(p) {
		return "moe_forward"
	}
	return "moe_backward"
}

// forwardProgram reports whether p is a forward: it combines the expert
// outputs (moe.Combine), which a backward does not.
func forwardProgram(p *moe.Program) bool {
	return slices.ContainsFunc(p.Ops, func(op moe.Op) bool { _, ok := op.(moe.Combine); return ok })
}

// persistPlan is the shape of a persistent kernel: its block (the
// largest phase's), the registers it launches with (.maxnreg: the GEMM
// phases', else what the block allows), its shared memory (the largest
// phase's), its grid (the GEMM phases', one block per SM) and which
// kernels synchronise their blocks.
type persistPlan struct {
	threads, regs, smem int
	grid                Expr
	syncs               []bool // per kernel: it synchronises its block (shape)
}

// planPersistent checks that every kernel of ks can run as a phase and
// returns the persistent kernel's shape. Errors name the kernel and why.
func (lw *perOp) planPersistent(name string, ks []Kernel) (persistPlan, error) {
	var p persistPlan
	var gemm *Kernel // the first phase of a persistent GEMM
	for i := range ks {
		k := &ks[i]
		f := lw.mod.FuncNamed(k.Name)
		if f == nil {
			return p, fmt.Errorf("codegen: kernel %s has no function in the module", k.Name)
		}
		fail := func(format string, args ...any) (persistPlan, error) {
			return p, fmt.Errorf("codegen: %s: %s: kernel %s cannot be a phase of %s: %s", lw.src.Layer.Name, lw.sched.Target, k.Name, name, fmt.Sprintf(format, args...))
		}
		switch {
		case k.Cluster > 1:
			return fail("it runs in clusters of %d blocks", k.Cluster)
		case k.BlocksPerSM > 1:
			return fail("it runs %d blocks per SM", k.BlocksPerSM)
		case k.GridPerSM && (!unitGrid(k.Grid[1]) || !unitGrid(k.Grid[2])):
			return fail("its persistent grid has more than one dimension")
		case !k.GridPerSM && asmUses(f, "setmaxnreg", "mbarrier.init"):
			return fail("its blocks set their registers or initialise mbarriers, which its virtual blocks, one after another in a block of the persistent grid, would do again")
		case k.Block%32 != 0:
			return fail("its block of %d threads is not whole warps", k.Block)
		}
		rets, syncs := shape(f)
		if rets > 1 && syncs {
			return fail("it returns early and synchronises its block (bar.sync), which threads that went on to the phase's end would not reach")
		}
		p.syncs = append(p.syncs, syncs)
		p.threads, p.smem = max(p.threads, k.Block), max(p.smem, k.SharedBytes)
		if !k.GridPerSM {
			continue
		}
		regs, annotated := lw.mod.Annotation(k.Name, "maxnreg")
		lowers, raises, backUp, backDown := setMaxNRegs(f, regs)
		switch {
		case asmUses(f, "mbarrier.init") && !asmUses(f, "mbarrier.inval"):
			return fail("it initialises mbarriers and does not invalidate them at its end, so the next phase could not initialise its own in the same shared memory (PTX ISA, \"mbarrier.inval\")")
		case (lowers || raises) && !annotated:
			return fail("it sets its warps' registers (setmaxnreg) without a launch register count (.maxnreg) to return them to")
		case lowers && !backUp || raises && !backDown:
			return fail("it sets its warps' registers (setmaxnreg) and does not return every role to the launch's %d (a role that lowered them raises them back, one that raised them lowers them), which would hold the later phases' code to its warps' fewest", regs)
		}
		if gemm == nil {
			gemm, p.grid, p.regs = k, k.Grid[0], regs
			continue
		}
		switch {
		case k.Grid[0] != gemm.Grid[0]:
			return fail("its grid %v differs from %s's %v", k.Grid[0], gemm.Name, gemm.Grid[0])
		case k.Block != gemm.Block:
			return fail("its blocks of %d threads differ from %s's %d: a persistent kernel runs blocks of one shape", k.Block, gemm.Name, gemm.Block)
		case regs != p.regs:
			return fail("it launches with %d registers per thread, %s with %d", regs, gemm.Name, p.regs)
		}
	}
	for _, k := range ks {
		if !k.GridPerSM && k.Block < p.threads && namedBarrier(lw.mod.FuncNamed(k.Name)) {
			return p, fmt.Errorf("codegen: %s: %s: kernel %s cannot be a phase of %s: it synchronises on a named barrier and runs fewer threads (%d) than the block (%d)", lw.src.Layer.Name, lw.sched.Target, k.Name, name, k.Block, p.threads)
		}
	}
	if gemm == nil {
		p.grid = Const(int64(lw.sched.Target.SMs()))
	} else if gemm.Block != p.threads {
		return p, fmt.Errorf("codegen: %s: %s: %s: %s's blocks of %d threads are smaller than another phase's %d: the persistent GEMMs' blocks must be the largest", lw.src.Layer.Name, lw.sched.Target, name, gemm.Name, gemm.Block, p.threads)
	}
	if p.regs == 0 {
		p.regs = min(255, 65536/p.threads) &^ 7
	}
	return p, nil
}

// calls calls visit with the callee of every direct call in f (an
// *llir.Func or an *llir.InlineAsm).
func calls(f *ir.Func, visit func(callee value.Value)) {
	for _, b := range f.IR.Blocks {
		for _, inst := range b.Insts {
			if c, ok := inst.(*llir.InstCall); ok {
				visit(c.Callee)
			}
		}
	}
}

// shape counts f's returns but those of every thread of the block alike
// (ReturnIfUniform's) and says whether it calls llvm.nvvm.barrier0 or
// has inline PTX on a CTA barrier (barrierAsm).
func shape(f *ir.Func) (rets int, syncs bool) {
	for _, b := range f.IR.Blocks {
		if _, ok := b.Term.(*llir.TermRet); ok && !strings.HasPrefix(b.Name(), uniformRet) {
			rets++
		}
	}
	calls(f, func(callee value.Value) {
		switch c := callee.(type) {
		case *llir.Func:
			syncs = syncs || c.Name() == "llvm.nvvm.barrier0"
		case *llir.InlineAsm:
			syncs = syncs || barrierAsm.MatchString(c.Asm)
		}
	})
	return rets, syncs
}

// unitGrid reports whether grid extent e is 1 at every T.
func unitGrid(e Expr) bool { return e.A == 0 && e.Eval(0) == 1 }

// setMaxNRegAsm matches a setmaxnreg instruction of inline PTX: its
// direction and register count.
var setMaxNRegAsm = regexp.MustCompile(`setmaxnreg\.(inc|dec)\.sync\.aligned\.u32 (\d+);`)

// setMaxNRegs reports f's setmaxnreg instructions against regs, the
// launch's registers per thread: whether some lower to another count
// (lowers) or raise to one (raises), and whether some raise back to regs
// (backUp) or lower back to it (backDown). A role's give-back at a
// phase's end is the inverse of its start (phaseGiveBack).
func setMaxNRegs(f *ir.Func, regs int) (lowers, raises, backUp, backDown bool) {
	calls(f, func(callee value.Value) {
		a, ok := callee.(*llir.InlineAsm)
		if !ok {
			return
		}
		for _, m := range setMaxNRegAsm.FindAllStringSubmatch(a.Asm, -1) {
			n, _ := strconv.Atoi(m[2])
			switch inc := m[1] == "inc"; {
			case n != regs && inc:
				raises = true
			case n != regs:
				lowers = true
			case inc:
				backUp = true
			default:
				backDown = true
			}
		}
	})
	return lowers, raises, backUp, backDown
}

// asmUses reports whether f has inline PTX containing any of texts.
func asmUses(f *ir.Func, texts ...string) (uses bool) {
	calls(f, func(callee value.Value) {
		if a, ok := callee.(*llir.InlineAsm); ok && slices.ContainsFunc(texts, func(t string) bool { return strings.Contains(a.Asm, t) }) {
			uses = true
		}
	})
	return uses
}

// namedBarrier reports whether f synchronises on a CTA barrier other than
// llvm.nvvm.barrier0: inline PTX on one (barrierAsm), or the named-barrier
// intrinsics llvm.nvvm.barrier.sync(.cnt). A row-wise phase on fewer
// threads than the block cannot keep those.
func namedBarrier(f *ir.Func) (named bool) {
	calls(f, func(callee value.Value) {
		switch c := callee.(type) {
		case *llir.Func:
			named = named || strings.HasPrefix(c.Name(), "llvm.nvvm.barrier.sync")
		case *llir.InlineAsm:
			named = named || barrierAsm.MatchString(c.Asm)
		}
	})
	return named
}

// barrierAsm matches inline PTX on a CTA barrier: bar.* or barrier.*,
// not mbarrier.*, membar.* or a warp's bar.warp.sync.
var barrierAsm = regexp.MustCompile(`(^|[^a-z_])(bar|barrier)\.(sync|arrive|red|cta)`)

// persistParam is one parameter of the persistent kernel: its plan entry
// and its IR declaration.
type persistParam struct {
	p  Param
	ir ir.Param
}

// fusePersistent replaces the program's kernels by the persistent kernels
// whose phases they are (see the top of this file): one, or where the
// GEMM kernels run blocks of several shapes (a GEMM variant or decode
// tiles of other warps than the base GEMMs', schedule.TileVariant), one
// per shape (persistGroups), each launched at the token counts of its
// GEMM kernels: at every T exactly one runs. Errors: a kernel that cannot
// be a phase (planPersistent), GEMM kernels of two shapes at one T.
func (lw *perOp) fusePersistent() error {
	ks := slices.Clone(lw.prog.Kernels)
	groups, err := lw.persistGroups(ks)
	if err != nil {
		return err
	}
	// One launch per run: the kernels share the words of their barriers.
	queue, qw := lw.workQueue(persistWords)
	var out []Kernel
	for _, g := range groups {
		k, err := lw.fuseGroup(g, queue, qw, len(groups) > 1)
		if err != nil {
			return err
		}
		out = append(out, k)
	}
	if len(groups) > 1 { // the phases absorbed copies of the kernels
		for _, k := range ks {
			if f := lw.mod.FuncNamed(k.Name); f != nil {
				lw.mod.Remove(f)
			}
		}
	}
	lw.prog.PhaseKernels = ks
	lw.prog.Kernels = out
	return nil
}

// PersistentVariants returns schedule s for the persistent lowering of
// program p, and the GEMM variants it leaves out. A variant whose blocks
// have other warps than the base GEMMs' (schedule.TileVariant.SameBlocks)
// runs in a persistent kernel of its own, launched at its token counts
// instead of the base GEMMs' (persistGroups), so every GEMM of p must take
// it there; a variant that a GEMM of p would not take is left out (the
// base tiles run in its range): the shared experts' GEMMs (dense rows)
// do not take the variant, the bf16 GEMMs of an mxfp8 program no MXOnly
// variant, and a backward's warp-specialized weight gradients
// (schedule.WGradWS: one block per SM of 384 threads at every T, the
// shape of the default schedule's base GEMMs) none. Every GEMM of a
// forward takes the decode tiles (gemmKernels), so they are never left
// out.
func PersistentVariants(p *moe.Program, s schedule.Schedule) (schedule.Schedule, []schedule.TileVariant) {
	var left []schedule.TileVariant
	var gemms []moe.GEMM
	wgrads := false
	for _, op := range p.Ops {
		switch o := op.(type) {
		case moe.GEMM:
			gemms = append(gemms, o)
		case moe.WeightGrad:
			wgrads = true
		}
	}
	wsGrads := wgrads && s.WGrad == schedule.WGradWS
	if v := s.Variant; v != nil && !v.SameBlocks(s) && (wsGrads || slices.ContainsFunc(gemms, func(g moe.GEMM) bool { return !variantTakes(g, s) })) {
		left, s.Variant = append(left, *v), nil
	}
	return s, left
}

// persistGroup is one persistent kernel of a program: its name, its
// phases (kernels of the per-op lowering, in launch order) and the token
// counts it runs at (nil: every T).
type persistGroup struct {
	name   string
	ks     []Kernel
	tokens []launch.TokenRange
}

// persistGroups splits kernels ks by the block shape of their persistent
// kernels (gemmShapes): one group where they share one (every kernel, at
// every T, named persistentName), else one per shape, named
// persistentName, then persistentName + "_" + the shape's variant (e.g.
// moe_forward_decode), each launched at its shape's token counts and
// taking the kernels of its shape and every other kernel that may run at
// one of them. Errors: gemmShapes'.
func (lw *perOp) persistGroups(ks []Kernel) ([]persistGroup, error) {
	name := persistentName(lw.src)
	sh, err := lw.gemmShapes(ks, name)
	if err != nil {
		return nil, err
	}
	if len(sh.first) <= 1 {
		return []persistGroup{{name: name, ks: ks}}, nil
	}
	groups := make([]persistGroup, len(sh.first))
	for g := range groups {
		groups[g].name, groups[g].tokens = name+sh.suffix[g], sh.tokens[g]
		for i, k := range ks {
			if sh.of[i] == g || sh.of[i] < 0 && len(intersectAll(runRanges(k), sh.tokens[g])) > 0 {
				groups[g].ks = append(groups[g].ks, k)
			}
		}
	}
	return groups, nil
}

// gemmShapes are the block shapes (threads per block, .maxnreg) of a
// plan's kernels of one block per SM (GridPerSM: the persistent GEMMs,
// the bulk-copy phases), in the order of their first kernels.
type gemmShapes struct {
	of     []int                 // per kernel: its shape, or -1 (not GridPerSM)
	first  []int                 // per shape (the base GEMMs' first): its first kernel
	suffix []string              // per shape: "" for the first (the base), else "_" + the variant's name
	tokens [][]launch.TokenRange // per shape (with more than one): the T it runs at
}

// gemmShapes finds the block shapes of kernels ks (see gemmShapes) and,
// where there are several, the token counts of each: the first is the
// base GEMMs' (blocks of Schedule.Threads; else the first kernel's) and
// runs at every T no other shape runs at (T = 0 included), another runs
// where its kernels may (runRanges) and is named by the schedule's GEMM
// variants (Variant, Decode) whose blocks it is, joined by "_", or
// "shape<i>" where none is. Errors (naming persistent kernel name):
// kernels of two shapes that may run at one T.
func (lw *perOp) gemmShapes(ks []Kernel, name string) (gemmShapes, error) {
	type key struct{ block, regs int }
	var keys []key
	sh := gemmShapes{of: make([]int, len(ks))}
	for i, k := range ks {
		sh.of[i] = -1
		if !k.GridPerSM {
			continue
		}
		regs, _ := lw.mod.Annotation(k.Name, "maxnreg")
		if sh.of[i] = slices.Index(keys, key{k.Block, regs}); sh.of[i] < 0 {
			sh.of[i], keys, sh.first = len(keys), append(keys, key{k.Block, regs}), append(sh.first, i)
		}
	}
	sh.suffix = make([]string, len(keys))
	if len(keys) <= 1 {
		return sh, nil
	}
	// The base shape is the base GEMMs' blocks (Schedule.Threads); the
	// others are named by their variants.
	if b := slices.IndexFunc(keys, func(k key) bool { return k.block == lw.sched.Threads() }); b > 0 {
		keys[0], keys[b] = keys[b], keys[0]
		sh.first[0], sh.first[b] = sh.first[b], sh.first[0]
		for i, g := range sh.of {
			switch g {
			case 0:
				sh.of[i] = b
			case b:
				sh.of[i] = 0
			}
		}
	}
	// A shape's name: the variants whose blocks it is (their schedules'
	// Threads).
	names := make([][]string, len(keys))
	nameBlocks := func(has bool, vs schedule.Schedule, v *schedule.TileVariant) {
		if g := slices.IndexFunc(keys, func(k key) bool { return k.block == vs.Threads() }); has && g > 0 {
			names[g] = append(names[g], v.Name)
		}
	}
	nameBlocks(lw.hasVariant, lw.variant, lw.sched.Variant)
	nameBlocks(lw.hasDecode, lw.decode, lw.sched.Decode)
	for g := 1; g < len(keys); g++ {
		if len(names[g]) == 0 {
			names[g] = []string{fmt.Sprintf("shape%d", g)}
		}
		sh.suffix[g] = "_" + strings.Join(names[g], "_")
	}
	sh.tokens = make([][]launch.TokenRange, len(keys))
	for i, k := range ks {
		if g := sh.of[i]; g > 0 {
			sh.tokens[g] = merge(append(sh.tokens[g], runRanges(k)...))
		}
	}
	sh.tokens[0] = []launch.TokenRange{{Min: 0, Max: launch.MaxTokens}}
	for g := 1; g < len(keys); g++ {
		sh.tokens[0] = subtract(sh.tokens[0], sh.tokens[g])
	}
	// Each kernel of one block per SM runs only where its shape does.
	for i, k := range ks {
		for h := 1; h < len(keys) && sh.of[i] >= 0; h++ {
			if both := intersectAll(runRanges(k), sh.tokens[h]); h != sh.of[i] && len(both) > 0 {
				b := ks[sh.first[h]]
				return sh, fmt.Errorf("codegen: %s: %s: %s: kernels %s (blocks of %d threads) and %s (%d) run at the same T (%d..%d): a persistent kernel runs blocks of one shape", lw.src.Layer.Name, lw.sched.Target, name, k.Name, k.Block, b.Name, b.Block, both[0].Min, both[0].Max)
			}
		}
	}
	return sh, nil
}

// fuseGroup builds the persistent kernel of group g, its phases' bodies
// absorbed (copies of them with copy: other groups absorb them too), and
// returns its launch.
func (lw *perOp) fuseGroup(g persistGroup, queue *moe.Buffer, qw kernelQueue, copy bool) (Kernel, error) {
	ks, name := g.ks, g.name
	plan, err := lw.planPersistent(name, ks)
	if err != nil {
		return Kernel{}, err
	}
	var params []persistParam
	index := map[string]int{}
	add := func(key string, p Param, irp ir.Param) string {
		if _, ok := index[key]; !ok {
			index[key] = len(params)
			params = append(params, persistParam{p, irp})
		}
		return params[index[key]].p.Name
	}
	tv, wl := PerT(1, 0), Const(launch.DefaultWaitLimitNs)
	add("T", Param{Name: "T", Type: ParamI32, Size: 4, Value: &tv}, ir.P("T", ir.I32))
	add("buf:"+launch.ErrBuffer, Param{Name: RoleErr, Type: ParamPtr, Size: 8, Buffer: moe.BufErr}, ir.P(RoleErr, GPtr))
	add(RoleWaitLimit, Param{Name: RoleWaitLimit, Type: ParamI64, Size: 8, Value: &wl}, ir.P(RoleWaitLimit, ir.I64))
	add("buf:"+queue.Name, Param{Name: "queue", Type: ParamPtr, Size: 8, Buffer: queue.Name}, ir.P("queue", GPtr))
	// Each phase's parameters: a pointer per buffer, shared by the phases
	// that take it; T and the wait limit shared; the rest per phase.
	args := make([][]string, len(ks))
	funcs := make([]*ir.Func, len(ks))
	for i, k := range ks {
		f := lw.mod.FuncNamed(k.Name)
		funcs[i] = f
		if len(f.IR.Params) != len(k.Params) {
			return Kernel{}, fmt.Errorf("codegen: %s: %s: kernel %s has %d parameters in its plan and %d in the module", lw.src.Layer.Name, lw.sched.Target, k.Name, len(k.Params), len(f.IR.Params))
		}
		for j, prm := range k.Params {
			t := f.IR.Params[j].Type()
			own := fmt.Sprintf("k%d_%s", i, prm.Name)
			var n string
			switch {
			case prm.Type == ParamPtr && prm.Buffer != "":
				prm.Name = prm.Buffer
				if prm.Buffer == queue.Name {
					prm.Name = "queue"
				}
				n = add("buf:"+prm.Buffer, prm, ir.P(prm.Name, t))
			case prm.Name == "T" && prm.Type == ParamI32 && prm.Value != nil && *prm.Value == tv:
				n = "T"
			case prm.Name == RoleWaitLimit && prm.Type == ParamI64:
				n = RoleWaitLimit
			case prm.Type == ParamTmap:
				prm.Name = own
				n = add(own, prm, ir.TensorMapParam(own))
			default:
				prm.Name = own
				n = add(own, prm, ir.P(own, t))
			}
			args[i] = append(args[i], n)
		}
		if !k.GridPerSM {
			for d := range 3 {
				if g := k.Grid[d]; hasGridParam(k, d) {
					n := gridParam(i, d)
					add(n, Param{Name: n, Type: ParamI32, Size: 4, Value: &g}, ir.P(n, ir.I32))
				}
			}
		}
	}
	irParams := make([]ir.Param, len(params))
	kparams := make([]Param, len(params))
	for i, p := range params {
		irParams[i], kparams[i] = p.ir, p.p
	}
	b := NewKernel(lw.mod, name, plan.threads, irParams...)
	b.MinBlocksPerSM(1)
	b.MaxRegisters(plan.regs)
	T := b.Param("T")
	tid := b.ThreadIdx(ir.X)
	grid := b.GridDim(ir.X)
	block := b.BlockIdx(ir.X)
	arrived := qw.word(b, persistArrived)
	before := value.Value(ir.Int32(0))   // phases run before this one
	barriers := value.Value(ir.Int32(0)) // grid barriers passed before this phase (with signalled phases)
	signalled := make([]bool, len(ks))   // the phases that start without a grid barrier
	anySignalled := false
	for i := range ks {
		signalled[i] = lw.followsSignals(ks, i)
		anySignalled = anySignalled || signalled[i]
	}
	var phases []string
	for i, k := range ks {
		var n [3]value.Value // a row-wise kernel's grid: its virtual blocks
		if !k.GridPerSM {
			for d := range 3 {
				n[d] = ir.Int32(1)
				if hasGridParam(k, d) {
					n[d] = b.Param(gridParam(i, d))
				}
			}
		}
		runs := phaseRuns(b, k, T, n)
		earlier, passed := before, barriers
		b.If(runs, func() {
			if signalled[i] {
				// the items wait for their rows (lower_phase_signals.go);
				// the block's threads are done with the last phase's
				// barriers and shared memory
				b.SyncThreads()
			} else {
				b.If(b.ICmp(enum.IPredSGT, earlier, ir.Int32(0)), func() {
					// every barrier so far: one per phase run before this
					// one, less those that skipped theirs (counted apart,
					// as passed, only in a kernel that has such phases)
					n := earlier
					if anySignalled {
						n = b.AddI(passed, 1)
					}
					b.gridBarrier(arrived, b.Mul(n, grid), tid)
				})
			}
			b.phaseMark(i, false)
			removePhaseMarks(funcs[i]) // a chained kernel's own: here the phases are the kernels
			a := ir.Absorption{Prefix: fmt.Sprintf("k%d.", i), Copy: copy}
			for _, n := range args[i] {
				a.Args = append(a.Args, b.Param(n))
			}
			if k.GridPerSM {
				b.Absorb(funcs[i], a)
			} else {
				var endBlock func() // a barrier of the virtual block's threads
				nvb := b.Mul(b.Mul(n[0], n[1]), n[2])
				rows := func() {
					b.Loop(block, nvb, grid, nil, func(vb value.Value, _ []value.Value) []value.Value {
						// virtual block vb = x + nx·(y + ny·z)
						yz := b.UDiv(vb, n[0])
						a.Intrinsics = map[string]value.Value{
							"llvm.nvvm.read.ptx.sreg.ctaid.x":  b.URem(vb, n[0]),
							"llvm.nvvm.read.ptx.sreg.ctaid.y":  b.URem(yz, n[1]),
							"llvm.nvvm.read.ptx.sreg.ctaid.z":  b.UDiv(yz, n[1]),
							"llvm.nvvm.read.ptx.sreg.nctaid.x": n[0],
							"llvm.nvvm.read.ptx.sreg.nctaid.y": n[1],
							"llvm.nvvm.read.ptx.sreg.nctaid.z": n[2],
							"llvm.nvvm.read.ptx.sreg.ntid.x":   ir.Int32(int64(k.Block)),
						}
						b.Absorb(funcs[i], a)
						if k.SharedBytes > 0 || plan.syncs[i] {
							// the next virtual block's threads reuse shared
							// memory the slowest of this one may still read
							endBlock()
						}
						return nil
					})
				}
				if k.Block < plan.threads {
					a.Barrier = fmt.Sprintf("bar.sync 1, %d;", k.Block)
					endBlock = func() { b.Asm(a.Barrier, "") }
					b.If(b.ICmp(enum.IPredULT, tid, ir.Int32(int64(k.Block))), rows)
				} else {
					endBlock = func() { b.SyncThreads() }
					rows()
				}
			}
			b.phaseMark(i, true)
		})
		if anySignalled && !signalled[i] {
			barriers = b.Add(barriers, b.ZExt(b.And(runs, b.ICmp(enum.IPredSGT, earlier, ir.Int32(0))), ir.I32))
		}
		before = b.Add(before, b.ZExt(runs, ir.I32))
		phases = append(phases, name+"/"+strings.TrimPrefix(k.Name, "moe_"))
	}
	// The last block to leave zeroes the words for the next launch: every
	// block passed every barrier before it counted itself out.
	b.If(b.ICmp(enum.IPredEQ, tid, ir.Int32(0)), func() {
		qw.leave(b, persistLeft, grid)
	})
	b.Ret(nil)
	return Kernel{Name: name, Params: kparams, Block: plan.threads, Grid: grid1(plan.grid), SharedBytes: plan.smem,
		GridPerSM: true, CoResident: true, Phases: phases, Tokens: g.tokens}, nil
}

// gridParam is the persistent kernel's parameter holding extent d (0, 1,
// 2: x, y, z) of phase i's grid, a row-wise kernel's virtual blocks.
func gridParam(i, d int) string { return fmt.Sprintf("k%d_grid_%c", i, "xyz"[d]) }

// hasGridParam reports whether row-wise kernel k's grid extent d takes a
// parameter of the persistent kernel (gridParam): x always, y and z
// where they are not 1 at every T.
func hasGridParam(k Kernel, d int) bool { return d == 0 || !unitGrid(k.Grid[d]) }

// phaseRuns is the i1 that says whether kernel k runs at T tokens, by
// launch.Kernel.RunsAt's rules: its Tokens ranges, SkipIfZeroT, and, for
// a row-wise kernel, no empty extent of its grid n (nil for a GEMM's).
func phaseRuns(b *Builder, k Kernel, T value.Value, n [3]value.Value) value.Value {
	var runs value.Value = ir.Bool(true)
	if len(k.Tokens) > 0 {
		runs = ir.Bool(false)
		for _, r := range k.Tokens {
			in := b.ICmp(enum.IPredSGE, T, ir.Int32(r.Min))
			if r.Max < launch.MaxTokens {
				in = b.And(in, b.ICmp(enum.IPredSLE, T, ir.Int32(r.Max)))
			}
			runs = b.Or(runs, in)
		}
	}
	if k.SkipIfZeroT {
		runs = b.And(runs, b.ICmp(enum.IPredSGT, T, ir.Int32(0)))
	}
	for _, e := range n {
		if e != nil {
			runs = b.And(runs, b.ICmp(enum.IPredSGT, e, ir.Int32(0)))
		}
	}
	return runs
}

// gridBarrier emits the barrier between two phases of the persistent
// kernel (see the top of this file): every block arrives on the counter
// at word, thread 0 waits until it holds target (every block of every
// barrier so far), then the block goes on.
func (b *Builder) gridBarrier(word, target, tid value.Value) {
	b.FenceProxyAsyncGlobal() // the phase's generic stores, for the next phases' TMA loads
	b.SyncThreads()
	b.If(b.ICmp(enum.IPredEQ, tid, ir.Int32(0)), func() {
		b.FenceAcqRel(ir.ScopeGPU)
		b.RedAddRelease(word, ir.Int32(1), ir.ScopeGPU)
		b.awaitCount(word, target)
	})
	b.SyncThreads()
	b.FenceProxyAsyncGlobal()
}
