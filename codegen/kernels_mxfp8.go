package codegen

import (
	"fmt"

	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"

	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/moe"
)

// The MXFP8 kernels (docs/mxfp8.md): the quantization of a GEMM's A rows.
// Formats: OCP Microscaling Formats v1.0 (E4M3 elements, UE8M0 scales,
// blocks of 32); the rounding of each step follows layouts.Quantize with
// the round-up scale, bit for bit.

// emitQuantize is op's kernel: four threads per block of 32 consecutive
// elements of a row of X (bf16 or f32, rows = X's row count at T), each
// thread 8 of them, grid ceil(rows*K/8 / 256), so that a warp's loads
// cover 512 consecutive bytes of a row (bf16). The four threads take
// amax over the block's magnitudes (as integers, so a NaN wins; amax4),
// the scale code UE8M0RoundUp(amax/448) (div.rn.f32, then the round-up of
// the exponent: layouts.UE8M0RoundUp), the exact reciprocal 2^(127-code)
// (NaN for code 255, 2^-127 for 254), and store E4M3(v * reciprocal) for
// each value (cvt.rn.satfinite.e4m3x2.f32: round to nearest even, Inf to
// ±448, NaN to NaN; PTX ISA "cvt", sm_89 and later) as 8 bytes each, and
// the block's first thread the code as one byte (storeMX8); with V they
// store the MXFP8 values in the register-fed order instead
// (gatherMXValues: four 4-byte pairs per thread, which measured faster
// than trading them among the four lanes for one 16-byte store each).
// Values and scales of rows past the real ones are computed from
// whatever those rows hold and never read.
func emitQuantize(m *ir.Module, op moe.Quantize) (Kernel, error) {
	if op.K%32 != 0 {
		return Kernel{}, fmt.Errorf("codegen: %s: K = %d is not a multiple of 32", op.Name(), op.K)
	}
	b, k := opKernel(m, op, utilThreads, true)
	rowsX := op.X.Shape[0]
	n8 := int64(op.K / 8)
	b.quantizeThread(op, b.Add(b.MulI(b.BlockIdx(ir.X), utilThreads), b.ThreadIdx(ir.X)))
	b.Ret(nil)
	k.SkipIfZeroT = true
	k.Grid = grid1(Expr{A: rowsX.A * n8, B: rowsX.B * n8, D: utilThreads, Min: 1})
	return k, nil
}

// quantizeThread emits the work of thread idx (i32, from 0, unsigned) of
// op's kernel (emitQuantize): X's elements 8idx .. 8idx+7, which lie in
// row idx/(K/8), quarter idx%4 of its block idx/4 (X's blocks of 32 in
// order, K a multiple of 32), returning for a row past X's rows at T
// (parameters x, q and scales or v, and T). The four threads of a block
// are consecutive lanes 4g..4g+3 of one warp (idx%4 = lane%4) and return
// together.
func (b *Builder) quantizeThread(op moe.Quantize, idx value.Value) {
	row, rows := b.quantizeRow(op, idx)
	b.ReturnIf(b.ICmp(enum.IPredUGE, row, rows))
	b.quantizeElems(op, idx)
}

// quantizeThreadIf is quantizeThread without the return: a thread past
// X's rows skips the work and goes on.
func (b *Builder) quantizeThreadIf(op moe.Quantize, idx value.Value) {
	row, rows := b.quantizeRow(op, idx)
	b.If(b.ICmp(enum.IPredULT, row, rows), func() { b.quantizeElems(op, idx) })
}

// quantizeRow is the row of X that quantizeThread's idx quantizes and X's
// rows at T.
func (b *Builder) quantizeRow(op moe.Quantize, idx value.Value) (row, rows value.Value) {
	rowsX := op.X.Shape[0]
	rows = b.Add(b.MulI(b.Param("T"), rowsX.A), ir.Int32(rowsX.B))
	return b.UDiv(idx, ir.Int32(int64(op.K/8))), rows
}

