package codegen

import (
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"

	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/moe"
)

// The weight gradient on the tensor cores: a GEMM whose reduction runs over
// each expert's rows,
//
//	Main_e[m, n] += sum_{r of e} A[r, m] * B[r, n],
//
// with both operands in the dispatch order (row-major [rows, M] and
// [rows, N], so M- and N-contiguous: "MN-major" for the reduction over r).
// A block owns one wgradMMATile x wgradMMATile tile of Main_e and walks the
// expert's rows wgradMMARows at a time through a cp.async ring of
// wgradMMAStages stages; ldmatrix.trans turns the row-major stage into the
// row-major A and column-major B fragments of mma.sync.m16n8k16 (PTX ISA
// 9.7.14.5.8 "Matrix fragments for mma.m16n8k16" and 9.7.14.5.15
// "ldmatrix": with .trans each thread receives the transposed 8x8 matrix).
// The instruction pair exists on sm_80 and later, so one kernel serves
// every target. The sums of a tile run in a fixed order (rows ascending in
// each thread's fragments, one mma chain per fragment) and round once into
// the main grad: repeated runs give the same bits, with no atomics.

const (
	wgradMMATile   = 128 // rows and columns of Main_e per block
	wgradMMARows   = 32  // expert rows per stage (two k16 steps)
	wgradMMAStages = 3   // cp.async ring depth
	wgradMMAWarps  = 8   // 2 (M) x 4 (N) warps of 64 x 32
	wgradMMAPitch  = 2*wgradMMATile + 16
	wgradMMAStage  = 2 * wgradMMARows * wgradMMAPitch
	wgradMMAChunks = wgradMMARows * wgradMMATile / 8 // 16-byte chunks of one operand per stage
)

// wgradOnTensorCores reports whether op's weight gradient runs on the
// tensor cores: bf16 operands whose rows are whole 16-byte chunks.
func wgradOnTensorCores(op moe.WeightGrad) bool {
	return op.A.DType == moe.BF16 && op.B.DType == moe.BF16 && op.M%8 == 0 && op.N%8 == 0
}

// emitWeightGradMMA is the tensor-core kernel of op (see the comment
// above): grid (ceil(N/128), ceil(M/128), E), 256 threads, 3 x 17408 bytes
// of shared memory. A block of an expert without rows exits at once; rows
// and columns past the expert's rows, M or N are zero-filled in shared
// memory and never stored. The bias gradient is emitWeightGradBias's.
func emitWeightGradMMA(m *ir.Module, op moe.WeightGrad) Kernel {
	b, k, w := wgradBlockStart(m, op, wgradMMATile, wgradMMARows)
	tid, lane, warp, n0, m0, e, lo, hi, kTiles := w.tid, w.lane, w.warp, w.n0, w.m0, w.e, w.lo, w.hi, w.kTiles
	M, N := int64(op.M), int64(op.N)
	smem := b.PtrToInt(b.DynSmem())
	ld := b.wgradLoader(tid, lo, hi, m0, n0, M, N)
	for s := int64(0); s < wgradMMAStages-1; s++ {
		b.If(b.ICmp(enum.IPredSLT, ir.Int32(s), kTiles), func() { ld.load(smem, ir.Int32(s)) })
		b.cpAsyncCommit()
	}
	// Warp (wm, wn) owns rows wm*64.. and columns wn*32.. of the tile.
	wm, wn := b.UDiv(warp, ir.Int32(4)), b.URem(warp, ir.Int32(4))
	j, l8 := b.LShr(lane, ir.Int32(3)), b.And(lane, ir.Int32(7))
	// ldmatrix.x4.trans row addresses: lane L gives row L%8 of matrix L/8.
	// A (m16 x k16 from sA[k][m]): matrix j holds k 8*(j/2).., m 8*(j%2)..
	// B (k16 x n16 from sB[k][n]): matrix j holds k 8*(j%2).., n 8*(j/2)..
	aLane := b.Add(b.MulI(b.Wide(b.Add(b.MulI(b.LShr(j, ir.Int32(1)), 8), l8)), wgradMMAPitch),
		b.MulI(b.Wide(b.Add(b.MulI(wm, 64), b.MulI(b.And(j, ir.Int32(1)), 8))), 2))
	bLane := b.Add(ir.Int64(wgradMMARows*wgradMMAPitch),
		b.Add(b.MulI(b.Wide(b.Add(b.MulI(b.And(j, ir.Int32(1)), 8), l8)), wgradMMAPitch),
			b.MulI(b.Wide(b.Add(b.MulI(wn, 32), b.MulI(b.LShr(j, ir.Int32(1)), 8))), 2)))
	acc := b.Loop(ir.Int32(0), kTiles, ir.Int32(1), zerosF32(4*4*4), func(kt value.Value, acc []value.Value) []value.Value {
		b.cpAsyncWait(wgradMMAStages - 2)
		b.SyncThreads()
		st := b.URem(kt, ir.Int32(wgradMMAStages))
		base := b.Add(smem, b.MulI(b.Wide(st), wgradMMAStage))
		out := append([]value.Value(nil), acc...)
		for kk := int64(0); kk < wgradMMARows/16; kk++ {
			b.wgradMMAStep(b.Add(base, b.Add(aLane, ir.Int64(kk*16*wgradMMAPitch))),
				b.Add(base, b.Add(bLane, ir.Int64(kk*16*wgradMMAPitch))), out)
		}
		next := b.AddI(kt, wgradMMAStages-1)
		b.If(b.ICmp(enum.IPredSLT, next, kTiles), func() { ld.load(smem, next) })
		b.cpAsyncCommit()
		return out
	})
	b.cpAsyncWait(0)
	b.wgradMMAStore(op, e, m0, n0, wm, wn, lane, acc)
	b.Ret(nil)
	k.SharedBytes = wgradMMAStages * wgradMMAStage
	k.SkipIfZeroT = true
	k.Grid = [3]Expr{Const((N + wgradMMATile - 1) / wgradMMATile), Const((M + wgradMMATile - 1) / wgradMMATile), Const(int64(op.Experts))}
	return k
}

