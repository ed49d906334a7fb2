package codegen

import (
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"

	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/launch"
	"github.com/mokc/mokc/moe"
)

// The dispatch past decode sizes as one kernel with a work queue
// (schedule.DispatchQueue; docs/megakernel.md, step 1). moe_dispatch does
// what moe_init, moe_count, moe_scan and moe_permute do, to the byte, as
// numbered work items over chunks of queueChunk routed slots (n chunks of
// the T·K slots):
//
//	items 0 .. n-1    count chunk i: per expert its valid slots (the
//	                  warps' counts in shared memory, as moe_dispatch_small
//	                  counts) into dispatch_parts[i][e], the chunk's error
//	                  bits into dispatch_parts[i][E], row_of_slot -1 for a
//	                  slot without a valid expert;
//	item n            the scan, once every count item is done: counts,
//	                  offsets and the GEMM work lists as moe_scan writes
//	                  them, the error word, and each dispatch_parts[i][e]
//	                  replaced by chunk i's first row of expert e (offsets[e]
//	                  plus the counts of e in the chunks before i);
//	items n+1 .. 2n   permute chunk i-n-1: the chunk counted again per warp
//	                  (while the scan runs), then, once the scan is done,
//	                  each slot's row as moe_dispatch_small ranks it from
//	                  the chunk's first rows.
//
// An expert's rows are thus in increasing slot order (chunk, warp, 32-slot
// group, lane), moe_permute's order. A block takes the next item number
// from the queue word (atomic add), so items start in increasing order
// and an item only waits for items with smaller numbers, which blocks
// already running hold: no deadlock however many blocks are resident. The
// grid is n + 1 blocks. Four words of launch.BufWorkQueue serve the kernel:
// the queue, the count items done, the scan done, and the blocks that
// left; the last block to leave zeroes the four (every other block has
// taken its last number by then), so the next run starts from zero. A
// count or scan item publishes with bar.sync, fence.acq_rel.gpu and a
// release add (or store) by thread 0; a waiting item's thread 0 spins with
// ld.acquire.gpu, fences and releases the block with bar.sync (PTX ISA,
// "Memory Consistency Model": release and acquire patterns).

// queueChunk is the routed slots of one count or permute item of
// moe_dispatch: smallWarps warps of 8 groups of 32 slots, the slots
// moe_dispatch_small's block counts.
const queueChunk = smallSlots

// queueMinSlots is the most routed slots (T·K) at which the four kernels
// run rather than moe_dispatch. Measured on the H200 (docs/perf.md,
// dispatch v2: qwen3-30b-a3b's forward, back to back): with moe_dispatch
// the forward was 4 µs slower at T·K = 2400 (two chunks: its three
// dependent rounds of items took 8.4 µs against 6.7 for the four short
// kernels), 0-1 µs slower at 8192, and 4 and 12 µs faster at 16,384 and
// 32,768, where moe_permute, each of its E blocks reading every id, grows
// with T·K.
const queueMinSlots = 4 * queueChunk

// The words of moe_dispatch in launch.BufWorkQueue, from its first.
const (
	queueNext   = iota // the next item number to take
	queueCounts        // count items done
	queueScan          // 1 once the scan is done
	queueLeft          // blocks that left the loop
	queueWords
)

// kernelQueue is one kernel's words in launch.BufWorkQueue: n u32 words
// from word first of its "queue" parameter (perOp.workQueue gives them).
type kernelQueue struct{ first, n int64 }

// word is the global address of the kernel's word i.
func (q kernelQueue) word(b *Builder, i int64) value.Value {
	return b.Cast(b.ByteOffsetC(b.Param("queue"), 4*(q.first+i)), ir.I32)
}

// leave emits, for the calling thread (one per block, once it has taken
// its last item number and passed its last wait), the count of the blocks
// done on word left by an acq_rel add, and the zeroing of the n words by
// the last block of the grid, so the next launch starts from zero: every
// other block's takes come before its add. grid is gridDim.x (nil: read
// after the add).
func (q kernelQueue) leave(b *Builder, left int64, grid value.Value) {
	done := b.AtomicAddAcqRel(q.word(b, left), ir.Int32(1), ir.ScopeGPU)
	if grid == nil {
		grid = b.GridDim(ir.X)
	}
	b.If(b.ICmp(enum.IPredEQ, done, b.AddI(grid, -1)), func() {
		for i := range q.n {
			b.StoreAt(ir.Int32(0), q.word(b, i), 4)
		}
	})
}

// dispatchParts is moe_dispatch's scratch of per-chunk counts (then first
// rows): i32 [ceil(T·K/queueChunk), E+1].
func dispatchParts(d dims) *moe.Buffer {
	return &moe.Buffer{Name: "dispatch_parts", Kind: moe.Scratch, DType: moe.I32,
		Shape: []launch.Expr{{A: int64(d.K), D: queueChunk, Min: 1}, launch.Const(int64(d.E + 1))},
		Doc:   "moe_dispatch: per 2048-slot chunk and expert the chunk's count of the expert, then its first row of it; the chunk's error bits at [chunk][E]"}
}

