package codegen

import (
	"fmt"
	"slices"
	"strings"

	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"

	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/target"
)

// Chained GEMMs: the work items of two grouped GEMMs over the same
// dispatched rows in one persistent kernel (Engine.ChainedGEMM), the
// second reading the first's C as its A (the forward's FC1 and FC2: h is
// FC1's C and FC2's A; in an mxfp8 forward's decode tiles FC2 reads h's
// MXFP8 form, which FC1's epilogue writes, GemmSpec.QuantizeC). Every
// role of a block walks the first GEMM's items as in its own kernel, then
// the second's, the stage ring's, the staging tile's and the code slots'
// state handed over, so a block that runs out of FC1 items starts FC2
// items while others finish theirs, where two kernels would wait for
// FC1's last item (its tail) and then ramp FC2 up. The two GEMMs share
// one tile list (the same tile rows), and item (tile t, column block n)
// of the second needs the whole of row tile t of the first's C, every one
// of its column blocks: the first's storing threads each add one to
// tile_done[t] (a release add at gpu scope after a
// fence.proxy.async.global, once their part of C is stored: signalTile),
// and the second's producer waits before an item's first load until
// tile_done[t] holds every signal of the tile (an acquire poll, then
// fence.proxy.async.global before its TMA loads of the rows: waitTile;
// PTX ISA, "Memory Consistency Model": release and acquire patterns,
// proxies); an MXFP8 second GEMM's scale-code warps wait likewise before
// they copy an item's A codes, which run ahead of its stages. An item
// only waits for items the fixed walk gives out before it (every
// first-GEMM item precedes every second-GEMM one in each block's walk)
// and the grid's blocks are all resident (one per SM: CoResident), so no
// wait lasts forever; should they not be (other persistent work on the
// device, a share of its SMs), a wait gives up after the kernel's wait
// limit and reports it in the error word (awaitCount). tile_done is zeroed by the
// kernel that writes the tile list (writeTileLists), every run. Each
// output is computed by one item in the K order of its own kernel: the
// same bits as the two kernels.

// chainPrefix is the prefix of a chained kernel's parameters of its second
// GEMM ("g2_a", "g2_tmap_b", ...); chainShared are the parameters both
// GEMMs take unprefixed.
const chainPrefix = "g2_"

var chainShared = []string{RoleTileDone, RoleErr, RoleWaitLimit}

// signalTile emits the calling thread's signal that its part of work item
// w's C is stored: a release add of one to tile_done[w.tile] (gpu scope),
// after a proxy fence so that the second GEMM's TMA loads, an async-proxy
// read, see the stores.
func (b *Builder) signalTile(w gemmWork) {
	b.FenceProxyAsyncGlobal()
	b.RedAddRelease(b.Cast(b.elemPtr(b.Param("tile_done"), w.tile, 4), ir.I32), ir.Int32(1), ir.ScopeGPU)
}

// signalItem emits the signal of the calling thread, one of the
// signalThreads() threads that store work item w's C, once its part is
// stored: in a chained kernel (signalPerItem 0) its own signalTile of one;
// with signalPerItem (the persistent forward's FC1 phases,
// lower_phase_signals.go) its warp synchronises (bar.warp.sync orders the
// lanes' stores before lane 0's) and lane 0 adds the warp's share of
// signalPerItem by a release add at gpu scope, without a proxy fence: the
// waiting producer fences the async proxy after its acquire, which orders
// every store before the release on the path before its TMA loads (PTX
// ISA, "Memory Consistency Model": proxy-preserved causality order).
func (l sm90Layout) signalItem(b *Builder, s GemmSpec, w gemmWork) {
	if s.signalPerItem == 0 {
		b.signalTile(w)
		return
	}
	b.warpSignal(RoleTileDone, w.tile, int64(s.signalPerItem/(l.signalThreads()/32)))
}

// warpSignal emits the calling warp's signal to word tile of the u32
// counters in parameter counters, once every lane's stores are done: the
// warp synchronises (bar.warp.sync orders the lanes' stores before lane
// 0's) and lane 0 adds n by a release add at gpu scope.
func (b *Builder) warpSignal(counters string, tile value.Value, n int64) {
	lane, _ := b.LaneWarp()
	b.WarpSync()
	b.If(b.ICmp(enum.IPredEQ, lane, ir.Int32(0)), func() {
		b.RedAddRelease(b.Cast(b.elemPtr(b.Param(counters), tile, 4), ir.I32), ir.Int32(n), ir.ScopeGPU)
	})
}

