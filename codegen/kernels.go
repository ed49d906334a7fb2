package codegen

import (
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"

	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/moe"
)

// dims are the compile-time sizes of the routing and dispatch kernels:
// hidden size, intermediate size, experts, top-k; and the work of a block
// of the gather and the combine, which the persistent lowering raises
// (newPerOp): their blocks run there as virtual blocks, one per SM at a
// time, so each one's memory latencies are not hidden by others'.
type dims struct {
	H, I, E, K int
	// gatherPerWarp: dispatched rows per warp of moe_gather (0 or 1: one).
	gatherPerWarp int
	// combinePerBlock: tokens per block of moe_combine (0 or 1: one).
	combinePerBlock int
	// combineGradPerBlock: the most tokens per block of moe_combine_grad
	// (0 or 1: one; combineGradTokens).
	combineGradPerBlock int
	// phaseRegs: under the persistent lowering, the registers per thread
	// of its kernels' largest block (the fewest any phase has); 0 per-op.
	phaseRegs int
	// actGradThreads: the most threads of a block of moe_act_grad (at most
	// utilThreads), which then runs several rows per block
	// (actGradShape); 0: one row per block of utilThreads.
	actGradThreads int
}

// The persistent lowering's work per virtual block of the gather and
// the combine (dims): a thread's loads for all of it are issued together.
const (
	persistGatherPerWarp   = 3
	persistCombinePerBlock = 2
	persistActGradRows     = 4 // rows per group of threads of moe_act_grad where they fit (actGradShape)
	persistActGradRowsMin  = 2 // rows per group of moe_act_grad where persistActGradRows do not
	persistCombineGradRows = 2 // tokens per block of moe_combine_grad
)

const (
	utilThreads   = 256 // threads of the routing / dispatch / combine kernels
	permuteSlots  = 8   // slots per thread per pass of moe_permute
	gatherRows    = 8   // warps per block of moe_gather (one row at a time each)
	gatherBatch   = 4   // 16-byte chunks a lane of moe_gather loads before it stores them
	routeTokens   = 8   // tokens per block of moe_route (one warp each)
	maxTileLists  = 3   // GEMM work lists (distinct row tiles) a program may have
	countPerBlock = utilThreads
)

// scanScratch is the shared memory of scanExperts' blockScan over a row
// count and the tile counts of lists work lists: 8 warps' i32 per value,
// and at least that of two lists.
func scanScratch(lists int) int {
	return 8 * 4 * max(1+lists, 3)
}

// opKernel starts the PerOp kernel "moe_"+op.Name() with threads per
// block: one global pointer parameter per operand of op, then per extra
// operand (the lowering's scratch), named by role and bound to the
// operand's buffer, then, with withT, the i32 token count "T". It returns
// the builder and the kernel's plan entry (name, block and parameters; the
// caller sets the grid and shared memory).
func opKernel(m *ir.Module, op moe.Op, threads int, withT bool, extra ...moe.Operand) (*Builder, Kernel) {
	return opKernelNamed(m, "moe_"+op.Name(), op, threads, withT, extra...)
}

// opKernelNamed is opKernel for a kernel named name: the second kernel of
// an op that lowers to two.
func opKernelNamed(m *ir.Module, name string, op moe.Op, threads int, withT bool, extra ...moe.Operand) (*Builder, Kernel) {
	k := Kernel{Name: name, Block: threads}
	var ps []ir.Param
	for _, o := range append(op.Operands(), extra...) {
		ps = append(ps, ir.P(o.Role, GPtr))
		k.Params = append(k.Params, Param{Name: o.Role, Type: ParamPtr, Size: 8, Buffer: o.Buffer.Name})
	}
	if withT {
		v := PerT(1, 0)
		ps = append(ps, ir.P("T", ir.I32))
		k.Params = append(k.Params, Param{Name: "T", Type: ParamI32, Size: 4, Value: &v})
	}
	return NewKernel(m, k.Name, threads, ps...), k
}

// grid1 is a grid of x blocks.
func grid1(x Expr) [3]Expr { return [3]Expr{x, Const(1), Const(1)} }

// elemPtr is base + i*size bytes.
func (b *Builder) elemPtr(base, i value.Value, size int64) value.Value {
	return b.ByteOffset(base, b.MulI(b.Wide(i), size))
}