// workQueue returns the program's launch.BufWorkQueue buffer with n more
// words for one kernel and those words, adding the buffer to the plan on
// first use.
func (lw *perOp) workQueue(n int64) (*moe.Buffer, kernelQueue) {
	pb := lw.prog.Buffer(launch.BufWorkQueue)
	var first int64
	if pb != nil {
		first = pb.Shape[0].Eval(0)
	}
	buf := &moe.Buffer{Name: launch.BufWorkQueue, Kind: moe.Scratch, DType: moe.U32,
		Shape: []launch.Expr{launch.Const(first + n)},
		Doc:   "work queues and dependency counters of the queue-scheduled kernels (launch.BufWorkQueue: zeroed at allocation, left zero by every run)"}
	if pb != nil {
		*pb = buf.Plan()
	} else {
		lw.prog.Buffers = append(lw.prog.Buffers, buf.Plan())
	}
	return buf, kernelQueue{first: first, n: n}
}

// emitDispatchQueue is moe_dispatch (see the top of this file), launched
// for tokens: n+1 blocks of utilThreads threads; qw are its queueWords
// words in queue (launch.BufWorkQueue) and parts its dispatchParts.
func emitDispatchQueue(m *ir.Module, d dims, in moe.Init, c moe.Count, s moe.Scan, p moe.Permute, tiles []tileList, tokens []launch.TokenRange, parts, queue *moe.Buffer, qw kernelQueue) Kernel {
	extra := append([]moe.Operand{
		{Role: "ids", Buffer: c.IDs, Access: moe.Read},
		{Role: "row_of_slot", Buffer: c.RowOfSlot, Access: moe.Write},
		{Role: "offsets", Buffer: s.Offsets, Access: moe.Write},
		{Role: "src_slot", Buffer: p.SrcSlot, Access: moe.Write},
	}, tileListOperands(tiles)...)
	extra = append(extra, moe.Operand{Role: "parts", Buffer: parts, Access: moe.ReadWrite},
		moe.Operand{Role: "queue", Buffer: queue, Access: moe.ReadWrite})
	b, k := opKernelNamed(m, "moe_dispatch", in, utilThreads, true, extra...)
	E, K := int64(d.E), int64(d.K)
	errAt, countsAt, idsAt, bytes := dispatchSmallSmem(d.E, len(tiles))
	itemAt := bytes // the item number thread 0 took, for the block
	smem := b.DynSmem()
	lane, warp := b.LaneWarp()
	tid := b.ThreadIdx(ir.X)
	lead := b.ICmp(enum.IPredEQ, tid, ir.Int32(0))
	tk := b.MulI(b.Param("T"), K)
	n := b.UDiv(b.AddI(tk, queueChunk-1), ir.Int32(queueChunk))
	items := b.AddI(b.MulI(n, 2), 1)
	word := func(i int64) value.Value { return qw.word(b, i) }
	part := func(ci, e value.Value) value.Value {
		return b.elemPtr(b.Param("parts"), b.Add(b.MulI(ci, E+1), e), 4)
	}
	chunk := func(ci value.Value) slotWarps {
		base := b.MulI(ci, queueChunk)
		return slotWarps{smem: smem, E: E, errAt: errAt, countsAt: countsAt, idsAt: idsAt,
			first: b.Add(base, b.MulI(warp, queueChunk/smallWarps)), R: ir.Int32(queueChunk / smallWarps), tk: tk, base: base, lane: lane, warp: warp,
			groups: queueChunk / smallWarps / 32}
	}
	// publish makes the block's writes visible before thread 0 signals.
	publish := func(signal func()) {
		b.SyncThreads()
		b.If(lead, func() {
			b.FenceAcqRel(ir.ScopeGPU)
			signal()
		})
	}
	// await holds the block until word i reaches at least target.
	await := func(i int64, target value.Value) {
		b.If(lead, func() {
			b.Kernel.Loop(func() value.Value {
				return b.ICmp(enum.IPredULT, b.LoadAcquire(word(i), ir.ScopeGPU), target)
			})
			b.FenceAcqRel(ir.ScopeGPU)
		})
		b.SyncThreads()
	}
	take := func() value.Value {
		b.If(lead, func() {
			b.StoreAt(b.AtomicAdd(word(queueNext), ir.Int32(1)), b.ByteOffsetC(smem, itemAt), 4)
		})
		b.SyncThreads()
		it := b.LoadVolatileAt(ir.I32, b.ByteOffsetC(smem, itemAt), 4)
		b.SyncThreads()
		return it
	}

	countItem := func(ci value.Value) {
		sw := chunk(ci)
		sw.zero(b, tid)
		sw.count(b, true)
		b.SyncThreads()
		b.Loop(tid, ir.Int32(E), ir.Int32(utilThreads), nil, func(e value.Value, _ []value.Value) []value.Value {
			b.StoreAt(sw.warpPrefix(b, e, ir.Int32(0), false), part(ci, e), 4)
			return nil
		})
		b.If(lead, func() {
			b.StoreAt(b.LoadVolatileAt(ir.I32, sw.sp(b, errAt, ir.Int32(0)), 4), part(ci, ir.Int32(E)), 4)
		})
		publish(func() { b.RedAddRelease(word(queueCounts), ir.Int32(1), ir.ScopeGPU) })
	}

	scanItem := func() {
		await(queueCounts, n)
		b.scanExperts(smem, tid, E, tiles, func(e value.Value) value.Value {
			sum := b.reduceParts(n, func(ci value.Value) value.Value { return part(ci, e) }, b.Add)
			b.StoreAt(sum, b.elemPtr(b.Param("counts"), e, 4), 4)
			return sum
		}, func(e, off value.Value) {
			b.firstRows(n, off, func(ci value.Value) value.Value { return part(ci, e) })
		}, func() {
			errs := b.reduceParts(n, func(ci value.Value) value.Value { return part(ci, ir.Int32(E)) }, b.Or)
			b.StoreAt(errs, b.Param("err"), 4)
		})
		publish(func() { b.StoreRelease(ir.Int32(1), word(queueScan), ir.ScopeGPU) })
	}

	permuteItem := func(ci value.Value) {
		// The chunk's per-warp counts do not depend on the scan: they are
		// taken while it runs.
		sw := chunk(ci)
		sw.zero(b, tid)
		sw.count(b, false)
		await(queueScan, ir.Int32(1))
		// Warp w's first row of expert e: the chunk's first row of e and
		// the counts of e of the warps before w.
		b.Loop(tid, ir.Int32(E), ir.Int32(utilThreads), nil, func(e value.Value, _ []value.Value) []value.Value {
			sw.warpPrefix(b, e, b.LoadAt(ir.I32, part(ci, e), 4), true)
			return nil
		})
		b.SyncThreads()
		sw.permute(b)
	}

	b.While([]value.Value{take()}, func(v []value.Value) value.Value {
		return b.ICmp(enum.IPredULT, v[0], items)
	}, func(v []value.Value) []value.Value {
		it := v[0]
		b.IfElse(b.ICmp(enum.IPredULT, it, n), func() { countItem(it) }, func() {
			b.IfElse(b.ICmp(enum.IPredEQ, it, n), scanItem, func() { permuteItem(b.Sub(it, b.AddI(n, 1))) })
		})
		return []value.Value{take()}
	})
	// The last block to leave zeroes the words for the next run.
	b.If(lead, func() { qw.leave(b, queueLeft, nil) })
	b.Ret(nil)
	k.SharedBytes = int(bytes) + 16
	k.Grid = grid1(launch.Expr{A: K, B: queueChunk, D: queueChunk, Min: 1}) // n + 1
	k.Tokens = tokens
	return k
}

