package ir

import (
	"fmt"

	llir "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"
)

// Func is a function under construction together with its builder: a cursor
// on the block where the next instruction goes. Every helper appends to the
// current block and returns the result value. Bad input (mismatched types,
// a terminated block) never panics: the helper records an error in the
// module (see Module.Err, Module.Finish) and returns undef of the expected
// type so that building can go on.
type Func struct {
	// IR is the underlying llir function.
	IR *llir.Func
	// M is the module the function belongs to.
	M *Module

	params []Param
	cur    *llir.Block
	nblock int
}

// Param returns the parameter called name; an unknown name is an error.
func (f *Func) Param(name string) value.Value {
	for _, p := range f.IR.Params {
		if p.Name() == name {
			return p
		}
	}
	f.errorf("no parameter %q", name)
	return constant.NewUndef(types.I32)
}

// Arg returns the i-th parameter (0-based).
func (f *Func) Arg(i int) value.Value {
	if i < 0 || i >= len(f.IR.Params) {
		f.errorf("parameter index %d out of range (%d parameters)", i, len(f.IR.Params))
		return constant.NewUndef(types.I32)
	}
	return f.IR.Params[i]
}

func (f *Func) errorf(format string, args ...any) {
	f.M.errorf("function @%s: %s", f.IR.Name(), fmt.Sprintf(format, args...))
}

// Block returns the current block.
func (f *Func) Block() *llir.Block { return f.cur }

// SetBlock moves the cursor to the end of block b.
func (f *Func) SetBlock(b *llir.Block) { f.cur = b }

// NewBlock adds a block whose name is prefix followed by a number unique in
// the function; the cursor does not move.
func (f *Func) NewBlock(prefix string) *llir.Block {
	f.nblock++
	return f.IR.NewBlock(fmt.Sprintf("%s%d", prefix, f.nblock))
}

// detached returns a new uniquely named block not yet in the function;
// attach appends it, so that block order follows program order.
func (f *Func) detached(prefix string) *llir.Block {
	f.nblock++
	b := llir.NewBlock(fmt.Sprintf("%s%d", prefix, f.nblock))
	b.Parent = f.IR
	return b
}

func (f *Func) attach(b *llir.Block) *llir.Block {
	f.IR.Blocks = append(f.IR.Blocks, b)
	return b
}

// block returns the current block, or records an error and returns a scratch
// block (never part of the function) when the current block is terminated.
func (f *Func) block(what string) *llir.Block {
	if f.cur.Term != nil {
		f.errorf("%s after the terminator of block %%%s", what, f.cur.Name())
		return llir.NewBlock("")
	}
	return f.cur
}

// try runs build, converting an llir panic (malformed operands) into a
// recorded error and undef of type fallback.
func (f *Func) try(what string, fallback types.Type, build func(b *llir.Block) value.Value) (v value.Value) {
	b := f.block(what)
	defer func() {
		if r := recover(); r != nil {
			f.errorf("%s: %v", what, r)
			v = constant.NewUndef(fallback)
		}
	}()
	return build(b)
}

func (f *Func) bad(fallback types.Type, format string, args ...any) value.Value {
	f.errorf(format, args...)
	return constant.NewUndef(fallback)
}

func typeOf(v value.Value) types.Type {
	if v == nil {
		return types.Void
	}
	return v.Type()
}

// --- integer and float arithmetic ---

func (f *Func) intBin(op string, x, y value.Value, mk func(b *llir.Block) value.Value) value.Value {
	tx, ty := typeOf(x), typeOf(y)
	if !isInt(tx) || !tx.Equal(ty) {
		return f.bad(tx, "%s: operands must be integers of one type, got %s and %s", op, tx, ty)
	}
	return f.try(op, tx, mk)
}

func (f *Func) fltBin(op string, x, y value.Value, mk func(b *llir.Block) value.Value) value.Value {
	tx, ty := typeOf(x), typeOf(y)
	if !isFloat(tx) || !tx.Equal(ty) {
		return f.bad(tx, "%s: operands must be floats of one type, got %s and %s", op, tx, ty)
	}
	return f.try(op, tx, mk)
}

