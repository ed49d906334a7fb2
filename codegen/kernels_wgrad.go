package codegen

import (
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"

	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/moe"
)

// The CUDA-core (fp32 FMA) PerOp kernels of the backward: the weight
// gradients the tensor cores do not take (an f32 operand, as the shared
// gate's; see wgradOnTensorCores and kernels_wgrad_mma.go), and the
// transpose of an N-major B into a K-major copy that the target's engine
// then reads.

const (
	wgradTile  = 64 // rows and columns of dW per block
	wgradRows  = 16 // token rows per shared-memory step
	wgradMicro = 4  // dW rows and columns per thread (4x4)
	transTile  = 64 // square tile of the weight transpose
	transPad   = 66 // shared-memory row pitch of the transpose, elements (bank spread, 4-byte rows)
	wgradSmemB = 4 * 2 * wgradRows * wgradTile
)

// emitTranspose: bt[e, c, r] = b_e[r, c] for each expert's [rows, cols]
// bf16 matrix b_e (stacked [E, rows, cols], or a u64 [E] pointer table),
// through 64x64 shared-memory tiles moved in 16-byte chunks (rows and cols
// are multiples of 8, so a chunk is wholly inside or outside); grid
// (ceil(cols/64), ceil(rows/64), E).
func emitTranspose(m *ir.Module, name string, rows, cols, experts int, table bool, b, bt *moe.Buffer) Kernel {
	k := Kernel{Name: name, Block: utilThreads,
		Params: []Param{{Name: "b", Type: ParamPtr, Size: 8, Buffer: b.Name}, {Name: "bt", Type: ParamPtr, Size: 8, Buffer: bt.Name}}}
	bd := NewKernel(m, name, utilThreads, ir.P("b", GPtr), ir.P("bt", GPtr))
	tid := bd.ThreadIdx(ir.X)
	c0, r0, e := bd.MulI(bd.BlockIdx(ir.X), transTile), bd.MulI(bd.BlockIdx(ir.Y), transTile), bd.BlockIdx(ir.Z)
	R, C := int64(rows), int64(cols)
	src := bd.ByteOffset(bd.Param("b"), bd.MulI(bd.Wide(e), 2*R*C))
	if table {
		ptr := bd.LoadAt(ir.I64, bd.elemPtr(bd.Param("b"), e, 8), 8)
		src = bd.IntToPtr(ptr, GPtr)
	}
	dst := bd.ByteOffset(bd.Param("bt"), bd.MulI(bd.Wide(e), 2*R*C))
	smem := bd.DynSmem()
	const chunks = transTile * transTile / 8
	inside := func(r, c value.Value) value.Value {
		return bd.And(bd.ICmp(enum.IPredSLT, r, ir.Int32(R)), bd.ICmp(enum.IPredSLT, c, ir.Int32(C)))
	}
	for i := int64(0); i < chunks/utilThreads; i++ { // chunk (rr, 8*j) of the input tile
		idx := bd.AddI(tid, i*utilThreads)
		rr, cc := bd.LShr(idx, ir.Int32(3)), bd.MulI(bd.And(idx, ir.Int32(7)), 8)
		r, c := bd.Add(r0, rr), bd.Add(c0, cc)
		bd.If(inside(r, c), func() {
			v := bd.LoadAt(ir.Vec(4, ir.I32), bd.elemPtr(src, bd.Add(bd.MulI(bd.Wide(r), C), bd.Wide(c)), 2), 16)
			for w := 0; w < 4; w++ {
				bd.StoreAt(bd.ExtractElement(v, w), bd.elemPtr(smem, bd.AddI(bd.Add(bd.MulI(rr, transPad), cc), int64(2*w)), 2), 4)
			}
		})
	}
	bd.SyncThreads()
	for i := int64(0); i < chunks/utilThreads; i++ { // output row c0+oc, input rows r0+or..+7
		idx := bd.AddI(tid, i*utilThreads)
		oc, or := bd.LShr(idx, ir.Int32(3)), bd.MulI(bd.And(idx, ir.Int32(7)), 8)
		r, c := bd.Add(r0, or), bd.Add(c0, oc)
		bd.If(inside(r, c), func() {
			var v value.Value = ir.Undef(ir.Vec(4, ir.I32))
			for w := int64(0); w < 4; w++ {
				lo := bd.LoadAt(ir.I16, bd.elemPtr(smem, bd.Add(bd.MulI(bd.AddI(or, 2*w), transPad), oc), 2), 2)
				hi := bd.LoadAt(ir.I16, bd.elemPtr(smem, bd.Add(bd.MulI(bd.AddI(or, 2*w+1), transPad), oc), 2), 2)
				word := bd.Or(bd.ZExt(lo, ir.I32), bd.Shl(bd.ZExt(hi, ir.I32), ir.Int32(16)))
				v = bd.InsertElement(v, word, int(w))
			}
			bd.StoreAt(v, bd.elemPtr(dst, bd.Add(bd.MulI(bd.Wide(c), R), bd.Wide(r)), 2), 16)
		})
	}
	bd.Ret(nil)
	k.SharedBytes = 2 * transTile * transPad
	k.Grid = [3]Expr{Const((C + transTile - 1) / transTile), Const((R + transTile - 1) / transTile), Const(int64(experts))}
	return k
}

