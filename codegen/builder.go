package codegen

import (
	"fmt"
	"strings"

	llir "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"
)

// Address spaces (LLVM NVPTX numbering).
const (
	ASGeneric = 0
	ASGlobal  = 1
	ASShared  = 3
)

// Common types.
var (
	I1  = types.I1
	I8  = types.I8
	I16 = types.I16
	I32 = types.I32
	I64 = types.I64
	F32 = types.Float
	// GPtr is a byte pointer to global memory: every pointer kernel parameter
	// has this type, and addressing is done in bytes.
	GPtr = types.NewPointer(types.I8)
	// SPtr is a byte pointer to shared memory.
	SPtr = types.NewPointer(types.I8)
)

func init() {
	GPtr.AddrSpace = ASGlobal
	SPtr.AddrSpace = ASShared
}

// Builder emits instructions into the current block B of function F of
// module M. Helpers that create control flow leave B at the join block, so a
// caller simply keeps emitting. The epilogue (epilogue.go) and every engine
// use it.
type Builder struct {
	M *llir.Module
	F *llir.Func
	B *llir.Block
	n int // block name counter
}

// NewKernel adds a kernel function to m (annotated in !nvvm.annotations with
// maxntidx = threads) and returns a Builder at its entry block.
func NewKernel(m *llir.Module, name string, threads int, params ...*llir.Param) *Builder {
	f := m.NewFunc(name, types.Void, params...)
	kernelAnnotate(m, f, threads)
	b := &Builder{M: m, F: f}
	b.B = f.NewBlock("entry")
	return b
}

// Block returns a fresh, empty block of the function (not current).
func (b *Builder) Block(hint string) *llir.Block {
	b.n++
	return b.F.NewBlock(fmt.Sprintf("%s%d", hint, b.n))
}

// Param returns the function parameter named name.
func (b *Builder) Param(name string) value.Value {
	for _, p := range b.F.Params {
		if p.Name() == name {
			return p
		}
	}
	panic("codegen: no parameter " + name) // programming error inside codegen
}

// Constants.

// I32c is an i32 constant.
func I32c(v int64) *constant.Int { return constant.NewInt(types.I32, v) }

// I64c is an i64 constant.
func I64c(v int64) *constant.Int { return constant.NewInt(types.I64, v) }

// I16c is an i16 constant.
func I16c(v int64) *constant.Int { return constant.NewInt(types.I16, v) }

// F32c is a float constant: v rounded to float32 first (round to nearest
// even), so the in-memory constant is exactly the float that llir prints
// (llir's text truncates a float64 that is not a float32) and every backend
// sees the same value.
func F32c(v float64) *constant.Float { return constant.NewFloat(types.Float, float64(float32(v))) }

// True and False are i1 constants.
var (
	True  = constant.True
	False = constant.False
)

// Integer arithmetic.

func (b *Builder) Add(x, y value.Value) value.Value  { return b.B.NewAdd(x, y) }
func (b *Builder) Sub(x, y value.Value) value.Value  { return b.B.NewSub(x, y) }
func (b *Builder) Mul(x, y value.Value) value.Value  { return b.B.NewMul(x, y) }
func (b *Builder) UDiv(x, y value.Value) value.Value { return b.B.NewUDiv(x, y) }
func (b *Builder) SDiv(x, y value.Value) value.Value { return b.B.NewSDiv(x, y) }
func (b *Builder) URem(x, y value.Value) value.Value { return b.B.NewURem(x, y) }
func (b *Builder) Shl(x, y value.Value) value.Value  { return b.B.NewShl(x, y) }
func (b *Builder) LShr(x, y value.Value) value.Value { return b.B.NewLShr(x, y) }
func (b *Builder) AShr(x, y value.Value) value.Value { return b.B.NewAShr(x, y) }
func (b *Builder) And(x, y value.Value) value.Value  { return b.B.NewAnd(x, y) }
func (b *Builder) Or(x, y value.Value) value.Value   { return b.B.NewOr(x, y) }
func (b *Builder) Xor(x, y value.Value) value.Value  { return b.B.NewXor(x, y) }

// AddI adds an integer constant of x's type.
func (b *Builder) AddI(x value.Value, c int64) value.Value {
	if c == 0 {
		return x
	}
	return b.B.NewAdd(x, constant.NewInt(x.Type().(*types.IntType), c))
}

// MulI multiplies by an integer constant of x's type.
func (b *Builder) MulI(x value.Value, c int64) value.Value {
	if c == 1 {
		return x
	}
	return b.B.NewMul(x, constant.NewInt(x.Type().(*types.IntType), c))
}

