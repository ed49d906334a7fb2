package codegen

import (
	"slices"
	"strings"
	"testing"

	"github.com/mokc/mokc/internal/testlayer"
	"github.com/mokc/mokc/internal/toolchain"
	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/launch"
	"github.com/mokc/mokc/moe"
	"github.com/mokc/mokc/ptx"
	"github.com/mokc/mokc/schedule"
	"github.com/mokc/mokc/target"
)

// persistentPair lowers layer l's forward (or backward) on sm_90a with its
// default schedule, per op and persistent.
func persistentPair(t *testing.T, l schedule.Layer, backward bool) (perOp, persistent *Program) {
	t.Helper()
	return lowerDefault(t, l, backward, PerOp, nil), lowerDefault(t, l, backward, Persistent, nil)
}

// lowerDefault lowers layer l's forward (or backward) on sm_90a with its
// default schedule changed by edit (nil: none), less the GEMM variants the
// persistent lowering leaves out (PersistentVariants), as how.
func lowerDefault(t *testing.T, l schedule.Layer, backward bool, how Lowering, edit func(*schedule.Schedule)) *Program {
	t.Helper()
	prog, err := lowerDefaultErr(t, l, backward, how, edit)
	if err != nil {
		t.Fatalf("%s (backward %v) %v: %v", l.Name, backward, how, err)
	}
	return prog
}

// lowerDefaultErr is lowerDefault returning the lowering's error.
func lowerDefaultErr(t *testing.T, l schedule.Layer, backward bool, how Lowering, edit func(*schedule.Schedule)) (*Program, error) {
	t.Helper()
	s := testlayer.DefaultSchedule(t, l, target.SM90a)
	if edit != nil {
		edit(&s)
	}
	s = s.FixedItemsWhereNeeded(l).FC2LargeWhereValid(l)
	p, err := moe.Forward(l)
	if backward {
		p, err = moe.Backward(l)
	}
	if err != nil {
		t.Fatal(err)
	}
	s, _ = PersistentVariants(p, s) // per op too: the same GEMM kernels
	return Lower(p, s, how)
}