// wgradBlock is the start of a tensor-core weight-gradient block: thread,
// lane and warp, the tile's first column n0 and row m0 of Main_e, the
// expert e, its rows lo..hi-1 and their count in stages (kTiles).
type wgradBlock struct {
	tid, lane, warp, n0, m0, e, lo, hi, kTiles value.Value
}

// wgradBlockStart declares op's kernel (wgradMMAWarps warps, two blocks
// per SM: at most 128 registers, so one block's epilogue overlaps the
// other's loop) and emits the start both tensor-core kernels share: block
// (x, y, z) owns the tile x, y of Main_e (tile x tile) of expert z and
// returns at once when the expert has no rows; rows per stage give
// kTiles.
func wgradBlockStart(m *ir.Module, op moe.WeightGrad, tile, rows int64) (*Builder, Kernel, wgradBlock) {
	dense := op.Offsets == nil
	b, k := opKernel(m, op, wgradMMAWarps*32, dense)
	b.MinBlocksPerSM(2)
	var w wgradBlock
	w.tid = b.ThreadIdx(ir.X)
	w.lane, w.warp = b.LaneWarp()
	w.n0, w.m0, w.e = b.MulI(b.BlockIdx(ir.X), tile), b.MulI(b.BlockIdx(ir.Y), tile), b.BlockIdx(ir.Z)
	w.lo, w.hi = b.expertRows(op, w.e)
	b.ReturnIfUniform(b.ICmp(enum.IPredSGE, w.lo, w.hi))
	w.kTiles = b.UDiv(b.AddI(b.Sub(w.hi, w.lo), rows-1), ir.Int32(rows))
	return b, k, w
}

// wgradMMAStore adds a warp's accumulators to Main_e: fragment (mi, nj)
// holds rows g, g+8 and columns 2q, 2q+1 of its m16n8 block (g = lane/4,
// q = lane%4). For each m16 fragment row mi, the thread's 8 pairs are
// loaded first (one 8-byte f32 or 4-byte bf16 load each, from the
// expert's first element when outside M x N), so they are in flight
// together, then added and stored, each rounded once. Four groups of 8
// keep the registers within two blocks per SM.
func (b *Builder) wgradMMAStore(op moe.WeightGrad, e, m0, n0, wm, wn, lane value.Value, acc []value.Value) {
	M, N := int64(op.M), int64(op.N)
	main := b.mainGradBase(op, e)
	g, q := b.LShr(lane, ir.Int32(2)), b.And(lane, ir.Int32(3))
	size := op.MainDType().Size()
	for mi := int64(0); mi < 4; mi++ {
		var ps []mainPair
		for h := int64(0); h < 2; h++ {
			row := b.Add(m0, b.Add(b.MulI(wm, 64), b.AddI(g, mi*16+h*8)))
			for nj := int64(0); nj < 4; nj++ {
				col := b.Add(n0, b.Add(b.MulI(wn, 32), b.AddI(b.MulI(q, 2), nj*8)))
				ps = append(ps, b.mainPairAt(main, row, col, M, N, size, acc[(mi*4+nj)*4+2*h:][:2]))
			}
		}
		b.addPairs(op.MainDType(), ps)
	}
}