// Cmp compares integers: pred is one of eq ne ult ule ugt uge slt sle sgt sge.
func (b *Builder) Cmp(pred string, x, y value.Value) value.Value {
	return b.B.NewICmp(ipred(pred), x, y)
}

func ipred(p string) enum.IPred {
	switch p {
	case "eq":
		return enum.IPredEQ
	case "ne":
		return enum.IPredNE
	case "ult":
		return enum.IPredULT
	case "ule":
		return enum.IPredULE
	case "ugt":
		return enum.IPredUGT
	case "uge":
		return enum.IPredUGE
	case "slt":
		return enum.IPredSLT
	case "sle":
		return enum.IPredSLE
	case "sgt":
		return enum.IPredSGT
	case "sge":
		return enum.IPredSGE
	}
	panic("codegen: bad icmp predicate " + p)
}

// Select is select c, x, y.
func (b *Builder) Select(c, x, y value.Value) value.Value { return b.B.NewSelect(c, x, y) }

// SMin / SMax / UMin of two i32s (icmp + select).
func (b *Builder) SMin(x, y value.Value) value.Value { return b.Select(b.Cmp("slt", x, y), x, y) }
func (b *Builder) SMax(x, y value.Value) value.Value { return b.Select(b.Cmp("sgt", x, y), x, y) }
func (b *Builder) UMin(x, y value.Value) value.Value { return b.Select(b.Cmp("ult", x, y), x, y) }

// Conversions.

func (b *Builder) ZExt(x value.Value, t types.Type) value.Value  { return b.B.NewZExt(x, t) }
func (b *Builder) SExt(x value.Value, t types.Type) value.Value  { return b.B.NewSExt(x, t) }
func (b *Builder) Trunc(x value.Value, t types.Type) value.Value { return b.B.NewTrunc(x, t) }
func (b *Builder) Bitcast(x value.Value, t types.Type) value.Value {
	return b.B.NewBitCast(x, t)
}
func (b *Builder) SIToFP(x value.Value) value.Value { return b.B.NewSIToFP(x, types.Float) }

// Wide sign-extends an i32 to i64 (for address arithmetic).
func (b *Builder) Wide(x value.Value) value.Value {
	if x.Type().Equal(types.I64) {
		return x
	}
	return b.B.NewSExt(x, types.I64)
}

// Float arithmetic.

func (b *Builder) FAdd(x, y value.Value) value.Value { return b.B.NewFAdd(x, y) }
func (b *Builder) FSub(x, y value.Value) value.Value { return b.B.NewFSub(x, y) }
func (b *Builder) FMul(x, y value.Value) value.Value { return b.B.NewFMul(x, y) }
func (b *Builder) FDiv(x, y value.Value) value.Value { return b.B.NewFDiv(x, y) }
func (b *Builder) FNeg(x value.Value) value.Value    { return b.B.NewFNeg(x) }

// FMA is llvm.fma.f32 (fma.rn.f32).
func (b *Builder) FMA(x, y, z value.Value) value.Value {
	return b.Call("llvm.fma.f32", types.Float, []types.Type{types.Float, types.Float, types.Float}, x, y, z)
}

// FMin / FMax are llvm.minnum.f32 / llvm.maxnum.f32 (min.f32 / max.f32).
func (b *Builder) FMin(x, y value.Value) value.Value {
	return b.Call("llvm.minnum.f32", types.Float, []types.Type{types.Float, types.Float}, x, y)
}
func (b *Builder) FMax(x, y value.Value) value.Value {
	return b.Call("llvm.maxnum.f32", types.Float, []types.Type{types.Float, types.Float}, x, y)
}

// Memory.

// GEP offsets a byte pointer by off bytes (i32 or i64).
func (b *Builder) GEP(p value.Value, off value.Value) value.Value {
	return b.B.NewGetElementPtr(types.I8, p, b.Wide(off))
}

// GEPc offsets a byte pointer by a constant number of bytes.
func (b *Builder) GEPc(p value.Value, off int64) value.Value {
	if off == 0 {
		return p
	}
	return b.B.NewGetElementPtr(types.I8, p, I64c(off))
}

// Load loads a value of type t from byte pointer p (any address space), with
// alignment align.
func (b *Builder) Load(t types.Type, p value.Value, align int) value.Value {
	tp := b.cast(p, t)
	l := b.B.NewLoad(t, tp)
	l.Align = llir.Align(align)
	return l
}

