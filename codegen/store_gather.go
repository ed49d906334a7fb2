package codegen

import (
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"

	"github.com/mokc/mokc/ir"
)

// The gather beside FC1 (persistent bf16 forward, sm_90a): the FC1 phase's
// store warps gather its A rows themselves, so the kernel has no gather
// phase and FC1 starts right after the dispatch.
//
// The staged epilogue's three store warps (warps 1-3 of the producer
// warpgroup, storeWarps) copy one staging tile per work item and are
// otherwise idle. With GemmSpec.storeGatherK they also copy xs[row] =
// x[slot[row] / top-k] (the gather's rows, bit for bit) in chunks of
// storeChunkRows consecutive rows of one row tile of the work list:
// storeChunks per tile (the last ones of a short tile hold fewer
// rows or none), chunk c being part c mod storeChunks of tile c /
// storeChunks. Store warp j of block b (j = 0..2) takes chunks j·grid +
// b, then every 3·grid-th: the grid's warps take consecutive chunks, in
// the tile list's order, which is the order of FC1's work items. Each
// chunk: lane r < rows holds row r's token; the lanes copy the chunk's
// 16-byte units, units lane + 32i, four loads issued before their four
// stores; then the warp synchronises and lane 0 adds one to the tile's
// word of gather_done by a release add at gpu scope (as signalItem: the
// release waits for the warp's stores, in warps whose only other work is
// the staging tile). A short tile's empty chunks signal too, so every
// tile's word ends at storeChunks.
//
// The producer waits, before an item's loads, until its tile's word holds
// storeChunks (awaitCount: an acquire poll bounded by the wait limit),
// then fences the async proxy before its TMA loads of the rows (the
// pattern of the FC2 phase's wait for FC1, lower_phase_signals.go).
//
// Every producer's wait ends (the grid is resident:
// launch.Kernel.CoResident). While the store warps wait for their staging
// tile they copy their next chunk (storeGather.wait: a non-blocking
// mbarrier.test_wait, lane 0's result shared by the warp, one chunk per
// incomplete test), and after their last item they copy the chunks left.
// Their only other wait is the item ring's (gemm_task.go, itemRing: with
// QueueItems, at the start of item j, for item j+1's number), which needs
// nothing the gather gives: they start item j once item j-1's staging
// tile was full, so the consumers had every stage of item j-1, so the
// producer had issued them all and gone on to item j, whose first step,
// before its wait for the tile's chunks (waitGathered), stores item j+1's
// number (the producer loads no stage of a next item before it starts
// it). So each warp's chunks are all copied whatever the other roles
// wait for. A chunk holds the staging tile at most one chunk's copy (32
// KB) and its release after the consumers filled it, well within the
// consumers' next item. The counters are zeroed with the tile list, by
// the kernel that writes it, every run.

// storeGatherChunkBytes is the size of a chunk's rows (at most, with one
// row where a row is larger): 32 KB, a few µs of one warp's copies.
const storeGatherChunkBytes = 32 * 1024

// storeChunkRows is the rows of a chunk of the store warps' gather
// (storeGatherK): as many as hold at most storeGatherChunkBytes, at least
// one, at most 32 (the lanes that hold a chunk's tokens) and at most a
// row tile.
func (s GemmSpec) storeChunkRows() int {
	return max(1, min(32, s.Tile.BM, storeGatherChunkBytes/max(1, 2*s.K)))
}

// storeChunks is the chunks of a row tile of the store warps' gather.
func (s GemmSpec) storeChunks() int {
	r := s.storeChunkRows()
	return (s.Tile.BM + r - 1) / r
}

// sm90StoreGather: the sm_90a atom's store warps gather A's rows for a
// GEMM phase of a persistent kernel (the grid resident) over bf16
// dispatched rows with grouped K-major weights, not gathered by the
// producer nor quantized in the epilogue, whose plan has the staged
// epilogue and two consumer warpgroups, one block per SM and no cluster.
func sm90StoreGather(s GemmSpec) bool {
	if !s.phase || s.MX || s.B != BGrouped || s.GatherK > 0 || s.QuantizeC || s.Tile.Cluster > 1 || s.Tile.BlocksPerSM > 1 || s.BNMajor {
		return false
	}
	l, err := sm90Plan(s)
	return err == nil && l.smem.Staged && l.WG == 2
}

// waitGathered emits the producer's wait, before work item w's loads, for
// the chunks of w's row tile (spec.storeChunks), then a proxy fence that
// orders the rows they published before its TMA loads.
func (p gemmProducer) waitGathered(b *Builder, w gemmWork) {
	b.awaitTileRows(RoleGatherDone, w.tile, p.spec.storeChunks())
}

// storeGather is the store warps' walk over their chunks: the first chunk
// of the calling warp, the stride between its chunks and the grid's
// chunk count.
type storeGather struct {
	first, stride, total value.Value
}

// newStoreGather emits the chunk walk of store thread t (0..95) of block k.
func newStoreGather(b *Builder, k *sm90Block, t value.Value) storeGather {
	warp := b.UDiv(t, ir.Int32(32))
	return storeGather{
		first:  b.Add(b.Mul(warp, k.work.step), k.work.first),
		stride: b.MulI(k.work.step, 3),
		total:  b.MulI(k.work.tiles, int64(k.spec.storeChunks())),
	}
}

// next emits the copy of chunk c when c is below the count and returns the
// warp's chunk after it (c itself past the count).
func (g storeGather) next(b *Builder, s GemmSpec, c value.Value) value.Value {
	return b.IfVals(b.ICmp(enum.IPredSLT, c, g.total), []value.Value{c}, func() []value.Value {
		copyGatherChunk(b, s, c)
		return []value.Value{b.Add(c, g.stride)}
	})[0]
}