// TestPersistent: the persistent lowering of the forward and the backward
// of every preset on sm_90a (bf16, and qwen3-30b-a3b's mxfp8 forward) is
// moe_forward or moe_backward, and where the default schedule's GEMM
// variants run blocks of other warps (qwen3-30b-a3b's "mid" and decode
// tiles) one more kernel per such shape, moe_forward_<variant>; each is
// co-resident on one block per SM, and at every T (each end of a per-op
// kernel's token ranges) exactly one of them runs, which has a phase of
// each per-op kernel that runs there (a gather or combine of another
// shape than the base's in a form named for it), its phases in the per-op
// plan's order, blocks and shared memory of its per-op kernels' largest, a
// pointer parameter per buffer its row-wise per-op kernels bind; the
// per-op kernels are gone from the module. Where FC1's store warps gather
// its rows (planStoreGather: the bf16 forwards of plain gathers, from
// Schedule.StoreGatherRows), FC1's store-gathering form follows its plain
// one. The same with blocks of 256 threads at every T (qwen3-30b-a3b and
// deepseek-v3 in 64x128 tiles of 4 MMA warps), too small for the
// bulk-copy gather and combine: their row-wise kernels are phases. And
// qwen3-30b-a3b's backward with the warp-specialized weight gradients.
func TestPersistent(t *testing.T) {
	type tcase struct {
		name     string
		backward bool
		edit     func(*schedule.Schedule) // nil: the default schedule
	}
	// blocks of 256 threads, too small for the bulk-copy phases, at every T
	small := func(s *schedule.Schedule) {
		s.Warps.MMA, s.FC1.M, s.FC1.N, s.FC2.M, s.FC2.N, s.Variant, s.Decode = 4, 64, 128, 64, 128, nil, nil
	}
	// the warp-specialized weight gradients: one block per SM of the base
	// shape at every T, so the "mid" tiles are left out (PersistentVariants)
	ws := func(s *schedule.Schedule) { s.WGrad = schedule.WGradWS }
	cases := []tcase{{"qwen3-30b-a3b mxfp8", false, nil}, {"qwen3-30b-a3b", false, small}, {"deepseek-v3", false, small}, {"qwen3-30b-a3b", true, ws}}
	for _, name := range schedule.Presets() {
		cases = append(cases, tcase{name, false, nil}, tcase{name, true, nil})
	}
	shapes := 0 // the kernels of other shapes seen
	for _, c := range cases {
		l := testlayer.Named(t, c.name)
		per, pk := lowerDefault(t, l, c.backward, PerOp, c.edit), lowerDefault(t, l, c.backward, Persistent, c.edit)
		want := "moe_forward"
		if c.backward {
			want = "moe_backward"
		}
		if len(pk.Kernels) == 0 || pk.Kernels[0].Name != want {
			t.Fatalf("%s backward %v: kernels %v, want %s first", c.name, c.backward, kernelNames(pk), want)
		}
		shapes += len(pk.Kernels) - 1
		// perOpOf is the index in per.Kernels of the per-op kernel whose phase
		// of persistent kernel k ph is, or -1
		perOpOf := func(k Kernel, ph string) int {
			op, ok := strings.CutPrefix(ph, k.Name+"/")
			if !ok {
				return -1
			}
			op = "moe_" + op // its per-op kernel's name, or that with the kernel's suffix or "_store_gathered"
			for _, n := range []string{op, strings.TrimSuffix(op, strings.TrimPrefix(k.Name, want)), strings.TrimSuffix(op, "_store_gathered")} {
				if i := slices.IndexFunc(per.Kernels, func(p Kernel) bool { return p.Name == n }); i >= 0 {
					return i
				}
			}
			return -1
		}
		for _, k := range pk.Kernels {
			if !strings.HasPrefix(k.Name, want) || !k.CoResident || !k.GridPerSM || k.SkipIfZeroT || k.Grid[0] != Const(int64(target.SM90a.SMs())) ||
				len(pk.Kernels) == 1 && len(k.Tokens) > 0 {
				t.Errorf("%s: %s: co-resident %v, grid per SM %v, tokens %v, skip at T = 0 %v, grid %v: want one block per SM (at every T where it is the only kernel)",
					c.name, k.Name, k.CoResident, k.GridPerSM, k.Tokens, k.SkipIfZeroT, k.Grid)
			}
			block, smem, last := 0, 0, -1
			for _, ph := range k.Phases {
				i := perOpOf(k, ph)
				if i < 0 || i < last {
					t.Errorf("%s: %s's phase %s is no per-op kernel after its previous phase's (phases %v, per-op kernels %v)", c.name, k.Name, ph, k.Phases, kernelNames(per))
					continue
				}
				last = i
				p := per.Kernels[i]
				block, smem = max(block, p.Block), max(smem, p.SharedBytes)
				for _, prm := range p.Params {
					if !p.GridPerSM && prm.Type == ParamPtr && !slices.ContainsFunc(k.Params, func(q Param) bool { return q.Type == ParamPtr && q.Buffer == prm.Buffer }) {
						t.Errorf("%s: %s binds no parameter to buffer %s, which %s takes", c.name, k.Name, prm.Buffer, p.Name)
					}
				}
			}
			if k.Block != block || k.SharedBytes != smem {
				t.Errorf("%s: %s: block %d, shared %d; its per-op kernels' largest %d, %d", c.name, k.Name, k.Block, k.SharedBytes, block, smem)
			}
		}
		var ends []int64 // each end of a kernel's token ranges, and the T beside it
		for _, k := range append(slices.Clone(per.Kernels), pk.Kernels...) {
			for _, r := range k.Tokens {
				ends = append(ends, max(0, r.Min-1), r.Min, r.Max, min(launch.MaxTokens, r.Max+1))
			}
		}
		for _, T := range append(ends, 0, 1, 64, 4096) {
			var runs []Kernel
			for _, k := range pk.Kernels {
				if k.RunsAt(T) {
					runs = append(runs, k)
				}
			}
			if len(runs) != 1 {
				t.Errorf("%s: at T = %d %d persistent kernels run (%v), want one", c.name, T, len(runs), runs)
				continue
			}
			// a phase's own token ranges: its kernel in PhaseKernels
			runsAt := func(ph string) bool {
				i := slices.IndexFunc(pk.PhaseKernels, func(q Kernel) bool { return runs[0].Name+"/"+strings.TrimPrefix(q.Name, "moe_") == ph })
				return i >= 0 && pk.PhaseKernels[i].RunsAt(T)
			}
			// (FC1's store warps gather the rows where their form runs)
			storesGather := slices.ContainsFunc(runs[0].Phases, func(ph string) bool { return strings.HasSuffix(ph, "_store_gathered") && runsAt(ph) })
			for i, p := range per.Kernels {
				if p.RunsAt(T) && !(p.Name == "moe_gather" && storesGather) && !slices.ContainsFunc(runs[0].Phases, func(ph string) bool { return perOpOf(runs[0], ph) == i && runsAt(ph) }) {
					t.Errorf("%s: at T = %d per-op %s runs, which is no phase of %s that runs there (%v)", c.name, T, p.Name, runs[0].Name, runs[0].Phases)
				}
			}
		}
		for _, f := range pkModuleFuncs(pk) {
			if !slices.ContainsFunc(pk.Kernels, func(k Kernel) bool { return k.Name == f }) && !strings.HasPrefix(f, "llvm.") {
				t.Errorf("%s: the persistent module still defines %s", c.name, f)
			}
		}
	}
	if shapes == 0 {
		t.Error("no preset's default schedule has a variant of other blocks: the kernels of other shapes are untested")
	}
}