// emitInit: zero counts[E] and the error word. Grid 1, 256 threads.
func emitInit(m *ir.Module, d dims, op moe.Init) Kernel {
	b, k := opKernel(m, op, utilThreads, false)
	tid := b.ThreadIdx(ir.X)
	b.Loop(tid, ir.Int32(int64(d.E)), ir.Int32(utilThreads), nil, func(i value.Value, _ []value.Value) []value.Value {
		b.StoreAt(ir.Int32(0), b.elemPtr(b.Param("counts"), i, 4), 4)
		return nil
	})
	b.If(b.ICmp(enum.IPredEQ, tid, ir.Int32(0)), func() { b.StoreAt(ir.Int32(0), b.Param("err"), 4) })
	b.Ret(nil)
	k.Grid = grid1(Const(1))
	return k
}

// emitRoute: dense routing map [T, E] u8 + probs [T, E] f32 → ids [T, K]
// i32 (increasing expert order, -1 padding) and weights [T, K] f32 (0
// padding). A row with more than K routes keeps the first K and sets
// ErrTooManyRoute. One warp per token.
func emitRoute(m *ir.Module, d dims, op moe.Route) Kernel {
	b, k := opKernel(m, op, utilThreads, true)
	lane, warp := b.LaneWarp()
	t := b.Add(b.MulI(b.BlockIdx(ir.X), routeTokens), warp)
	b.ReturnIf(b.ICmp(enum.IPredSGE, t, b.Param("T")))
	E, K := int64(d.E), int64(d.K)
	ltMask := b.Sub(b.Shl(ir.Int32(1), lane), ir.Int32(1))
	rowMap := b.ByteOffset(b.Param("map"), b.MulI(b.Wide(t), E))
	rowProb := b.ByteOffset(b.Param("probs"), b.MulI(b.Wide(t), 4*E))
	ids := b.ByteOffset(b.Param("ids"), b.MulI(b.Wide(t), 4*K))
	ws := b.ByteOffset(b.Param("weights"), b.MulI(b.Wide(t), 4*K))
	res := b.Loop(ir.Int32(0), ir.Int32(E), ir.Int32(32), []value.Value{ir.Int32(0)}, func(c value.Value, v []value.Value) []value.Value {
		running := v[0]
		e := b.Add(c, lane)
		inE := b.ICmp(enum.IPredSLT, e, ir.Int32(E))
		flag := b.IfVals(inE, []value.Value{ir.Bool(false)}, func() []value.Value {
			return []value.Value{b.ICmp(enum.IPredNE, b.LoadAt(ir.I8, b.ByteOffset(rowMap, e), 1), ir.Int8(0))}
		})[0]
		mask := b.ballot(flag)
		rank := b.Add(running, b.Popc(b.And(mask, ltMask)))
		b.If(b.And(flag, b.ICmp(enum.IPredSLT, rank, ir.Int32(K))), func() {
			b.StoreAt(e, b.elemPtr(ids, rank, 4), 4)
			b.StoreAt(b.LoadAt(ir.F32, b.elemPtr(rowProb, e, 4), 4), b.elemPtr(ws, rank, 4), 4)
		})
		return []value.Value{b.Add(running, b.Popc(mask))}
	})
	n := res[0]
	b.If(b.And(b.ICmp(enum.IPredSGT, n, ir.Int32(K)), b.ICmp(enum.IPredEQ, lane, ir.Int32(0))), func() {
		b.atomicOr(b.Param("err"), ir.Int32(ErrTooManyRoute))
	})
	b.Loop(lane, ir.Int32(K), ir.Int32(32), nil, func(k value.Value, _ []value.Value) []value.Value {
		b.If(b.ICmp(enum.IPredSGE, k, n), func() {
			b.StoreAt(ir.Int32(-1), b.elemPtr(ids, k, 4), 4)
			b.StoreAt(ir.Float32(0), b.elemPtr(ws, k, 4), 4)
		})
		return nil
	})
	b.Ret(nil)
	k.SkipIfZeroT, k.Grid = true, grid1(Expr{A: 1, D: routeTokens, Min: 1})
	return k
}