// Add returns x + y (integers of one type, wrapping).
func (f *Func) Add(x, y value.Value) value.Value {
	return f.intBin("add", x, y, func(b *llir.Block) value.Value { return b.NewAdd(x, y) })
}

// Sub returns x - y (integers).
func (f *Func) Sub(x, y value.Value) value.Value {
	return f.intBin("sub", x, y, func(b *llir.Block) value.Value { return b.NewSub(x, y) })
}

// Mul returns x * y (integers, low half).
func (f *Func) Mul(x, y value.Value) value.Value {
	return f.intBin("mul", x, y, func(b *llir.Block) value.Value { return b.NewMul(x, y) })
}

// UDiv returns x / y, unsigned.
func (f *Func) UDiv(x, y value.Value) value.Value {
	return f.intBin("udiv", x, y, func(b *llir.Block) value.Value { return b.NewUDiv(x, y) })
}

// SDiv returns x / y, signed (rounds toward zero).
func (f *Func) SDiv(x, y value.Value) value.Value {
	return f.intBin("sdiv", x, y, func(b *llir.Block) value.Value { return b.NewSDiv(x, y) })
}

// URem returns x % y, unsigned.
func (f *Func) URem(x, y value.Value) value.Value {
	return f.intBin("urem", x, y, func(b *llir.Block) value.Value { return b.NewURem(x, y) })
}

// SRem returns x % y, signed (sign of x).
func (f *Func) SRem(x, y value.Value) value.Value {
	return f.intBin("srem", x, y, func(b *llir.Block) value.Value { return b.NewSRem(x, y) })
}

// Shl returns x << y.
func (f *Func) Shl(x, y value.Value) value.Value {
	return f.intBin("shl", x, y, func(b *llir.Block) value.Value { return b.NewShl(x, y) })
}

// LShr returns x >> y, logical.
func (f *Func) LShr(x, y value.Value) value.Value {
	return f.intBin("lshr", x, y, func(b *llir.Block) value.Value { return b.NewLShr(x, y) })
}

// AShr returns x >> y, arithmetic.
func (f *Func) AShr(x, y value.Value) value.Value {
	return f.intBin("ashr", x, y, func(b *llir.Block) value.Value { return b.NewAShr(x, y) })
}

// And returns x & y (integers, i1 included).
func (f *Func) And(x, y value.Value) value.Value {
	return f.intBin("and", x, y, func(b *llir.Block) value.Value { return b.NewAnd(x, y) })
}

// Or returns x | y.
func (f *Func) Or(x, y value.Value) value.Value {
	return f.intBin("or", x, y, func(b *llir.Block) value.Value { return b.NewOr(x, y) })
}

// Xor returns x ^ y.
func (f *Func) Xor(x, y value.Value) value.Value {
	return f.intBin("xor", x, y, func(b *llir.Block) value.Value { return b.NewXor(x, y) })
}

// FAdd returns x + y (half, float or double; round to nearest even).
func (f *Func) FAdd(x, y value.Value) value.Value {
	return f.fltBin("fadd", x, y, func(b *llir.Block) value.Value { return b.NewFAdd(x, y) })
}

// FSub returns x - y.
func (f *Func) FSub(x, y value.Value) value.Value {
	return f.fltBin("fsub", x, y, func(b *llir.Block) value.Value { return b.NewFSub(x, y) })
}

// FMul returns x * y.
func (f *Func) FMul(x, y value.Value) value.Value {
	return f.fltBin("fmul", x, y, func(b *llir.Block) value.Value { return b.NewFMul(x, y) })
}

// FDiv returns x / y (IEEE, div.rn).
func (f *Func) FDiv(x, y value.Value) value.Value {
	return f.fltBin("fdiv", x, y, func(b *llir.Block) value.Value { return b.NewFDiv(x, y) })
}

// FNeg returns -x.
func (f *Func) FNeg(x value.Value) value.Value {
	if !isFloat(typeOf(x)) {
		return f.bad(typeOf(x), "fneg: operand must be a float, got %s", typeOf(x))
	}
	return f.try("fneg", x.Type(), func(b *llir.Block) value.Value { return b.NewFNeg(x) })
}

