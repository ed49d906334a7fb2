package codegen

import (
	"slices"
	"strings"

	llir "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/mokc/mokc/ir"
)

// Byte pointer types. Every pointer parameter of mokc's kernels is a GPtr
// and kernels address memory in bytes (ByteOffset), casting to the element
// type at each access (LoadAt, StoreAt).
var (
	// GPtr is i8 addrspace(1)*, a byte pointer to global memory.
	GPtr = ir.GlobalPtr(ir.I8)
	// SPtr is i8 addrspace(3)*, a byte pointer to shared memory.
	SPtr = ir.SharedPtr(ir.I8)
)

// Builder builds one kernel: package ir's kernel builder (embedded; its
// arithmetic, conversions, ICmp/Select, special registers, shuffles,
// atomics, intrinsics, inline PTX and annotations are used as they are)
// with the conventions of mokc's kernels on top:
//   - byte addressing: LoadAt, StoreAt, LoadVolatileAt take a byte pointer
//     and the element type; ByteOffsetC, AddI, MulI and Wide are the
//     constant and 64-bit forms the address arithmetic uses;
//   - control flow: If, IfElse, IfVals, ReturnIf and Loop (built from ir's
//     NewBlock, CondBr, Br and SetBlock) take the place of ir's If, IfElse,
//     IfElseValues, Loop and ForCarry. They append their blocks to the
//     function when they start (then, endif; loop, body, endloop), so the
//     blocks of a nested body follow the join block, where ir places blocks
//     in program order; every kernel's block order, and hence its PTX,
//     rests on this layout;
//   - bf16 pairs, sigmoid, dynamic shared memory, lane and warp of a thread
//     (this file) and the inline PTX of the sm_90a and sm_100a engines
//     (sm90_ops.go, wgmma.go, sm100_ops.go).
type Builder struct {
	*ir.Kernel
	// paramPrefix, when set, makes Param return the parameter
	// paramPrefix+name, but for the names in paramShared: the second GEMM
	// of a chained kernel (chainPrefix) is emitted by the one-GEMM code
	// with its own parameters.
	paramPrefix string
	paramShared []string
}

// Param returns the kernel parameter name (with paramPrefix set, the
// parameter paramPrefix+name unless name is shared; a missing one is a
// builder error).
func (b *Builder) Param(name string) value.Value {
	if b.paramPrefix != "" && !slices.Contains(b.paramShared, name) {
		name = b.paramPrefix + name
	}
	return b.Kernel.Param(name)
}

// withParams emits body with Param taking the parameters prefix+name, but
// for the names shared.
func (b *Builder) withParams(prefix string, shared []string, body func()) {
	oldP, oldS := b.paramPrefix, b.paramShared
	b.paramPrefix, b.paramShared = prefix, shared
	defer func() { b.paramPrefix, b.paramShared = oldP, oldS }()
	body()
}

// NewKernel adds kernel name with params to m, annotated with maxntidx =
// threads (PTX .maxntid), and returns its Builder at the entry block.
func NewKernel(m *ir.Module, name string, threads int, params ...ir.Param) *Builder {
	k := m.Kernel(name, params...)
	k.MaxThreads(threads)
	return &Builder{Kernel: k}
}

// intType is the integer type of x (i32 when x is not an integer: the ir
// helper that receives the constant then reports the mismatch).
func intType(x value.Value) *types.IntType {
	if t, ok := x.Type().(*types.IntType); ok {
		return t
	}
	return types.I32
}

// AddI returns x + c for a constant c of x's integer type; x itself when
// c = 0.
func (b *Builder) AddI(x value.Value, c int64) value.Value {
	if c == 0 {
		return x
	}
	return b.Add(x, ir.Int(intType(x), c))
}

// MulI returns x * c for a constant c of x's integer type; x itself when
// c = 1.
func (b *Builder) MulI(x value.Value, c int64) value.Value {
	if c == 1 {
		return x
	}
	return b.Mul(x, ir.Int(intType(x), c))
}

// Wide sign-extends an i32 to i64 for address arithmetic; an i64 is
// returned as it is.
func (b *Builder) Wide(x value.Value) value.Value {
	if x.Type().Equal(ir.I64) {
		return x
	}
	return b.SExt(x, ir.I64)
}

// ByteOffsetC is ByteOffset by a constant number of bytes; p itself when
// off = 0.
func (b *Builder) ByteOffsetC(p value.Value, off int64) value.Value {
	if off == 0 {
		return p
	}
	return b.ByteOffset(p, ir.Int64(off))
}

// LoadAt loads a value of type t from byte pointer p (any address space)
// with alignment align bytes.
func (b *Builder) LoadAt(t types.Type, p value.Value, align int) value.Value {
	return b.LoadAlign(b.Cast(p, t), align)
}

// LoadVolatileAt is LoadAt with a volatile load (re-read from memory every
// time).
func (b *Builder) LoadVolatileAt(t types.Type, p value.Value, align int) value.Value {
	return b.LoadVolatileAlign(b.Cast(p, t), align)
}