// quantizeElems is quantizeThread's work for an idx within X's rows.
func (b *Builder) quantizeElems(op moe.Quantize, idx value.Value) {
	first := b.MulI(b.ZExt(idx, ir.I64), 8) // element index of the thread's 8
	var vals []value.Value
	if op.X.DType == moe.BF16 {
		vals = b.loadBF16x8(b.ByteOffset(b.Param("x"), b.MulI(first, 2)))
	} else {
		src := b.ByteOffset(b.Param("x"), b.MulI(first, 4))
		for i := 0; i < 2; i++ {
			v := b.LoadAt(ir.Vec(4, ir.F32), b.ByteOffsetC(src, int64(16*i)), 16)
			for j := 0; j < 4; j++ {
				vals = append(vals, b.ExtractElement(v, j))
			}
		}
	}
	if op.V != nil { // v as one row of chunks: chunk idx is the thread's 8
		b.gatherMXValues(vals, b.Param("v"), idx)
		return
	}
	b.storeMX8(vals, b.ByteOffset(b.Param("q"), first), b.ByteOffset(b.Param("scales"), b.ZExt(b.LShr(idx, ir.Int32(2)), ir.I64)), b.And(idx, ir.Int32(3)))
}

// storeMX8 quantizes the calling lane's 8 f32 vals, quarter q (0..3, its
// lane%4) of a 32-wide block that lanes 4g..4g+3 hold together (they run
// it together), as schedule.MXActivations defines it: the block's amax
// over the 4 lanes (amax4), its round-up scale (mxScale), each value
// times the reciprocal to e4m3 (e4m3x4); it stores the lane's 8 e4m3
// bytes at qAt (8-byte aligned) and, from the lane with q = 0, the
// block's UE8M0 code at sAt.
func (b *Builder) storeMX8(vals []value.Value, qAt, sAt, q value.Value) {
	code, r := b.mxScale(b.amax4(vals))
	lo := b.e4m3x4(b.FMul(vals[0], r), b.FMul(vals[1], r), b.FMul(vals[2], r), b.FMul(vals[3], r))
	hi := b.e4m3x4(b.FMul(vals[4], r), b.FMul(vals[5], r), b.FMul(vals[6], r), b.FMul(vals[7], r))
	var v value.Value = ir.Undef(ir.Vec(2, ir.I32))
	v = b.InsertElement(b.InsertElement(v, lo, 0), hi, 1)
	b.StoreAt(v, qAt, 8)
	b.If(b.ICmp(enum.IPredEQ, q, ir.Int32(0)), func() { b.StoreAt(b.Trunc(code, ir.I8), sAt, 1) })
}

// quantizeBlock quantizes one 32-wide block, the f32 vals, as
// schedule.MXActivations defines it (the amax's round-up scale,
// mxScale; each value times the scale's reciprocal to e4m3, e4m3x4) and
// stores its 32 e4m3 bytes at q (16-byte aligned) and its UE8M0 code at s.
func (b *Builder) quantizeBlock(vals []value.Value, q, s value.Value) {
	code, r := b.mxScale(b.absMaxBits(vals, ir.Int32(0)))
	var words [8]value.Value
	for i := range words {
		words[i] = b.e4m3x4(b.FMul(vals[4*i], r), b.FMul(vals[4*i+1], r), b.FMul(vals[4*i+2], r), b.FMul(vals[4*i+3], r))
	}
	for h := 0; h < 2; h++ {
		var v value.Value = ir.Undef(ir.Vec(4, ir.I32))
		for j := 0; j < 4; j++ {
			v = b.InsertElement(v, words[4*h+j], j)
		}
		b.StoreAt(v, b.ByteOffsetC(q, int64(16*h)), 16)
	}
	b.StoreAt(b.Trunc(code, ir.I8), s, 1)
}

// absMaxBits is the largest of the magnitudes of the f32 vals and of the
// i32 start, compared as integers (bits without the sign: a NaN wins over
// every number, an Inf over every finite value).
func (b *Builder) absMaxBits(vals []value.Value, start value.Value) value.Value {
	amax := start
	for _, v := range vals {
		a := b.And(b.BitCast(v, ir.I32), ir.Int32(0x7FFFFFFF))
		amax = b.Select(b.ICmp(enum.IPredUGT, a, amax), a, amax)
	}
	return amax
}

// mxScale is the block scale of a block whose amax has the bits amax:
// the UE8M0 code UE8M0RoundUp(amax/448) (div.rn.f32; layouts.UE8M0RoundUp,
// the round-up rule) and its exact reciprocal 2^(127-code) as f32 (NaN
// for code 255, the subnormal 2^-127 for 254).
func (b *Builder) mxScale(amax value.Value) (code, inv value.Value) {
	code = b.ue8m0RoundUp(b.AsmCallNoMemory("div.rn.f32 $0, $1, 0f43E00000;", "=f,f", ir.F32, b.BitCast(amax, ir.F32))) // 448
	return code, b.mxInv(code)
}

