package ptx

import (
	"fmt"

	"github.com/llir/llvm/ir/types"
)

// kind is the machine-level class of a scalar LLVM type: it fixes the PTX
// register class that holds a value of that type and the instruction type
// suffixes used on it.
type kind int

const (
	kPred kind = iota // i1 in a .pred register
	kI8               // i8 in the low 8 bits of a .b16 register (upper bits undefined)
	kI16              // i16 in a .b16 register
	kHalf             // half (IEEE binary16) in a .b16 register
	kI32              // i32 in a .b32 register
	kF32              // float in a .f32 register
	kI64              // i64 in a .b64 register
	kF64              // double in a .f64 register
	kPtr              // any pointer: a 64-bit address in a .b64 register
)

// regClass is a PTX virtual register class.
type regClass int

const (
	rcPred regClass = iota // %p: .pred
	rcB16                  // %rs: .b16 (i8, i16)
	rcH                    // %h: .b16 holding half
	rcB32                  // %r: .b32
	rcF32                  // %f: .f32
	rcB64                  // %rd: .b64 (i64, pointers)
	rcF64                  // %fd: .f64
	numRegClasses
)

// regClassInfo gives each register class its name prefix, its declaration
// type and a representative kind (kindOfReg).
var regClassInfo = [numRegClasses]struct {
	prefix, decl string
	kind         kind
}{
	rcPred: {"%p", ".pred", kPred},
	rcB16:  {"%rs", ".b16", kI16},
	rcH:    {"%h", ".b16", kHalf},
	rcB32:  {"%r", ".b32", kI32},
	rcF32:  {"%f", ".f32", kF32},
	rcB64:  {"%rd", ".b64", kI64},
	rcF64:  {"%fd", ".f64", kF64},
}

func (k kind) class() regClass {
	switch k {
	case kPred:
		return rcPred
	case kI8, kI16:
		return rcB16
	case kHalf:
		return rcH
	case kI32:
		return rcB32
	case kF32:
		return rcF32
	case kF64:
		return rcF64
	}
	return rcB64
}

// bits is the width of the value in bits (1 for i1, 64 for pointers).
func (k kind) bits() int {
	switch k {
	case kPred:
		return 1
	case kI8:
		return 8
	case kI16, kHalf:
		return 16
	case kI32, kF32:
		return 32
	}
	return 64
}

// regBits is the width of the register that holds the value.
func (k kind) regBits() int {
	if k == kI8 {
		return 16
	}
	return k.bits()
}

func (k kind) isInt() bool   { return k == kI8 || k == kI16 || k == kI32 || k == kI64 }
func (k kind) isFloat() bool { return k == kHalf || k == kF32 || k == kF64 }

// fsuf is the PTX floating-point type suffix (f16, f32, f64).
func (k kind) fsuf() string {
	switch k {
	case kHalf:
		return "f16"
	case kF32:
		return "f32"
	}
	return "f64"
}

// scalarKind classifies a scalar LLVM type; anything else is an error.
func scalarKind(t types.Type) (kind, error) {
	switch t := t.(type) {
	case *types.IntType:
		switch t.BitSize {
		case 1:
			return kPred, nil
		case 8:
			return kI8, nil
		case 16:
			return kI16, nil
		case 32:
			return kI32, nil
		case 64:
			return kI64, nil
		}
	case *types.FloatType:
		switch t.Kind {
		case types.FloatKindHalf:
			return kHalf, nil
		case types.FloatKindFloat:
			return kF32, nil
		case types.FloatKindDouble:
			return kF64, nil
		}
	case *types.PointerType:
		if err := checkAddrSpace(t.AddrSpace); err != nil {
			return 0, err
		}
		return kPtr, nil
	}
	return 0, fmt.Errorf("type %s is not supported (scalars are i1, i8, i16, i32, i64, half, float, double and pointers; bf16 and fp8 travel as i16 and i8)", t)
}

// Address spaces of the NVPTX target (LLVM NVPTX numbering).
const (
	asGeneric = 0
	asGlobal  = 1
	asShared  = 3
	asConst   = 4
	asLocal   = 5
	asParam   = 101
)

func checkAddrSpace(as types.AddrSpace) error {
	switch as {
	case asGeneric, asGlobal, asShared, asConst, asLocal, asParam:
		return nil
	}
	return fmt.Errorf("address space %d is not supported (0 generic, 1 global, 3 shared, 4 const, 5 local, 101 param)", as)
}

// spaceSuffix is the state-space qualifier of ld/st/atom for a pointer in
// address space as ("" for generic addressing).
func spaceSuffix(as types.AddrSpace) string {
	switch as {
	case asGlobal:
		return ".global"
	case asShared:
		return ".shared"
	case asConst:
		return ".const"
	case asLocal:
		return ".local"
	case asParam:
		return ".param"
	}
	return ""
}