// emitCount: validate ids (out of range → ErrBadExpertID, treated as -1),
// counts[e] += 1 per slot with id e (integer atomics: order-free), and
// row_of_slot[s] = -1 for slots without a valid expert.
func emitCount(m *ir.Module, d dims, op moe.Count) Kernel {
	b, k := opKernel(m, op, utilThreads, true)
	s := b.Add(b.MulI(b.BlockIdx(ir.X), countPerBlock), b.ThreadIdx(ir.X))
	b.ReturnIf(b.ICmp(enum.IPredSGE, s, b.MulI(b.Param("T"), int64(d.K))))
	id := b.LoadAt(ir.I32, b.elemPtr(b.Param("ids"), s, 4), 4)
	bad := b.Or(b.ICmp(enum.IPredSLT, id, ir.Int32(-1)), b.ICmp(enum.IPredSGE, id, ir.Int32(int64(d.E))))
	b.If(bad, func() { b.atomicOr(b.Param("err"), ir.Int32(ErrBadExpertID)) })
	valid := b.And(b.ICmp(enum.IPredSGE, id, ir.Int32(0)), b.ICmp(enum.IPredSLT, id, ir.Int32(int64(d.E))))
	b.IfElse(valid, func() {
		b.AtomicAdd(b.Cast(b.elemPtr(b.Param("counts"), id, 4), ir.I32), ir.Int32(1))
	}, func() {
		b.StoreAt(ir.Int32(-1), b.elemPtr(b.Param("row_of_slot"), s, 4), 4)
	})
	b.Ret(nil)
	k.SkipIfZeroT, k.Grid = true, grid1(Expr{A: int64(d.K), D: countPerBlock, Min: 1})
	return k
}

// blockScan computes, for each of the i32 values xs of the calling thread,
// the exclusive prefix over the threads of the block (in thread order) and
// the block total. smem holds at least 8*len(xs) i32 (utilThreads = 256 =
// 8 warps). It synchronises twice, so smem may be reused right after.
func (b *Builder) blockScan(smem value.Value, xs []value.Value) (excl, total []value.Value) {
	lane, warp := b.LaneWarp()
	nv := int64(len(xs))
	incl := make([]value.Value, len(xs))
	copy(incl, xs)
	for dd := int64(1); dd < 32; dd *= 2 {
		ge := b.ICmp(enum.IPredSGE, lane, ir.Int32(dd))
		for j := range incl {
			y := b.ShflUp(ir.FullMask, incl[j], ir.Int32(dd))
			incl[j] = b.Select(ge, b.Add(incl[j], y), incl[j])
		}
	}
	b.If(b.ICmp(enum.IPredEQ, lane, ir.Int32(31)), func() {
		for j := range incl {
			b.StoreAt(incl[j], b.elemPtr(smem, b.AddI(b.MulI(warp, nv), int64(j)), 4), 4)
		}
	})
	b.SyncThreads()
	excl = make([]value.Value, len(xs))
	total = make([]value.Value, len(xs))
	for j := range xs {
		var pre, tot value.Value = ir.Int32(0), ir.Int32(0)
		for w := int64(0); w < utilThreads/32; w++ {
			v := b.LoadVolatileAt(ir.I32, b.ByteOffsetC(smem, 4*(w*nv+int64(j))), 4)
			pre = b.Add(pre, b.Select(b.ICmp(enum.IPredSLT, ir.Int32(w), warp), v, ir.Int32(0)))
			tot = b.Add(tot, v)
		}
		excl[j] = b.Add(pre, b.Sub(incl[j], xs[j]))
		total[j] = tot
	}
	b.SyncThreads()
	return excl, total
}

// emitScan: one block. offsets[e] = exclusive prefix of counts (offsets[E]
// = total rows); one tile list per distinct GEMM row tile BM (tileRows):
// for each expert, ceil(count/BM) tiles (expert, first row), in expert
// order; ntiles = their number. The work lists are extra operands, after
// the op's.
func emitScan(m *ir.Module, d dims, op moe.Scan, tiles []tileList) Kernel {
	b, k := opKernel(m, op, utilThreads, false, tileListOperands(tiles)...)
	smem := b.DynSmem()
	b.scanExperts(smem, b.ThreadIdx(ir.X), int64(d.E), tiles, func(e value.Value) value.Value {
		return b.LoadAt(ir.I32, b.elemPtr(b.Param("counts"), e, 4), 4)
	}, nil, nil)
	b.Ret(nil)
	k.SharedBytes, k.Grid = scanScratch(len(tiles)), grid1(Const(1))
	return k
}

// tileListOperands are the GEMM work lists as operands of the kernel that
// writes them: per list its tiles, its count and (when the list has them)
// the counters of its row tiles (tileList.done, tileList.gathered), by
// their buffers' names.
func tileListOperands(tiles []tileList) []moe.Operand {
	var out []moe.Operand
	for _, t := range tiles {
		out = append(out, moe.Operand{Role: t.tiles.Name, Buffer: t.tiles, Access: moe.Write},
			moe.Operand{Role: t.count.Name, Buffer: t.count, Access: moe.Write})
		for _, d := range t.counters() {
			out = append(out, moe.Operand{Role: d.Name, Buffer: d, Access: moe.Write})
		}
	}
	return out
}

