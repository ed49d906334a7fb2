package ir

import (
	"fmt"

	llir "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"
)

// Dim is a grid or block dimension: X, Y or Z.
type Dim int

// The three dimensions of threadIdx, blockIdx, blockDim, gridDim.
const (
	X Dim = iota
	Y
	Z
)

func (f *Func) sreg(reg string, d Dim) value.Value {
	if d < X || d > Z {
		return f.bad(types.I32, "%s: dimension %d is not X, Y or Z", reg, d)
	}
	return f.CallIntrinsic(fmt.Sprintf("llvm.nvvm.read.ptx.sreg.%s.%c", reg, "xyz"[d]))
}

// ThreadIdx returns threadIdx.d (PTX %tid), an i32.
func (f *Func) ThreadIdx(d Dim) value.Value { return f.sreg("tid", d) }

// BlockIdx returns blockIdx.d (PTX %ctaid), an i32.
func (f *Func) BlockIdx(d Dim) value.Value { return f.sreg("ctaid", d) }

// BlockDim returns blockDim.d (PTX %ntid), an i32.
func (f *Func) BlockDim(d Dim) value.Value { return f.sreg("ntid", d) }

// GridDim returns gridDim.d (PTX %nctaid), an i32.
func (f *Func) GridDim(d Dim) value.Value { return f.sreg("nctaid", d) }

// LaneID returns the lane of the thread in its warp, 0..31 (PTX %laneid).
func (f *Func) LaneID() value.Value { return f.CallIntrinsic("llvm.nvvm.read.ptx.sreg.laneid") }

// WarpID returns PTX %warpid (the warp's slot on its SM; it can change over
// the thread's life, so use threadIdx.x/32 for warp roles).
func (f *Func) WarpID() value.Value { return f.CallIntrinsic("llvm.nvvm.read.ptx.sreg.warpid") }

// SMID returns the SM the thread runs on (PTX %smid), an i32.
func (f *Func) SMID() value.Value { return f.CallIntrinsic("llvm.nvvm.read.ptx.sreg.smid") }

// Clock64 returns the SM cycle counter (PTX %clock64), an i64.
func (f *Func) Clock64() value.Value { return f.CallIntrinsic("llvm.nvvm.read.ptx.sreg.clock64") }

// GlobalTimer returns the global nanosecond timer (PTX %globaltimer), an i64.
func (f *Func) GlobalTimer() value.Value {
	return f.CallIntrinsic("llvm.nvvm.read.ptx.sreg.globaltimer")
}

// GlobalThreadIdx returns blockIdx.x*blockDim.x + threadIdx.x as an i32.
func (f *Func) GlobalThreadIdx() value.Value {
	return f.Add(f.Mul(f.BlockIdx(X), f.BlockDim(X)), f.ThreadIdx(X))
}

// --- barriers and fences ---

// SyncThreads is __syncthreads(): `bar.sync 0` over the whole block.
func (f *Func) SyncThreads() { f.CallIntrinsic("llvm.nvvm.barrier0") }

// BarrierSync waits on named barrier id (i32, 0..15) for n threads (i32, a
// multiple of 32): `barrier.sync id, n` (PTX ISA §9.7.13.1).
func (f *Func) BarrierSync(id, n value.Value) {
	f.CallIntrinsic("llvm.nvvm.barrier.sync.cnt", id, n)
}

// BarrierSyncAll waits on named barrier id for all threads of the block:
// `barrier.sync id`.
func (f *Func) BarrierSyncAll(id value.Value) { f.CallIntrinsic("llvm.nvvm.barrier.sync", id) }

// SyncWarp is __syncwarp(mask): `bar.warp.sync mask`.
func (f *Func) SyncWarp(mask value.Value) { f.CallIntrinsic("llvm.nvvm.bar.warp.sync", mask) }

// MembarCTA is __threadfence_block(): membar.cta.
func (f *Func) MembarCTA() { f.CallIntrinsic("llvm.nvvm.membar.cta") }

// MembarGPU is __threadfence(): membar.gl.
func (f *Func) MembarGPU() { f.CallIntrinsic("llvm.nvvm.membar.gl") }

// MembarSys is __threadfence_system(): membar.sys.
func (f *Func) MembarSys() { f.CallIntrinsic("llvm.nvvm.membar.sys") }