// LoadVolatile is Load marked volatile (re-read from memory every time).
func (b *Builder) LoadVolatile(t types.Type, p value.Value, align int) value.Value {
	tp := b.cast(p, t)
	l := b.B.NewLoad(t, tp)
	l.Align = llir.Align(align)
	l.Volatile = true
	return l
}

// Store stores v through byte pointer p with alignment align.
func (b *Builder) Store(v value.Value, p value.Value, align int) {
	tp := b.cast(p, v.Type())
	s := b.B.NewStore(v, tp)
	s.Align = llir.Align(align)
}

// cast bitcasts a byte pointer to a pointer to t in the same address space.
func (b *Builder) cast(p value.Value, t types.Type) value.Value {
	pt := p.Type().(*types.PointerType)
	if pt.ElemType.Equal(t) {
		return p
	}
	np := types.NewPointer(t)
	np.AddrSpace = pt.AddrSpace
	return b.B.NewBitCast(p, np)
}

// AtomicAdd is atomicrmw add (i32) at byte pointer p, returning the old value.
func (b *Builder) AtomicAdd(p, v value.Value) value.Value {
	return b.B.NewAtomicRMW(enum.AtomicOpAdd, b.cast(p, v.Type()), v, enum.AtomicOrderingMonotonic)
}

// AtomicOr is atomicrmw or (i32) at byte pointer p.
func (b *Builder) AtomicOr(p, v value.Value) value.Value {
	return b.B.NewAtomicRMW(enum.AtomicOpOr, b.cast(p, v.Type()), v, enum.AtomicOrderingMonotonic)
}

// SharedAddr is the 64-bit shared-window address of shared pointer p (for
// inline PTX operands of ldmatrix / cp.async / ld.shared).
func (b *Builder) SharedAddr(p value.Value) value.Value {
	return b.B.NewPtrToInt(p, types.I64)
}

// Calls.

// Call calls the function named name, declaring it in the module (with
// result type ret and parameter types params) if it is not there yet.
func (b *Builder) Call(name string, ret types.Type, params []types.Type, args ...value.Value) value.Value {
	return b.B.NewCall(declare(b.M, name, ret, params...), args...)
}

func declare(m *llir.Module, name string, ret types.Type, params ...types.Type) *llir.Func {
	for _, f := range m.Funcs {
		if f.Name() == name {
			return f
		}
	}
	ps := make([]*llir.Param, len(params))
	for i, t := range params {
		ps[i] = llir.NewParam("", t)
	}
	return m.NewFunc(name, ret, ps...)
}

// Asm calls inline PTX (asm sideeffect) with result type ret (types.Void, a
// scalar, or a struct for several outputs) and the given constraint string.
func (b *Builder) Asm(ret types.Type, asm, constraints string, args ...value.Value) value.Value {
	ia := llir.NewInlineAsm(types.NewPointer(types.NewFunc(ret, argTypes(args)...)), asm, constraints)
	ia.SideEffect = true
	return b.B.NewCall(ia, args...)
}

func argTypes(args []value.Value) []types.Type {
	ts := make([]types.Type, len(args))
	for i, a := range args {
		ts[i] = a.Type()
	}
	return ts
}

// Struct returns the literal struct type of n fields of type t (results of
// multi-output inline asm).
func Struct(t types.Type, n int) *types.StructType {
	fs := make([]types.Type, n)
	for i := range fs {
		fs[i] = t
	}
	return types.NewStruct(fs...)
}

// Extract is extractvalue x, i.
func (b *Builder) Extract(x value.Value, i int) value.Value { return b.B.NewExtractValue(x, uint64(i)) }

// Special registers and barriers.

func (b *Builder) sreg(name string) value.Value {
	return b.Call("llvm.nvvm.read.ptx.sreg."+name, types.I32, nil)
}

// Tid is threadIdx.x, Ctaid(d) is blockIdx.{x,y,z}, Ntid is blockDim.x,
// Nctaid(d) is gridDim.{x,y,z}, Lane is %laneid.
func (b *Builder) Tid() value.Value            { return b.sreg("tid.x") }
func (b *Builder) Ntid() value.Value           { return b.sreg("ntid.x") }
func (b *Builder) Ctaid(d string) value.Value  { return b.sreg("ctaid." + d) }
func (b *Builder) Nctaid(d string) value.Value { return b.sreg("nctaid." + d) }