// storesGatherPhase reports whether a phase of persistent program p
// gathers its rows in its store warps (binds RoleGatherDone's counters).
func storesGatherPhase(p *Program) bool {
	return slices.ContainsFunc(p.PhaseKernels, func(k Kernel) bool {
		return slices.ContainsFunc(k.Params, func(q Param) bool { return q.Role == RoleGatherDone })
	})
}

// pkModuleFuncs names the functions of p's module.
func pkModuleFuncs(p *Program) []string {
	var out []string
	for _, f := range p.Module.Funcs {
		out = append(out, f.Name())
	}
	return out
}

// TestPersistentAssemble: the persistent forward of qwen3-30b-a3b
// (persistent GEMMs whose roles set their registers with setmaxnreg and
// give them back, row-wise phases on named barriers of fewer threads) and
// deepseek-v3's (shared experts), qwen3-30b-a3b's persistent backward
// (weight gradients on three-dimensional virtual grids, and with the
// warp-specialized ones, schedule.WGradWS, the persistent default, whose
// phases give their registers back: before they did, ptxas 13.0 spilled
// 344 bytes in the later phases, docs/perf.md), and the forwards
// of qwen3-30b-a3b and gpt-oss-120b with FC1's store warps gathering its
// rows (schedule.GatherStoreWarps), assemble with the
// gate's ptxas and with CUDA 12.9's, which compiles each with no warning
// and no spill (ptxas 12.5 spills a few bytes in them: docs/perf.md,
// persistent v3).
func TestPersistentAssemble(t *testing.T) {
	var texts []string
	names := []string{"qwen3-30b-a3b", "deepseek-v3", "qwen3-30b-a3b backward", "qwen3-30b-a3b backward wgmma-ws", "qwen3-30b-a3b store-warps", "gpt-oss-120b store-warps"}
	for _, name := range names {
		var p *Program
		if base, stores := strings.CutSuffix(name, " store-warps"); stores {
			p = storeGatherProgram(t, testlayer.Named(t, base), false, schedule.GatherStoreWarps)
		} else if base, ws := strings.CutSuffix(name, " backward wgmma-ws"); ws {
			p = lowerDefault(t, testlayer.Named(t, base), true, Persistent, func(s *schedule.Schedule) { s.WGrad = schedule.WGradWS })
		} else {
			base, backward := strings.CutSuffix(name, " backward")
			_, p = persistentPair(t, testlayer.Named(t, base), backward)
		}
		res, err := ptx.CompileModule(p.Module, target.SM90a)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		texts = append(texts, res.Text)
	}
	toolchain.NeedPtxas(t, target.SM90a.String())
	ptxas := toolchain.NeedPtxas(t, target.SM100a.String())
	for i, text := range texts {
		if err := toolchain.Assemble(text, target.SM90a.String()); err != nil {
			t.Errorf("%s: %v", names[i], err)
		}
		out := ptxasVerbose(t, ptxas, names[i], text)
		if strings.Contains(strings.ToLower(out), "warning") {
			t.Errorf("%s: ptxas warns:\n%s", names[i], out)
		}
		// every kernel (one per block shape) without a spill
		if spills, clean := strings.Count(out, "bytes spill stores"), strings.Count(out, " 0 bytes spill stores, 0 bytes spill loads"); spills == 0 || clean != spills {
			t.Errorf("%s: ptxas spills (the persistent kernels run at their GEMM phases' registers):\n%s", names[i], out)
		}
	}
}