// mxInv is the exact reciprocal 2^(127-code) of a UE8M0 scale code as f32
// (NaN for code 255, the subnormal 2^-127 for 254).
func (b *Builder) mxInv(code value.Value) value.Value {
	bits := b.Shl(b.Sub(ir.Int32(254), code), ir.Int32(23))
	bits = b.Select(b.ICmp(enum.IPredEQ, code, ir.Int32(254)), ir.Int32(0x00400000), bits)
	bits = b.Select(b.ICmp(enum.IPredEQ, code, ir.Int32(255)), ir.Int32(0x7FC00000), bits)
	return b.BitCast(bits, ir.F32)
}

// e4m3x4 packs E4M3(v0..v3) (cvt.rn.satfinite.e4m3x2.f32: round to
// nearest even, saturating to ±448, NaN stays NaN) into an i32, v0 in the
// lowest byte (the element at the lowest address).
func (b *Builder) e4m3x4(v0, v1, v2, v3 value.Value) value.Value {
	return b.AsmCallNoMemory(
		"{\n\t.reg .b16 lo, hi;\n\tcvt.rn.satfinite.e4m3x2.f32 lo, $2, $1;\n\tcvt.rn.satfinite.e4m3x2.f32 hi, $4, $3;\n\tmov.b32 $0, {lo, hi};\n\t}",
		"=r,f,f,f,f", ir.I32, v0, v1, v2, v3)
}

// e4m3x4F32 widens the four E4M3 bytes of the i32 w (lowest byte first)
// to f32, exactly (cvt.rn.f16x2.e4m3x2, then cvt.f32.f16; every E4M3 value
// is an f16 value; PTX ISA "cvt", sm_89 and later).
func (b *Builder) e4m3x4F32(w value.Value) [4]value.Value {
	r := b.AsmCallNoMemory("{\n\t.reg .b16 lo, hi, a, c, d, e;\n\t.reg .b32 x, y;\n\tmov.b32 {lo, hi}, $4;\n"+
		"\tcvt.rn.f16x2.e4m3x2 x, lo;\n\tcvt.rn.f16x2.e4m3x2 y, hi;\n\tmov.b32 {a, c}, x;\n\tmov.b32 {d, e}, y;\n"+
		"\tcvt.f32.f16 $0, a;\n\tcvt.f32.f16 $1, c;\n\tcvt.f32.f16 $2, d;\n\tcvt.f32.f16 $3, e;\n\t}",
		"=f,=f,=f,=f,r", ir.Struct(ir.F32, ir.F32, ir.F32, ir.F32), w)
	return [4]value.Value{b.ExtractValue(r, 0), b.ExtractValue(r, 1), b.ExtractValue(r, 2), b.ExtractValue(r, 3)}
}

// mxValues8 returns the MXFP8 values (schedule.MXActivations) of the 8
// f32 vals a thread holds of a 32-wide block that 4 consecutive lanes
// hold together (lane%4 the thread's quarter of the block; the 4 lanes
// must run this together): the block's amax over the 4 lanes
// (shfl.sync.bfly 1 and 2 among them), its scale (mxScale), each value
// times the reciprocal rounded to E4M3 (e4m3x4), widened back, times
// 2^(code-127).
func (b *Builder) mxValues8(vals []value.Value) []value.Value {
	code, inv := b.mxScale(b.amax4(vals))
	scale := b.ue8m0F32(code)
	out := make([]value.Value, 0, len(vals))
	for i := 0; i < len(vals); i += 4 {
		w := b.e4m3x4(b.FMul(vals[i], inv), b.FMul(vals[i+1], inv), b.FMul(vals[i+2], inv), b.FMul(vals[i+3], inv))
		for _, x := range b.e4m3x4F32(w) {
			out = append(out, b.FMul(x, scale))
		}
	}
	return out
}

// amax4 is absMaxBits of the calling thread's f32 vals and those of the
// three other lanes of its group of 4 (lanes 4g..4g+3, which must run it
// together): shfl.sync.bfly 1 and 2 among them.
func (b *Builder) amax4(vals []value.Value) value.Value {
	amax := b.absMaxBits(vals, ir.Int32(0))
	lane := b.And(b.ThreadIdx(ir.X), ir.Int32(31))
	group := b.Shl(ir.Int32(15), b.And(lane, ir.Int32(28))) // the 4 lanes' member mask
	for _, d := range []int{1, 2} {
		o := b.AsmCallNoMemory(fmt.Sprintf("shfl.sync.bfly.b32 $0, $1, %d, 31, $2;", d), "=r,r,r", ir.I32, amax, group)
		amax = b.Select(b.ICmp(enum.IPredUGT, o, amax), o, amax)
	}
	return amax
}