// Sync is __syncthreads (llvm.nvvm.barrier0 → bar.sync 0).
func (b *Builder) Sync() { b.Call("llvm.nvvm.barrier0", types.Void, nil) }

// ShflBfly / ShflIdx / ShflUp are full-warp shuffles of an i32 (mask
// 0xffffffff, clamp 31 / 0 as CUDA's __shfl_*_sync).
func (b *Builder) ShflBfly(v value.Value, lanes int64) value.Value {
	return b.shfl("bfly", v, I32c(lanes), I32c(31))
}
func (b *Builder) ShflIdx(v value.Value, lane value.Value) value.Value {
	return b.shfl("idx", v, lane, I32c(31))
}
func (b *Builder) ShflUp(v value.Value, delta int64) value.Value {
	return b.shfl("up", v, I32c(delta), I32c(0))
}

func (b *Builder) shfl(mode string, v, lane, clamp value.Value) value.Value {
	t := v.Type()
	suffix := "i32"
	if t.Equal(types.Float) {
		suffix = "f32"
	}
	return b.Call("llvm.nvvm.shfl.sync."+mode+"."+suffix, t, []types.Type{types.I32, t, types.I32, types.I32},
		I32c(-1), v, lane, clamp)
}

// Ballot is vote.sync.ballot.b32 over the full warp.
func (b *Builder) Ballot(pred value.Value) value.Value {
	p32 := b.ZExt(pred, types.I32)
	return b.Asm(types.I32, "{\n\t.reg .pred p;\n\tsetp.ne.u32 p, $1, 0;\n\tvote.sync.ballot.b32 $0, p, 0xffffffff;\n\t}", "=r,r", p32)
}

// Popc is llvm.ctpop.i32.
func (b *Builder) Popc(x value.Value) value.Value {
	return b.Call("llvm.ctpop.i32", types.I32, []types.Type{types.I32}, x)
}

// Control flow.

// If emits `if cond { then() }` and leaves B at the join block.
func (b *Builder) If(cond value.Value, then func()) {
	tb, join := b.Block("then"), b.Block("endif")
	b.B.NewCondBr(cond, tb, join)
	b.B = tb
	then()
	b.B.NewBr(join)
	b.B = join
}

// IfElse emits `if cond { then() } else { els() }`.
func (b *Builder) IfElse(cond value.Value, then, els func()) {
	tb, eb, join := b.Block("then"), b.Block("else"), b.Block("endif")
	b.B.NewCondBr(cond, tb, eb)
	b.B = tb
	then()
	b.B.NewBr(join)
	b.B = eb
	els()
	b.B.NewBr(join)
	b.B = join
}

// Return emits `if cond { return }`.
func (b *Builder) ReturnIf(cond value.Value) {
	rb, cont := b.Block("ret"), b.Block("cont")
	b.B.NewCondBr(cond, rb, cont)
	rb.NewRet(nil)
	b.B = cont
}

// Loop emits a counted loop `for i := start; i < end; i += step { body(i, vars) }`
// (i32, signed compare) with loop-carried values: init gives the initial
// values, body returns the values for the next iteration. It returns the
// values after the loop. The test is at the top, so zero iterations are fine.
func (b *Builder) Loop(start, end, step value.Value, init []value.Value, body func(i value.Value, vars []value.Value) []value.Value) []value.Value {
	pre := b.B
	head, bodyB, exit := b.Block("loop"), b.Block("body"), b.Block("endloop")
	pre.NewBr(head)
	b.B = head
	iv := head.NewPhi(llir.NewIncoming(start, pre))
	phis := make([]*llir.InstPhi, len(init))
	vars := make([]value.Value, len(init))
	for k, v := range init {
		phis[k] = head.NewPhi(llir.NewIncoming(v, pre))
		vars[k] = phis[k]
	}
	head.NewCondBr(head.NewICmp(enum.IPredSLT, iv, end), bodyB, exit)
	b.B = bodyB
	next := body(iv, vars)
	in := b.Add(iv, step)
	latch := b.B
	iv.Incs = append(iv.Incs, llir.NewIncoming(in, latch))
	for k := range phis {
		phis[k].Incs = append(phis[k].Incs, llir.NewIncoming(next[k], latch))
	}
	latch.NewBr(head)
	b.B = exit
	return vars
}

// Phi2 merges two values arriving from blocks p1 and p2 at the current block.
func (b *Builder) Phi2(v1 value.Value, p1 *llir.Block, v2 value.Value, p2 *llir.Block) value.Value {
	return b.B.NewPhi(llir.NewIncoming(v1, p1), llir.NewIncoming(v2, p2))
}

