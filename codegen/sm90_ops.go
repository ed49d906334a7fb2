package codegen

import (
	"fmt"
	"strings"

	"github.com/llir/llvm/ir/value"

	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/layouts"
)

// Inline PTX for the asynchronous machinery shared by the sm_90a and
// sm_100a engines: mbarriers, TMA (cp.async.bulk.tensor), proxy fences,
// wgmma and setmaxnreg. Every shared-memory operand is a 32-bit address in
// the shared window (what `cvta.to.shared` gives, and what ptrtoint of an
// addrspace(3) pointer truncated to i32 is); tensor-map operands are the
// 64-bit generic address of a byval kernel parameter (ir.TensorMapParam;
// ptrtoint of the parameter).
// Sources: PTX ISA 8.x, sections "Parallel Synchronization and
// Communication Instructions: mbarrier", "Data Movement: cp.async.bulk.tensor",
// "Asynchronous Warpgroup Level Matrix Multiply-Accumulate (wgmma)",
// "membar/fence" (fence.proxy.async, fence.mbarrier_init) and "setmaxnreg".

// SharedBase1024 returns the dynamic shared memory base rounded up to 1024
// bytes, as a 32-bit shared-window address. 128-byte swizzled tiles must
// start 1024-byte aligned (the swizzle XORs address bits [4,7) with [7,10));
// kernels that use it request 1024 extra bytes of dynamic shared memory.
func (b *Builder) SharedBase1024() value.Value {
	a := b.Trunc(b.PtrToInt(b.DynSmem()), ir.I32)
	return b.And(b.AddI(a, 1023), ir.Int32(-1024))
}

// MbarInit initialises the mbarrier at shared address bar (8 bytes, 8-byte
// aligned) with an expected arrival count.
func (b *Builder) MbarInit(bar value.Value, count int) {
	b.Asm("mbarrier.init.shared::cta.b64 [$0], $1;", "r,r,~{memory}", bar, ir.Int32(int64(count)))
}

// MbarInval invalidates the mbarrier at bar (PTX ISA, "mbarrier.inval"),
// so that its shared memory may be initialised as another barrier or
// used for data.
func (b *Builder) MbarInval(bar value.Value) {
	b.Asm("mbarrier.inval.shared::cta.b64 [$0];", "r,~{memory}", bar)
}

// FenceMbarInit makes initialised mbarriers visible to the async proxy and
// other threads (fence.mbarrier_init.release.cluster), followed by
// fence.proxy.async.shared::cta; a barrier (bar.sync) must follow before
// other threads use them.
func (b *Builder) FenceMbarInit() {
	b.Asm("fence.mbarrier_init.release.cluster;\n\tfence.proxy.async.shared::cta;", "~{memory}")
}

// MbarArriveExpectTx arrives once on bar and adds bytes to the barrier's
// expected transaction count (the bytes TMA will deliver in this phase).
func (b *Builder) MbarArriveExpectTx(bar value.Value, bytes int) {
	b.MbarArriveExpectTxReg(bar, ir.Int32(int64(bytes)))
}

// MbarArrive arrives once on bar (release semantics, CTA scope).
func (b *Builder) MbarArrive(bar value.Value) {
	b.Asm("mbarrier.arrive.shared::cta.b64 _, [$0];", "r,~{memory}", bar)
}

// MbarArriveCount arrives n times on bar at once (mbarrier.arrive with a
// count, sm_90: PTX ISA "Parallel Synchronization and Communication
// Instructions: mbarrier.arrive").
func (b *Builder) MbarArriveCount(bar value.Value, n int) {
	b.Asm("mbarrier.arrive.shared::cta.b64 _, [$0], $1;", "r,r,~{memory}", bar, ir.Int32(int64(n)))
}

// MbarArriveIf arrives once on bar when pred (i32) is nonzero.
func (b *Builder) MbarArriveIf(bar, pred value.Value) {
	b.Asm("{\n\t.reg .pred p;\n\tsetp.ne.u32 p, $1, 0;\n\t@p mbarrier.arrive.shared::cta.b64 _, [$0];\n\t}", "r,r,~{memory}", bar, pred)
}

// MbarWait spins until the phase of bar with parity parity (i32, 0 or 1)
// has completed (mbarrier.try_wait.parity in a loop; acquire semantics, CTA
// scope). The loop's labels are local to the asm's braces.
func (b *Builder) MbarWait(bar, parity value.Value) {
	b.Asm(asmLines(
		"{",
		".reg .pred p;",
		"MBAR_WAIT:",
		"mbarrier.try_wait.parity.shared::cta.b64 p, [$0], $1;",
		"@!p bra MBAR_WAIT;",
		"}"), "r,r,~{memory}", bar, parity)
}

// PrefetchTensorMap prefetches the tensor map at generic address tmap (i64).
func (b *Builder) PrefetchTensorMap(tmap value.Value) {
	b.Asm("prefetch.tensormap [$0];", "l,~{memory}", tmap)
}