// loadScalarF32 loads element i (i32 or i64) of a bf16 or f32 array as f32.
func (b *Builder) loadScalarF32(d moe.DType, base, i value.Value) value.Value {
	if d == moe.F32 {
		return b.LoadAt(ir.F32, b.elemPtr(base, i, 4), 4)
	}
	return b.BF16Lo(b.ZExt(b.LoadAt(ir.I16, b.elemPtr(base, i, 2), 2), ir.I32))
}

// storeScalar stores the f32 v as element i of a bf16 (rounded) or f32 array.
func (b *Builder) storeScalar(d moe.DType, base, i, v value.Value) {
	if d == moe.F32 {
		b.StoreAt(v, b.elemPtr(base, i, 4), 4)
		return
	}
	b.StoreAt(b.ToBF16(v), b.elemPtr(base, i, 2), 2)
}

// emitWeightGrad: main[e, m, n] += sum_{r of e} a[r, m]*b[r, n] for a
// 64x64 tile of dW per block (the bias gradient is emitWeightGradBias's), grid (ceil(N/64), ceil(M/64), E). The rows of expert e
// (offsets, or 0..T-1 for dense rows) are read 16 at a time into shared
// memory as fp32; each thread keeps a 4x4 block of sums in registers, in a
// fixed order over the rows, and adds it to the main grad with one
// rounding. A block of an expert without rows exits at once.
func emitWeightGrad(m *ir.Module, op moe.WeightGrad) Kernel {
	dense := op.Offsets == nil
	b, k := opKernel(m, op, utilThreads, dense)
	tid := b.ThreadIdx(ir.X)
	n0, m0, e := b.MulI(b.BlockIdx(ir.X), wgradTile), b.MulI(b.BlockIdx(ir.Y), wgradTile), b.BlockIdx(ir.Z)
	lo, hi := b.expertRows(op, e)
	b.ReturnIfUniform(b.ICmp(enum.IPredSGE, lo, hi))
	M, N := int64(op.M), int64(op.N)
	smem := b.DynSmem()
	sa, sb := smem, b.ByteOffsetC(smem, 4*wgradRows*wgradTile)
	tm, tn := b.UDiv(tid, ir.Int32(wgradTile/wgradMicro)), b.URem(tid, ir.Int32(wgradTile/wgradMicro))
	acc := b.Loop(lo, hi, ir.Int32(wgradRows), zerosF32(wgradMicro*wgradMicro), func(r0 value.Value, acc []value.Value) []value.Value {
		b.wgradStage(op, sa, sb, r0, hi, m0, n0, M, N)
		b.SyncThreads()
		out := append([]value.Value(nil), acc...)
		for kk := int64(0); kk < wgradRows; kk++ {
			var av, bv [wgradMicro]value.Value
			for i := int64(0); i < wgradMicro; i++ {
				av[i] = b.LoadAt(ir.F32, b.elemPtr(sa, b.AddI(b.MulI(tm, wgradMicro), kk*wgradTile+i), 4), 4)
				bv[i] = b.LoadAt(ir.F32, b.elemPtr(sb, b.AddI(b.MulI(tn, wgradMicro), kk*wgradTile+i), 4), 4)
			}
			for i := range av {
				for j := range bv {
					out[i*wgradMicro+j] = b.FMA(av[i], bv[j], out[i*wgradMicro+j])
				}
			}
		}
		b.SyncThreads()
		return out
	})
	b.wgradStore(op, acc, e, m0, n0, tm, tn, M, N)
	b.Ret(nil)
	k.SharedBytes = wgradSmemB
	k.SkipIfZeroT = true
	k.Grid = [3]Expr{Const((N + wgradTile - 1) / wgradTile), Const((M + wgradTile - 1) / wgradTile), Const(int64(op.Experts))}
	return k
}