// expertRows emits the first and end row of expert e: offsets[e] and
// offsets[e+1] for dispatched rows, 0 and T for dense rows.
func (b *Builder) expertRows(op moe.WeightGrad, e value.Value) (lo, hi value.Value) {
	if op.Offsets == nil {
		return ir.Int32(0), b.Param("T")
	}
	return b.LoadAt(ir.I32, b.elemPtr(b.Param("offsets"), e, 4), 4),
		b.LoadAt(ir.I32, b.elemPtr(b.Param("offsets"), b.AddI(e, 1), 4), 4)
}

// mainGradBase emits expert e's [M, N] main grad (elements of
// op.MainDType()): main + e*M*N elements (Stacked) or the e-th pointer of
// the table (Table: per-expert storage's fc1_grad_table, fc2_grad_table).
// Both kernels call it only after an expert without rows has returned, so
// such an expert's table entry is never read.
func (b *Builder) mainGradBase(op moe.WeightGrad, e value.Value) value.Value {
	if op.Storage == moe.Table {
		return b.IntToPtr(b.LoadAt(ir.I64, b.elemPtr(b.Param("main"), e, 8), 8), GPtr)
	}
	return b.ByteOffset(b.Param("main"), b.MulI(b.Wide(e), int64(op.M)*int64(op.N)*op.MainDType().Size()))
}

// wgradChunk is one 16-byte cp.async chunk a thread copies per stage.
type wgradChunk struct {
	sOff  int64       // byte offset of the operand's tile in the stage
	row   value.Value // i32 row of the chunk inside the stage
	sCol  value.Value // i64 byte offset of the chunk inside its shared row
	gBase value.Value // i64 address of the operand's row lo, column col
	colOK value.Value // i1 the chunk's columns exist
	pitch int64       // bytes per operand row in global memory
}

// wgradChunks is the calling thread's chunks of a stage and the rows.
type wgradChunks struct {
	b      *Builder
	lo, hi value.Value
	chunks []wgradChunk
}

// wgradLoader emits the thread's chunk addresses: chunk c = tid + i*256 of
// an operand is row c/16, columns 8*(c%16).. of its 32 x 128 tile.
func (b *Builder) wgradLoader(tid, lo, hi, m0, n0 value.Value, M, N int64) *wgradChunks {
	ld := &wgradChunks{b: b, lo: lo, hi: hi}
	threads := int64(wgradMMAWarps * 32)
	for _, o := range []struct {
		base, c0 value.Value
		width    int64
		sOff     int64
	}{{b.Param("a"), m0, M, 0}, {b.Param("b"), n0, N, wgradMMARows * wgradMMAPitch}} {
		for i := int64(0); i < wgradMMAChunks/threads; i++ {
			c := b.AddI(tid, i*threads)
			ch := wgradChunk{sOff: o.sOff, row: b.LShr(c, ir.Int32(4)), pitch: 2 * o.width}
			local := b.MulI(b.And(c, ir.Int32(15)), 8)
			col := b.Add(o.c0, local)
			ch.sCol = b.MulI(b.Wide(local), 2)
			ch.colOK = b.ICmp(enum.IPredSLT, col, ir.Int32(o.width))
			ch.gBase = b.PtrToInt(b.ByteOffset(o.base, b.Add(b.MulI(b.Wide(lo), 2*o.width), b.MulI(b.Wide(col), 2))))
			ld.chunks = append(ld.chunks, ch)
		}
	}
	return ld
}

// load issues the cp.async of rows lo+32*kt.. into stage kt%3 at smem (i64
// shared address); chunks past hi or the operand's width are zero-filled
// (source size 0, from the operand's first row).
func (ld *wgradChunks) load(smem, kt value.Value) {
	b := ld.b
	st := b.Add(smem, b.MulI(b.Wide(b.URem(kt, ir.Int32(wgradMMAStages))), wgradMMAStage))
	for _, ch := range ld.chunks {
		r := b.Add(b.MulI(kt, wgradMMARows), ch.row)
		ok := b.And(ch.colOK, b.ICmp(enum.IPredSLT, b.Add(ld.lo, r), ld.hi))
		src := b.Select(ok, b.Add(ch.gBase, b.MulI(b.Wide(r), ch.pitch)), ch.gBase)
		size := b.Select(ok, ir.Int32(16), ir.Int32(0))
		dst := b.Add(st, b.Add(ir.Int64(ch.sOff), b.Add(b.MulI(b.Wide(ch.row), wgradMMAPitch), ch.sCol)))
		b.CpAsync16(dst, src, size)
	}
}