// TMALoad issues a tiled TMA load of one box of the tensor map at generic
// address tmap (i64) into shared address dst (i32; 128-byte aligned, 1024 for
// 128-byte swizzle), completing on mbarrier bar with complete_tx::bytes.
// coords are i32 element coordinates, innermost first (1 to 5 of them).
// Elements outside the tensor are filled with zeros and still count toward
// the transaction bytes (the whole box is always delivered).
func (b *Builder) TMALoad(tmap, dst, bar value.Value, coords ...value.Value) error {
	return b.tmaLoad(tmap, dst, bar, nil, coords)
}

// TMALoadMulticast is TMALoad delivering the box to the same shared
// offset dst, and its complete_tx to the same mbarrier offset bar, in
// every CTA of the cluster whose rank has its bit set in ctaMask (i16;
// PTX ISA "cp.async.bulk.tensor", .multicast::cluster; sm_90).
func (b *Builder) TMALoadMulticast(tmap, dst, bar, ctaMask value.Value, coords ...value.Value) error {
	return b.tmaLoad(tmap, dst, bar, ctaMask, coords)
}

// tmaLoad emits TMALoad, or TMALoadMulticast when ctaMask is not nil.
func (b *Builder) tmaLoad(tmap, dst, bar, ctaMask value.Value, coords []value.Value) error {
	n := len(coords)
	if n < 1 || n > 5 {
		return fmt.Errorf("codegen: TMA load with %d coordinates (want 1..5)", n)
	}
	args, cons, mc, first := []value.Value{dst, tmap, bar}, "r,l,r", "", 3
	if ctaMask != nil {
		args, cons, mc, first = append(args, ctaMask), cons+",h", ".multicast::cluster", 4
	}
	cs := make([]string, n)
	for i := range cs {
		cs[i] = fmt.Sprintf("$%d", first+i)
	}
	text := fmt.Sprintf("cp.async.bulk.tensor.%dd.shared::cluster.global.mbarrier::complete_tx::bytes%s [$0], [$1, {%s}], [$2]", n, mc, strings.Join(cs, ", "))
	if ctaMask != nil {
		text += ", $3"
	}
	b.Asm(text+";", cons+strings.Repeat(",r", n)+",~{memory}", append(args, coords...)...)
	return nil
}

// ClusterCTARank returns the calling CTA's rank in its cluster (PTX
// %cluster_ctarank, i32).
func (b *Builder) ClusterCTARank() value.Value {
	return b.AsmCall("mov.u32 $0, %cluster_ctarank;", "=r", ir.I32)
}

// ClusterID returns the calling CTA's cluster index along x in the grid
// (PTX %clusterid.x, i32).
func (b *Builder) ClusterID() value.Value {
	return b.AsmCall("mov.u32 $0, %clusterid.x;", "=r", ir.I32)
}

// ClusterCount returns the number of clusters along x in the grid (PTX
// %nclusterid.x, i32).
func (b *Builder) ClusterCount() value.Value {
	return b.AsmCall("mov.u32 $0, %nclusterid.x;", "=r", ir.I32)
}

// ClusterSync is barrier.cluster.arrive.release then
// barrier.cluster.wait.acquire: every thread of every CTA of the cluster
// waits for all of them, and the memory operations before it (the
// mbarrier initialisations, fence.mbarrier_init) are visible to the
// cluster after it (PTX ISA "barrier.cluster"). Every non-exited thread
// of the cluster must execute it.
func (b *Builder) ClusterSync() {
	b.Asm("barrier.cluster.arrive.release;\n\tbarrier.cluster.wait.acquire;", "~{memory}")
}

// SetMaxNReg is setmaxnreg.{inc,dec}.sync.aligned.u32 n: the executing
// warpgroup requests (inc) or releases (dec) registers so each thread has n
// (24..256, a multiple of 8). All warps of the warpgroup must execute it.
func (b *Builder) SetMaxNReg(inc bool, n int) {
	op := "dec"
	if inc {
		op = "inc"
	}
	b.Asm(fmt.Sprintf("setmaxnreg.%s.sync.aligned.u32 %d;", op, n), "~{memory}")
}

// SM90DescK128B returns the address-independent bits of the wgmma shared
// memory descriptor (layouts.SM90SmemDescriptor with start address 0) of
// the K-major 128-byte-swizzled bf16 tiles TMA writes with
// CU_TENSOR_MAP_SWIZZLE_128B: 8-row groups 1024 bytes apart (SBO), LBO 16
// (unused by swizzled K-major layouts, "assumed 1"), base offset 0 (tiles
// are 1024-byte aligned). OR in the start address with SM90Desc.
func SM90DescK128B() (uint64, error) {
	return layouts.SM90SmemDescriptor(layouts.SmemDescriptor{LBO: 16, SBO: 1024, Swizzle: layouts.Swizzle128B})
}

