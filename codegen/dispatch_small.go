package codegen

import (
	llir "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"

	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/launch"
	"github.com/mokc/mokc/moe"
	"github.com/mokc/mokc/schedule"
)

// The dispatch of few tokens in one block. At decode sizes the routing
// ops init → count → scan → permute are four launches of a few threads'
// work each; moe_dispatch_small does the four in one block of utilThreads
// threads for T·K up to smallSlots (the PerOp lowering launches it for
// those T and the four kernels for larger T). Its results are the four
// kernels' to the bit: the same counts, offsets, work lists and error word,
// and the same permutation (each expert's rows in increasing slot order).
//
// Shared memory (dispatchSmallSmem): the blockScan scratch, the error
// word, per warp w and expert e the count of e among w's slots (then the
// warp's first row of e), and the validated ids (-1 for a slot without a
// valid expert). The slots are split among the 8 warps in contiguous
// ranges of whole 32-slot groups, so a warp's rows of an expert follow
// those of the warps before it and, inside a warp, the group order and
// the lane order (match.any.sync ranks) are the slot order.

const (
	// smallSlots bounds T·K for moe_dispatch_small: at most 8 groups of 32
	// slots per warp.
	smallSlots = 2048
	// smallExperts bounds E for moe_dispatch_small (its per-warp counts
	// take 32·E bytes of shared memory).
	smallExperts = 1024
	smallWarps   = utilThreads / 32
)

// dispatchSmallSmem is moe_dispatch_small's shared memory: the blockScan
// scratch (scanScratch of lists work lists), the error word at errAt, the
// per-warp counts [smallWarps][E] i32 at countsAt and the ids [smallSlots]
// i32 at idsAt.
func dispatchSmallSmem(E, lists int) (errAt, countsAt, idsAt, bytes int64) {
	errAt = int64(scanScratch(lists))
	countsAt = errAt + 16
	idsAt = countsAt + 4*smallWarps*int64(E)
	return errAt, countsAt, idsAt, idsAt + 4*smallSlots
}

// smallDispatchOps returns the init, count, scan and permute ops when ops
// begins with them, in that order, over the same buffers (the ids form of
// the routing: no route op between init and count).
func smallDispatchOps(ops []moe.Op) (moe.Init, moe.Count, moe.Scan, moe.Permute, bool) {
	var (
		in moe.Init
		c  moe.Count
		s  moe.Scan
		p  moe.Permute
	)
	if len(ops) < 4 {
		return in, c, s, p, false
	}
	var ok [4]bool
	in, ok[0] = ops[0].(moe.Init)
	c, ok[1] = ops[1].(moe.Count)
	s, ok[2] = ops[2].(moe.Scan)
	p, ok[3] = ops[3].(moe.Permute)
	if ok != [4]bool{true, true, true, true} {
		return in, c, s, p, false
	}
	same := c.Counts == in.Counts && c.Err == in.Err && s.Counts == c.Counts && p.IDs == c.IDs &&
		p.Offsets == s.Offsets && p.RowOfSlot == c.RowOfSlot
	return in, c, s, p, same
}

// smallDispatchTokens is the largest T moe_dispatch_small serves for top-k
// K and E experts, 0 when it serves none (E beyond smallExperts).
func smallDispatchTokens(d dims) int64 {
	if d.E > smallExperts {
		return 0
	}
	return smallSlots / int64(d.K)
}