// ICmp compares integers or pointers of one type; the result is i1.
func (f *Func) ICmp(pred enum.IPred, x, y value.Value) value.Value {
	tx, ty := typeOf(x), typeOf(y)
	_, isPtr := ptrType(tx)
	if !(isInt(tx) || isPtr) || !tx.Equal(ty) {
		return f.bad(types.I1, "icmp: operands must be integers or pointers of one type, got %s and %s", tx, ty)
	}
	return f.try("icmp", types.I1, func(b *llir.Block) value.Value { return b.NewICmp(pred, x, y) })
}

// FCmp compares floats of one type; the result is i1.
func (f *Func) FCmp(pred enum.FPred, x, y value.Value) value.Value {
	tx, ty := typeOf(x), typeOf(y)
	if !isFloat(tx) || !tx.Equal(ty) {
		return f.bad(types.I1, "fcmp: operands must be floats of one type, got %s and %s", tx, ty)
	}
	return f.try("fcmp", types.I1, func(b *llir.Block) value.Value { return b.NewFCmp(pred, x, y) })
}

// Select returns cond ? x : y; cond is i1.
func (f *Func) Select(cond, x, y value.Value) value.Value {
	tx, ty := typeOf(x), typeOf(y)
	if !typeOf(cond).Equal(types.I1) || !tx.Equal(ty) {
		return f.bad(tx, "select: want i1 condition and operands of one type, got %s, %s, %s", typeOf(cond), tx, ty)
	}
	return f.try("select", tx, func(b *llir.Block) value.Value { return b.NewSelect(cond, x, y) })
}

// --- conversions ---

func (f *Func) conv(op string, x value.Value, to types.Type, ok bool, mk func(b *llir.Block) value.Value) value.Value {
	if !ok {
		return f.bad(to, "%s: cannot convert %s to %s", op, typeOf(x), to)
	}
	return f.try(op, to, mk)
}

func bits(t types.Type) uint64 {
	switch t := t.(type) {
	case *types.IntType:
		return t.BitSize
	case *types.FloatType:
		switch t.Kind {
		case types.FloatKindHalf:
			return 16
		case types.FloatKindFloat:
			return 32
		case types.FloatKindDouble:
			return 64
		}
	case *types.PointerType:
		return 64
	case *types.VectorType:
		return t.Len * bits(t.ElemType)
	}
	return 0
}

// Trunc truncates integer x to the narrower integer type to.
func (f *Func) Trunc(x value.Value, to types.Type) value.Value {
	return f.conv("trunc", x, to, isInt(typeOf(x)) && isInt(to) && bits(to) < bits(typeOf(x)),
		func(b *llir.Block) value.Value { return b.NewTrunc(x, to) })
}

// ZExt zero-extends integer x to the wider integer type to.
func (f *Func) ZExt(x value.Value, to types.Type) value.Value {
	return f.conv("zext", x, to, isInt(typeOf(x)) && isInt(to) && bits(to) > bits(typeOf(x)),
		func(b *llir.Block) value.Value { return b.NewZExt(x, to) })
}

// SExt sign-extends integer x to the wider integer type to.
func (f *Func) SExt(x value.Value, to types.Type) value.Value {
	return f.conv("sext", x, to, isInt(typeOf(x)) && isInt(to) && bits(to) > bits(typeOf(x)),
		func(b *llir.Block) value.Value { return b.NewSExt(x, to) })
}

// FPTrunc rounds float x to the narrower float type to (round to nearest even).
func (f *Func) FPTrunc(x value.Value, to types.Type) value.Value {
	return f.conv("fptrunc", x, to, isFloat(typeOf(x)) && isFloat(to) && bits(to) < bits(typeOf(x)),
		func(b *llir.Block) value.Value { return b.NewFPTrunc(x, to) })
}

// FPExt widens float x to the float type to (exact).
func (f *Func) FPExt(x value.Value, to types.Type) value.Value {
	return f.conv("fpext", x, to, isFloat(typeOf(x)) && isFloat(to) && bits(to) > bits(typeOf(x)),
		func(b *llir.Block) value.Value { return b.NewFPExt(x, to) })
}

