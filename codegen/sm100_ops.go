package codegen

import (
	"fmt"
	"strings"

	"github.com/llir/llvm/ir/value"

	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/layouts"
)

// Inline PTX for the sm_100a (Blackwell) tensor-core path: tensor memory
// (TMEM) allocation, tcgen05.mma with a TMEM accumulator, its completion
// through tcgen05.commit to an mbarrier, tcgen05.ld into registers, and the
// tcgen05 thread-sync fences. PTX ISA 8.7/8.8 section "TensorCore 5th
// Generation Family Instructions" (tcgen05). These need `.version 8.8` and
// `.target sm_100a` (ptxas rejects tcgen05 for plain sm_100).
//
// TMEM addresses are 32 bits: lane << 16 | column. A CTA has 128 lanes x 512
// columns of 32 bits; warp w may access lanes 32*(w%4) .. 32*(w%4)+31 only.

// TMEMAlloc allocates ncols TMEM columns (a power of two, 32..512) for the
// CTA and writes the TMEM base address to the shared word at dst (i32 shared
// address). Executed by one whole warp (.sync.aligned); the same warp must
// later TMEMDealloc.
func (b *Builder) TMEMAlloc(dst value.Value, ncols int) error {
	if ncols < 32 || ncols > 512 || ncols&(ncols-1) != 0 {
		return fmt.Errorf("codegen: tcgen05.alloc of %d columns (want a power of two in 32..512)", ncols)
	}
	b.Asm("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [$0], $1;", "r,r,~{memory}", dst, ir.Int32(int64(ncols)))
	return nil
}

// TMEMRelinquish gives up the CTA's right to allocate more TMEM, so that
// other CTAs on the SM are not kept waiting (warp-wide).
func (b *Builder) TMEMRelinquish() {
	b.Asm("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;", "~{memory}")
}

// TMEMDealloc frees ncols TMEM columns at taddr (warp-wide; the warp that
// allocated them).
func (b *Builder) TMEMDealloc(taddr value.Value, ncols int) {
	b.Asm("tcgen05.dealloc.cta_group::1.sync.aligned.b32 $0, $1;", "r,r,~{memory}", taddr, ir.Int32(int64(ncols)))
}

// TCGen05FenceBefore is tcgen05.fence::before_thread_sync: orders this
// thread's prior tcgen05 operations before a following thread sync
// (bar.sync, mbarrier arrive).
func (b *Builder) TCGen05FenceBefore() {
	b.Asm("tcgen05.fence::before_thread_sync;", "~{memory}")
}

// TCGen05FenceAfter is tcgen05.fence::after_thread_sync: orders this
// thread's later tcgen05 operations after a preceding thread sync (bar.sync,
// mbarrier wait).
func (b *Builder) TCGen05FenceAfter() {
	b.Asm("tcgen05.fence::after_thread_sync;", "~{memory}")
}

// TCGen05MMAF16 issues one `tcgen05.mma.cta_group::1.kind::f16` (one thread
// issues it for the CTA): D[taddr] (+)= A(adesc) * B(bdesc)^T with the
// instruction descriptor idesc (TCGen05IDescF16); accumulate (i32) nonzero
// adds into D, zero overwrites it (the first MMA of a tile).
func (b *Builder) TCGen05MMAF16(taddr, adesc, bdesc value.Value, idesc uint32, accumulate value.Value) {
	b.Asm(asmLines(
		"{",
		".reg .pred p;",
		"setp.ne.b32 p, $4, 0;",
		"tcgen05.mma.cta_group::1.kind::f16 [$0], $1, $2, $3, p;",
		"}"), "r,l,l,r,r,~{memory}", taddr, adesc, bdesc, ir.Int32(int64(idesc)), accumulate)
}

// TCGen05MMAMX issues one block-scaled MMA, D[taddr] (+)= (A·2^sfa) x
// (B·2^sfb) for e4m3 A and B through their shared-memory descriptors, one
// UE8M0 scale per row and 32-wide K step
// (tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.scale_vec::1X; PTX
// ISA, "tcgen05.mma"; M = 128 with cta_group::1): sfa and sfb are the TMEM
// addresses of the A and B scale-factor columns (what TCGen05CpSF copied),
// idesc a layouts.TCGen05InstrDescMXF8F6F4 whose scale-factor ids pick the
// byte of each 32-bit scale cell this K step uses; accumulate (i32) 0
// overwrites D.
func (b *Builder) TCGen05MMAMX(taddr, adesc, bdesc value.Value, idesc uint32, sfa, sfb, accumulate value.Value) {
	b.Asm(asmLines(
		"{",
		".reg .pred p;",
		"setp.ne.b32 p, $6, 0;",
		"tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.scale_vec::1X [$0], $1, $2, $3, [$4], [$5], p;",
		"}"), "r,l,l,r,r,r,r,~{memory}", taddr, adesc, bdesc, ir.Int32(int64(idesc)), sfa, sfb, accumulate)
}