// scanExperts is the scan of moe_scan by the block's utilThreads threads
// (tid: the thread's index), over the E experts in chunks of
// utilThreads: expert e's row count (count(e), emitted only for e < E),
// its first row offsets[e], the exclusive prefix in expert order
// (blockScan over smem's first scanScratch(len(tiles)) bytes), its entries of the
// GEMM work lists (writeTileLists), then done(e, offsets[e]) for e < E;
// thread 0 writes offsets[E] and the lists' counts, then runs last. done
// and last may be nil.
func (b *Builder) scanExperts(smem, tid value.Value, E int64, tiles []tileList, count func(e value.Value) value.Value, done func(e, off value.Value), last func()) {
	bms := make([]int64, len(tiles))
	for i, t := range tiles {
		bms[i] = int64(t.bm)
	}
	init := make([]value.Value, 1+len(bms))
	for i := range init {
		init[i] = ir.Int32(0)
	}
	res := b.Loop(ir.Int32(0), ir.Int32(E), ir.Int32(utilThreads), init, func(c value.Value, base []value.Value) []value.Value {
		e := b.Add(c, tid)
		inE := b.ICmp(enum.IPredSLT, e, ir.Int32(E))
		cnt := b.IfVals(inE, []value.Value{ir.Int32(0)}, func() []value.Value { return []value.Value{count(e)} })[0]
		xs := []value.Value{cnt}
		for _, bm := range bms {
			xs = append(xs, b.UDiv(b.AddI(cnt, bm-1), ir.Int32(bm)))
		}
		excl, total := b.blockScan(smem, xs)
		off := b.Add(base[0], excl[0])
		b.If(inE, func() {
			b.StoreAt(off, b.elemPtr(b.Param("offsets"), e, 4), 4)
			if done != nil {
				done(e, off)
			}
		})
		b.writeTileLists(tiles, bms, xs[1:], excl[1:], base[1:], e, off)
		next := make([]value.Value, len(base))
		for j := range base {
			next[j] = b.Add(base[j], total[j])
		}
		return next
	})
	b.If(b.ICmp(enum.IPredEQ, tid, ir.Int32(0)), func() {
		b.StoreAt(res[0], b.ByteOffsetC(b.Param("offsets"), 4*E), 4)
		for i, t := range tiles {
			b.StoreAt(res[1+i], b.Param(t.count.Name), 4)
		}
		if last != nil {
			last()
		}
	})
}

// emitPermute: one block per expert e. The rank of slot s = t*K+k among the
// slots with id e, in increasing s (stable, deterministic), gives its row
// offsets[e] + rank: row_of_slot[s] = row, src_slot[row] = s.
func emitPermute(m *ir.Module, d dims, op moe.Permute) Kernel {
	b, k := opKernel(m, op, utilThreads, true)
	smem := b.DynSmem()
	e := b.BlockIdx(ir.X)
	offs := b.Param("offsets")
	base := b.LoadAt(ir.I32, b.elemPtr(offs, e, 4), 4)
	end := b.LoadAt(ir.I32, b.elemPtr(offs, b.AddI(e, 1), 4), 4)
	b.ReturnIfUniform(b.ICmp(enum.IPredSGE, base, end))
	tk := b.MulI(b.Param("T"), int64(d.K))
	tid := b.ThreadIdx(ir.X)
	const V = permuteSlots
	b.Loop(ir.Int32(0), tk, ir.Int32(utilThreads*V), []value.Value{ir.Int32(0)}, func(c value.Value, run []value.Value) []value.Value {
		s0 := b.Add(c, b.MulI(tid, V))
		flags := make([]value.Value, V)
		cnt := value.Value(ir.Int32(0))
		for j := 0; j < V; j++ {
			s := b.AddI(s0, int64(j))
			in := b.ICmp(enum.IPredSLT, s, tk)
			flags[j] = b.IfVals(in, []value.Value{ir.Bool(false)}, func() []value.Value {
				return []value.Value{b.ICmp(enum.IPredEQ, b.LoadAt(ir.I32, b.elemPtr(b.Param("ids"), s, 4), 4), e)}
			})[0]
			cnt = b.Add(cnt, b.ZExt(flags[j], ir.I32))
		}
		excl, total := b.blockScan(smem, []value.Value{cnt})
		r := b.Add(b.Add(base, run[0]), excl[0])
		for j := 0; j < V; j++ {
			s := b.AddI(s0, int64(j))
			row := r
			b.If(flags[j], func() {
				b.StoreAt(row, b.elemPtr(b.Param("row_of_slot"), s, 4), 4)
				b.StoreAt(s, b.elemPtr(b.Param("src_slot"), row, 4), 4)
			})
			r = b.Add(r, b.ZExt(flags[j], ir.I32))
		}
		return []value.Value{b.Add(run[0], total[0])}
	})
	b.Ret(nil)
	k.SharedBytes, k.SkipIfZeroT, k.Grid = scanScratch(0), true, grid1(Const(int64(d.E)))
	return k
}