// lowerSmallDispatch lowers init, count, scan and permute (smallDispatchOps)
// as moe_dispatch_small for T = 0 .. smallDispatchTokens and as the four
// kernels for larger T, except that with schedule.DispatchQueue
// moe_dispatch (dispatch_queue.go) takes the T where T·K > queueMinSlots.
// Where the lowering quantizes x per token
// (lw.tokenQuant) it runs moe_dispatch_small_quantize_x instead, which
// also quantizes x (tokenQuant.fused). It returns how many ops it
// lowered: 0 when ops do not begin with the four, or the layer is beyond
// moe_dispatch_small.
func (lw *perOp) lowerSmallDispatch(ops []moe.Op) (int, error) {
	in, c, s, p, ok := smallDispatchOps(ops)
	tmax := smallDispatchTokens(lw.d)
	if !ok || tmax < 1 {
		return 0, nil
	}
	small := []launch.TokenRange{{Min: 0, Max: tmax}}
	if tq := lw.tokenQuant; tq != nil {
		tq.fused = intersect(tq.tokens, small[0])
		for _, r := range tq.fused {
			small = without(small, r)
		}
	}
	if len(small) > 0 {
		lw.prog.Kernels = append(lw.prog.Kernels, emitDispatchSmall(lw.mod, lw.d, in, c, s, p, lw.lists, small, nil))
	}
	if tq := lw.tokenQuant; tq != nil && len(tq.fused) > 0 {
		lw.prog.Kernels = append(lw.prog.Kernels, emitDispatchSmall(lw.mod, lw.d, in, c, s, p, lw.lists, tq.fused, &tq.op))
	}
	large := []launch.TokenRange{{Min: tmax + 1, Max: launch.MaxTokens}}
	if lw.sched.Dispatch == schedule.DispatchQueue {
		qmin := max(tmax+1, queueMinSlots/int64(lw.d.K)+1)
		parts := dispatchParts(lw.d)
		lw.prog.Buffers = append(lw.prog.Buffers, parts.Plan())
		queue, qw := lw.workQueue(queueWords)
		lw.prog.Kernels = append(lw.prog.Kernels, emitDispatchQueue(lw.mod, lw.d, in, c, s, p, lw.lists,
			[]launch.TokenRange{{Min: qmin, Max: launch.MaxTokens}}, parts, queue, qw))
		if qmin == tmax+1 {
			return 4, nil
		}
		large = []launch.TokenRange{{Min: tmax + 1, Max: qmin - 1}}
	}
	for _, op := range ops[:4] {
		if err := lw.lowerFor(op, large); err != nil {
			return 0, err
		}
	}
	return 4, nil
}

// lowerFor lowers op (lower) with its kernels launched only for tokens.
func (lw *perOp) lowerFor(op moe.Op, tokens []launch.TokenRange) error {
	n := len(lw.prog.Kernels)
	if err := lw.lowerOp(op); err != nil {
		return err
	}
	for i := n; i < len(lw.prog.Kernels); i++ {
		lw.prog.Kernels[i].Tokens = tokens
	}
	return nil
}