// StoreAt stores v through byte pointer p with alignment align bytes.
func (b *Builder) StoreAt(v, p value.Value, align int) {
	b.StoreAlign(v, b.Cast(p, v.Type()), align)
}

// If emits `if cond { then() }` and leaves the cursor at the join block.
func (b *Builder) If(cond value.Value, then func()) {
	tb, join := b.NewBlock("then"), b.NewBlock("endif")
	b.CondBr(cond, tb, join)
	b.SetBlock(tb)
	then()
	b.Br(join)
}

// IfElse emits `if cond { then() } else { els() }`.
func (b *Builder) IfElse(cond value.Value, then, els func()) {
	tb, eb, join := b.NewBlock("then"), b.NewBlock("else"), b.NewBlock("endif")
	b.CondBr(cond, tb, eb)
	b.SetBlock(tb)
	then()
	b.Br(join)
	b.SetBlock(eb)
	els()
	b.Br(join)
}

// IfElseVals emits `if cond { vals = then() } else { vals = els() }` and
// returns vals after the join (phi nodes); both branches return as many
// values, of the same types.
func (b *Builder) IfElseVals(cond value.Value, then, els func() []value.Value) []value.Value {
	tb, eb, join := b.NewBlock("then"), b.NewBlock("else"), b.NewBlock("endif")
	b.CondBr(cond, tb, eb)
	b.SetBlock(tb)
	tv := then()
	tEnd := b.Block()
	b.Br(join)
	b.SetBlock(eb)
	ev := els()
	eEnd := b.Block()
	b.Br(join)
	b.SetBlock(join)
	out := make([]value.Value, len(tv))
	for i := range tv {
		out[i] = join.NewPhi(llir.NewIncoming(tv[i], tEnd), llir.NewIncoming(ev[i], eEnd))
	}
	return out
}

// IfVals emits `if cond { vals = then() }` and returns the values after the
// join: then()'s results when cond holds, else defaults (phi nodes).
func (b *Builder) IfVals(cond value.Value, defaults []value.Value, then func() []value.Value) []value.Value {
	pre := b.Block()
	tb, join := b.NewBlock("then"), b.NewBlock("endif")
	b.CondBr(cond, tb, join)
	b.SetBlock(tb)
	got := then()
	tEnd := b.Block()
	b.Br(join)
	out := make([]value.Value, len(defaults))
	for i := range defaults {
		out[i] = join.NewPhi(llir.NewIncoming(got[i], tEnd), llir.NewIncoming(defaults[i], pre))
	}
	return out
}

// ReturnIf emits `if cond { return }`.
func (b *Builder) ReturnIf(cond value.Value) { b.returnIf(cond, "ret") }

// returnIf returns from the kernel where cond holds, in a block named
// name, and goes on in a new block otherwise.
func (b *Builder) returnIf(cond value.Value, name string) {
	rb, cont := b.NewBlock(name), b.NewBlock("cont")
	b.CondBr(cond, rb, cont)
	b.SetBlock(rb)
	b.Ret(nil)
	b.SetBlock(cont)
}

// ReturnIfUniform is ReturnIf for a cond that every thread of the block
// evaluates alike (from the block index, parameters, or values all its
// threads load alike): its return block is named uniformRet, which tells
// the persistent lowering (fusePersistent) that no thread of a virtual
// block goes on to a bar.sync that the returned ones would skip.
func (b *Builder) ReturnIfUniform(cond value.Value) { b.returnIf(cond, uniformRet) }

// uniformRet is the name prefix of a block that returns every thread of
// the block alike (ReturnIfUniform).
const uniformRet = "uret"

// Loop emits a counted loop `for i := start; i < end; i += step { body(i,
// vars) }` (integers of one type, signed compare) with loop-carried values:
// init gives the initial values, body returns the values for the next
// iteration. It returns the values after the loop. The test is at the top,
// so zero iterations are fine.
func (b *Builder) Loop(start, end, step value.Value, init []value.Value, body func(i value.Value, vars []value.Value) []value.Value) []value.Value {
	out := b.loop([3]string{"loop", "body", "endloop"}, append([]value.Value{start}, init...), func(v []value.Value) value.Value {
		return b.ICmp(enum.IPredSLT, v[0], end)
	}, func(v []value.Value) []value.Value {
		next := body(v[0], v[1:])
		return append([]value.Value{b.Add(v[0], step)}, next...)
	})
	return out[1:]
}

// While emits `for vars := init; cond(vars); vars = body(vars) {}` with
// loop-carried values: cond, emitted at the top of each iteration, gives
// an i1; body returns the values for the next iteration. It returns the
// values after the loop (zero iterations are fine).
func (b *Builder) While(init []value.Value, cond func(vars []value.Value) value.Value, body func(vars []value.Value) []value.Value) []value.Value {
	return b.loop([3]string{"while", "body", "endwhile"}, init, cond, body)
}