// emitGather: xs[row, :] = x[src_slot[row] / K, :] for row < offsets[E]
// (times the routing weight, rounded to bf16, when the weight scales the
// input). A warp per row at a time, d.gatherPerWarp rows per warp (the
// block's rows warp, warp + gatherRows, ...; a row at or past the count
// is neither loaded nor stored), 16-byte vectors: lane l takes
// the 8-element chunks l, l+32, ..., gatherBatch of them of each of its
// rows loaded before any is stored (gatherChunk). With op.Q (the MXFP8
// forward) the row is not stored but quantized (gatherMX), with op.V its
// MXFP8 values stored in the register-fed order (gatherMXValues).
func emitGather(m *ir.Module, d dims, op moe.Gather) Kernel {
	b, k := opKernel(m, op, utilThreads, false)
	R := int64(max(1, d.gatherPerWarp))
	lane, warp := b.LaneWarp()
	row0 := b.Add(b.MulI(b.BlockIdx(ir.X), gatherRows*R), warp)
	total := b.LoadAt(ir.I32, b.ByteOffsetC(b.Param("offsets"), 4*int64(d.E)), 4)
	b.ReturnIf(b.ICmp(enum.IPredSGE, row0, total))
	H := int64(d.H)
	// Row j of the warp: live (below total; row 0 is), src, dst, weight.
	rows, live := make([]value.Value, R), make([]value.Value, R)
	srcs, dsts, ws := make([]value.Value, R), make([]value.Value, R), make([]value.Value, R)
	for j := range R {
		row := row0
		if j > 0 {
			row = b.AddI(row0, gatherRows*j)
			live[j] = b.ICmp(enum.IPredSLT, row, total)
		}
		rows[j] = row
		s := b.whenLive(live[j], ir.Int32(0), func() []value.Value {
			return []value.Value{b.LoadAt(ir.I32, b.elemPtr(b.Param("src_slot"), row, 4), 4)}
		})
		t := b.UDiv(s, ir.Int32(int64(d.K)))
		srcs[j] = b.ByteOffset(b.Param("x"), b.MulI(b.Wide(t), 2*H))
		switch {
		case op.V != nil:
			dsts[j] = b.ByteOffset(b.Param("v"), b.MulI(b.Wide(row), 2*H))
		case op.Q == nil:
			dsts[j] = b.ByteOffset(b.Param("xs"), b.MulI(b.Wide(row), 2*H))
		}
		if op.Weights != nil {
			ws[j] = b.whenLive(live[j], ir.Float32(0), func() []value.Value {
				return []value.Value{b.LoadAt(ir.F32, b.elemPtr(b.Param("weights"), s, 4), 4)}
			})
		}
	}
	v4 := ir.Vec(4, ir.I32)
	n := H / 8 // chunks per row
	q := gatherPlain
	switch {
	case op.Q != nil:
		q = gatherQ
	case op.V != nil:
		q = gatherV
	}
	b.Loop(lane, ir.Int32(n), ir.Int32(32*gatherBatch), nil, func(c0 value.Value, _ []value.Value) []value.Value {
		// The batch's loads of every row first, then its stores: one
		// memory latency per batch, not per chunk or row.
		type chunk struct{ c, in, v value.Value } // in: nil where always loaded
		var chunks [][]chunk
		for j := range R {
			var cs []chunk
			for u := range int64(gatherBatch) {
				c, in := c0, live[j] // chunk c0 < n: the loop's bound
				if u > 0 {
					c = b.AddI(c0, 32*u)
					in = b.ICmp(enum.IPredSLT, c, ir.Int32(n))
					if live[j] != nil {
						in = b.And(in, live[j])
					}
				}
				src := srcs[j]
				v := b.whenLive(in, ir.Undef(v4), func() []value.Value {
					return []value.Value{b.LoadAt(v4, b.ByteOffset(src, b.MulI(b.Wide(c), 16)), 16)}
				})
				cs = append(cs, chunk{c, in, v})
			}
			chunks = append(chunks, cs)
		}
		for j, cs := range chunks {
			for _, ch := range cs {
				store := func() { b.gatherChunk(q, ch.v, ws[j], dsts[j], rows[j], ch.c, H) }
				if ch.in == nil {
					store()
				} else {
					b.If(ch.in, store)
				}
			}
		}
		return nil
	})
	b.Ret(nil)
	k.SkipIfZeroT, k.Grid = true, grid1(Expr{A: int64(d.K), D: gatherRows * R, Min: 1})
	return k
}