// TestPersistentRefused: the schedules the persistent kernel cannot run
// are refused with the reason, by Validate or by the lowering.
func TestPersistentRefused(t *testing.T) {
	l := testlayer.Named(t, "qwen3-30b-a3b")
	for _, c := range []struct {
		what string
		tg   target.Target
		edit func(*schedule.Schedule)
		want string
	}{
		{"sm_80", target.SM80, func(*schedule.Schedule) {}, "built for sm_90a"},
		{"clusters", target.SM90a, func(s *schedule.Schedule) { s.Cluster, s.Items = 2, schedule.ItemsFixed }, "not clusters of 2"},
		{"two blocks per SM", target.SM90a, func(s *schedule.Schedule) { s.BlocksPerSM, s.Items = 2, schedule.ItemsFixed }, "one block per SM"},
		{"a grid", target.SM90a, func(s *schedule.Schedule) { s.GridCTAs = 64 }, "leave Schedule.GridCTAs out"},
	} {
		s := testlayer.DefaultSchedule(t, l, c.tg)
		c.edit(&s)
		s.Lowering = schedule.LoweringPersistent
		_, err := Build(l, s)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.what, err, c.want)
		}
	}
}

// TestPersistentCombineBulk: the persistent forward's gather phase is the
// bulk-copy form (emitGatherBulk) on every bf16 preset whose rows the
// gather copies plainly (llama4-scout's scales them: row-wise); its
// combine phase is the bulk-copy form (emitCombineBulk: one block per SM of the GEMM phases'
// shape, the routed rows copied by cp.async.bulk into a ring of stages)
// on the presets without a shared output gate or a weight on the input,
// and the row-wise form on those with one; the per-op combine is always
// row-wise. The phases take no more shared memory than the GEMM phases
// (TestPersistent), and their stage plans fit for every preset's hidden
// size and top-k in 148656 bytes, the least shared memory of any preset's
// GEMM phases (the backward's).
func TestPersistentCombineBulk(t *testing.T) {
	for name, bulk := range map[string]bool{"qwen3-30b-a3b": true, "deepseek-v3": true, "gpt-oss-20b": true, "mixtral-8x7b": true,
		"qwen2-57b-a14b": false, "llama4-scout": false} {
		perOp, p := persistentPair(t, testlayer.Named(t, name), false)
		for _, k := range perOp.Kernels {
			if k.Name == "moe_combine" && k.GridPerSM {
				t.Errorf("%s: the per-op moe_combine is the bulk-copy form", name)
			}
		}
		var combine *Kernel
		for i, k := range p.PhaseKernels {
			if k.Name == "moe_combine" {
				combine = &p.PhaseKernels[i]
			}
		}
		if combine == nil {
			t.Fatalf("%s: no moe_combine phase", name)
		}
		res, err := ptx.CompileModule(p.Module, target.SM90a)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if combine.GridPerSM != bulk {
			t.Errorf("%s: combine phase one block per SM %v, want %v", name, combine.GridPerSM, bulk)
		}
		// llama4-scout's gather scales the rows by the routing weight; the
		// others' gather phase runs between the gathering FC1 and FC1's
		// store warps (Schedule.StoreGatherRows).
		plain := name != "llama4-scout"
		for _, k := range p.PhaseKernels {
			if k.Name == "moe_gather" && k.GridPerSM != plain {
				t.Errorf("%s: the gather phase one block per SM %v, want %v", name, k.GridPerSM, plain)
			}
		}
		if copies := strings.Contains(res.Text, "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"); copies != (bulk || plain) {
			t.Errorf("%s: bulk copies in the kernel %v, want %v", name, copies, bulk || plain)
		}
	}
	for _, name := range schedule.Presets() {
		l := testlayer.Named(t, name)
		if rows, stage, stages := gatherBulkPlan(l.Hidden, 148656); rows < 1 || rows > 32 || stage > gatherBulkStageBytes || stages < 2 || stages*stage+16*stages+1024 > 148656 {
			t.Errorf("%s: gather H %d: %d rows per stage of %d bytes, %d stages", name, l.Hidden, rows, stage, stages)
		}
		for _, rows := range []int{l.TopK, l.TopK + 1} {
			slices, w, stage, stages := combineBulkPlan(l.Hidden, l.TopK, rows, 148656)
			if w%8 != 0 || slices*w < l.Hidden || (slices-1)*w >= l.Hidden || stage > combineBulkStageBytes || stages < 2 || stages*(stage+8*l.TopK+16)+1024 > 148656 {
				t.Errorf("%s: H %d, %d rows: %d slices of %d columns, stages of %d bytes, %d stages", name, l.Hidden, rows, slices, w, stage, stages)
			}
		}
	}
}