// Scope is the scope of a memory-consistency operation (PTX ISA §8.5):
// the set of threads it orders with.
type Scope string

// Scopes (PTX .cta, .cluster, .gpu, .sys).
const (
	ScopeCTA     Scope = "cta"
	ScopeCluster Scope = "cluster"
	ScopeGPU     Scope = "gpu"
	ScopeSys     Scope = "sys"
)

func (f *Func) okScope(s Scope) bool {
	switch s {
	case ScopeCTA, ScopeCluster, ScopeGPU, ScopeSys:
		return true
	}
	f.errorf("scope %q is not cta, cluster, gpu or sys", s)
	return false
}

// FenceAcqRel is `fence.acq_rel.scope` (PTX ISA §9.7.13.4; sm_70+), as inline
// PTX: llc-19 cannot select the LLVM fence instruction for NVPTX, so the
// subset has none.
func (f *Func) FenceAcqRel(s Scope) {
	if f.okScope(s) {
		f.Asm("fence.acq_rel."+string(s)+";", "")
	}
}

// FenceSC is `fence.sc.scope` (sequentially consistent fence; sm_70+).
func (f *Func) FenceSC(s Scope) {
	if f.okScope(s) {
		f.Asm("fence.sc."+string(s)+";", "")
	}
}

// spaceSuffix returns the PTX state-space qualifier of a pointer's address
// space for ld/st/atom/red ("" for generic).
func spaceSuffix(as uint64) (string, bool) {
	switch as {
	case 0:
		return "", true
	case 1:
		return ".global", true
	case 3:
		return ".shared", true
	}
	return "", false
}

// memOrderOp emits ld.acquire / st.release / red.release / atom.acq_rel on
// an i32 or i64 through p, as inline PTX.
func (f *Func) scopedPtr(what string, p value.Value, s Scope) (string, string, types.Type, bool) {
	pt, ok := ptrType(typeOf(p))
	if !ok || !isInt(pt.ElemType, 32, 64) {
		f.errorf("%s: %s is not a pointer to i32 or i64", what, typeOf(p))
		return "", "", types.I32, false
	}
	sp, ok := spaceSuffix(uint64(pt.AddrSpace))
	if !ok {
		f.errorf("%s: address space %d is not generic, global or shared", what, pt.AddrSpace)
		return "", "", pt.ElemType, false
	}
	if !f.okScope(s) {
		return "", "", pt.ElemType, false
	}
	letter := "r"
	if isInt(pt.ElemType, 64) {
		letter = "l"
	}
	return sp, letter, pt.ElemType, true
}

func widthOf(t types.Type) string {
	if isInt(t, 64) {
		return "64"
	}
	return "32"
}

// LoadAcquire returns *p read with `ld.acquire.scope` (PTX ISA §9.7.9.8;
// sm_70+): later accesses of the thread are ordered after it. p points to
// i32 or i64 in generic, global or shared memory. Pair with StoreRelease or
// RedAddRelease on the producer side.
func (f *Func) LoadAcquire(p value.Value, s Scope) value.Value {
	sp, l, t, ok := f.scopedPtr("ld.acquire", p, s)
	if !ok {
		return Undef(t)
	}
	return f.AsmCall(fmt.Sprintf("ld.acquire.%s%s.b%s $0, [$1];", s, sp, widthOf(t)), "="+l+",l", t, p)
}

// StoreRelease writes v to *p with `st.release.scope`: earlier accesses of
// the thread are ordered before it.
func (f *Func) StoreRelease(v, p value.Value, s Scope) {
	f.scopedWrite("st.release", "storing", "st.release.%s%s.b%s [$0], $1;", p, v, s)
}

// RedAddRelease adds v to *p atomically without returning the old value,
// with release semantics: `red.release.scope.add.u32/u64` (PTX ISA
// §9.7.13.6). The producer side of a dependency counter.
func (f *Func) RedAddRelease(p, v value.Value, s Scope) {
	f.scopedWrite("red.release", "adding", "red.release.%s%s.add.u%s [$0], $1;", p, v, s)
}