// blockTokens is the tokens of a block of a row-wise kernel over R
// tokens per block: t0 = R·blockIdx.x and, with R > 1, t0 + j where below
// the kernel's parameter T (live[j]; else t0 again, for the caller to read
// and not store; live[0] is nil: t0 is below T).
func (b *Builder) blockTokens(R int64) (ts, live []value.Value) {
	ts, live = make([]value.Value, R), make([]value.Value, R)
	ts[0] = b.BlockIdx(ir.X)
	if R > 1 {
		ts[0] = b.MulI(ts[0], R)
		for j := int64(1); j < R; j++ {
			t := b.AddI(ts[0], j)
			live[j] = b.ICmp(enum.IPredSLT, t, b.Param("T"))
			ts[j] = b.Select(live[j], t, ts[0])
		}
	}
	return ts, live
}

// whenLive is then()'s one value where live is nil (always) or true,
// else def: a load only where its row exists.
func (b *Builder) whenLive(live, def value.Value, then func() []value.Value) value.Value {
	if live == nil {
		return then()[0]
	}
	return b.IfVals(live, []value.Value{def}, then)[0]
}

// ifLive runs then where live is nil (always) or true: a store only where
// its row or token exists.
func (b *Builder) ifLive(live value.Value, then func()) {
	if live == nil {
		then()
		return
	}
	b.If(live, then)
}

// gatherForm is what a gather writes of each row: the bf16 row
// (gatherPlain), its e4m3 form and scales (gatherQ, moe.Gather Q and S),
// or its MXFP8 values in the register-fed order (gatherV, moe.Gather V).
type gatherForm int

const (
	gatherPlain gatherForm = iota
	gatherQ
	gatherV
)

// gatherChunk stores chunk c (elements 8c..8c+7, the 16 bytes v) of
// dispatched row row at dst: as loaded, or times the routing weight w
// (rounded to bf16) when w is set; with gatherQ those values (weighted or
// not) are quantized into the q and scales parameters instead (gatherMX;
// dst unused), with gatherV their MXFP8 values stored in the register-fed
// order at dst (gatherMXValues).
func (b *Builder) gatherChunk(q gatherForm, v, w, dst, row, c value.Value, H int64) {
	if w == nil && q == gatherPlain {
		b.StoreAt(v, b.ByteOffset(dst, b.MulI(b.Wide(c), 16)), 16)
		return
	}
	vals := b.bf16x8(v)
	if w != nil {
		for i := range vals {
			vals[i] = b.FMul(vals[i], w)
		}
		if q == gatherPlain {
			StoreBF16(b, b.ByteOffset(dst, b.MulI(b.Wide(c), 16)), vals)
			return
		}
		for i := 0; i < 8; i += 2 { // the bf16 values the bf16 gather stores
			p := b.PackBF16(vals[i], vals[i+1])
			vals[i], vals[i+1] = b.BF16Lo(p), b.BF16Hi(p)
		}
	}
	if q == gatherV {
		b.gatherMXValues(vals, dst, c)
		return
	}
	b.gatherMX(vals, row, c, H)
}

// gatherMXValues stores the MXFP8 values (mxValues8: the 4 lanes of a
// 32-wide block run it together) of chunk c (elements 8c..8c+7 of the
// row at dst, bf16) in the register-fed order (layouts.RegisterFedOrder):
// the lane's elements 8q + e (q = c mod 4) go to positions 8h + 2q + j of
// their block, e = 4(h/2) + h%2 + 2j, as four bf16 pairs (h = 0..3), each
// a 4-byte store at 16h + 4q.
func (b *Builder) gatherMXValues(vals []value.Value, dst, c value.Value) {
	mv := b.mxValues8(vals)
	q := b.And(c, ir.Int32(3))
	blk := b.ByteOffset(dst, b.Add(b.MulI(b.Wide(b.LShr(c, ir.Int32(2))), 64), b.MulI(b.Wide(q), 4)))
	for h := 0; h < 4; h++ {
		e := 4*(h/2) + h%2
		b.StoreAt(b.PackBF16(mv[e], mv[e+2]), b.ByteOffsetC(blk, int64(16*h)), 4)
	}
}