// TestPersistentPhaseSignals: in the persistent bf16 forward of sm_90a
// presets, FC2's phase waits for FC1's row tiles (tile_done1, which every
// FC1 kernel form of the base GEMMs' blocks signals and the kernels
// writing the list zero; the variants of other blocks, in persistent
// kernels of their own, through their own lists' counters) instead
// of a grid barrier, so each persistent kernel has one grid barrier fewer
// than with the counters off (fence.acq_rel.gpu: one per barrier); a chained FC1 and
// FC2 (Schedule.Chain) and the mxfp8 forward keep the barrier.
func TestPersistentPhaseSignals(t *testing.T) {
	build := func(l schedule.Layer, chain, signals bool) *Program {
		t.Helper()
		p, _ := persistentSignals(t, l, chain, signals)
		return p
	}
	barriers := func(p *Program) int {
		t.Helper()
		res, err := ptx.CompileModule(p.Module, target.SM90a)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(res.Text, "fence.acq_rel.gpu")
	}
	binds := func(k Kernel, buf string) bool {
		return slices.ContainsFunc(k.Params, func(p Param) bool { return p.Buffer == buf })
	}
	for _, name := range []string{"qwen3-30b-a3b", "deepseek-v3", "gpt-oss-120b", "mixtral-8x7b", "llama4-scout"} {
		l := testlayer.Named(t, name)
		on, off := build(l, false, true), build(l, false, false)
		if on.Buffer("tile_done1") == nil || off.Buffer("tile_done1") != nil {
			t.Errorf("%s: counters of FC1's row tiles with the signals %v, without %v; want only with", name, on.Buffer("tile_done1") != nil, off.Buffer("tile_done1") != nil)
		}
		for _, k := range on.PhaseKernels {
			// (the GEMMs of other blocks, in kernels of their own, signal
			// through their own tile list's counters)
			want := strings.HasPrefix(k.Name, "moe_fc1") && k.Block == on.Kernels[0].Block || k.Name == "moe_fc2" || k.Name == "moe_scan" || strings.HasPrefix(k.Name, "moe_dispatch")
			if binds(k, "tile_done1") != want {
				t.Errorf("%s: phase %s binds tile_done1 %v, want %v", name, k.Name, !want, want)
			}
			if other := k.GridPerSM && k.Block != on.Kernels[0].Block && (strings.HasPrefix(k.Name, "moe_fc1") || strings.HasPrefix(k.Name, "moe_fc2")); other &&
				!slices.ContainsFunc(k.Params, func(p Param) bool { return strings.HasPrefix(p.Buffer, "tile_done") }) {
				t.Errorf("%s: phase %s, of other blocks, binds no counters of its tile list", name, k.Name)
			}
		}
		if a, b := barriers(on), barriers(off); a != b-len(on.Kernels) {
			t.Errorf("%s: %d grid barriers with the counters, %d without: want one fewer per persistent kernel (%d)", name, a, b, len(on.Kernels))
		}
		if chained := build(l, true, true); barriers(chained) != barriers(build(l, true, false)) {
			t.Errorf("%s: the chained schedule's persistent forward lost a grid barrier", name)
		}
	}
	mx := testlayer.Named(t, "qwen3-30b-a3b")
	mx.Precision = schedule.MXFP8
	if p := build(mx, false, true); p.Buffer("tile_done1") != nil {
		t.Errorf("qwen3-30b-a3b mxfp8: counters of FC1's row tiles in the persistent forward")
	}
}

// persistentSignals lowers layer l's forward on sm_90a persistent with its
// default schedule (as persistentPair),
// chained (Schedule.Chain: FC1 and FC2 in one kernel, the fixed walk)
// where asked, with the phases' counters on or off (signalPhases); it
// returns the program and FC1's spec of that schedule.
func persistentSignals(t *testing.T, l schedule.Layer, chain, signals bool) (*Program, GemmSpec) {
	t.Helper()
	defer func(old bool) { signalPhases = old }(signalPhases)
	signalPhases = signals
	s := testlayer.DefaultSchedule(t, l, target.SM90a)
	s = s.FixedItemsWhereNeeded(l).FC2LargeWhereValid(l)
	if chain {
		s.Chain, s.Items, s.FC2Large = schedule.ChainFC, schedule.ItemsFixed, schedule.LargeRowsTile{}
	}
	p, err := moe.Forward(l)
	if err != nil {
		t.Fatal(err)
	}
	prog, err := Lower(p, s, Persistent)
	if err != nil {
		t.Fatalf("%s: %v", l.Name, err)
	}
	var fc1 moe.GEMM
	for i := range p.Ops {
		if g1, _, _, ok := fcPair(p.Ops, i); ok {
			fc1 = g1
		}
	}
	lw := perOp{sched: s, d: dims{H: l.Hidden, I: l.Intermediate, E: l.Experts, K: l.TopK}, src: p}
	return prog, lw.gemmSpec(fc1, s)
}