// waitTile emits the producer's wait, before work item w's loads, for the
// signals of w's row tile (spec.waitTiles of them), then a proxy fence
// that orders the rows they published before its TMA loads.
func (p gemmProducer) waitTile(b *Builder, w gemmWork) {
	b.awaitTileRows(RoleTileDone, w.tile, p.spec.waitTiles)
}

// awaitTileRows emits the calling thread's wait until word tile of the
// u32 counters in parameter counters holds n (awaitCount), then a proxy
// fence that orders the rows the signals published before its TMA loads.
func (b *Builder) awaitTileRows(counters string, tile value.Value, n int) {
	b.awaitCount(b.Cast(b.elemPtr(b.Param(counters), tile, 4), ir.I32), ir.Int32(int64(n)))
	b.FenceProxyAsyncGlobal()
}

// awaitCount emits the calling thread's wait until the u32 at word
// (global) holds at least target: an acquire poll at gpu scope, bounded
// by the kernel's wait limit (parameter wait_limit_ns, nanoseconds of
// %globaltimer from the wait's start; 0: no bound). A wait that reaches
// the limit ORs ErrWaitTimeout into both error words (parameter err: the
// run's, and the one kept across runs, launch.ErrBuffer) and returns, as
// does every wait that finds the bit already set in the run's word, so that a
// grid whose blocks are not all resident ends with the error reported
// instead of hanging; its outputs are then not valid (the runtime's
// CheckErrors says so).
func (b *Builder) awaitCount(word, target value.Value) {
	errWord := b.Cast(b.Param(RoleErr), ir.I32)
	keptWord := b.Cast(b.ByteOffsetC(b.Param(RoleErr), 4), ir.I32) // launch.ErrBuffer's word 1
	// limit-1 as unsigned: a limit of 0 is never exceeded.
	last := b.Sub(b.Param(RoleWaitLimit), ir.Int64(1))
	start := b.GlobalTimer()
	b.Kernel.Loop(func() value.Value {
		pending := b.ICmp(enum.IPredULT, b.LoadAcquire(word, ir.ScopeGPU), target)
		over := b.ICmp(enum.IPredUGT, b.Sub(b.GlobalTimer(), start), last)
		b.If(b.And(pending, over), func() {
			b.atomicOr(errWord, ir.Int32(ErrWaitTimeout))
			b.atomicOr(keptWord, ir.Int32(ErrWaitTimeout))
		})
		given := b.ICmp(enum.IPredNE, b.And(b.LoadVolatile(errWord), ir.Int32(ErrWaitTimeout)), ir.Int32(0))
		return b.And(pending, b.Xor(b.Or(over, given), ir.Bool(true)))
	})
}

// chainer is an atom that runs its GEMM's work items and then another's
// in one kernel (see the top of this file).
type chainer interface {
	// align returns the specs s1 (its own) and s2 (second's) changed so
	// that their plans can share one kernel (the same shared-memory
	// layout of barriers, the same register split), when they differ.
	align(s1 GemmSpec, second atom, s2 GemmSpec) (GemmSpec, GemmSpec)
	// canChain says why the atom cannot chain second (planned from s2)
	// after its own GEMM (s1), or nil.
	canChain(s1 GemmSpec, second atom, s2 GemmSpec) error
	// buildChain adds the chained kernel name to m.
	buildChain(m *ir.Module, name string, s1 GemmSpec, second atom, s2 GemmSpec, rowsPerT int64) (KernelInfo, error)
}

