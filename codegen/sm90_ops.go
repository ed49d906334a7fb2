package codegen

import (
	"fmt"
	"strings"

	"github.com/llir/llvm/ir/types"
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
	b.Asm("mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;", "r,r,~{memory}", bar, ir.Int32(int64(bytes)))
}

// MbarArrive arrives once on bar (release semantics, CTA scope).
func (b *Builder) MbarArrive(bar value.Value) {
	b.Asm("mbarrier.arrive.shared::cta.b64 _, [$0];", "r,~{memory}", bar)
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
	n := len(coords)
	if n < 1 || n > 5 {
		return fmt.Errorf("codegen: TMA load with %d coordinates (want 1..5)", n)
	}
	cs := make([]string, n)
	for i := range cs {
		cs[i] = fmt.Sprintf("$%d", 3+i)
	}
	text := fmt.Sprintf("cp.async.bulk.tensor.%dd.shared::cluster.global.mbarrier::complete_tx::bytes [$0], [$1, {%s}], [$2];",
		n, strings.Join(cs, ", "))
	cons := "r,l,r" + strings.Repeat(",r", n) + ",~{memory}"
	args := append([]value.Value{dst, tmap, bar}, coords...)
	b.Asm(text, cons, args...)
	return nil
}

// WGMMAWait is wgmma.wait_group.sync.aligned n: waits until at most n
// committed wgmma groups of the warpgroup are pending. acc are the
// accumulator values the pending groups write; they pass through the asm
// (tied "+f") so no use of them can move above the wait.
func (b *Builder) WGMMAWait(n int, acc []value.Value) []value.Value {
	if len(acc) == 0 {
		b.Asm(fmt.Sprintf("wgmma.wait_group.sync.aligned %d;", n), "~{memory}")
		return nil
	}
	cons := make([]string, 0, 2*len(acc)+1)
	for range acc {
		cons = append(cons, "=f")
	}
	for i := range acc {
		cons = append(cons, fmt.Sprint(i))
	}
	cons = append(cons, "~{memory}")
	return b.AsmCallN(fmt.Sprintf("wgmma.wait_group.sync.aligned %d;", n), strings.Join(cons, ","), f32s(len(acc)), acc...)
}