// SM90Desc returns hi | ((addr >> 4) & 0x3FFF) as an i64 descriptor for the
// tile at 32-bit shared address addr.
func (b *Builder) SM90Desc(addr value.Value, hi uint64) value.Value {
	lo := b.ZExt(b.And(b.LShr(addr, ir.Int32(4)), ir.Int32(0x3FFF)), ir.I64)
	return b.Or(lo, ir.Int64(int64(hi)))
}

// WarpUniform returns x as lane 0 of the warp has it (shfl.sync.idx), for
// an x every lane of the warp holds (a warpgroup index): ptxas then knows
// code under a branch on it is not a divergent path. In one, ptxas
// serializes a wgmma pipeline whose registers are read while another
// wgmma is in flight (info C7518, "wgmma.mma_async instructions are
// serialized due to program dependence on compiler-inserted WG.DP in
// divergent path"), as the MXFP8 K loop does (WGMMAMainloopMX.asmSplit).
func (b *Builder) WarpUniform(x value.Value) value.Value {
	return b.AsmCallNoMemory("shfl.sync.idx.b32 $0, $1, 0, 31, -1;", "=r,r", ir.I32, x)
}

// shflXor is the f32 v of lane^d (shfl.sync.bfly.b32, all 32 lanes).
func (b *Builder) shflXor(v value.Value, d int) value.Value {
	return b.BitCast(b.shflXorI32(b.BitCast(v, ir.I32), d), ir.F32)
}

// shflXorI32 is shflXor of an i32.
func (b *Builder) shflXorI32(v value.Value, d int) value.Value {
	return b.AsmCallNoMemory(fmt.Sprintf("shfl.sync.bfly.b32 $0, $1, %d, 31, -1;", d), "=r,r", ir.I32, v)
}

// movMatrixTrans transposes an 8x8 matrix of b16 held across the warp as
// mma fragments (thread t: row t/4, columns 2(t%4) and +1, the lower column
// in bits 0..15) and returns the thread's fragment of the transpose (PTX
// ISA, warp-level matrix instructions: movmatrix.sync.aligned.m8n8.trans.b16;
// sm_75 and later, PTX 7.8). Every lane of the warp must execute it.
func (b *Builder) movMatrixTrans(v value.Value) value.Value {
	return b.AsmCallNoMemory("movmatrix.sync.aligned.m8n8.trans.b16 $0, $1;", "=r,r", ir.I32, v)
}

// CpAsync16 copies 16 bytes from global address src (i64) to shared
// address dst (i32, or i64) with cp.async.cg (L2 only), reading srcBytes (i32, 16
// or 0) bytes and zero-filling the rest (PTX ISA "cp.async": src-size).
func (b *Builder) CpAsync16(dst, src, srcBytes value.Value) {
	cons := "r,l,r,~{memory}"
	if dst.Type().Equal(ir.I64) {
		cons = "l,l,r,~{memory}"
	}
	b.Asm("cp.async.cg.shared.global [$0], [$1], 16, $2;", cons, dst, src, srcBytes)
}

// cpAsync16CA is CpAsync16 through L1 (cp.async.ca): a later copy of the
// rest of the same 32-byte sector hits there.
func (b *Builder) cpAsync16CA(dst, src, srcBytes value.Value) {
	b.Asm("cp.async.ca.shared.global [$0], [$1], 16, $2;", "r,l,r,~{memory}", dst, src, srcBytes)
}

// CpAsyncMbarArrive makes the mbarrier at bar receive one arrival (counted
// against its expected arrivals: .noinc) once every cp.async this thread
// issued before has completed.
func (b *Builder) CpAsyncMbarArrive(bar value.Value) {
	b.Asm("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [$0];", "r,~{memory}", bar)
}

// MbarArriveExpectTxReg is MbarArriveExpectTx with the byte count bytes
// an i32 value.
func (b *Builder) MbarArriveExpectTxReg(bar, bytes value.Value) {
	b.Asm("mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;", "r,r,~{memory}", bar, bytes)
}

// BulkCopyG2S copies size bytes (i32, a multiple of 16) from global
// address src (a global pointer, 16-byte aligned) to shared address dst
// (i32, 16-byte aligned) asynchronously, completing size bytes of
// transactions on the mbarrier at bar (PTX ISA "Data Movement:
// cp.async.bulk", .shared::cluster.global.mbarrier::complete_tx::bytes;
// sm_90).
func (b *Builder) BulkCopyG2S(dst, src, size, bar value.Value) {
	b.Asm("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [$0], [$1], $2, [$3];", "r,l,r,r,~{memory}", dst, src, size, bar)
}

// WarpSync is bar.warp.sync over the full warp: its threads meet, and
// their memory accesses before it are ordered before those after it
// (PTX ISA "bar.warp.sync").
func (b *Builder) WarpSync() {
	b.Asm("bar.warp.sync -1;", "~{memory}")
}