// emitDispatchSmall is moe_dispatch_small (see the top of this file),
// launched for tokens (within T = 0 .. smallDispatchTokens): one block of
// utilThreads threads. With q (the quantization of x per token, whose
// token rows the gathering MXFP8 FC1 reads: lowerMXGatheredGEMM) it is
// moe_dispatch_small_quantize_x: blocks 1.. run q's kernel beside the
// dispatch (thread idx of emitQuantize at block 1 + idx/utilThreads), so
// the quantization costs no launch of its own.
func emitDispatchSmall(m *ir.Module, d dims, in moe.Init, c moe.Count, s moe.Scan, p moe.Permute, tiles []tileList, tokens []launch.TokenRange, q *moe.Quantize) Kernel {
	extra := append([]moe.Operand{
		{Role: "ids", Buffer: c.IDs, Access: moe.Read},
		{Role: "row_of_slot", Buffer: c.RowOfSlot, Access: moe.Write},
		{Role: "offsets", Buffer: s.Offsets, Access: moe.Write},
		{Role: "src_slot", Buffer: p.SrcSlot, Access: moe.Write},
	}, tileListOperands(tiles)...)
	name := "moe_dispatch_small"
	if q != nil {
		name += "_" + q.Name()
		extra = append(extra, q.Operands()...)
	}
	b, k := opKernelNamed(m, name, in, utilThreads, true, extra...)
	k.Grid = grid1(Const(1))
	var done *llir.Block // with q: the quantizing blocks' and the dispatch's end
	if q != nil {
		n8 := int64(q.K / 8)
		rowsX := q.X.Shape[0]
		if rowsX.A != 1 || rowsX.B != 0 {
			panic("codegen: moe_dispatch_small quantizes token rows ([T, K]) only")
		}
		blk := b.BlockIdx(ir.X)
		qb, dispatch := b.NewBlock("quantize"), b.NewBlock("dispatch")
		done = b.NewBlock("done")
		b.CondBr(b.ICmp(enum.IPredNE, blk, ir.Int32(0)), qb, dispatch)
		b.SetBlock(qb)
		b.quantizeThreadIf(*q, b.Add(b.MulI(b.AddI(blk, -1), utilThreads), b.ThreadIdx(ir.X)))
		b.Br(done) // one return, so that it can be a phase of the persistent kernel (shape)
		b.SetBlock(dispatch)
		k.Grid = grid1(Expr{A: n8, B: utilThreads, D: utilThreads, Min: 1}) // 1 + ceil(T*K/8/utilThreads)
	}
	E, K := int64(d.E), int64(d.K)
	errAt, countsAt, idsAt, bytes := dispatchSmallSmem(d.E, len(tiles))
	smem := b.DynSmem()
	lane, warp := b.LaneWarp()
	tid := b.ThreadIdx(ir.X)
	tk := b.MulI(b.Param("T"), K)
	// Warp w owns slots [w*R, (w+1)*R): R, whole 32-slot groups.
	R := b.MulI(b.UDiv(b.AddI(tk, 32*smallWarps-1), ir.Int32(32*smallWarps)), 32)
	sw := slotWarps{smem: smem, E: E, errAt: errAt, countsAt: countsAt, idsAt: idsAt,
		first: b.Mul(warp, R), R: R, tk: tk, lane: lane, warp: warp}
	sw.zero(b, tid)
	sw.count(b, true)
	b.SyncThreads()

	// Scan (moe_scan): per expert the warps' counts become each warp's
	// first row of the expert within it, the totals the offsets and the
	// work lists; thread 0 also writes the error word.
	b.scanExperts(smem, tid, E, tiles, func(e value.Value) value.Value {
		run := sw.warpPrefix(b, e, ir.Int32(0), true)
		b.StoreAt(run, b.elemPtr(b.Param("counts"), e, 4), 4)
		return run
	}, func(e, off value.Value) {
		for w := int64(0); w < smallWarps; w++ {
			at := sw.warpCount(b, ir.Int32(w), e)
			b.StoreAt(b.Add(b.LoadAt(ir.I32, at, 4), off), at, 4)
		}
	}, func() {
		b.StoreAt(b.LoadVolatileAt(ir.I32, sw.sp(b, errAt, ir.Int32(0)), 4), b.Param("err"), 4)
	})
	b.SyncThreads()
	sw.permute(b)
	if done != nil {
		b.Br(done)
		b.SetBlock(done)
	}
	b.Ret(nil)
	k.SharedBytes = int(bytes)
	k.Tokens = tokens
	return k
}

// slotWarps is the counting and ranking of a run of routed slots by the
// smallWarps warps of a block, shared by moe_dispatch_small and
// moe_dispatch: the calling warp owns slots [first, first+R) below tk (R
// whole 32-slot groups; warp w's range follows warp w-1's), and the block's
// shared memory at smem holds the error word at errAt, the count of expert
// e among warp w's slots at countsAt + 4(w*E+e) (then, after a scan, the
// warp's next row of e) and each slot's validated id at idsAt +
// 4(slot-base) (base: the run's first slot; nil for 0).
type slotWarps struct {
	smem                   value.Value
	E                      int64
	errAt, countsAt, idsAt int64
	first, R, tk, base     value.Value
	lane, warp             value.Value
	// groups, when nonzero, is R/32 as a constant: count loads the ids
	// of all the warp's groups before it uses any, so that their
	// latencies overlap (moe_dispatch's chunks); 0 loops over the groups.
	groups int
}

// sp is the i32 at shared byte offset off + 4i.
func (sw slotWarps) sp(b *Builder, off int64, i value.Value) value.Value {
	return b.Cast(b.ByteOffset(b.ByteOffsetC(sw.smem, off), b.MulI(b.Wide(i), 4)), ir.I32)
}

