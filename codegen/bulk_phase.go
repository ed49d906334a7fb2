package codegen

import (
	"fmt"

	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"

	"github.com/mokc/mokc/ir"
)

// bulkConsumers are the threads of a bulk-copy phase (combine_bulk.go,
// gather_bulk.go, actgrad_bulk.go) that read its stages: the block's last
// 256.
const bulkConsumers = 256

// bulkPhase is the frame the bulk-copy phases share: a block of one per
// SM in the persistent GEMMs' shape, S stages of stageBytes at the
// 1024-aligned base of dynamic shared memory, then extra bytes of the
// phase's own (its stage headers), then the ring's 2S mbarriers (full:
// one arrival, the producer's lane 0, and the bytes it expects; empty:
// one arrival per consumer thread, each after its own reads of the stage). Warp 0 produces, the last
// bulkConsumers threads consume, the warps between wait at the end.
type bulkPhase struct {
	b                *Builder
	threads          int
	tid, lane, warp  value.Value
	base             value.Value // i32 shared address of stage 0
	block, nblocks   value.Value // %ctaid.x, %nctaid.x (sync)
	ring             mbarRing
	stageBytes, S    int64
	barOff, smemSize int64 // the barriers' offset from base; the kernel's dynamic shared memory
}

// checkBulkBlock says why blocks of threads cannot run a bulk-copy
// phase of kernel name (whole warps, a producer warp and bulkConsumers
// threads), or nil.
func checkBulkBlock(name string, threads int) error {
	if threads < 32+bulkConsumers || threads%32 != 0 {
		return fmt.Errorf("codegen: %s: a bulk-copy phase needs whole warps, a producer warp and %d consumer threads (blocks of %d threads)", name, bulkConsumers, threads)
	}
	return nil
}

// checkBulkStages says why S stages of stageBytes in smem bytes of
// shared memory cannot hold kernel name's ring (fewer than 2), or nil.
func checkBulkStages(name string, stageBytes, S, smem int) error {
	if S < 2 {
		return fmt.Errorf("codegen: %s: a stage of %d bytes leaves fewer than 2 stages in %d bytes", name, stageBytes, smem)
	}
	return nil
}

// finish ends the phase's kernel k: the return, its dynamic shared
// memory, one block per SM of grid, none at T = 0.
func (p bulkPhase) finish(k *Kernel, grid Expr) {
	p.b.Ret(nil)
	k.SharedBytes = int(p.smemSize)
	k.SkipIfZeroT = true
	k.Grid = grid1(grid)
	k.GridPerSM = true
}

// newBulkPhase starts the phase in b (blocks of threads, launched with
// launchRegs registers): it initialises the ring's barriers; extra bytes
// per stage follow the stages (a header each). The caller synchronises
// the block (sync) before the roles run.
func newBulkPhase(b *Builder, threads, launchRegs int, S, stageBytes, extra int64) bulkPhase {
	b.MinBlocksPerSM(1)
	b.MaxRegisters(launchRegs)
	p := bulkPhase{b: b, threads: threads, S: S, stageBytes: stageBytes}
	p.tid = b.ThreadIdx(ir.X)
	p.lane, p.warp = b.LaneWarp()
	p.base = b.SharedBase1024()
	p.barOff = S*stageBytes + S*extra
	p.smemSize = p.barOff + 16*S + 1024
	p.ring = mbarRing{bars: b.AddI(p.base, p.barOff), S: int(S)}
	p.ring.init(b, p.tid, 1, bulkConsumers, nil, nil, nil)
	return p
}

// sync synchronises the block after the barriers' initialisation (and
// whatever the caller loads before it) and reads the block's index and
// the grid's size, which each walks by.
func (p *bulkPhase) sync() {
	p.b.SyncThreads()
	p.block, p.nblocks = p.b.BlockIdx(ir.X), p.b.GridDim(ir.X)
}

// each walks the block's items i = block, block + nblocks, ... below
// end (i32), stages stages per item, carrying the ring's (stage, phase)
// and vars from init: ahead (nil: none) runs first for item i and returns
// the vars of the next item (what the producer loads one item ahead), then
// body runs stage s of item i on ring stage st of phase ph with the
// current vars.
func (p bulkPhase) each(end value.Value, stages int64, init []value.Value, ahead func(i value.Value, v []value.Value) []value.Value,
	body func(i value.Value, s int64, st, ph value.Value, v []value.Value)) {
	b := p.b
	vars := append([]value.Value{ir.Int32(0), ir.Int32(0)}, init...)
	b.Loop(p.block, end, p.nblocks, vars, func(i value.Value, v []value.Value) []value.Value {
		st, ph, cur := v[0], v[1], v[2:]
		next := cur
		if ahead != nil {
			next = ahead(i, cur)
		}
		for s := range stages {
			body(i, s, st, ph, cur)
			st, ph = ringNext(b, st, ph, int(p.S))
		}
		return append([]value.Value{st, ph}, next...)
	})
}

// stage is the shared address of stage st (i32).
func (p bulkPhase) stage(st value.Value) value.Value {
	return p.b.Add(p.base, p.b.MulI(st, p.stageBytes))
}

// sptr is the shared pointer of shared address addr (i32).
func (p bulkPhase) sptr(addr value.Value) value.Value {
	return p.b.IntToPtr(p.b.ZExt(addr, ir.I64), SPtr)
}

// arriveExpect emits lane 0's arrival on stage st's full barrier
// expecting n (i32) copies of copyBytes, then a warp barrier, so the
// lanes' copies come after it.
func (p bulkPhase) arriveExpect(st, n value.Value, copyBytes int64) {
	b := p.b
	b.If(b.ICmp(enum.IPredEQ, p.lane, ir.Int32(0)), func() {
		b.MbarArriveExpectTxReg(p.ring.full(b, st), b.MulI(n, copyBytes))
	})
	b.WarpSync()
}

// release emits a consumer thread's arrival on stage st's empty barrier
// once it is done with the stage. Every thread arrives (release
// semantics, PTX ISA "mbarrier.arrive"), so each one's reads of the stage
// and its header are ordered before the producer refills it; a warp
// barrier and lane 0's arrival order them too (bar.warp.sync orders the
// memory accesses of the warp's threads), but compute-sanitizer's
// racecheck does not follow that order and reports each refill of a
// stage as a hazard (docs/runs/run51/call3).
func (p bulkPhase) release(st value.Value) {
	p.b.MbarArrive(p.ring.empty(p.b, st))
}

// roles emits warp 0's producer and the consumers' body (ct: the
// consumer's index, 0..bulkConsumers-1), then the end of the phase: a
// barrier of the block and the invalidation of the ring's barriers.
func (p bulkPhase) roles(producer func(), consumer func(ct value.Value)) {
	b := p.b
	b.IfElse(b.ICmp(enum.IPredEQ, p.warp, ir.Int32(0)), producer, func() {
		first := int64(p.threads - bulkConsumers)
		b.If(b.ICmp(enum.IPredUGE, p.tid, ir.Int32(first)), func() { consumer(b.AddI(p.tid, -first)) })
	})
	b.SyncThreads()
	b.If(b.ICmp(enum.IPredEQ, p.tid, ir.Int32(0)), func() {
		for s := range 2 * p.S {
			b.MbarInval(b.AddI(p.ring.bars, 8*s))
		}
	})
}
