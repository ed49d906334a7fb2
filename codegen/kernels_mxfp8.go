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

// emitQuantize is op's kernel: one thread per block of 32 consecutive
// elements of a row of X (bf16 or f32, rows = X's row count at T), grid
// ceil(rows*K/32 / 256). The thread loads the 32 values as f32, takes
// amax over their magnitudes (as integers, so a NaN wins), the scale code
// UE8M0RoundUp(amax/448) (div.rn.f32, then the round-up of the exponent:
// layouts.UE8M0RoundUp), the exact reciprocal 2^(127-code) (NaN for code
// 255, 2^-127 for 254), and stores E4M3(v * reciprocal) for each value
// (cvt.rn.satfinite.e4m3x2.f32: round to nearest even, Inf to ±448, NaN
// to NaN; PTX ISA "cvt", sm_89 and later) as 32 bytes, and the code as one
// byte. Values and scales of rows past the real ones are computed from
// whatever those rows hold and never read.
func emitQuantize(m *ir.Module, op moe.Quantize) (Kernel, error) {
	if op.K%32 != 0 {
		return Kernel{}, fmt.Errorf("codegen: %s: K = %d is not a multiple of 32", op.Name(), op.K)
	}
	b, k := opKernel(m, op, utilThreads, true)
	rowsX := op.X.Shape[0]
	nb := int64(op.K / 32)
	idx := b.Add(b.MulI(b.BlockIdx(ir.X), utilThreads), b.ThreadIdx(ir.X))
	rows := b.Add(b.MulI(b.Param("T"), rowsX.A), ir.Int32(rowsX.B))
	row, blk := b.UDiv(idx, ir.Int32(nb)), b.URem(idx, ir.Int32(nb))
	b.ReturnIf(b.ICmp(enum.IPredUGE, row, rows))
	first := b.Add(b.MulI(b.Wide(row), int64(op.K)), b.MulI(b.Wide(blk), 32)) // element index of the block
	vals := make([]value.Value, 32)
	if op.X.DType == moe.BF16 {
		src := b.ByteOffset(b.Param("x"), b.MulI(first, 2))
		for i := 0; i < 4; i++ {
			copy(vals[8*i:], b.loadBF16x8(b.ByteOffsetC(src, int64(16*i))))
		}
	} else {
		src := b.ByteOffset(b.Param("x"), b.MulI(first, 4))
		for i := 0; i < 8; i++ {
			v := b.LoadAt(ir.Vec(4, ir.F32), b.ByteOffsetC(src, int64(16*i)), 16)
			for j := 0; j < 4; j++ {
				vals[4*i+j] = b.ExtractElement(v, j)
			}
		}
	}
	var amax value.Value = ir.Int32(0)
	for _, v := range vals {
		a := b.And(b.BitCast(v, ir.I32), ir.Int32(0x7FFFFFFF))
		amax = b.Select(b.ICmp(enum.IPredUGT, a, amax), a, amax)
	}
	code := b.ue8m0RoundUp(b.AsmCallNoMemory("div.rn.f32 $0, $1, 0f43E00000;", "=f,f", ir.F32, b.BitCast(amax, ir.F32))) // 448
	// 2^(127-code): NaN for 255, the subnormal 2^-127 for 254.
	inv := b.Shl(b.Sub(ir.Int32(254), code), ir.Int32(23))
	inv = b.Select(b.ICmp(enum.IPredEQ, code, ir.Int32(254)), ir.Int32(0x00400000), inv)
	inv = b.Select(b.ICmp(enum.IPredEQ, code, ir.Int32(255)), ir.Int32(0x7FC00000), inv)
	r := b.BitCast(inv, ir.F32)
	var words [8]value.Value
	for i := range words {
		words[i] = b.AsmCallNoMemory(
			"{\n\t.reg .b16 lo, hi;\n\tcvt.rn.satfinite.e4m3x2.f32 lo, $2, $1;\n\tcvt.rn.satfinite.e4m3x2.f32 hi, $4, $3;\n\tmov.b32 $0, {lo, hi};\n\t}",
			"=r,f,f,f,f", ir.I32, b.FMul(vals[4*i], r), b.FMul(vals[4*i+1], r), b.FMul(vals[4*i+2], r), b.FMul(vals[4*i+3], r))
	}
	dst := b.ByteOffset(b.Param("q"), first)
	for h := 0; h < 2; h++ {
		var v value.Value = ir.Undef(ir.Vec(4, ir.I32))
		for j := 0; j < 4; j++ {
			v = b.InsertElement(v, words[4*h+j], j)
		}
		b.StoreAt(v, b.ByteOffsetC(dst, int64(16*h)), 16)
	}
	b.StoreAt(b.Trunc(code, ir.I8), b.ByteOffset(b.Param("scales"), b.Add(b.MulI(b.Wide(row), nb), b.Wide(blk))), 1)
	b.Ret(nil)
	k.SkipIfZeroT = true
	k.Grid = grid1(Expr{A: rowsX.A * nb, B: rowsX.B * nb, D: utilThreads, Min: 1})
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