// reduceParts folds op (b.Add, b.Or) over the i32 at at(ci) for chunks
// ci = 0 .. n-1 from 0, loaded sumBatch at a time so that their latencies
// overlap (loadParts gives 0 past n).
func (b *Builder) reduceParts(n value.Value, at func(ci value.Value) value.Value, op func(x, y value.Value) value.Value) value.Value {
	res := b.Loop(ir.Int32(0), n, ir.Int32(sumBatch), []value.Value{ir.Int32(0)}, func(c0 value.Value, v []value.Value) []value.Value {
		acc := v[0]
		for _, x := range b.loadParts(n, c0, at) {
			acc = op(acc, x)
		}
		return []value.Value{acc}
	})
	return res[0]
}

// firstRows replaces the counts at at(ci), ci = 0 .. n-1, by their
// exclusive prefix from first: chunk ci's first row.
func (b *Builder) firstRows(n, first value.Value, at func(ci value.Value) value.Value) {
	b.Loop(ir.Int32(0), n, ir.Int32(sumBatch), []value.Value{first}, func(c0 value.Value, v []value.Value) []value.Value {
		run := v[0]
		for j, x := range b.loadParts(n, c0, at) {
			ci := b.AddI(c0, int64(j))
			row := run
			b.If(b.ICmp(enum.IPredSLT, ci, n), func() { b.StoreAt(row, at(ci), 4) })
			run = b.Add(run, x)
		}
		return []value.Value{run}
	})
}

// sumBatch is how many chunks' words reduceParts and firstRows load at once.
const sumBatch = 8

// loadParts loads the sumBatch i32 at at(c0+j), 0 past n.
func (b *Builder) loadParts(n, c0 value.Value, at func(ci value.Value) value.Value) []value.Value {
	xs := make([]value.Value, sumBatch)
	for j := range xs {
		ci := b.AddI(c0, int64(j))
		xs[j] = b.IfVals(b.ICmp(enum.IPredSLT, ci, n), []value.Value{ir.Int32(0)}, func() []value.Value {
			return []value.Value{b.LoadAt(ir.I32, at(ci), 4)}
		})[0]
	}
	return xs
}