// WGMMABF16 issues len(offA) consecutive
// `wgmma.mma_async.sync.aligned.m64n<n>k16.f32.bf16.bf16` instructions as
// one asm statement, preceded by wgmma.fence and followed by
// wgmma.commit_group (one group). descA and descB (i64) are shared-memory
// matrix descriptors; step s uses descA + offA[s] and descB + offB[s]
// (descriptor units of 16 bytes in the start-address field: +2 per k16 step
// inside a 128-byte swizzle row, + rows*8 to the next 64-wide K atom of a
// tile of rows rows). acc holds the n/2 f32 accumulators of each thread
// (PTX ISA "wgmma D matrix, m64nNk16": register 4j+i holds row
// 16*(warp%4) + lane/4 + 8*(i/2), column 8j + 2*(lane%4) + i%2); they are
// accumulated into (scale-d = 1) and the new values returned. A and B are
// K-major (no transpose), scale-a = scale-b = 1. The results are only valid
// after a WGMMAWait that covers this group.
func (b *Builder) WGMMABF16(n int, acc []value.Value, descA, descB value.Value, offA, offB []int) ([]value.Value, error) {
	if n < 8 || n > 256 || n%8 != 0 {
		return nil, fmt.Errorf("codegen: wgmma m64n%dk16: N must be a multiple of 8 in 8..256", n)
	}
	if len(acc) != n/2 {
		return nil, fmt.Errorf("codegen: wgmma m64n%dk16 needs %d accumulators per thread, got %d", n, n/2, len(acc))
	}
	if len(offA) < 1 || len(offA) != len(offB) {
		return nil, fmt.Errorf("codegen: wgmma with %d A and %d B descriptor offsets", len(offA), len(offB))
	}
	na := n / 2
	regs := make([]string, na)
	for i := range regs {
		regs[i] = fmt.Sprintf("$%d", i)
	}
	dlist := "{" + strings.Join(regs, ", ") + "}"
	ia, ib := fmt.Sprintf("$%d", na), fmt.Sprintf("$%d", na+1)
	lines := []string{"{", ".reg .b64 da, db;", "wgmma.fence.sync.aligned;"}
	for s := range offA {
		a, bb := ia, ib
		if offA[s] != 0 {
			lines = append(lines, fmt.Sprintf("add.s64 da, %s, %d;", ia, offA[s]))
			a = "da"
		}
		if offB[s] != 0 {
			lines = append(lines, fmt.Sprintf("add.s64 db, %s, %d;", ib, offB[s]))
			bb = "db"
		}
		lines = append(lines, fmt.Sprintf("wgmma.mma_async.sync.aligned.m64n%dk16.f32.bf16.bf16 %s, %s, %s, 1, 1, 1, 0, 0;", n, dlist, a, bb))
	}
	lines = append(lines, "wgmma.commit_group.sync.aligned;", "}")
	cons := make([]string, 0, 2*na+3)
	for i := 0; i < na; i++ {
		cons = append(cons, "=f")
	}
	cons = append(cons, "l", "l")
	for i := 0; i < na; i++ {
		cons = append(cons, fmt.Sprint(i))
	}
	cons = append(cons, "~{memory}")
	args := append([]value.Value{descA, descB}, acc...)
	return b.AsmCallN(asmLines(lines...), strings.Join(cons, ","), f32s(na), args...), nil
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

// WGMMAMainloop describes the consumer K loop of an sm_90a GEMM work item,
// emitted as one inline-PTX statement by (*Builder).WGMMAMainloop.
type WGMMAMainloop struct {
	N          int    // wgmma N (B-tile rows), 8..256
	Stages     int    // ring depth S
	StageBytes int    // bytes of one ring stage (A atoms, then B atoms)
	BOffset    int    // offset of the B atoms inside a stage
	OffA, OffB []int  // per k16 step: descriptor offsets (16-byte units) from the stage's A / B descriptors
	DescHi     uint64 // address-independent descriptor bits (SM90DescK128B)
	// ProxyFence adds fence.proxy.async.shared::cta after each full-barrier
	// wait: needed when (part of) the stage was written by generic-proxy
	// stores or cp.async rather than TMA.
	ProxyFence bool
}

// WGMMAMainloop emits the whole K loop of one work item of a consumer
// warpgroup as a single asm statement, so no register copy of the
// accumulators can fall between a wgmma and the wgmma.wait_group that
// covers it, however the backend allocates registers (ptxas would otherwise
// inject warpgroup.wait and serialise the pipeline). Per K tile kt of
// ktiles: wait on full[stage] with parity phase (try_wait loop); wgmma.fence;
// len(OffA) wgmma m64nNk16 from descriptors of the stage (A at smem + stage*
// StageBytes + aOff, B at + BOffset); commit; wait_group 1; then, for
// kt > 0, lane 0 of each warp (lead != 0) arrives on empty[previous stage];
// advance (stage, phase). After the loop: wait_group 0 and release the last
// stage. The accumulators start at zero. bars is the shared address of
// full[0] (full[s] at bars + 8s, empty[s] at bars + 8(S+s)); smem the
// ring's base. Returns the N/2 accumulators (fragment layout of WGMMABF16)
// and the advanced stage and phase.
func (b *Builder) WGMMAMainloop(ml WGMMAMainloop, stage, phase, ktiles, bars, smem, aOff, lead value.Value) (acc []value.Value, stageOut, phaseOut value.Value, err error) {
	n := ml.N
	if n < 8 || n > 256 || n%8 != 0 {
		return nil, nil, nil, fmt.Errorf("codegen: wgmma m64n%dk16: N must be a multiple of 8 in 8..256", n)
	}
	if len(ml.OffA) == 0 || len(ml.OffA) != len(ml.OffB) || ml.Stages < 2 {
		return nil, nil, nil, fmt.Errorf("codegen: wgmma mainloop with %d/%d steps and %d stages", len(ml.OffA), len(ml.OffB), ml.Stages)
	}
	na := n / 2
	in := func(i int) string { return fmt.Sprintf("$%d", na+2+i) } // inputs after the outputs
	inStage, inPhase, inKT, inBars, inSmem, inAOff, inLead := in(0), in(1), in(2), in(3), in(4), in(5), in(6)
	regs := make([]string, na)
	for i := range regs {
		regs[i] = fmt.Sprintf("$%d", i)
	}
	dlist := "{" + strings.Join(regs, ", ") + "}"
	S := ml.Stages
	L := []string{
		"{",
		".reg .pred P, Q;",
		".reg .b32 s, ph, kt, bar, sa, t;",
		".reg .b64 d0a, d0b, da, db;",
		"mov.b32 s, " + inStage + ";",
		"mov.b32 ph, " + inPhase + ";",
		"mov.b32 kt, 0;",
	}
	for i := 0; i < na; i++ {
		L = append(L, fmt.Sprintf("mov.f32 $%d, 0f00000000;", i))
	}
	desc := func(dst, addr string) []string {
		return []string{
			"shr.u32 t, " + addr + ", 4;",
			"and.b32 t, t, 16383;",
			"cvt.u64.u32 " + dst + ", t;",
			fmt.Sprintf("or.b64 %s, %s, %d;", dst, dst, int64(ml.DescHi)),
		}
	}
	release := func(pred string) []string {
		return []string{
			"setp.eq.s32 Q, s, 0;",
			"add.s32 t, s, -1;",
			fmt.Sprintf("selp.b32 t, %d, t, Q;", S-1),
			fmt.Sprintf("mad.lo.s32 bar, t, 8, %s;", inBars),
			fmt.Sprintf("add.s32 bar, bar, %d;", 8*S),
			"@" + pred + " mbarrier.arrive.shared::cta.b64 _, [bar];",
		}
	}
	L = append(L,
		"WGML_LOOP:",
		"setp.ge.s32 P, kt, "+inKT+";",
		"@P bra WGML_DONE;",
		fmt.Sprintf("mad.lo.s32 bar, s, 8, %s;", inBars),
		"WGML_WAIT:",
		"mbarrier.try_wait.parity.shared::cta.b64 Q, [bar], ph;",
		"@!Q bra WGML_WAIT;",
	)
	if ml.ProxyFence {
		L = append(L, "fence.proxy.async.shared::cta;")
	}
	L = append(L,
		fmt.Sprintf("mad.lo.s32 sa, s, %d, %s;", ml.StageBytes, inSmem),
		"add.s32 bar, sa, "+inAOff+";",
	)
	L = append(L, desc("d0a", "bar")...)
	L = append(L, fmt.Sprintf("add.s32 bar, sa, %d;", ml.BOffset))
	L = append(L, desc("d0b", "bar")...)
	L = append(L, "wgmma.fence.sync.aligned;")
	for s := range ml.OffA {
		a, bb := "d0a", "d0b"
		if ml.OffA[s] != 0 {
			L = append(L, fmt.Sprintf("add.s64 da, d0a, %d;", ml.OffA[s]))
			a = "da"
		}
		if ml.OffB[s] != 0 {
			L = append(L, fmt.Sprintf("add.s64 db, d0b, %d;", ml.OffB[s]))
			bb = "db"
		}
		L = append(L, fmt.Sprintf("wgmma.mma_async.sync.aligned.m64n%dk16.f32.bf16.bf16 %s, %s, %s, 1, 1, 1, 0, 0;", n, dlist, a, bb))
	}
	L = append(L,
		"wgmma.commit_group.sync.aligned;",
		"wgmma.wait_group.sync.aligned 1;",
		"setp.gt.s32 P, kt, 0;",
		"setp.ne.b32 Q, "+inLead+", 0;",
		"and.pred P, P, Q;",
	)
	L = append(L, release("P")...)
	L = append(L,
		"add.s32 s, s, 1;",
		fmt.Sprintf("setp.eq.s32 Q, s, %d;", S),
		"@Q mov.b32 s, 0;",
		"@Q xor.b32 ph, ph, 1;",
		"add.s32 kt, kt, 1;",
		"bra.uni WGML_LOOP;",
		"WGML_DONE:",
		"wgmma.wait_group.sync.aligned 0;",
		"setp.gt.s32 P, kt, 0;",
		"setp.ne.b32 Q, "+inLead+", 0;",
		"and.pred P, P, Q;",
	)
	L = append(L, release("P")...)
	L = append(L,
		fmt.Sprintf("mov.b32 $%d, s;", na),
		fmt.Sprintf("mov.b32 $%d, ph;", na+1),
		"}")
	cons := make([]string, 0, na+10)
	for i := 0; i < na; i++ {
		cons = append(cons, "=f")
	}
	cons = append(cons, "=r", "=r", "r", "r", "r", "r", "r", "r", "r", "~{memory}")
	outs := b.AsmCallN(asmLines(L...), strings.Join(cons, ","), append(f32s(na), ir.I32, ir.I32),
		stage, phase, ktiles, bars, smem, aOff, lead)
	return outs[:na], outs[na], outs[na+1], nil
}

// WGMMADrain emits the ring side of WGMMAMainloop without the wgmma: for
// each of ktiles K tiles, wait on full[stage] with parity phase, then lane 0
// of each warp (lead != 0) arrives on empty[stage] at once (nothing reads
// the stage), and (stage, phase) advance. A consumer warpgroup whose rows
// all lie past the expert's segment runs it instead of the K loop, so the
// other consumers have the tensor cores to themselves while the ring's
// arrival counts stay whole. Returns the advanced stage and phase.
func (b *Builder) WGMMADrain(ml WGMMAMainloop, stage, phase, ktiles, bars, lead value.Value) (stageOut, phaseOut value.Value) {
	S := ml.Stages
	L := []string{
		"{",
		".reg .pred P, Q;",
		".reg .b32 s, ph, kt, bar;",
		"mov.b32 s, $2;",
		"mov.b32 ph, $3;",
		"mov.b32 kt, 0;",
		"setp.ne.b32 Q, $6, 0;",
		"WGMD_LOOP:",
		"setp.ge.s32 P, kt, $4;",
		"@P bra WGMD_DONE;",
		"mad.lo.s32 bar, s, 8, $5;",
		"WGMD_WAIT:",
		"mbarrier.try_wait.parity.shared::cta.b64 P, [bar], ph;",
		"@!P bra WGMD_WAIT;",
		fmt.Sprintf("add.s32 bar, bar, %d;", 8*S),
		"@Q mbarrier.arrive.shared::cta.b64 _, [bar];",
		"add.s32 s, s, 1;",
		fmt.Sprintf("setp.eq.s32 P, s, %d;", S),
		"@P mov.b32 s, 0;",
		"@P xor.b32 ph, ph, 1;",
		"add.s32 kt, kt, 1;",
		"bra.uni WGMD_LOOP;",
		"WGMD_DONE:",
		"mov.b32 $0, s;",
		"mov.b32 $1, ph;",
		"}",
	}
	outs := b.AsmCallN(asmLines(L...), "=r,=r,r,r,r,r,r,~{memory}", []types.Type{ir.I32, ir.I32},
		stage, phase, ktiles, bars, lead)
	return outs[0], outs[1]
}

// CpAsync16 copies 16 bytes from global address src (i64) to shared
// address dst (i32) with cp.async.cg (L2 only), reading srcBytes (i32, 16
// or 0) bytes and zero-filling the rest (PTX ISA "cp.async": src-size).
func (b *Builder) CpAsync16(dst, src, srcBytes value.Value) {
	b.Asm("cp.async.cg.shared.global [$0], [$1], 16, $2;", "r,l,r,~{memory}", dst, src, srcBytes)
}

// CpAsyncMbarArrive makes the mbarrier at bar receive one arrival (counted
// against its expected arrivals: .noinc) once every cp.async this thread
// issued before has completed.
func (b *Builder) CpAsyncMbarArrive(bar value.Value) {
	b.Asm("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [$0];", "r,~{memory}", bar)
}