// gatherMX quantizes chunk c (elements 8c..8c+7) of dispatched row row,
// the 8 f32 (bf16) vals of the calling lane (c mod 32 is its lane), into
// the q and scales parameters, as emitQuantize would from the stored bf16
// row (storeMX8): a 32-wide block is the chunks of 4 consecutive lanes
// (H/8 chunks, a multiple of 4, so the 4 lanes of a block run together).
func (b *Builder) gatherMX(vals []value.Value, row, c value.Value, H int64) {
	at := b.Add(b.MulI(b.Wide(row), H/32), b.Wide(b.LShr(c, ir.Int32(2))))
	b.storeMX8(vals, b.rowPtr(b.Param("q"), row, c, H, 1), b.ByteOffset(b.Param("scales"), at), b.And(c, ir.Int32(3)))
}

// emitCombine: one block per token t, or d.combinePerBlock tokens per
// block where set (their loads issued together; the kernel then takes T,
// and a token at or past it reads the block's first token's rows again
// and stores nothing):
//
//	y[t] = g_t * shared_out[t] + sum_{k in 0..K-1, row_of_slot[t*K+k] >= 0} w[t,k] * out_rows[row]
//
// in fp32 in that fixed order (fma), rounded once to bf16; g_t =
// sigmoid(x[t]·gate) with the shared output gate, else 1; w = 1 when the
// weight scaled the input. A slot without a route reads nothing. Loads
// that do not depend on each other are issued together: every slot's
// row and every slot's weight (weights [T·K] f32 holds one for every
// slot, routed or not: an unrouted slot's is read and not used), then
// in each step a thread's 16-byte chunk of every routed row before the
// first fma, so the block waits for memory once for the rows and
// weights and once per step, not K times for each (a block that runs
// alone on its SM, as a virtual block of the persistent kernel does, is
// bound by that latency).
func emitCombine(m *ir.Module, d dims, op moe.Combine) Kernel {
	R := int64(max(1, d.combinePerBlock))
	b, k := opKernel(m, op, utilThreads, R > 1)
	shared, gated := op.SharedOut != nil, op.SharedGate != nil
	H, K := int64(d.H), int64(d.K)
	ts, live := b.blockTokens(R) // t0 read again past T, its store skipped
	tid := b.ThreadIdx(ir.X)
	gates := make([]value.Value, R)
	for j := range gates {
		gates[j] = ir.Float32(1)
		if gated {
			gates[j] = b.sharedGateSigmoid(b.Param("x"), b.Param("shared_gate"), ts[j], tid, H)
		}
	}
	slots := make([][]value.Value, R)
	wts := make([][]value.Value, R)
	for j, t := range ts { // every slot's row before the weights' tests
		for k := int64(0); k < K; k++ {
			slots[j] = append(slots[j], b.LoadAt(ir.I32, b.elemPtr(b.Param("row_of_slot"), b.AddI(b.MulI(t, K), k), 4), 4))
		}
	}
	for j, t := range ts { // every slot's weight, which does not wait for its row
		for k := int64(0); k < K; k++ {
			if op.WeightOnInput {
				wts[j] = append(wts[j], ir.Float32(1))
				continue
			}
			wts[j] = append(wts[j], b.LoadAt(ir.F32, b.elemPtr(b.Param("weights"), b.AddI(b.MulI(t, K), k), 4), 4))
		}
	}
	v4 := ir.Vec(4, ir.I32)
	b.Loop(tid, ir.Int32(H/8), ir.Int32(utilThreads), nil, func(c value.Value, _ []value.Value) []value.Value {
		// Every routed slot's chunk, of every token of the block, is
		// loaded before the first sum uses one: one memory latency per
		// step, not one per slot.
		routed := make([][]value.Value, R)
		chunks := make([][]value.Value, R)
		for j := range ts {
			for k := int64(0); k < K; k++ {
				r := slots[j][k]
				routed[j] = append(routed[j], b.ICmp(enum.IPredSGE, r, ir.Int32(0)))
				chunks[j] = append(chunks[j], b.IfVals(routed[j][k], []value.Value{ir.Undef(v4)}, func() []value.Value {
					return []value.Value{b.LoadAt(v4, b.rowPtr(b.Param("out_rows"), r, c, H, 2), 16)}
				})[0])
			}
		}
		sharedRows := make([]value.Value, R)
		for j, t := range ts {
			if shared {
				sharedRows[j] = b.LoadAt(v4, b.rowPtr(b.Param("shared_out"), t, c, H, 2), 16)
			}
		}
		for j, t := range ts {
			acc := make([]value.Value, 8)
			if shared {
				sv := b.bf16x8(sharedRows[j])
				for i := range acc {
					acc[i] = b.FMul(sv[i], gates[j])
				}
			} else {
				for i := range acc {
					acc[i] = ir.Float32(0)
				}
			}
			for k := int64(0); k < K; k++ {
				w, chunk := wts[j][k], chunks[j][k]
				acc = b.IfVals(routed[j][k], acc, func() []value.Value {
					ov := b.bf16x8(chunk)
					n := make([]value.Value, 8)
					for i := range n {
						n[i] = b.FMA(w, ov[i], acc[i])
					}
					return n
				})
			}
			b.ifLive(live[j], func() { StoreBF16(b, b.rowPtr(b.Param("y"), t, c, H, 2), acc) })
		}
		return nil
	})
	b.Ret(nil)
	if gated {
		k.SharedBytes = 8 * 4
	}
	k.SkipIfZeroT, k.Grid = true, grid1(Expr{A: 1, D: R, Min: 1})
	return k
}