// TCGen05CpSF copies one 512-byte scale-factor tile (layouts.SFOffset's
// layout, cuBLAS's "1D Block Scaling Factors Layout": 32 rows of 16 bytes,
// row r%32 holding rows r%32, +32, +64, +96 of 128) from shared memory,
// described by sdesc (no swizzle, SBO 128 bytes), to the 4 TMEM columns at
// taddr, each of the 4 lane quarters receiving the 32 rows
// (tcgen05.cp.cta_group::1.32x128b.warpx4; PTX ISA, "tcgen05.cp"): lane l,
// column c holds the 4 scales of tile row 32c + l%32. Issued by one
// thread; it completes in order with the thread's later tcgen05.mma.
func (b *Builder) TCGen05CpSF(taddr, sdesc value.Value) {
	b.Asm("tcgen05.cp.cta_group::1.32x128b.warpx4 [$0], $1;", "r,l,~{memory}", taddr, sdesc)
}

// TCGen05Commit makes the mbarrier at bar (i32 shared address) receive one
// arrival once every tcgen05 operation this thread issued before has
// completed (tcgen05.commit.cta_group::1.mbarrier::arrive::one; it implies
// tcgen05.fence::before_thread_sync).
func (b *Builder) TCGen05Commit(bar value.Value) {
	b.Asm("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [$0];", "r,~{memory}", bar)
}

// TCGen05Load32x32b loads n (1, 2, 4, 8, 16, 32, 64 or 128) consecutive
// 32-bit TMEM columns starting at taddr for the warp's 32 lanes
// (tcgen05.ld.sync.aligned.32x32b.x<n>.b32): thread l of the warp gets lane
// (taddr>>16) + l, and value i is column (taddr & 0xFFFF) + i. It waits for
// completion (tcgen05.wait::ld) in the same statement, so the results are
// ready. Warp-wide; lanes must be the warp's own quarter.
func (b *Builder) TCGen05Load32x32b(taddr value.Value, n int) ([]value.Value, error) {
	switch n {
	case 1, 2, 4, 8, 16, 32, 64, 128:
	default:
		return nil, fmt.Errorf("codegen: tcgen05.ld 32x32b.x%d (want a power of two up to 128)", n)
	}
	regs := make([]string, n)
	cons := make([]string, 0, n+2)
	for i := range regs {
		regs[i] = fmt.Sprintf("$%d", i)
		cons = append(cons, "=f")
	}
	cons = append(cons, "r", "~{memory}")
	text := asmLines(
		fmt.Sprintf("tcgen05.ld.sync.aligned.32x32b.x%d.b32 {%s}, [$%d];", n, strings.Join(regs, ", "), n),
		"tcgen05.wait::ld.sync.aligned;")
	return b.AsmCallN(text, strings.Join(cons, ","), f32s(n), taddr), nil
}

// SM100DescK128B returns the address-independent bits of the tcgen05
// shared memory descriptor (layouts.SM100SmemDescriptor with start address
// 0) of K-major 128-byte-swizzled bf16 tiles written by TMA with
// CU_TENSOR_MAP_SWIZZLE_128B: SBO 1024 (8-row groups), LBO 0 (unused by
// swizzled K-major layouts), version bits 0b001, swizzle code 2 (128B).
// OR in the start address with SM100Desc.
func SM100DescK128B() (uint64, error) {
	return layouts.SM100SmemDescriptor(layouts.SmemDescriptor{SBO: 1024, Swizzle: layouts.Swizzle128B})
}

// SM100Desc returns hi | ((addr >> 4) & 0x3FFF) as an i64 descriptor for
// the tile at 32-bit shared address addr.
func (b *Builder) SM100Desc(addr value.Value, hi uint64) value.Value {
	lo := b.ZExt(b.And(b.LShr(addr, ir.Int32(4)), ir.Int32(0x3FFF)), ir.I64)
	return b.Or(lo, ir.Int64(int64(hi)))
}

// TCGen05IDescF16 is the 32-bit instruction descriptor of
// tcgen05.mma.cta_group::1.kind::f16 for bf16 x bf16 -> f32, both operands
// K-major, no negation, shape M x N (layouts.TCGen05InstrDescF16; pinned in
// the tests to values computed with CUTLASS's InstrDescriptor).
func TCGen05IDescF16(m, n int) (uint32, error) {
	return layouts.TCGen05InstrDescF16(layouts.TCGen05InstrF16{M: m, N: n, CTAGroup: 1,
		AType: layouts.TCGen05BF16, BType: layouts.TCGen05BF16, F32Accum: true})
}