// scopedWrite emits the inline PTX asm (a format of the scope, the state
// space and the width in bits) that writes v through p without a result,
// after scopedPtr's checks of op; verb names the access in the error for a
// v whose type is not p's element type.
func (f *Func) scopedWrite(op, verb, asm string, p, v value.Value, s Scope) {
	sp, l, t, ok := f.scopedPtr(op, p, s)
	if !ok || !typeOf(v).Equal(t) {
		if ok {
			f.errorf("%s: %s %s through %s", op, verb, typeOf(v), typeOf(p))
		}
		return
	}
	f.Asm(fmt.Sprintf(asm, s, sp, widthOf(t)), "l,"+l, p, v)
}

// AtomicAddAcqRel is an atomic add with acquire-release semantics that
// returns the old value: `atom.acq_rel.scope.add.u32/u64` (PTX ISA
// §9.7.13.5).
func (f *Func) AtomicAddAcqRel(p, v value.Value, s Scope) value.Value {
	sp, l, t, ok := f.scopedPtr("atom.acq_rel", p, s)
	if !ok || !typeOf(v).Equal(t) {
		if ok {
			f.errorf("atom.acq_rel: adding %s through %s", typeOf(v), typeOf(p))
		}
		return Undef(t)
	}
	return f.AsmCall(fmt.Sprintf("atom.acq_rel.%s%s.add.u%s $0, [$1], $2;", s, sp, widthOf(t)), "="+l+",l,"+l, t, p, v)
}

// FenceProxyAsync orders the thread's generic-proxy shared-memory writes
// before later async-proxy operations (TMA stores, wgmma operand reads):
// `fence.proxy.async.shared::cta` (PTX ISA §9.7.13.4; sm_90+).
func (f *Func) FenceProxyAsync() { f.Asm("fence.proxy.async.shared::cta;", "") }

// FenceProxyAsyncGlobal orders the thread's generic-proxy accesses of
// global memory with its later (and earlier) async-proxy ones, such as a
// TMA load of rows that generic stores wrote: `fence.proxy.async.global`
// (PTX ISA §9.7.13.4, "Memory Consistency Model: proxies"; sm_90+).
func (f *Func) FenceProxyAsyncGlobal() { f.Asm("fence.proxy.async.global;", "") }

// --- warp shuffles and votes ---

func (f *Func) shfl(kind string, mask, v, b value.Value, c int64) value.Value {
	var suffix string
	switch {
	case typeOf(v).Equal(types.I32):
		suffix = "i32"
	case isF32(typeOf(v)):
		suffix = "f32"
	default:
		return f.bad(typeOf(v), "shfl.sync.%s: value is %s, want i32 or float", kind, typeOf(v))
	}
	return f.CallIntrinsic("llvm.nvvm.shfl.sync."+kind+"."+suffix, mask, v, b, Int32(c))
}

// ShflBfly returns v from lane (laneid ^ laneMask) of the warp:
// `shfl.sync.bfly.b32 d, v, laneMask, 0x1f, mask` (PTX ISA §9.7.8.6). v is
// an i32 or float; mask and laneMask are i32.
func (f *Func) ShflBfly(mask, v, laneMask value.Value) value.Value {
	return f.shfl("bfly", mask, v, laneMask, 0x1f)
}

// ShflDown returns v from lane laneid+delta (own v past the warp's end).
func (f *Func) ShflDown(mask, v, delta value.Value) value.Value {
	return f.shfl("down", mask, v, delta, 0x1f)
}

// ShflUp returns v from lane laneid-delta (own v below lane 0).
func (f *Func) ShflUp(mask, v, delta value.Value) value.Value {
	return f.shfl("up", mask, v, delta, 0)
}

// ShflIdx returns v from lane srcLane (broadcast).
func (f *Func) ShflIdx(mask, v, srcLane value.Value) value.Value {
	return f.shfl("idx", mask, v, srcLane, 0x1f)
}

// Ballot returns the i32 mask of lanes in mask whose pred (i1) is true:
// `vote.sync.ballot.b32`.
func (f *Func) Ballot(mask, pred value.Value) value.Value {
	return f.CallIntrinsic("llvm.nvvm.vote.ballot.sync", mask, pred)
}