// TestActGradShape: the row-wise act_grad's blocks (actGradShape): per-op
// one row per block of utilThreads; in the persistent lowering, groups of
// a row's warps within the phase's threads, four rows per group where one
// step's values for them fit the phase's registers less 64, else two.
// I = 768 (qwen3-30b-a3b): groups of 96 threads, four rows in the 168
// registers of a block of 384 threads, two in the 128 of one of 512;
// I = 1408: one group of 192; I = 2880: one of 256 (two chunks per
// thread); I = 8192 with FC1·x (llama4-scout: 40 values a row): two rows.
func TestActGradShape(t *testing.T) {
	fc1x := &moe.Buffer{Name: "fc1x"}
	for _, c := range []struct {
		n, threads, regs int
		fc1x             bool
		g, r, p          int64
	}{
		{768, 0, 0, false, utilThreads, 1, 1}, // per-op
		{768, 256, 168, false, 96, 2, 4},
		{768, 256, 128, false, 96, 2, 2},
		{1408, 256, 168, false, 192, 1, 4},
		{2880, 256, 168, false, 256, 1, 4},
		{2880, 256, 128, false, 256, 1, 2},
		{8192, 256, 168, true, 256, 1, 2},
	} {
		op := moe.ActGrad{N: c.n}
		if c.fc1x {
			op.FC1X = fc1x
		}
		g, r, p := actGradShape(dims{actGradThreads: c.threads, phaseRegs: c.regs}, op)
		if g != c.g || r != c.r || p != c.p {
			t.Errorf("N %d, %d threads, %d registers, FC1·x %v: (G, R, P) = (%d, %d, %d); want (%d, %d, %d)", c.n, c.threads, c.regs, c.fc1x, g, r, p, c.g, c.r, c.p)
		}
	}
}

// TestActGradBulkPlan: the bulk-copy act_grad's stages (actGradBulkPlan)
// in the 148656 bytes of the persistent GEMMs' shared memory: eight rows
// a stage where two stages fit, else four, two or one; no stage where one
// row leaves fewer than two. The rows hold f32 gu and dh [I] x 3 (and
// f32 FC1·x [2I]), as the backward's scratch buffers do where they are not
// rounded to bf16. The headers keep the mbarriers after them 8-byte
// aligned (an odd number of one-row stages had them at 4 mod 8).
func TestActGradBulkPlan(t *testing.T) {
	const smem = 148656
	for _, c := range []struct {
		n                   int
		dt                  moe.DType
		fc1x                bool
		rows, bytes, stages int
	}{
		{768, moe.F32, false, 8, 8 * 768 * 12, 2},   // qwen3-30b-a3b
		{768, moe.BF16, false, 8, 8 * 768 * 6, 3},   // bf16 rows
		{1024, moe.F32, false, 4, 4 * 1024 * 12, 3}, // olmoe-1b-7b
		{1408, moe.F32, false, 4, 4 * 1408 * 12, 2}, // deepseek-v2-lite
		{2048, moe.F32, false, 2, 2 * 2048 * 12, 3}, // deepseek-v3
		{2880, moe.F32, false, 2, 2 * 2880 * 12, 2}, // gpt-oss-20b
		{20480, moe.F32, false, 1, 20480 * 12, 0},   // qwen2-57b-a14b's shared expert
		{8192, moe.F32, true, 1, 8192 * 20, 0},      // llama4-scout's routed rows, with FC1·x
		{4096, moe.F32, false, 1, 4096 * 12, 3},     // one row a stage, an odd number of stages
	} {
		op := moe.ActGrad{N: c.n, GU: &moe.Buffer{DType: c.dt}, DH: &moe.Buffer{DType: c.dt}}
		if c.fc1x {
			op.FC1X = &moe.Buffer{DType: moe.F32}
		}
		rows, bytes, stages := actGradBulkPlan(op, smem)
		if rows != c.rows || bytes != c.bytes || stages != c.stages {
			t.Errorf("N %d %v FC1·x %v: %d rows, %d bytes, %d stages; want %d, %d, %d", c.n, c.dt, c.fc1x, rows, bytes, stages, c.rows, c.bytes, c.stages)
		}
		// the ring's mbarriers follow the stages and their headers: 8-byte aligned
		if bars := stages * (bytes + actGradHeaderBytes(rows)); bars%8 != 0 {
			t.Errorf("N %d %v FC1·x %v: the mbarriers at %d, not 8-byte aligned", c.n, c.dt, c.fc1x, bars)
		}
	}
}