// emitDequantize is op's kernel: one thread per block of 32 consecutive
// elements of the [Experts*Rows, Cols] e4m3 data, grid
// ceil(Experts*Rows*Cols/32 / 256), no T (the weights' size). The thread
// loads the 32 bytes and the block's scale code, widens each value exactly
// (e4m3x4F32), multiplies by 2^(code-127) (exact in f32, subnormals
// kept) and stores bf16 (cvt.rn.bf16x2.f32, round to nearest even; exact
// for scales of at least 2^-124) as 64 bytes.
func emitDequantize(m *ir.Module, op moe.Dequantize) (Kernel, error) {
	if op.Cols%32 != 0 {
		return Kernel{}, fmt.Errorf("codegen: %s: %d columns is not a multiple of 32", op.Name(), op.Cols)
	}
	b, k := opKernel(m, op, utilThreads, false)
	blocks := int64(op.Experts) * int64(op.Rows) * int64(op.Cols/32)
	idx := b.Add(b.MulI(b.Wide(b.BlockIdx(ir.X)), utilThreads), b.Wide(b.ThreadIdx(ir.X)))
	b.ReturnIf(b.ICmp(enum.IPredUGE, idx, ir.Int64(blocks)))
	scale := b.ue8m0F32(b.ZExt(b.LoadAt(ir.I8, b.ByteOffset(b.Param("scales"), idx), 1), ir.I32))
	src := b.ByteOffset(b.Param("q"), b.MulI(idx, 32))
	dst := b.ByteOffset(b.Param("out"), b.MulI(idx, 64))
	for h := int64(0); h < 2; h++ {
		v := b.LoadAt(ir.Vec(4, ir.I32), b.ByteOffsetC(src, 16*h), 16)
		var vals []value.Value
		for j := 0; j < 4; j++ {
			for _, x := range b.e4m3x4F32(b.ExtractElement(v, j)) {
				vals = append(vals, b.FMul(x, scale))
			}
		}
		StoreBF16(b, b.ByteOffsetC(dst, 32*h), vals[:8])
		StoreBF16(b, b.ByteOffsetC(dst, 32*h+16), vals[8:])
	}
	b.Ret(nil)
	k.SkipIfZeroT = true
	k.Grid = grid1(Const((blocks + utilThreads - 1) / utilThreads))
	return k, nil
}

// ue8m0RoundUp emits layouts.UE8M0RoundUp of the f32 x (i32 code 0..255):
// NaN 255, Inf 254, 0 stays 0; otherwise the exponent field, incremented
// when the mantissa is not 0, the exponent is not 254, and x is not a
// subnormal of at most 2^-127.
func (b *Builder) ue8m0RoundUp(x value.Value) value.Value {
	bits := b.And(b.BitCast(x, ir.I32), ir.Int32(0x7FFFFFFF))
	e, mant := b.LShr(bits, ir.Int32(23)), b.And(bits, ir.Int32(0x7FFFFF))
	up := b.And(b.ICmp(enum.IPredNE, mant, ir.Int32(0)), b.ICmp(enum.IPredNE, e, ir.Int32(0xFE)))
	tinySub := b.And(b.ICmp(enum.IPredEQ, e, ir.Int32(0)), b.ICmp(enum.IPredULE, mant, ir.Int32(0x400000)))
	up = b.And(up, b.Xor(tinySub, ir.Bool(true)))
	c := b.Select(up, b.AddI(e, 1), e)
	c = b.Select(b.ICmp(enum.IPredEQ, bits, ir.Int32(0x7F800000)), ir.Int32(0xFE), c)
	return b.Select(b.ICmp(enum.IPredUGT, bits, ir.Int32(0x7F800000)), ir.Int32(0xFF), c)
}

// ue8m0F32 emits the f32 value 2^(code-127) of a UE8M0 scale code (i32
// 0..255): the exponent field code, 2^-127 (a subnormal) for 0, NaN for
// 255 (layouts.F32FromUE8M0).
func (b *Builder) ue8m0F32(code value.Value) value.Value {
	bits := b.Shl(code, ir.Int32(23))
	bits = b.Select(b.ICmp(enum.IPredEQ, code, ir.Int32(0)), ir.Int32(0x00400000), bits)
	bits = b.Select(b.ICmp(enum.IPredEQ, code, ir.Int32(255)), ir.Int32(0x7FC00000), bits)
	return b.BitCast(bits, ir.F32)
}