// wgradMMAStep emits one k16 step of a warp's 64 x 32 tile: four
// ldmatrix.x4.trans of A (one per m16 fragment), two of B (two n8
// fragments each), sixteen mma.sync into acc (updated in place).
func (b *Builder) wgradMMAStep(aAddr, bAddr value.Value, acc []value.Value) {
	var aFr [4][4]value.Value
	for mi := int64(0); mi < 4; mi++ {
		aFr[mi] = b.ldmatrixX4(b.Add(aAddr, ir.Int64(mi*16*2)), true)
	}
	var bFr [4][2]value.Value
	for nj := int64(0); nj < 4; nj += 2 {
		r := b.ldmatrixX4(b.Add(bAddr, ir.Int64(nj*8*2)), true)
		bFr[nj], bFr[nj+1] = [2]value.Value{r[0], r[1]}, [2]value.Value{r[2], r[3]}
	}
	for mi := 0; mi < 4; mi++ {
		for nj := 0; nj < 4; nj++ {
			b.mmaBF16(aFr[mi], bFr[nj], acc[(mi*4+nj)*4:][:4])
		}
	}
}

// emitWeightGradBias: Bias_e[m] += sum_{r of e} s_r * A[r, m] for either
// weight-gradient kernel, one thread per column m in a fixed row
// order; grid (ceil(M/256), E). s_r is the row's routing weight (Weights
// through SrcSlot) or 1.
func emitWeightGradBias(m *ir.Module, op moe.WeightGrad) Kernel {
	dense := op.Offsets == nil
	b, k := opKernelNamed(m, "moe_"+op.Name()+"_bias", op, utilThreads, dense)
	e := b.BlockIdx(ir.Y)
	col := b.Add(b.MulI(b.BlockIdx(ir.X), utilThreads), b.ThreadIdx(ir.X))
	lo, hi := b.expertRows(op, e)
	M := int64(op.M)
	b.ReturnIf(b.Or(b.ICmp(enum.IPredSGE, lo, hi), b.ICmp(enum.IPredSGE, col, ir.Int32(M))))
	sum := b.Loop(lo, hi, ir.Int32(1), []value.Value{ir.Float32(0)}, func(r value.Value, acc []value.Value) []value.Value {
		var s value.Value = ir.Float32(1)
		if op.Weights != nil {
			slot := b.LoadAt(ir.I32, b.elemPtr(b.Param("src_slot"), r, 4), 4)
			s = b.LoadAt(ir.F32, b.elemPtr(b.Param("weights"), slot, 4), 4)
		}
		a := b.loadScalarF32(op.A.DType, b.Param("a"), b.Add(b.MulI(b.Wide(r), M), b.Wide(col)))
		return []value.Value{b.FMA(s, a, acc[0])}
	})[0]
	i := b.Add(b.MulI(b.Wide(e), M), b.Wide(col))
	b.storeScalar(op.Bias.DType, b.Param("bias"), i, b.FAdd(b.loadScalarF32(op.Bias.DType, b.Param("bias"), i), sum))
	b.Ret(nil)
	k.SkipIfZeroT = true
	k.Grid = [3]Expr{Const((M + utilThreads - 1) / utilThreads), Const(int64(op.Experts)), Const(1)}
	return k
}

// mainPair is two adjacent elements of Main_e a thread adds acc to.
type mainPair struct {
	ptr, in value.Value
	acc     []value.Value
	old     [2]value.Value
}

// mainPairAt is the pair at (row, col) of main ([M, N] of size-byte
// elements): in says it lies inside; outside, ptr is main's first element.
func (b *Builder) mainPairAt(main, row, col value.Value, M, N, size int64, acc []value.Value) mainPair {
	in := b.And(b.ICmp(enum.IPredSLT, row, ir.Int32(M)), b.ICmp(enum.IPredSLT, col, ir.Int32(N)))
	idx := b.Select(in, b.Add(b.MulI(b.Wide(row), N), b.Wide(col)), ir.Int64(0))
	return mainPair{ptr: b.elemPtr(main, idx, size), in: in, acc: acc}
}

// addPairs loads every pair first (so the loads are in flight together),
// then adds acc and stores those inside, each rounded once to d.
func (b *Builder) addPairs(d moe.DType, ps []mainPair) {
	for i := range ps {
		if d == moe.F32 {
			v := b.LoadAt(ir.Vec(2, ir.F32), ps[i].ptr, 8)
			ps[i].old = [2]value.Value{b.ExtractElement(v, 0), b.ExtractElement(v, 1)}
		} else {
			w := b.LoadAt(ir.I32, ps[i].ptr, 4)
			ps[i].old = [2]value.Value{b.BF16Lo(w), b.BF16Hi(w)}
		}
	}
	for _, p := range ps {
		lo, hi := b.FAdd(p.old[0], p.acc[0]), b.FAdd(p.old[1], p.acc[1])
		b.If(p.in, func() {
			if d == moe.F32 {
				v := b.InsertElement(b.InsertElement(ir.Undef(ir.Vec(2, ir.F32)), lo, 0), hi, 1)
				b.StoreAt(v, p.ptr, 8)
			} else {
				b.StoreAt(b.PackBF16(lo, hi), p.ptr, 4)
			}
		})
	}
}