// TestPersistentActGrad: the persistent backward's act_grad phases take
// the bulk-copy form (emitActGradBulk) in the blocks of the GEMMs they
// follow, one per SM, in their shared memory, where two stages of a row
// fit (the "mid" tiles' 512-thread kernel of the default schedule gets
// moe_act_grad_mid); where they do not, the row-wise kernel stays with
// actGradShape's blocks and grid, ceil(rows / rows per block), and takes T
// where its rows are dense (llama4-scout's routed rows, 160 KB each with
// FC1·x, and its shared expert's, 96 KB; qwen2-57b-a14b's shared expert's
// 20480 columns); per-op keeps the row-wise kernel of one row per block.
// Every persistent kernel's block holds its phases'.
func TestPersistentActGrad(t *testing.T) {
	type shape struct {
		block, smem int
		perSM       bool // bulk-copy: one block per SM
		grid        Expr // row-wise: the grid (bulk-copy: the GEMMs')
		withT       bool // the kernel takes T (dense rows)
	}
	ws := func(s *schedule.Schedule) { s.WGrad = schedule.WGradWS }
	const four, two = 4, 2 // persistActGradRows, persistActGradRowsMin
	rowWise := func(block, smem int, grid Expr, withT bool) shape { return shape{block, smem, false, grid, withT} }
	bulk := func(block, smem int, withT bool) shape { return shape{block, smem, true, Expr{}, withT} }
	for _, c := range []struct {
		model string
		edit  func(*schedule.Schedule)
		want  map[string]shape // by kernel name
	}{
		{"qwen3-30b-a3b", nil, map[string]shape{"moe_act_grad": bulk(384, 148576, false), "moe_act_grad_mid": bulk(512, 148576, false)}},
		{"qwen3-30b-a3b", ws, map[string]shape{"moe_act_grad": bulk(384, 148576, false)}},
		{"deepseek-v2-lite", nil, map[string]shape{"moe_act_grad": bulk(384, 136272, false), "moe_shared_act_grad": bulk(384, 136256, true)}},
		{"gpt-oss-20b", ws, map[string]shape{"moe_act_grad": bulk(384, 139328, false)}},
		// row-wise: a word per warp and row of the block in shared memory
		{"qwen2-57b-a14b", ws, map[string]shape{"moe_act_grad": bulk(384, 123968, false),
			"moe_shared_act_grad": rowWise(256, 4*8*four, Expr{A: 1, D: four, Min: 1}, true)}},
		{"llama4-scout", ws, map[string]shape{"moe_act_grad": rowWise(256, 4*8*two, Expr{A: 1, D: two, Min: 1}, false),
			"moe_shared_act_grad": rowWise(256, 4*8*four, Expr{A: 1, D: four, Min: 1}, true)}},
	} {
		l := testlayer.Named(t, c.model)
		perOp, p := lowerDefault(t, l, true, PerOp, c.edit), lowerDefault(t, l, true, Persistent, c.edit)
		for name, want := range c.want {
			i := slices.IndexFunc(p.PhaseKernels, func(k Kernel) bool { return k.Name == name })
			if i < 0 {
				t.Fatalf("%s: no phase %s", c.model, name)
			}
			k := p.PhaseKernels[i]
			got := shape{k.Block, k.SharedBytes, k.GridPerSM, k.Grid[0], slices.ContainsFunc(k.Params, func(p Param) bool { return p.Name == "T" })}
			if want.perSM { // the GEMMs' grid, one block per SM
				got.grid = Expr{}
			}
			if got != want {
				t.Errorf("%s (wgmma-ws %v): %s: %+v; want %+v", c.model, c.edit != nil, name, got, want)
			}
			base := strings.TrimSuffix(name, "_mid")
			j := slices.IndexFunc(perOp.Kernels, func(k Kernel) bool { return k.Name == base })
			if j < 0 {
				t.Fatalf("%s: no per-op kernel %s", c.model, base)
			}
			if k := perOp.Kernels[j]; k.Block != utilThreads || k.SharedBytes != 32 || k.Grid[0].D != 1 {
				t.Errorf("%s: per-op %s: block %d, shared %d, grid %v; want one row per block of %d", c.model, base, k.Block, k.SharedBytes, k.Grid[0], utilThreads)
			}
		}
		for _, k := range p.Kernels {
			for name, w := range c.want {
				if !strings.HasSuffix(name, "_mid") && k.Block < w.block {
					t.Errorf("%s: %s's blocks of %d threads are smaller than its %s phase's %d", c.model, k.Name, k.Block, name, w.block)
				}
			}
		}
	}
}