// chainPlans validates and plans the two GEMMs of a chained kernel, each
// with a staging tile of the wider of their output tiles (minStaging), so
// that their shared-memory plans place the barriers alike; it returns
// the specs as planned.
func (e atomEngine) chainPlans(first, second GemmSpec) (chainer, atom, GemmSpec, GemmSpec, error) {
	fail := func(err error) (chainer, atom, GemmSpec, GemmSpec, error) { return nil, nil, first, second, err }
	for _, s := range []GemmSpec{first, second} {
		if err := s.Validate(); err != nil {
			return fail(err)
		}
		switch {
		case s.A != ATiled || s.B != BGrouped || s.BNMajor || s.SplitK > 1 || s.QueueItems || s.MX && (!s.swapAB() || s.MXRegisterFed || s.GatherK > 0):
			return fail(fmt.Errorf("codegen: %s: a chained kernel runs GEMMs over dispatched rows with grouped K-major weights loaded by TMA, the fixed walk, one part of the reduction: bf16, or MXFP8 promoted with the operand swap (the decode tiles) not gathering its rows", s.Name))
		}
	}
	if second.GatherK > 0 || second.QuantizeC || first.MX != second.MX {
		return fail(fmt.Errorf("codegen: %s, %s: a chained kernel's second GEMM reads the first's C (or its MXFP8 form, QuantizeC) by TMA, in the first's precision", first.Name, second.Name))
	}
	if first.Tile.BlocksPerSM > 1 || second.Tile.BlocksPerSM > 1 {
		return fail(fmt.Errorf("codegen: %s, %s: a chained kernel runs one block per SM (its blocks wait for one another), not BlocksPerSM %d and %d", first.Name, second.Name, first.Tile.BlocksPerSM, second.Tile.BlocksPerSM))
	}
	if first.Tile.Cluster != second.Tile.Cluster {
		return fail(fmt.Errorf("codegen: %s, %s: a chained kernel runs both GEMMs in clusters of the same size or neither (Cluster %d and %d)", first.Name, second.Name, first.Tile.Cluster, second.Tile.Cluster))
	}
	if first.Tile.Grid != 0 || second.Tile.Grid != 0 {
		return fail(fmt.Errorf("codegen: %s, %s: a chained kernel runs one block per SM of the device, all resident (Tile.Grid 0, not %d and %d)", first.Name, second.Name, first.Tile.Grid, second.Tile.Grid))
	}
	if second.K != first.N || first.Tile.BM != second.Tile.BM || first.COutF32 && !first.QuantizeC {
		return fail(fmt.Errorf("codegen: %s, %s: a chained kernel's second GEMM reads the first's bf16 C (K = %d, the first's N = %d) in the same row tiles (BM %d, %d)", first.Name, second.Name, second.K, first.N, first.Tile.BM, second.Tile.BM))
	}
	first.minStaging = max(first.Tile.BN, second.Tile.BN)
	second.minStaging = first.minStaging
	a1, err := e.plan(first)
	if err != nil {
		return fail(err)
	}
	a2, err := e.plan(second)
	if err != nil {
		return fail(err)
	}
	c, ok := a1.(chainer)
	if !ok {
		return fail(fmt.Errorf("codegen: %s: the %v engine does not chain GEMMs in one kernel", first.Name, e.target))
	}
	for range 2 { // the staging, then the registers (align)
		f, s := c.align(first, a2, second)
		if f == first && s == second {
			break
		}
		first, second = f, s
		if a1, err = e.plan(first); err != nil {
			return fail(err)
		}
		if a2, err = e.plan(second); err != nil {
			return fail(err)
		}
		c = a1.(chainer)
	}
	if err := c.canChain(first, a2, second); err != nil {
		return fail(err)
	}
	return c, a2, first, second, nil
}

// ChainsGEMMs says why the atom cannot chain second after first in one
// kernel, or nil (see Engine).
func (e atomEngine) ChainsGEMMs(first, second GemmSpec) error {
	_, _, _, _, err := e.chainPlans(first, second)
	return err
}

// ChainedGEMM adds the chained kernel of first and second to m (see
// Engine).
func (e atomEngine) ChainedGEMM(m *ir.Module, name string, first, second GemmSpec, rowsPerT int64) (KernelInfo, error) {
	c, a2, first, second, err := e.chainPlans(first, second)
	if err != nil {
		return KernelInfo{}, err
	}
	return c.buildChain(m, name, first, a2, second, rowsPerT)
}

// sm90Chained is the second GEMM of an sm_90a chained kernel: its layout
// and block state (the first's shared base and ring), and the arrivals
// its TMA thread adds on each full barrier for the first GEMM's copying
// threads (gemmProducer.extraArrivals).
type sm90Chained struct {
	l             sm90Layout
	k             sm90Block
	extraArrivals int
}