// wait emits the store warps' wait for the staging tile's phase of parity
// on bar, copying the warp's next chunk after each test that finds it
// incomplete (mbarTestWait, lane 0's result shared with the warp so that
// the warp stays converged), then the wait itself (each thread's acquire
// of the phase); it returns the warp's next chunk.
func (g storeGather) wait(b *Builder, s GemmSpec, bar, parity, c value.Value) value.Value {
	out := b.While([]value.Value{c}, func(v []value.Value) value.Value {
		return b.ICmp(enum.IPredEQ, b.WarpUniform(b.mbarTestWait(bar, parity)), ir.Int32(0))
	}, func(v []value.Value) []value.Value {
		return []value.Value{g.next(b, s, v[0])}
	})
	b.MbarWait(bar, parity)
	return out[0]
}

// drain emits the copies of the warp's chunks from c on.
func (g storeGather) drain(b *Builder, s GemmSpec, c value.Value) {
	b.While([]value.Value{c}, func(v []value.Value) value.Value {
		return b.ICmp(enum.IPredSLT, v[0], g.total)
	}, func(v []value.Value) []value.Value {
		return []value.Value{g.next(b, s, v[0])}
	})
}

// gatherUnroll is the 16-byte loads of a lane in flight in a chunk's copy.
const gatherUnroll = 4

// copyGatherChunk emits the calling warp's copy of chunk c (see the top of
// this file): the rows of its part of the tile from x by their tokens
// into A, then lane 0's release add to the tile's word of gather_done.
func copyGatherChunk(b *Builder, s GemmSpec, c value.Value) {
	lane, _ := b.LaneWarp()
	G, R, H := int64(s.storeChunks()), int64(s.storeChunkRows()), int64(s.K)
	units := H / 8 // 16-byte units of a row
	tile, part := b.UDiv(c, ir.Int32(G)), b.URem(c, ir.Int32(G))
	q := b.ByteOffset(b.Param("tiles"), b.MulI(b.Wide(tile), 8))
	e := b.LoadAt(ir.I32, q, 4)
	row0 := b.LoadAt(ir.I32, b.ByteOffsetC(q, 4), 4)
	end := b.LoadAt(ir.I32, b.elemPtr(b.Param("offsets"), b.AddI(e, 1), 4), 4)
	tileEnd := b.AddI(row0, int64(s.Tile.BM))
	end = b.Select(b.ICmp(enum.IPredSLT, end, tileEnd), end, tileEnd)
	r0 := b.Add(row0, b.MulI(part, R))
	n := b.Sub(end, r0) // the chunk's rows: clamped to 0..R
	n = b.Select(b.ICmp(enum.IPredSLT, n, ir.Int32(R)), n, ir.Int32(R))
	n = b.Select(b.ICmp(enum.IPredSGT, n, ir.Int32(0)), n, ir.Int32(0))
	token := b.IfVals(b.ICmp(enum.IPredSLT, lane, n), []value.Value{ir.Int32(0)}, func() []value.Value {
		slot := b.LoadAt(ir.I32, b.elemPtr(b.Param(RoleGatherSlot), b.Add(r0, lane), 4), 4)
		return []value.Value{b.UDiv(slot, ir.Int32(int64(s.storeGatherK)))}
	})[0]
	total := b.MulI(n, units)
	v4 := ir.Vec(4, ir.I32)
	b.Loop(ir.Int32(0), total, ir.Int32(32*gatherUnroll), nil, func(base value.Value, _ []value.Value) []value.Value {
		var ok, dst, val [gatherUnroll]value.Value
		for j := range gatherUnroll {
			u := b.Add(b.AddI(base, int64(32*j)), lane)
			ok[j] = b.ICmp(enum.IPredSLT, u, total)
			u = b.Select(ok[j], u, ir.Int32(0)) // unit 0 (row 0, a row of the chunk) where past the chunk: loaded, not stored
			r, col := b.UDiv(u, ir.Int32(units)), b.URem(u, ir.Int32(units))
			tk := b.shflIdx(token, r)
			val[j] = b.LoadAt(v4, b.rowPtr(b.Param(RoleGatherX), tk, col, H, 2), 16)
			dst[j] = b.rowPtr(b.Param("a"), b.Add(r0, r), col, H, 2)
		}
		for j := range gatherUnroll {
			b.If(ok[j], func() { b.StoreAt(val[j], dst[j], 16) })
		}
		return nil
	})
	b.warpSignal(RoleGatherDone, tile, 1)
}

// mbarTestWait is 1 when the phase of parity of the mbarrier at shared
// address bar has completed, else 0 (mbarrier.test_wait.parity: it does
// not suspend the thread, unlike try_wait; PTX ISA, "mbarrier.test_wait").
func (b *Builder) mbarTestWait(bar, parity value.Value) value.Value {
	return b.AsmCall(asmLines(
		"{",
		".reg .pred p;",
		"mbarrier.test_wait.parity.shared::cta.b64 p, [$1], $2;",
		"selp.u32 $0, 1, 0, p;",
		"}"), "=r,r,r", ir.I32, bar, parity)
}

// shflIdx is the i32 v of lane src (shfl.sync.idx.b32, all 32 lanes).
func (b *Builder) shflIdx(v, src value.Value) value.Value {
	return b.AsmCallNoMemory("shfl.sync.idx.b32 $0, $1, $2, 31, -1;", "=r,r,r", ir.I32, v, src)
}
