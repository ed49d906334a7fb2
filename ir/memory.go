package ir

import (
	llir "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"
)

// GEP returns `getelementptr inbounds elem, p, idx...`: the address of an
// element below pointer p (whose element type must be elem). Indices are i32
// or i64; struct fields take i32 constants.
func (f *Func) GEP(p value.Value, idx ...value.Value) value.Value {
	pt, ok := ptrType(typeOf(p))
	if !ok {
		return f.bad(GenericPtr(types.I8), "getelementptr: base %s is not a pointer", typeOf(p))
	}
	for _, i := range idx {
		if !isInt(typeOf(i), 32, 64) {
			return f.bad(p.Type(), "getelementptr: index %s is not i32 or i64", typeOf(i))
		}
	}
	return f.try("getelementptr", p.Type(), func(b *llir.Block) value.Value {
		g := b.NewGetElementPtr(pt.ElemType, p, idx...)
		g.InBounds = true
		return g
	})
}

// Index returns &p[i] for pointer p and integer index i (one GEP index).
func (f *Func) Index(p, i value.Value) value.Value { return f.GEP(p, i) }

// ByteOffset returns the address off bytes past the byte pointer p (i8 in
// any address space): `getelementptr i8, p, i64 off`, without inbounds, so
// the address may leave the object p points into (a row past the end that
// is computed but never dereferenced). off is an i64, or an i32 that is
// sign-extended to i64 first (sext), so the address arithmetic is 64-bit.
func (f *Func) ByteOffset(p, off value.Value) value.Value {
	pt, ok := ptrType(typeOf(p))
	if !ok || !pt.ElemType.Equal(types.I8) {
		return f.bad(GenericPtr(types.I8), "byte offset: base %s is not an i8 pointer", typeOf(p))
	}
	switch {
	case isInt(typeOf(off), 32):
		off = f.SExt(off, types.I64)
	case !isInt(typeOf(off), 64):
		return f.bad(p.Type(), "byte offset: offset %s is not i32 or i64", typeOf(off))
	}
	return f.try("getelementptr", p.Type(), func(b *llir.Block) value.Value {
		return b.NewGetElementPtr(types.I8, p, off)
	})
}

// Load returns *p (natural alignment).
func (f *Func) Load(p value.Value) value.Value { return f.load(p, 0, false) }

// LoadAlign returns *p with alignment align bytes (a vector load needs align
// equal to its size to become one ld.v2/ld.v4).
func (f *Func) LoadAlign(p value.Value, align int) value.Value { return f.load(p, align, false) }

// LoadVolatile returns *p with a volatile load (PTX ld.volatile): re-read
// every time, e.g. for flags polled in a loop.
func (f *Func) LoadVolatile(p value.Value) value.Value { return f.load(p, 0, true) }

// LoadVolatileAlign is LoadVolatile with alignment align bytes (a power of
// two).
func (f *Func) LoadVolatileAlign(p value.Value, align int) value.Value {
	return f.load(p, align, true)
}

func (f *Func) load(p value.Value, align int, volatile bool) value.Value {
	pt, ok := ptrType(typeOf(p))
	if !ok {
		return f.bad(types.I32, "load: %s is not a pointer", typeOf(p))
	}
	if align != 0 && !isPow2(align) {
		return f.bad(pt.ElemType, "load: alignment %d is not a power of two", align)
	}
	return f.try("load", pt.ElemType, func(b *llir.Block) value.Value {
		l := b.NewLoad(pt.ElemType, p)
		l.Align = llir.Align(align)
		l.Volatile = volatile
		return l
	})
}

// Store writes v to *p (natural alignment).
func (f *Func) Store(v, p value.Value) { f.store(v, p, 0, false) }

// StoreAlign writes v to *p with alignment align bytes.
func (f *Func) StoreAlign(v, p value.Value, align int) { f.store(v, p, align, false) }

// StoreVolatile writes v to *p with a volatile store (st.volatile).
func (f *Func) StoreVolatile(v, p value.Value) { f.store(v, p, 0, true) }

func (f *Func) store(v, p value.Value, align int, volatile bool) {
	pt, ok := ptrType(typeOf(p))
	if !ok || !pt.ElemType.Equal(typeOf(v)) {
		f.errorf("store: cannot store %s through %s", typeOf(v), typeOf(p))
		return
	}
	if align != 0 && !isPow2(align) {
		f.errorf("store: alignment %d is not a power of two", align)
		return
	}
	f.try("store", types.Void, func(b *llir.Block) value.Value {
		s := b.NewStore(v, p)
		s.Align = llir.Align(align)
		s.Volatile = volatile
		return nil
	})
}