// align: a first GEMM that gathers its rows (GemmSpec.GatherK: its
// producer warps copy them, so it has no staged epilogue) makes the
// second plan none either, and the producer warpgroup keeps the larger of
// the two GEMMs' registers.
func (l sm90Layout) align(s1 GemmSpec, second atom, s2 GemmSpec) (GemmSpec, GemmSpec) {
	l2, ok := second.(sm90Layout)
	if !ok {
		return s1, s2
	}
	if l.smem.Staged != l2.smem.Staged {
		s1.noStaging, s2.noStaging = true, true
		return s1, s2 // the registers follow the staging: align again after the plan
	}
	if regs := max(l.prodRegs, l2.prodRegs); l.prodRegs != regs || l2.prodRegs != regs {
		s1.minProdRegs, s2.minProdRegs = regs, regs
	}
	return s1, s2
}

// canChain: the sm_90a atom chains two GEMMs whose blocks are alike (the
// same warpgroups and registers, the same ring of stages and barriers,
// both with the staged epilogue or both without, both with the operand
// swap or neither, MXFP8's code slots and warps alike), neither with the
// expansion.
func (l sm90Layout) canChain(s1 GemmSpec, second atom, s2 GemmSpec) error {
	l2, ok := second.(sm90Layout)
	switch {
	case !ok:
		return fmt.Errorf("codegen: %s: an sm_90a kernel chains sm_90a GEMMs", s1.Name)
	case l.expand || l2.expand || l.swap != l2.swap:
		return fmt.Errorf("codegen: %s, %s: a chained sm_90a kernel runs no MXFP8 expansion, and the operand swap in both GEMMs or neither", s1.Name, s2.Name)
	case l.smem.CodeSlots != l2.smem.CodeSlots || l.smem.CodeOffset != l2.smem.CodeOffset || l.mxCodeWarps(s1) != l2.mxCodeWarps(s2):
		return fmt.Errorf("codegen: %s, %s: a chained sm_90a kernel's MXFP8 GEMMs share the scale codes' slots and warps (%d and %d slots, %d and %d warps)", s1.Name, s2.Name, l.smem.CodeSlots, l2.smem.CodeSlots, l.mxCodeWarps(s1), l2.mxCodeWarps(s2))
	case l.WG != l2.WG || l.mmaWG0 != l2.mmaWG0 || l.threads != l2.threads || l.prodRegs != l2.prodRegs || l.mmaRegs != l2.mmaRegs || l.launchRegs != l2.launchRegs:
		return fmt.Errorf("codegen: %s, %s: a chained sm_90a kernel's GEMMs need the same warpgroups and registers (%d and %d consumer warpgroups)", s1.Name, s2.Name, l.WG, l2.WG)
	case l.S != l2.S || l.stageBytes != l2.stageBytes || l.smem.BarrierOffset != l2.smem.BarrierOffset || l.smem.Staged != l2.smem.Staged:
		return fmt.Errorf("codegen: %s, %s: a chained sm_90a kernel's GEMMs share one ring: the same stages (%d, %d) of the same bytes (%d, %d), the same barriers and epilogue staging", s1.Name, s2.Name, l.S, l2.S, l.stageBytes, l2.stageBytes)
	}
	return nil
}

// signalThreads is the threads that store, and signal, each work item of
// a GEMM whose items signal their row tiles (GemmSpec.signalTiles: the
// first GEMM of a chained kernel, the persistent forward's FC1): the
// staged epilogue's 96 store threads, else every consumer thread.
func (l sm90Layout) signalThreads() int {
	if l.smem.Staged {
		return 96
	}
	return 128 * l.WG
}