// warpCount is warp w's count (or next row) of expert e in shared memory.
func (sw slotWarps) warpCount(b *Builder, w, e value.Value) value.Value {
	return sw.sp(b, sw.countsAt, b.Add(b.MulI(w, sw.E), e))
}

// idAt is slot's validated id in shared memory.
func (sw slotWarps) idAt(b *Builder, slot value.Value) value.Value {
	if sw.base != nil {
		slot = b.Sub(slot, sw.base)
	}
	return sw.sp(b, sw.idsAt, slot)
}

// warpPrefix walks the warps' counts of expert e in warp order from
// start: with store, each count becomes start plus the counts of the warps
// before it (the warp's first row of e); it returns start plus all of them.
func (sw slotWarps) warpPrefix(b *Builder, e, start value.Value, store bool) value.Value {
	run := start
	for w := int64(0); w < smallWarps; w++ {
		at := sw.warpCount(b, ir.Int32(w), e)
		n := b.LoadAt(ir.I32, at, 4)
		if store {
			b.StoreAt(run, at, 4)
		}
		run = b.Add(run, n)
	}
	return run
}

// zero zeroes every warp's counts and the error word (thread tid of the
// block's utilThreads), then synchronises the block.
func (sw slotWarps) zero(b *Builder, tid value.Value) {
	b.Loop(tid, ir.Int32(smallWarps*sw.E), ir.Int32(utilThreads), nil, func(i value.Value, _ []value.Value) []value.Value {
		b.StoreAt(ir.Int32(0), sw.sp(b, sw.countsAt, i), 4)
		return nil
	})
	b.If(b.ICmp(enum.IPredEQ, tid, ir.Int32(0)), func() { b.StoreAt(ir.Int32(0), sw.sp(b, sw.errAt, ir.Int32(0)), 4) })
	b.SyncThreads()
}

// count is moe_count over the warp's slots: each slot's id is validated
// (out of range: ErrBadExpertID into the shared error word, then treated
// as -1) and kept in shared memory, and counted for the warp; with
// unrouted, a slot without a valid expert also gets row_of_slot -1.
func (sw slotWarps) count(b *Builder, unrouted bool) {
	E := sw.E
	one := func(slot, id value.Value) {
		bad := b.Or(b.ICmp(enum.IPredSLT, id, ir.Int32(-1)), b.ICmp(enum.IPredSGE, id, ir.Int32(E)))
		b.If(bad, func() { b.atomicOr(sw.sp(b, sw.errAt, ir.Int32(0)), ir.Int32(ErrBadExpertID)) })
		valid := b.And(b.ICmp(enum.IPredSGE, id, ir.Int32(0)), b.ICmp(enum.IPredSLT, id, ir.Int32(E)))
		b.StoreAt(b.Select(valid, id, ir.Int32(-1)), sw.idAt(b, slot), 4)
		if !unrouted {
			b.If(valid, func() { b.AtomicAdd(sw.warpCount(b, sw.warp, id), ir.Int32(1)) })
			return
		}
		b.IfElse(valid, func() {
			b.AtomicAdd(sw.warpCount(b, sw.warp, id), ir.Int32(1))
		}, func() {
			b.StoreAt(ir.Int32(-1), b.elemPtr(b.Param("row_of_slot"), slot, 4), 4)
		})
	}
	if sw.groups > 0 {
		slots, ids := make([]value.Value, sw.groups), make([]value.Value, sw.groups)
		for g := range slots {
			slots[g] = b.Add(b.AddI(sw.first, int64(32*g)), sw.lane)
			ids[g] = b.IfVals(b.ICmp(enum.IPredSLT, slots[g], sw.tk), []value.Value{ir.Int32(-1)}, func() []value.Value {
				return []value.Value{b.LoadAt(ir.I32, b.elemPtr(b.Param("ids"), slots[g], 4), 4)}
			})[0]
		}
		for g := range slots {
			b.If(b.ICmp(enum.IPredSLT, slots[g], sw.tk), func() { one(slots[g], ids[g]) })
		}
		return
	}
	b.Loop(ir.Int32(0), sw.R, ir.Int32(32), nil, func(g value.Value, _ []value.Value) []value.Value {
		slot := b.Add(b.Add(sw.first, g), sw.lane)
		b.If(b.ICmp(enum.IPredSLT, slot, sw.tk), func() {
			one(slot, b.LoadAt(ir.I32, b.elemPtr(b.Param("ids"), slot, 4), 4))
		})
		return nil
	})
}