// FPToSI converts float x to signed integer type to (round toward zero).
func (f *Func) FPToSI(x value.Value, to types.Type) value.Value {
	return f.conv("fptosi", x, to, isFloat(typeOf(x)) && isInt(to),
		func(b *llir.Block) value.Value { return b.NewFPToSI(x, to) })
}

// FPToUI converts float x to unsigned integer type to (round toward zero).
func (f *Func) FPToUI(x value.Value, to types.Type) value.Value {
	return f.conv("fptoui", x, to, isFloat(typeOf(x)) && isInt(to),
		func(b *llir.Block) value.Value { return b.NewFPToUI(x, to) })
}

// SIToFP converts signed integer x to float type to (round to nearest even).
func (f *Func) SIToFP(x value.Value, to types.Type) value.Value {
	return f.conv("sitofp", x, to, isInt(typeOf(x)) && isFloat(to),
		func(b *llir.Block) value.Value { return b.NewSIToFP(x, to) })
}

// UIToFP converts unsigned integer x to float type to.
func (f *Func) UIToFP(x value.Value, to types.Type) value.Value {
	return f.conv("uitofp", x, to, isInt(typeOf(x)) && isFloat(to),
		func(b *llir.Block) value.Value { return b.NewUIToFP(x, to) })
}

// PtrToInt returns pointer x as an i64.
func (f *Func) PtrToInt(x value.Value) value.Value {
	_, ok := ptrType(typeOf(x))
	return f.conv("ptrtoint", x, types.I64, ok,
		func(b *llir.Block) value.Value { return b.NewPtrToInt(x, types.I64) })
}

// IntToPtr returns the i64 x as a pointer of type to.
func (f *Func) IntToPtr(x value.Value, to *types.PointerType) value.Value {
	return f.conv("inttoptr", x, to, isInt(typeOf(x), 64),
		func(b *llir.Block) value.Value { return b.NewIntToPtr(x, to) })
}

// BitCast reinterprets x as type to of the same size: pointer to pointer in
// the same address space (a change of element type), or between scalars and
// vectors of one bit size (e.g. <2 x i16> and i32, float and i32).
func (f *Func) BitCast(x value.Value, to types.Type) value.Value {
	from := typeOf(x)
	pf, fromPtr := ptrType(from)
	pt, toPtr := ptrType(to)
	ok := false
	switch {
	case fromPtr && toPtr:
		ok = pf.AddrSpace == pt.AddrSpace
	case !fromPtr && !toPtr:
		ok = bits(from) != 0 && bits(from) == bits(to)
	}
	return f.conv("bitcast", x, to, ok, func(b *llir.Block) value.Value { return b.NewBitCast(x, to) })
}

// Cast returns pointer p with element type elem, same address space (a
// bitcast); p itself when it already has that element type.
func (f *Func) Cast(p value.Value, elem types.Type) value.Value {
	pt, ok := ptrType(typeOf(p))
	if !ok {
		return f.bad(GenericPtr(elem), "cast: %s is not a pointer", typeOf(p))
	}
	if pt.ElemType.Equal(elem) {
		return p
	}
	return f.BitCast(p, PtrTo(elem, pt.AddrSpace))
}

// ToSpace casts pointer p to address space as (addrspacecast; PTX cvta or
// cvta.to). One side must be generic. p itself when already in as.
func (f *Func) ToSpace(p value.Value, as types.AddrSpace) value.Value {
	pt, ok := ptrType(typeOf(p))
	if !ok {
		return f.bad(PtrTo(types.I8, as), "addrspacecast: %s is not a pointer", typeOf(p))
	}
	if pt.AddrSpace == as {
		return p
	}
	to := PtrTo(pt.ElemType, as)
	ok = (pt.AddrSpace == Generic) != (as == Generic) && okSpace(pt.AddrSpace) && okSpace(as)
	return f.conv("addrspacecast", p, to, ok, func(b *llir.Block) value.Value { return b.NewAddrSpaceCast(p, to) })
}

// ToGeneric casts pointer p to the generic address space (PTX cvta).
func (f *Func) ToGeneric(p value.Value) value.Value { return f.ToSpace(p, Generic) }

func okSpace(as types.AddrSpace) bool {
	switch as {
	case Generic, Global, Shared, Const, Local:
		return true
	}
	return false
}