// Alloca reserves per-thread local memory for one value of type t (PTX
// .local); the result is a generic `t*`. Put allocas in the entry block; the
// helper inserts it there whatever the current block.
func (f *Func) Alloca(t types.Type) value.Value {
	entry := f.IR.Blocks[0]
	a := llir.NewAlloca(t)
	// Place after the leading allocas of the entry block.
	n := 0
	for n < len(entry.Insts) {
		if _, ok := entry.Insts[n].(*llir.InstAlloca); !ok {
			break
		}
		n++
	}
	entry.Insts = append(entry.Insts, nil)
	copy(entry.Insts[n+1:], entry.Insts[n:])
	entry.Insts[n] = a
	return a
}

// SharedBytes returns the shared address `byteOffset` bytes into shared
// buffer g (a DynamicShared or StaticShared global), as an `i8 addrspace(3)*`.
// byteOffset is an i32 or i64 value.
func (f *Func) SharedBytes(g value.Value, byteOffset value.Value) value.Value {
	pt, ok := ptrType(typeOf(g))
	if !ok || pt.AddrSpace != Shared {
		return f.bad(SharedPtr(types.I8), "shared bytes: %s is not a shared pointer", typeOf(g))
	}
	base := f.Cast(g, types.I8)
	return f.GEP(base, byteOffset)
}

// SharedAt returns shared buffer g at byteOffset as a pointer to elem
// (`elem addrspace(3)*`).
func (f *Func) SharedAt(g value.Value, byteOffset value.Value, elem types.Type) value.Value {
	return f.Cast(f.SharedBytes(g, byteOffset), elem)
}

// ExtractElement returns element i (a constant) of vector v.
func (f *Func) ExtractElement(v value.Value, i int) value.Value {
	vt, ok := typeOf(v).(*types.VectorType)
	if !ok || i < 0 || uint64(i) >= vt.Len {
		return f.bad(types.I32, "extractelement: index %d of %s", i, typeOf(v))
	}
	return f.try("extractelement", vt.ElemType, func(b *llir.Block) value.Value {
		return b.NewExtractElement(v, constant.NewInt(types.I32, int64(i)))
	})
}

// InsertElement returns vector v with element i (a constant) replaced by x.
func (f *Func) InsertElement(v, x value.Value, i int) value.Value {
	vt, ok := typeOf(v).(*types.VectorType)
	if !ok || i < 0 || uint64(i) >= vt.Len || !vt.ElemType.Equal(typeOf(x)) {
		return f.bad(typeOf(v), "insertelement: %s at %d into %s", typeOf(x), i, typeOf(v))
	}
	return f.try("insertelement", vt, func(b *llir.Block) value.Value {
		return b.NewInsertElement(v, x, constant.NewInt(types.I32, int64(i)))
	})
}

// ExtractValue returns field i of struct value v (results of cmpxchg and of
// inline asm with several outputs).
func (f *Func) ExtractValue(v value.Value, i int) value.Value {
	st, ok := typeOf(v).(*types.StructType)
	if !ok || i < 0 || i >= len(st.Fields) {
		return f.bad(types.I32, "extractvalue: field %d of %s", i, typeOf(v))
	}
	return f.try("extractvalue", st.Fields[i], func(b *llir.Block) value.Value {
		return b.NewExtractValue(v, uint64(i))
	})
}

// Call calls the internal function g with args; the result is g's return
// value (nil for void functions).
func (f *Func) Call(g *Func, args ...value.Value) value.Value {
	ps := g.IR.Sig.Params
	if len(args) != len(ps) {
		return f.bad(g.IR.Sig.RetType, "call @%s: %d arguments for %d parameters", g.IR.Name(), len(args), len(ps))
	}
	for i, a := range args {
		if !typeOf(a).Equal(ps[i]) {
			return f.bad(g.IR.Sig.RetType, "call @%s: argument %d is %s, want %s", g.IR.Name(), i, typeOf(a), ps[i])
		}
	}
	return f.try("call", g.IR.Sig.RetType, func(b *llir.Block) value.Value {
		c := b.NewCall(g.IR, args...)
		if g.IR.Sig.RetType.Equal(types.Void) {
			return nil
		}
		return c
	})
}

// CallIntrinsic calls intrinsic name, one of Intrinsics(), declared in the
// module on first use, with args of the listed parameter types; the result
// is nil for void intrinsics.
func (f *Func) CallIntrinsic(name string, args ...value.Value) value.Value {
	decl := f.M.intrinsic(name)
	s := intrinsicSigs[name]
	if len(args) != len(s.params) {
		return f.bad(s.ret, "%s: %d arguments for %d parameters", name, len(args), len(s.params))
	}
	for i, a := range args {
		if !typeOf(a).Equal(s.params[i]) {
			return f.bad(s.ret, "%s: argument %d is %s, want %s", name, i, typeOf(a), s.params[i])
		}
	}
	return f.try(name, s.ret, func(b *llir.Block) value.Value {
		c := b.NewCall(decl, args...)
		if s.ret.Equal(types.Void) {
			return nil
		}
		return c
	})
}