// permute is moe_permute over the warp's slots, once every warp count
// holds the warp's first row of its expert: each warp walks its slots in
// order; a slot's row is its warp's next row of its expert plus its rank
// among the group's lanes of the same expert; the highest of those lanes
// moves the warp's next row past them.
func (sw slotWarps) permute(b *Builder) {
	lane, warp := sw.lane, sw.warp
	ltMask := b.Sub(b.Shl(ir.Int32(1), lane), ir.Int32(1))
	b.Loop(ir.Int32(0), sw.R, ir.Int32(32), nil, func(g value.Value, _ []value.Value) []value.Value {
		slot := b.Add(b.Add(sw.first, g), lane)
		inRange := b.ICmp(enum.IPredSLT, slot, sw.tk)
		id := b.IfVals(inRange, []value.Value{ir.Int32(-1)}, func() []value.Value {
			return []value.Value{b.LoadAt(ir.I32, sw.idAt(b, slot), 4)}
		})[0]
		peers := b.matchAny(id)
		valid := b.ICmp(enum.IPredSGE, id, ir.Int32(0))
		next := b.IfVals(valid, []value.Value{ir.Int32(0)}, func() []value.Value {
			return []value.Value{b.LoadAt(ir.I32, sw.warpCount(b, warp, id), 4)}
		})[0]
		b.SyncWarp(ir.FullMask)
		b.If(valid, func() {
			row := b.Add(next, b.Popc(b.And(peers, ltMask)))
			b.StoreAt(row, b.elemPtr(b.Param("row_of_slot"), slot, 4), 4)
			b.StoreAt(slot, b.elemPtr(b.Param("src_slot"), row, 4), 4)
			last := b.ICmp(enum.IPredEQ, b.LShr(peers, lane), ir.Int32(1)) // no higher lane of the expert
			b.If(last, func() { b.StoreAt(b.Add(next, b.Popc(peers)), sw.warpCount(b, warp, id), 4) })
		})
		b.SyncWarp(ir.FullMask)
		return nil
	})
}

// writeTileLists writes expert e's entries of the GEMM work lists (as
// emitScan): for list i of bms[i]-row tiles, n[i] tiles (expert, first
// row) from entry base[i] + excl[i], the rows from off in steps of bms[i];
// a list with counters of its row tiles (tileList.done, tileList.gathered)
// gets each tile's zeroed.
func (b *Builder) writeTileLists(tiles []tileList, bms []int64, n, excl, base []value.Value, e, off value.Value) {
	for li, bm := range bms {
		first := b.Add(base[li], excl[li])
		list := b.Param(tiles[li].tiles.Name)
		b.Loop(ir.Int32(0), n[li], ir.Int32(1), nil, func(j value.Value, _ []value.Value) []value.Value {
			q := b.elemPtr(list, b.MulI(b.Add(first, j), 2), 4)
			b.StoreAt(e, q, 4)
			b.StoreAt(b.Add(off, b.MulI(j, bm)), b.ByteOffsetC(q, 4), 4)
			for _, d := range tiles[li].counters() {
				b.StoreAt(ir.Int32(0), b.elemPtr(b.Param(d.Name), b.Add(first, j), 4), 4)
			}
			return nil
		})
	}
}

// matchAny is match.any.sync.b32 of the i32 v over the full warp: the mask
// of the lanes holding the same value (PTX ISA "Parallel Synchronization
// and Communication Instructions: match.sync", sm_70).
func (b *Builder) matchAny(v value.Value) value.Value {
	return b.AsmCall("match.any.sync.b32 $0, $1, 0xffffffff;", "=r,r", ir.I32, v)
}