// sharedGateSigmoid is sigmoid(x[t]·gate) in fp32 for token t (x bf16
// [T,H], gate bf16 [H]), the shared expert's output gate: 8 columns per
// thread tid per step, then a fixed-order block reduction through the
// first 8 f32 of dynamic shared memory; every thread gets it.
func (b *Builder) sharedGateSigmoid(x, gate, t, tid value.Value, H int64) value.Value {
	smem := b.DynSmem()
	part := b.Loop(tid, ir.Int32(H/8), ir.Int32(utilThreads), []value.Value{ir.Float32(0)}, func(c value.Value, acc []value.Value) []value.Value {
		xv := b.loadBF16x8(b.rowPtr(x, t, c, H, 2))
		gv := b.loadBF16x8(b.rowPtr(gate, ir.Int32(0), c, H, 2))
		a := acc[0]
		for i := 0; i < 8; i++ {
			a = b.FMA(xv[i], gv[i], a)
		}
		return []value.Value{a}
	})[0]
	return b.Sigmoid(b.blockSumF32(smem, part))
}

// loadBF16x8 widens the 8 bf16 at byte pointer p (16-byte aligned) to f32.
func (b *Builder) loadBF16x8(p value.Value) []value.Value {
	return b.bf16x8(b.LoadAt(ir.Vec(4, ir.I32), p, 16))
}

// bf16x8 widens the 8 bf16 of v (<4 x i32>, lowest address first) to f32.
func (b *Builder) bf16x8(v value.Value) []value.Value {
	out := make([]value.Value, 8)
	for i := 0; i < 4; i++ {
		x := b.ExtractElement(v, i)
		out[2*i], out[2*i+1] = b.BF16Lo(x), b.BF16Hi(x)
	}
	return out
}

// rowPtr is base + (r*width + 8*c) elements of size bytes: chunk c of 8
// elements of row r.
func (b *Builder) rowPtr(base, r, c value.Value, width, size int64) value.Value {
	return b.ByteOffset(base, b.Add(b.MulI(b.Wide(r), width*size), b.MulI(b.Wide(c), 8*size)))
}

// blockSumF32 sums one f32 per thread over the block in a fixed order
// (butterfly within warps, then warps in order); every thread gets the sum.
func (b *Builder) blockSumF32(smem value.Value, x value.Value) value.Value {
	lane, warp := b.LaneWarp()
	x = b.WarpSum(x)
	b.If(b.ICmp(enum.IPredEQ, lane, ir.Int32(0)), func() { b.StoreAt(x, b.elemPtr(smem, warp, 4), 4) })
	b.SyncThreads()
	var s value.Value = ir.Float32(0)
	for w := int64(0); w < utilThreads/32; w++ {
		s = b.FAdd(s, b.LoadVolatileAt(ir.F32, b.ByteOffsetC(smem, 4*w), 4))
	}
	b.SyncThreads()
	return s
}

// ballot is vote.sync.ballot.b32 of pred (i1) over the full warp (inline
// PTX on the predicate as a 32-bit value).
func (b *Builder) ballot(pred value.Value) value.Value {
	return b.AsmCallNoMemory("{\n\t.reg .pred p;\n\tsetp.ne.u32 p, $1, 0;\n\tvote.sync.ballot.b32 $0, p, 0xffffffff;\n\t}", "=r,r",
		ir.I32, b.ZExt(pred, ir.I32))
}

// atomicOr is atomicrmw or (monotonic) of the i32 v at byte pointer p.
func (b *Builder) atomicOr(p, v value.Value) value.Value {
	return b.AtomicRMW(enum.AtomicOpOr, b.Cast(p, ir.I32), v)
}