// wgradStage loads rows r0..r0+15 (below hi) of a's columns m0..m0+63 and
// b's columns n0..n0+63 into shared memory as fp32 (0 outside).
func (b *Builder) wgradStage(op moe.WeightGrad, sa, sb, r0, hi, m0, n0 value.Value, M, N int64) {
	tid := b.ThreadIdx(ir.X)
	for i := int64(0); i < wgradRows*wgradTile/utilThreads; i++ {
		idx := b.AddI(tid, i*utilThreads)
		rr, cc := b.UDiv(idx, ir.Int32(wgradTile)), b.URem(idx, ir.Int32(wgradTile))
		r := b.Add(r0, rr)
		live := b.ICmp(enum.IPredSLT, r, hi)
		for _, s := range []struct {
			smem, base, c0 value.Value
			width          int64
			dt             moe.DType
		}{{sa, b.Param("a"), m0, M, op.A.DType}, {sb, b.Param("b"), n0, N, op.B.DType}} {
			c := b.Add(s.c0, cc)
			in := b.And(live, b.ICmp(enum.IPredSLT, c, ir.Int32(s.width)))
			v := b.IfVals(in, []value.Value{ir.Float32(0)}, func() []value.Value {
				return []value.Value{b.loadScalarF32(s.dt, s.base, b.Add(b.MulI(b.Wide(r), s.width), b.Wide(c)))}
			})[0]
			b.StoreAt(v, b.elemPtr(s.smem, idx, 4), 4)
		}
	}
}

// wgradStore adds each thread's 4x4 sums to main[e, m, n] with one rounding.
func (b *Builder) wgradStore(op moe.WeightGrad, acc []value.Value, e, m0, n0, tm, tn value.Value, M, N int64) {
	main := b.mainGradBase(op, e)
	for i := int64(0); i < wgradMicro; i++ {
		mi := b.Add(m0, b.AddI(b.MulI(tm, wgradMicro), i))
		for j := int64(0); j < wgradMicro; j++ {
			nj := b.Add(n0, b.AddI(b.MulI(tn, wgradMicro), j))
			in := b.And(b.ICmp(enum.IPredSLT, mi, ir.Int32(M)), b.ICmp(enum.IPredSLT, nj, ir.Int32(N)))
			v := acc[i*wgradMicro+j]
			b.If(in, func() {
				idx := b.Add(b.MulI(b.Wide(mi), N), b.Wide(nj))
				b.storeScalar(op.MainDType(), main, idx, b.FAdd(b.loadScalarF32(op.MainDType(), main, idx), v))
			})
		}
	}
}