// WarpAllReduce combines v (i32 or float) over the 32 lanes with op by a
// butterfly of shfl.sync.bfly (offsets 16, 8, 4, 2, 1); every lane gets the
// result. op must be associative and commutative.
func (f *Func) WarpAllReduce(v value.Value, op func(a, b value.Value) value.Value) value.Value {
	for off := int64(16); off >= 1; off /= 2 {
		v = op(v, f.ShflBfly(FullMask, v, Int32(off)))
	}
	return v
}

// WarpSum returns the sum of float v over the warp, in every lane.
func (f *Func) WarpSum(v value.Value) value.Value { return f.WarpAllReduce(v, f.FAdd) }

// WarpMax returns the maximum of float v over the warp (llvm.maxnum), in
// every lane.
func (f *Func) WarpMax(v value.Value) value.Value { return f.WarpAllReduce(v, f.FMax) }

// --- atomics ---

// AtomicRMW emits `atomicrmw op p, v monotonic` (PTX atom, relaxed) and
// returns the old value. p points to i32/i64 (float or double for fadd) in
// global, shared or generic memory; op is xchg, add, sub, and, or, xor, max,
// min, umax, umin or fadd.
func (f *Func) AtomicRMW(op enum.AtomicOp, p, v value.Value) value.Value {
	ordering := enum.AtomicOrderingMonotonic
	pt, ok := ptrType(typeOf(p))
	if !ok || !pt.ElemType.Equal(typeOf(v)) {
		return f.bad(typeOf(v), "atomicrmw %s: %s through %s", op, typeOf(v), typeOf(p))
	}
	if err := checkAtomicRMW(op, pt, ordering); err != "" {
		return f.bad(typeOf(v), "atomicrmw %s: %s", op, err)
	}
	return f.try("atomicrmw", typeOf(v), func(b *llir.Block) value.Value {
		return b.NewAtomicRMW(op, p, v, ordering)
	})
}

// AtomicAdd is atomicAdd(p, v) (relaxed, i.e. monotonic) on i32, i64 or
// float; it returns the old value.
func (f *Func) AtomicAdd(p, v value.Value) value.Value {
	op := enum.AtomicOpAdd
	if isFloat(typeOf(v)) {
		op = enum.AtomicOpFAdd
	}
	return f.AtomicRMW(op, p, v)
}

// AtomicMax is atomicMax on signed i32/i64 (monotonic); returns the old
// value.
func (f *Func) AtomicMax(p, v value.Value) value.Value {
	return f.AtomicRMW(enum.AtomicOpMax, p, v)
}

// AtomicExch is atomicExch (monotonic); returns the old value.
func (f *Func) AtomicExch(p, v value.Value) value.Value {
	return f.AtomicRMW(enum.AtomicOpXChg, p, v)
}

// AtomicCAS is atomicCAS(p, cmp, new) (monotonic) on i32/i64: it returns the
// old value and an i1 telling whether the swap happened.
func (f *Func) AtomicCAS(p, cmp, newv value.Value) (old, swapped value.Value) {
	pt, ok := ptrType(typeOf(p))
	t := typeOf(cmp)
	if !ok || !isInt(t, 32, 64) || !pt.ElemType.Equal(t) || !t.Equal(typeOf(newv)) || !atomicSpace(pt.AddrSpace) {
		return f.bad(t, "cmpxchg: %s, %s through %s", t, typeOf(newv), typeOf(p)), Bool(false)
	}
	pair := f.try("cmpxchg", Struct(t, types.I1), func(b *llir.Block) value.Value {
		return b.NewCmpXchg(p, cmp, newv, enum.AtomicOrderingMonotonic, enum.AtomicOrderingMonotonic)
	})
	return f.ExtractValue(pair, 0), f.ExtractValue(pair, 1)
}

func atomicSpace(as types.AddrSpace) bool { return as == Generic || as == Global || as == Shared }