// TestWGradWSThreads: schedule.PersistentWGrad picks the warp-specialized
// weight gradient for GEMM blocks of schedule.WGradWSThreads threads, the
// block emitWeightGradWS builds.
func TestWGradWSThreads(t *testing.T) {
	if got := 128 * (wsWG + 1); got != schedule.WGradWSThreads {
		t.Errorf("emitWeightGradWS's blocks have %d threads, schedule.WGradWSThreads is %d", got, schedule.WGradWSThreads)
	}
}

// TestPersistentCombineGradRows: the persistent backward's combine_grad
// phase runs persistCombineGradRows tokens per virtual block (taking T)
// where that many tokens' chunks fit the phase's registers
// (combineGradTokens), else one: qwen3-30b-a3b's two (K = 8, f32 dxs) fit
// the 168 registers of the base GEMMs' 384 threads, not the 128 of the
// "mid" tiles' 512 (the default schedule with --wgrad wgmma; the
// persistent default, wgmma-ws, leaves them out); gpt-oss-20b's (K = 4)
// fit both; qwen2-57b-a14b's, with its shared expert's and gate's
// chunks, neither. Per-op one per block.
func TestPersistentCombineGradRows(t *testing.T) {
	ws := func(s *schedule.Schedule) { s.WGrad = schedule.WGradWS }
	for _, c := range []struct {
		name string
		edit func(*schedule.Schedule)
		rows int64
	}{
		{"qwen3-30b-a3b", ws, persistCombineGradRows},
		{"qwen3-30b-a3b", nil, 1},
		{"gpt-oss-20b", ws, persistCombineGradRows},
		{"gpt-oss-20b", nil, persistCombineGradRows},
		{"qwen2-57b-a14b", nil, 1},
		{"llama4-scout", nil, persistCombineGradRows},
	} {
		l := testlayer.Named(t, c.name)
		for _, lw := range []struct {
			p    *Program
			ks   func(*Program) []Kernel
			rows int64
		}{
			{lowerDefault(t, l, true, PerOp, c.edit), func(p *Program) []Kernel { return p.Kernels }, 1},
			{lowerDefault(t, l, true, Persistent, c.edit), func(p *Program) []Kernel { return p.PhaseKernels }, c.rows},
		} {
			ks := lw.ks(lw.p)
			i := slices.IndexFunc(ks, func(k Kernel) bool { return k.Name == "moe_combine_grad" })
			if i < 0 {
				t.Fatalf("%s: no moe_combine_grad", c.name)
			}
			k := ks[i]
			withT := slices.ContainsFunc(k.Params, func(p Param) bool { return p.Name == "T" })
			if k.Grid[0] != (Expr{A: 1, D: lw.rows, Min: 1}) || withT != (lw.rows > 1) {
				t.Errorf("%s (wgmma-ws %v): moe_combine_grad grid %v, takes T %v; want %d tokens per block", c.name, c.edit != nil, k.Grid[0], withT, lw.rows)
			}
		}
	}
}

// TestSetMaxNRegs: a GEMM phase's roles (a producer lowering its registers
// to 56, consumers raising theirs to 232, launched at 168) give them back
// when the producer raises them back to 168 and the consumers lower them
// back; setMaxNRegs tells each direction apart, so that planPersistent
// refuses a phase where only one role gives them back.
func TestSetMaxNRegs(t *testing.T) {
	for _, c := range []struct {
		what                             string
		emit                             func(b *Builder)
		lowers, raises, backUp, backDown bool
	}{
		{"both roles give back", func(b *Builder) {
			b.SetMaxNReg(false, 56)
			b.SetMaxNReg(true, 232)
			b.SetMaxNReg(true, 168)
			b.SetMaxNReg(false, 168)
		}, true, true, true, true},
		{"the producer alone gives back", func(b *Builder) {
			b.SetMaxNReg(false, 56)
			b.SetMaxNReg(true, 232)
			b.SetMaxNReg(true, 168)
		}, true, true, true, false},
		{"none gives back", func(b *Builder) {
			b.SetMaxNReg(false, 56)
			b.SetMaxNReg(true, 232)
		}, true, true, false, false},
		{"no setmaxnreg", func(b *Builder) {}, false, false, false, false},
	} {
		m := ir.NewModule("regs")
		b := NewKernel(m, "k", 384)
		c.emit(b)
		b.Ret(nil)
		lowers, raises, backUp, backDown := setMaxNRegs(b.Func, 168)
		if lowers != c.lowers || raises != c.raises || backUp != c.backUp || backDown != c.backDown {
			t.Errorf("%s: lowers %v raises %v back up %v back down %v; want %v %v %v %v", c.what, lowers, raises, backUp, backDown, c.lowers, c.raises, c.backUp, c.backDown)
		}
	}
}