// loop is While with the names of its head, body and exit blocks.
func (b *Builder) loop(names [3]string, init []value.Value, cond func(vars []value.Value) value.Value, body func(vars []value.Value) []value.Value) []value.Value {
	pre := b.Block()
	head, bodyB, exit := b.NewBlock(names[0]), b.NewBlock(names[1]), b.NewBlock(names[2])
	b.Br(head)
	phis := make([]*llir.InstPhi, len(init))
	vars := make([]value.Value, len(init))
	for k, v := range init {
		phis[k] = head.NewPhi(llir.NewIncoming(v, pre))
		vars[k] = phis[k]
	}
	b.CondBr(cond(vars), bodyB, exit)
	b.SetBlock(bodyB)
	next := body(vars)
	latch := b.Block()
	for k := range phis {
		phis[k].Incs = append(phis[k].Incs, llir.NewIncoming(next[k], latch))
	}
	b.Br(head)
	b.SetBlock(exit)
	return vars
}

// LaneWarp returns (lane, warp) of the current thread from threadIdx.x.
func (b *Builder) LaneWarp() (lane, warp value.Value) {
	t := b.ThreadIdx(ir.X)
	return b.And(t, ir.Int32(31)), b.LShr(t, ir.Int32(5))
}

// dynSmem is the module's dynamic shared memory (PTX `.extern .shared
// .align 16 .b8 moe_smem[];`).
const dynSmem = "moe_smem"

// DynSmem returns the module's dynamic shared memory as a shared byte
// pointer (SPtr), declaring it on first use.
func (b *Builder) DynSmem() value.Value {
	var g *llir.Global
	for _, x := range b.M.IR.Globals {
		if x.Name() == dynSmem {
			g = x
		}
	}
	if g == nil {
		g = b.M.DynamicShared(dynSmem, 16)
	}
	return b.Cast(g, ir.I8)
}

// bf16 travels as i16 (pairs as i32); the roundings are inline PTX cvt (PTX
// ISA "cvt": cvt.rn.bf16.f32 and cvt.rn.bf16x2.f32 need sm_80) without the
// memory clobber, as the kernels were written (ir.F32ToBF16 is the same
// instruction with it).

// ToBF16 rounds an f32 to bf16 (round to nearest even), as i16.
func (b *Builder) ToBF16(x value.Value) value.Value {
	return b.AsmCallNoMemory("cvt.rn.bf16.f32 $0, $1;", "=h,f", ir.I16, x)
}

// PackBF16 rounds two f32 to bf16 and packs them in an i32, lo in bits 0..15
// (the element at the lower address).
func (b *Builder) PackBF16(lo, hi value.Value) value.Value {
	return b.AsmCallNoMemory("cvt.rn.bf16x2.f32 $0, $2, $1;", "=r,f,f", ir.I32, lo, hi)
}

// PackBF16RoundOdd is PackBF16 rounding to odd instead of to nearest even:
// each half is the f32's upper 16 bits (truncation) with its last bit set
// when any of the lower 16 was (a NaN stays a NaN, an infinity an
// infinity; GemmSpec.CRoundOdd says why).
func (b *Builder) PackBF16RoundOdd(lo, hi value.Value) value.Value {
	return b.AsmCallNoMemory("{\n.reg .b32 a, c, s, t;\nmov.b32 a, $1;\nmov.b32 c, $2;\n"+
		"and.b32 s, a, 65535;\nmin.u32 s, s, 1;\nand.b32 t, c, 65535;\nmin.u32 t, t, 1;\nshl.b32 t, t, 16;\nor.b32 s, s, t;\n"+
		"prmt.b32 t, a, c, 0x7632;\nor.b32 $0, t, s;\n}", "=r,f,f", ir.I32, lo, hi)
}

// BF16Lo / BF16Hi widen the low / high bf16 of an i32 to f32 (exactly).
func (b *Builder) BF16Lo(w value.Value) value.Value {
	return b.BitCast(b.Shl(w, ir.Int32(16)), ir.F32)
}

// BF16Hi widens the high bf16 of an i32 to f32.
func (b *Builder) BF16Hi(w value.Value) value.Value {
	return b.BitCast(b.And(w, ir.Int32(-65536)), ir.F32)
}

// Exp2 is ex2.approx.ftz.f32 (inline PTX without the memory clobber; ir.Ex2
// is the non-ftz intrinsic).
func (b *Builder) Exp2(x value.Value) value.Value {
	return b.AsmCallNoMemory("ex2.approx.ftz.f32 $0, $1;", "=f,f", ir.F32, x)
}

// Sigmoid is 1 / (1 + 2^(-x*log2(e))) in f32 (ex2.approx, then an IEEE
// division, so it is deterministic and accurate to a few ulp).
func (b *Builder) Sigmoid(x value.Value) value.Value {
	e := b.Exp2(b.FMul(x, ir.Float32(-1.4426950408889634)))
	return b.FDiv(ir.Float32(1), b.FAdd(ir.Float32(1), e))
}

// f32s returns n float types (the outputs of an inline PTX statement with n
// f32 results).
func f32s(n int) []types.Type {
	ts := make([]types.Type, n)
	for i := range ts {
		ts[i] = ir.F32
	}
	return ts
}

// asmLines joins lines of a multi-line inline PTX template with "\n\t" (the
// layout llc uses), so every multi-line asm string is built the same way.
func asmLines(lines ...string) string { return strings.Join(lines, "\n\t") }