// Ret emits ret void.
func (b *Builder) Ret() { b.B.NewRet(nil) }

// bf16 helpers (bf16 travels as i16; conversions are inline PTX, PTX ISA
// "cvt": cvt.rn.bf16.f32 needs sm_80).

// ToBF16 rounds an f32 to bf16 (round to nearest even), as i16.
func (b *Builder) ToBF16(x value.Value) value.Value {
	return b.Asm(types.I16, "cvt.rn.bf16.f32 $0, $1;", "=h,f", x)
}

// PackBF16 rounds two f32 to bf16 and packs them in an i32, lo in bits 0..15
// (the element at the lower address).
func (b *Builder) PackBF16(lo, hi value.Value) value.Value {
	return b.Asm(types.I32, "cvt.rn.bf16x2.f32 $0, $2, $1;", "=r,f,f", lo, hi)
}

// FromBF16 widens a bf16 (i16) to f32 exactly (shift into the high half).
func (b *Builder) FromBF16(h value.Value) value.Value {
	w := b.Shl(b.ZExt(h, types.I32), I32c(16))
	return b.Bitcast(w, types.Float)
}

// BF16Lo / BF16Hi widen the low / high bf16 of an i32 to f32.
func (b *Builder) BF16Lo(w value.Value) value.Value {
	return b.Bitcast(b.Shl(w, I32c(16)), types.Float)
}
func (b *Builder) BF16Hi(w value.Value) value.Value {
	return b.Bitcast(b.And(w, I32c(-65536)), types.Float)
}

// Exp2 is ex2.approx.ftz.f32 (llvm.nvvm.ex2.approx.ftz.f).
func (b *Builder) Exp2(x value.Value) value.Value {
	return b.Asm(types.Float, "ex2.approx.ftz.f32 $0, $1;", "=f,f", x)
}

// Sigmoid is 1 / (1 + 2^(-x*log2(e))) in f32 (ex2.approx, then an IEEE
// division, so it is deterministic and accurate to a few ulp).
func (b *Builder) Sigmoid(x value.Value) value.Value {
	e := b.Exp2(b.FMul(x, F32c(-1.4426950408889634)))
	return b.FDiv(F32c(1), b.FAdd(F32c(1), e))
}

// undefVec is an undef vector of type t.
func undefVec(t *types.VectorType) value.Value { return constant.NewUndef(t) }

// IfVals emits `if cond { vals = then() }` and returns the values after the
// join: then()'s results when cond holds, else the given defaults (phi nodes).
func (b *Builder) IfVals(cond value.Value, defaults []value.Value, then func() []value.Value) []value.Value {
	pre := b.B
	tb, join := b.Block("then"), b.Block("endif")
	pre.NewCondBr(cond, tb, join)
	b.B = tb
	got := then()
	tEnd := b.B
	tEnd.NewBr(join)
	b.B = join
	out := make([]value.Value, len(defaults))
	for i := range defaults {
		out[i] = join.NewPhi(llir.NewIncoming(got[i], tEnd), llir.NewIncoming(defaults[i], pre))
	}
	return out
}

// DynSmem returns the module's dynamic shared memory as a shared byte
// pointer, declaring `@moe_smem = external addrspace(3) global [0 x i8],
// align 16` on first use (PTX `.extern .shared .align 16 .b8 moe_smem[];`).
func (b *Builder) DynSmem() value.Value {
	const name = "moe_smem"
	var g *llir.Global
	for _, x := range b.M.Globals {
		if x.Name() == name {
			g = x
		}
	}
	if g == nil {
		g = b.M.NewGlobal(name, types.NewArray(0, types.I8))
		g.Linkage = enum.LinkageExternal
		g.AddrSpace = ASShared
		g.Align = llir.Align(16)
		pt := types.NewPointer(g.ContentType)
		pt.AddrSpace = ASShared
		g.Typ = pt
	}
	return b.B.NewBitCast(g, SPtr)
}

// LaneWarp returns (lane, warp) of the current thread from threadIdx.x.
func (b *Builder) LaneWarp() (lane, warp value.Value) {
	t := b.Tid()
	return b.And(t, I32c(31)), b.LShr(t, I32c(5))
}

// asmLines joins lines of a multi-line inline PTX template with "\n\t" (the
// layout llc uses), so every multi-line asm string is built the same way.
func asmLines(lines ...string) string { return strings.Join(lines, "\n\t") }