// laneTypes flattens a first-class type into the scalar types of its
// registers: a scalar is one lane, a vector n lanes, a struct or array the
// lanes of its members in order.
func laneTypes(t types.Type) ([]types.Type, error) {
	switch t := t.(type) {
	case *types.VectorType:
		if t.Scalable {
			return nil, fmt.Errorf("scalable vector %s is not supported", t)
		}
		if _, err := scalarKind(t.ElemType); err != nil {
			return nil, err
		}
		if t.Len > 64 {
			return nil, fmt.Errorf("vector %s is too long", t)
		}
		out := make([]types.Type, t.Len)
		for i := range out {
			out[i] = t.ElemType
		}
		return out, nil
	case *types.StructType:
		if t.Opaque {
			return nil, fmt.Errorf("opaque struct %s has no lanes", t)
		}
		var out []types.Type
		for _, f := range t.Fields {
			l, err := laneTypes(f)
			if err != nil {
				return nil, err
			}
			out = append(out, l...)
		}
		if len(out) > 256 {
			return nil, fmt.Errorf("aggregate %s is too large to hold in registers", t)
		}
		return out, nil
	case *types.ArrayType:
		l, err := laneTypes(t.ElemType)
		if err != nil {
			return nil, err
		}
		if uint64(len(l))*t.Len > 256 {
			return nil, fmt.Errorf("aggregate %s is too large to hold in registers", t)
		}
		var out []types.Type
		for i := uint64(0); i < t.Len; i++ {
			out = append(out, l...)
		}
		return out, nil
	}
	if _, err := scalarKind(t); err != nil {
		return nil, err
	}
	return []types.Type{t}, nil
}

// laneKinds is laneTypes mapped through scalarKind.
func laneKinds(t types.Type) ([]kind, error) {
	lts, err := laneTypes(t)
	if err != nil {
		return nil, err
	}
	ks := make([]kind, len(lts))
	for i, lt := range lts {
		if ks[i], err = scalarKind(lt); err != nil {
			return nil, err
		}
	}
	return ks, nil
}

// Data layout "e-i64:64-i128:128-v16:16-v32:32-n16:32:64" (the NVPTX
// default): every integer, float and pointer type is naturally aligned,
// vectors are aligned to their size rounded up to a power of two, arrays to
// their element and structs to their most aligned field (LLVM LangRef, "Data
// Layout").

// typeSize is the store size in bytes of t as laid out in memory (the alloc
// size: padded to a multiple of its alignment).
func typeSize(t types.Type) (int64, error) {
	switch t := t.(type) {
	case *types.IntType:
		if t.BitSize == 1 || t.BitSize == 8 {
			return 1, nil
		}
		switch t.BitSize {
		case 16, 32, 64, 128:
			return int64(t.BitSize / 8), nil
		}
	case *types.FloatType:
		switch t.Kind {
		case types.FloatKindHalf:
			return 2, nil
		case types.FloatKindFloat:
			return 4, nil
		case types.FloatKindDouble:
			return 8, nil
		}
	case *types.PointerType:
		return 8, nil
	case *types.VectorType:
		k, err := scalarKind(t.ElemType)
		if err != nil {
			return 0, err
		}
		if k == kPred {
			return 0, fmt.Errorf("vector of i1 %s has no byte layout", t)
		}
		return int64(t.Len) * int64(k.bits()/8), nil
	case *types.ArrayType:
		es, err := typeSize(t.ElemType)
		if err != nil {
			return 0, err
		}
		return es * int64(t.Len), nil
	case *types.StructType:
		off, align, err := structLayout(t, nil)
		if err != nil {
			return 0, err
		}
		return roundUp(off, align), nil
	}
	return 0, fmt.Errorf("type %s has no memory layout here", t)
}

// typeAlign is the ABI alignment in bytes of t.
func typeAlign(t types.Type) (int64, error) {
	switch t := t.(type) {
	case *types.VectorType:
		s, err := typeSize(t)
		if err != nil {
			return 0, err
		}
		return nextPow2(s), nil
	case *types.ArrayType:
		return typeAlign(t.ElemType)
	case *types.StructType:
		if t.Packed {
			return 1, nil
		}
		_, a, err := structLayout(t, nil)
		return a, err
	}
	return typeSize(t)
}

// structLayout returns the unpadded end offset and alignment of struct t; when
// offsets is non-nil it receives the byte offset of each field.
func structLayout(t *types.StructType, offsets *[]int64) (end, align int64, err error) {
	if t.Opaque {
		return 0, 0, fmt.Errorf("opaque struct %s has no layout", t)
	}
	align = 1
	for _, f := range t.Fields {
		fs, err := typeSize(f)
		if err != nil {
			return 0, 0, err
		}
		fa := int64(1)
		if !t.Packed {
			if fa, err = typeAlign(f); err != nil {
				return 0, 0, err
			}
		}
		end = roundUp(end, fa)
		if offsets != nil {
			*offsets = append(*offsets, end)
		}
		end += fs
		if fa > align {
			align = fa
		}
	}
	return end, align, nil
}

func roundUp(x, a int64) int64 {
	if a <= 1 {
		return x
	}
	return (x + a - 1) / a * a
}

func nextPow2(x int64) int64 {
	p := int64(1)
	for p < x {
		p <<= 1
	}
	return p
}

func log2(x int64) int {
	n := 0
	for x > 1 {
		x >>= 1
		n++
	}
	return n
}

func isPow2(x int64) bool { return x > 0 && x&(x-1) == 0 }
