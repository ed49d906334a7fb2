package ir

import (
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"
)

// Value is an llir value (instruction result, parameter, constant, global).
type Value = value.Value

// Type is an llir type.
type Type = types.Type

// Address spaces, LLVM NVPTX numbering (llvm/Support/NVPTXAddrSpace.h;
// PTX ISA §5.1 state spaces).
const (
	Generic types.AddrSpace = 0 // generic addresses (PTX ISA §6.4.1)
	Global  types.AddrSpace = 1 // .global
	Shared  types.AddrSpace = 3 // .shared (CTA)
	Const   types.AddrSpace = 4 // .const
	Local   types.AddrSpace = 5 // .local
)

// Scalar types. bf16 values travel as I16 and fp8 (E4M3/E5M2/UE8M0) as I8.
var (
	I1  = types.I1
	I8  = types.I8
	I16 = types.I16
	I32 = types.I32
	I64 = types.I64
	F16 = types.Half
	F32 = types.Float
	F64 = types.Double
	// Void is the return type of functions that return nothing.
	Void = types.Void
)

// PtrTo returns the type `elem addrspace(as)*`.
func PtrTo(elem types.Type, as types.AddrSpace) *types.PointerType {
	p := types.NewPointer(elem)
	p.AddrSpace = as
	return p
}

// GlobalPtr returns `elem addrspace(1)*`.
func GlobalPtr(elem types.Type) *types.PointerType { return PtrTo(elem, Global) }

// SharedPtr returns `elem addrspace(3)*`.
func SharedPtr(elem types.Type) *types.PointerType { return PtrTo(elem, Shared) }

// GenericPtr returns `elem*` (generic address space).
func GenericPtr(elem types.Type) *types.PointerType { return PtrTo(elem, Generic) }

// ConstPtr returns `elem addrspace(4)*`.
func ConstPtr(elem types.Type) *types.PointerType { return PtrTo(elem, Const) }

// LocalPtr returns `elem addrspace(5)*`.
func LocalPtr(elem types.Type) *types.PointerType { return PtrTo(elem, Local) }

// Vec returns the vector type <n x elem>; the subset allows n = 2 or 4 of
// i8, i16, i32, half, float, at most 16 bytes.
func Vec(n int, elem types.Type) *types.VectorType { return types.NewVector(uint64(n), elem) }

// Struct returns the literal struct type {fields...} (results of inline asm
// with several outputs, alloca/global element types).
func Struct(fields ...types.Type) *types.StructType { return types.NewStruct(fields...) }

// Array returns [n x elem].
func Array(n int, elem types.Type) *types.ArrayType { return types.NewArray(uint64(n), elem) }

// Int32 returns the i32 constant v.
func Int32(v int64) *constant.Int { return constant.NewInt(types.I32, v) }

// Int64 returns the i64 constant v.
func Int64(v int64) *constant.Int { return constant.NewInt(types.I64, v) }

// Int16 returns the i16 constant v.
func Int16(v int64) *constant.Int { return constant.NewInt(types.I16, v) }

// Int8 returns the i8 constant v.
func Int8(v int64) *constant.Int { return constant.NewInt(types.I8, v) }

// Int returns the integer constant v of type t.
func Int(t *types.IntType, v int64) *constant.Int { return constant.NewInt(t, v) }

// Bool returns the i1 constant v.
func Bool(v bool) *constant.Int { return constant.NewBool(v) }

// Float32 returns the float constant v (rounded to float32).
func Float32(v float64) *constant.Float {
	return constant.NewFloat(types.Float, float64(float32(v)))
}

// Float64 returns the double constant v.
func Float64(v float64) *constant.Float { return constant.NewFloat(types.Double, v) }

// FullMask is the i32 constant 0xffffffff: all 32 lanes of a warp, the member
// mask of *.sync instructions.
var FullMask = constant.NewInt(types.I32, -1)

// Undef returns undef of type t.
func Undef(t types.Type) *constant.Undef { return constant.NewUndef(t) }

func isInt(t types.Type, bits ...uint64) bool {
	it, ok := t.(*types.IntType)
	if !ok {
		return false
	}
	if len(bits) == 0 {
		return true
	}
	for _, b := range bits {
		if it.BitSize == b {
			return true
		}
	}
	return false
}

func isFloat(t types.Type) bool {
	ft, ok := t.(*types.FloatType)
	if !ok {
		return false
	}
	return ft.Kind == types.FloatKindHalf || ft.Kind == types.FloatKindFloat || ft.Kind == types.FloatKindDouble
}

func isF32(t types.Type) bool {
	ft, ok := t.(*types.FloatType)
	return ok && ft.Kind == types.FloatKindFloat
}

func ptrType(t types.Type) (*types.PointerType, bool) {
	p, ok := t.(*types.PointerType)
	return p, ok
}