// checkAtomicRMW returns "" when the combination is in the subset, else the
// reason.
func checkAtomicRMW(op enum.AtomicOp, pt *types.PointerType, ordering enum.AtomicOrdering) string {
	if !atomicSpace(pt.AddrSpace) {
		return fmt.Sprintf("address space %d is not generic, global or shared", pt.AddrSpace)
	}
	if ordering != enum.AtomicOrderingMonotonic {
		return fmt.Sprintf("ordering %s is not in the subset: only monotonic (llc-19 drops orderings; use AtomicAddAcqRel, LoadAcquire, StoreRelease, RedAddRelease or fences)", ordering)
	}
	t := pt.ElemType
	switch op {
	case enum.AtomicOpFAdd:
		if !isF32(t) && !t.Equal(types.Double) {
			return fmt.Sprintf("fadd on %s, want float or double", t)
		}
	case enum.AtomicOpXChg, enum.AtomicOpAdd, enum.AtomicOpSub, enum.AtomicOpAnd, enum.AtomicOpOr,
		enum.AtomicOpXor, enum.AtomicOpMax, enum.AtomicOpMin, enum.AtomicOpUMax, enum.AtomicOpUMin:
		if !isInt(t, 32, 64) {
			return fmt.Sprintf("%s on %s, want i32 or i64", op, t)
		}
	default:
		return fmt.Sprintf("operation %s is not supported", op)
	}
	return ""
}

// --- math ---

func (f *Func) f32Op(name string, args ...value.Value) value.Value {
	return f.CallIntrinsic(name, args...)
}

// FMA returns a*b+c rounded once (fma.rn.f32 / .f64).
func (f *Func) FMA(a, b, c value.Value) value.Value {
	if typeOf(a).Equal(types.Double) {
		return f.CallIntrinsic("llvm.fma.f64", a, b, c)
	}
	return f.f32Op("llvm.fma.f32", a, b, c)
}

// FMax returns the larger of floats a and b; NaN loses (llvm.maxnum.f32 →
// max.f32).
func (f *Func) FMax(a, b value.Value) value.Value { return f.f32Op("llvm.maxnum.f32", a, b) }

// FMin returns the smaller of floats a and b; NaN loses (min.f32).
func (f *Func) FMin(a, b value.Value) value.Value { return f.f32Op("llvm.minnum.f32", a, b) }

// FAbs returns |a| (float).
func (f *Func) FAbs(a value.Value) value.Value { return f.f32Op("llvm.fabs.f32", a) }

// Sqrt returns the correctly rounded square root of float a (sqrt.rn.f32).
func (f *Func) Sqrt(a value.Value) value.Value { return f.f32Op("llvm.sqrt.f32", a) }

// Ex2 returns 2^a, approximate (ex2.approx.f32, max 2 ulp; PTX ISA
// §9.7.3.21).
func (f *Func) Ex2(a value.Value) value.Value { return f.f32Op("llvm.nvvm.ex2.approx.f", a) }

// Exp returns e^a as ex2.approx(a * log2(e)).
func (f *Func) Exp(a value.Value) value.Value {
	return f.Ex2(f.FMul(a, Float32(1.4426950408889634)))
}

// Rcp returns 1/a, correctly rounded (rcp.rn.f32).
func (f *Func) Rcp(a value.Value) value.Value { return f.f32Op("llvm.nvvm.rcp.rn.f", a) }

func (f *Func) intOp(op string, a, b value.Value) value.Value {
	switch {
	case typeOf(a).Equal(types.I64):
		return f.CallIntrinsic("llvm."+op+".i64", a, b)
	default:
		return f.CallIntrinsic("llvm."+op+".i32", a, b)
	}
}

// SMax returns the signed maximum of i32/i64 a and b.
func (f *Func) SMax(a, b value.Value) value.Value { return f.intOp("smax", a, b) }

// SMin returns the signed minimum.
func (f *Func) SMin(a, b value.Value) value.Value { return f.intOp("smin", a, b) }

// UMax returns the unsigned maximum.
func (f *Func) UMax(a, b value.Value) value.Value { return f.intOp("umax", a, b) }

// UMin returns the unsigned minimum.
func (f *Func) UMin(a, b value.Value) value.Value { return f.intOp("umin", a, b) }

// Clz returns the number of leading zero bits of i32 a (32 for 0).
func (f *Func) Clz(a value.Value) value.Value {
	return f.CallIntrinsic("llvm.ctlz.i32", a, Bool(false))
}

// Popc returns the number of one bits of i32 a.
func (f *Func) Popc(a value.Value) value.Value { return f.CallIntrinsic("llvm.ctpop.i32", a) }