// buildChain adds the sm_90a chained kernel: the first GEMM's parameters
// (with tile_done), then the second's with chainPrefix, shared memory for
// the larger of the two plans.
func (l sm90Layout) buildChain(m *ir.Module, name string, s1 GemmSpec, second atom, s2 GemmSpec, rowsPerT int64) (KernelInfo, error) {
	l2 := second.(sm90Layout)
	s1.signalTiles = true
	s2.waitTiles = l.nBlocks * l.signalThreads()
	params, err := tmaParams(s1, rowsPerT, l.tmaRing)
	if err != nil {
		return KernelInfo{}, err
	}
	p2, err := tmaParams(s2, rowsPerT, l2.tmaRing)
	if err != nil {
		return KernelInfo{}, err
	}
	for _, q := range p2 {
		switch {
		case q.Role == RoleTileDone: // the first's
		case slices.Contains(chainShared, q.Role): // the second's only, unprefixed
			params = append(params, q)
		default:
			q.Name = chainPrefix + q.Name
			params = append(params, q)
		}
	}
	b := NewKernel(m, name, l.threads, gemmIRParams(params)...)
	b.MinBlocksPerSM(1)
	if l.launchRegs > 0 {
		b.MaxRegisters(l.launchRegs)
	}
	cluster := 0
	if l.cluster > 1 {
		cluster = l.cluster
		b.ClusterDims(cluster, 1, 1)
	}
	if err := l.emitChain(b, s1, l2, s2); err != nil {
		return KernelInfo{}, err
	}
	return KernelInfo{Name: name, Params: params, Block: l.threads, SharedBytes: max(l.smem.Bytes, l2.smem.Bytes),
		Grid: [3]Expr{persistentGrid(s1.Tile, target.SM90a.SMs()), Const(1), Const(1)}, GridPerSM: true, CoResident: true,
		Phases: []string{chainPhase(name, s1), chainPhase(name, s2)}, Cluster: cluster}, nil
}

// chainPhase names the inner phase of a chained kernel's GEMM s (its work
// items): "<kernel>/<GEMM kernel name without moe_>", e.g.
// moe_fc1_fc2/fc1. The roles mark phase 0 (the first GEMM) and 1
// (phaseMark): the consumers both ends of each, the staged epilogue's
// store warps their ends, the producer the second's start.
func chainPhase(kernel string, s GemmSpec) string {
	return kernel + "/" + strings.TrimPrefix(s.Name, "moe_")
}

// emitChain is the body of an sm_90a chained kernel: emit's, with the
// second GEMM's tensor maps, work list and roles after the first's.
func (l sm90Layout) emitChain(b *Builder, s1 GemmSpec, l2 sm90Layout, s2 GemmSpec) error {
	k := sm90Block{tmaBlock: tmaBlock{spec: s1}, tid: b.ThreadIdx(ir.X)}
	wg := b.WarpUniform(b.LShr(k.tid, ir.Int32(7)))
	k.base = b.SharedBase1024()
	k.ring = mbarRing{bars: b.AddI(k.base, int64(l.smem.BarrierOffset)), S: l.S}
	var fullCount, fullCount2 int
	k.tmA, k.tmB, fullCount = tmaMaps(b, s1, 128, l.mxCodeWarps(s1)) // a gathering first GEMM: no tmap_a, a copy arrival per producer thread
	next := &sm90Chained{l: l2, k: sm90Block{tmaBlock: tmaBlock{spec: s2, base: k.base, ring: k.ring}, tid: k.tid}}
	b.withParams(chainPrefix, chainShared, func() { next.k.tmA, next.k.tmB, fullCount2 = tmaMaps(b, s2, 128, l2.mxCodeWarps(s2)) })
	next.extraArrivals = fullCount - fullCount2
	k.ring.init(b, k.tid, fullCount, 4*l.WG*l.cluster, func() { // a cluster's stages: released by both CTAs' consumer warps
		if l.smem.Staged {
			b.MbarInit(b.AddI(k.ring.bars, int64(16*l.S)), 128*l.WG) // staging full: every consumer thread
			b.MbarInit(b.AddI(k.ring.bars, int64(16*l.S+8)), 96)     // staging empty: every store thread
		}
		b.PrefetchTensorMap(next.k.tmA)
		b.PrefetchTensorMap(next.k.tmB)
	}, k.tmA, k.tmB)
	b.SyncThreads()
	if l.cluster > 1 {
		b.ClusterSync() // as in emit: the peer's barriers initialised first
	}
	k.work = l.workList(b, s1, nil)
	b.withParams(chainPrefix, chainShared, func() { next.k.work = l2.workList(b, s2, nil) })
	var err error
	b.IfElse(b.ICmp(enum.IPredEQ, wg, ir.Int32(0)), func() {
		err = l.producer(b, &k, next)
	}, func() {
		err = l.consumers(b, &k, wg, next)
	})
	if l.cluster > 1 {
		b.ClusterSync() // neither CTA exits while the other may arrive on its barriers
	}
	if s1.phase {
		l.invalBars(b, &k, nil)
	}
	b.Ret(nil)
	return err
}
