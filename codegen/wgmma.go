package codegen

import (
	"fmt"
	"strings"

	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/mokc/mokc/ir"
)

// Inline PTX of the sm_90a tensor cores: wgmma.mma_async (PTX ISA 9.7.15
// "Asynchronous Warpgroup Level Matrix Multiply-Accumulate"), its fence,
// commit and wait, and the consumer K loop of the sm_90a atom as one
// statement.

// regList is "{$first, $first+1, ..., $first+n-1}": n asm operands.
func regList(first, n int) string {
	regs := make([]string, n)
	for i := range regs {
		regs[i] = fmt.Sprintf("$%d", first+i)
	}
	return "{" + strings.Join(regs, ", ") + "}"
}

// accConstraints is n "=f" outputs, then ins, then n inputs tied to the
// outputs ("0", "1", ...) when tied, then the memory clobber.
func accConstraints(n int, tied bool, ins ...string) string {
	cons := make([]string, 0, 2*n+len(ins)+1)
	for i := 0; i < n; i++ {
		cons = append(cons, "=f")
	}
	cons = append(cons, ins...)
	if tied {
		for i := 0; i < n; i++ {
			cons = append(cons, fmt.Sprint(i))
		}
	}
	return strings.Join(append(cons, "~{memory}"), ",")
}

// checkWGMMAN refuses an N that wgmma m64nNk16 does not have.
func checkWGMMAN(n int) error {
	if n < 8 || n > 256 || n%8 != 0 {
		return fmt.Errorf("codegen: wgmma m64n%dk16: N must be a multiple of 8 in 8..256", n)
	}
	return nil
}

// wgmmaSteps is the PTX of len(offA) wgmma m64nNk16 into the accumulator
// list dlist: step s reads descriptors descA + offA[s] and descB + offB[s]
// (through the scratch registers da, db when the offset is not 0); A is
// read M-major (imm-trans-a = 1) when transA and B N-major (imm-trans-b =
// 1) when transB (PTX ISA 9.7.15.5.1.2).
func wgmmaSteps(n int, dlist, descA, descB string, offA, offB []int, transA, transB bool) []string {
	ta, tb := 0, 0
	if transA {
		ta = 1
	}
	if transB {
		tb = 1
	}
	var lines []string
	for s := range offA {
		step, a, bb := stepDescs(descA, descB, offA[s], offB[s])
		lines = append(lines, step...)
		lines = append(lines, fmt.Sprintf("wgmma.mma_async.sync.aligned.m64n%dk16.f32.bf16.bf16 %s, %s, %s, 1, 1, 1, %d, %d;", n, dlist, a, bb, ta, tb))
	}
	return lines
}

// wgmmaStepsSplit is wgmmaSteps of WGMMAMainloop.OffBHi: per step the
// wgmma of B's first n/2 rows into accumulators 0 .. n/4-1, then that of
// its rows from n/2 (offBHi) into the rest.
func wgmmaStepsSplit(n int, descA, descB string, offA, offB, offBHi []int, transA, transB bool) []string {
	var lines []string
	for s := range offA {
		lines = append(lines, wgmmaSteps(n/2, regList(0, n/4), descA, descB, offA[s:s+1], offB[s:s+1], transA, transB)...)
		a := descA // the first wgmma's A descriptor (da when offset)
		if offA[s] != 0 {
			a = "da"
		}
		lines = append(lines, wgmmaSteps(n/2, regList(n/4, n/4), a, descB, []int{0}, offBHi[s:s+1], transA, transB)...)
	}
	return lines
}

// stepDescs is the PTX that offsets descriptors descA and descB by offA
// and offB (16-byte units) into the scratch registers da, db, and the
// registers that then hold them (the originals where an offset is 0).
func stepDescs(descA, descB string, offA, offB int) (lines []string, a, b string) {
	a, b = descA, descB
	if offA != 0 {
		lines = append(lines, fmt.Sprintf("add.s64 da, %s, %d;", descA, offA))
		a = "da"
	}
	if offB != 0 {
		lines = append(lines, fmt.Sprintf("add.s64 db, %s, %d;", descB, offB))
		b = "db"
	}
	return lines, a, b
}

// The PTX shared by the K loops written as one asm statement (registers s,
// ph, kt, bar, sa, t declared by the statement; labels prefixed by l).

// loopStart opens the statement: the declarations decls, the ring's stage
// and phase from the operands stage and phase, kt = 0, and the first na
// operands (the accumulators) zeroed.
func loopStart(decls []string, stage, phase string, na int) []string {
	L := append([]string{"{"}, decls...)
	L = append(L, "mov.b32 s, "+stage+";", "mov.b32 ph, "+phase+";", "mov.b32 kt, 0;")
	for i := 0; i < na; i++ {
		L = append(L, fmt.Sprintf("mov.f32 $%d, 0f00000000;", i))
	}
	return L
}

// loopHead is the head of the K loop: leave for <l>_DONE at kt >= ktiles,
// then wait on full[s] (at bars + 8s) with parity ph.
func loopHead(l, ktiles, bars string) []string {
	return []string{
		l + "_LOOP:",
		"setp.ge.s32 P, kt, " + ktiles + ";",
		"@P bra " + l + "_DONE;",
		fmt.Sprintf("mad.lo.s32 bar, s, 8, %s;", bars),
		l + "_WAIT:",
		"mbarrier.try_wait.parity.shared::cta.b64 Q, [bar], ph;",
		"@!Q bra " + l + "_WAIT;",
	}
}

// stageDescs builds the stage's descriptors: sa = smem + s*stageBytes, d0a
// over A at sa + aOff (bits hiA), d0b over B at sa + bOffset (bits hiB).
func stageDescs(stageBytes int, smem, aOff string, bOffset int, hiA, hiB uint64) []string {
	L := []string{fmt.Sprintf("mad.lo.s32 sa, s, %d, %s;", stageBytes, smem), "add.s32 bar, sa, " + aOff + ";"}
	L = append(L, descPTX("d0a", "bar", hiA)...)
	L = append(L, fmt.Sprintf("add.s32 bar, sa, %d;", bOffset))
	return append(L, descPTX("d0b", "bar", hiB)...)
}

// loopAdvance advances the ring (s, wrapping to 0 and flipping ph after
// stages) and kt, and branches back to <l>_LOOP.
func loopAdvance(l string, stages int) []string {
	return []string{
		"add.s32 s, s, 1;",
		fmt.Sprintf("setp.eq.s32 Q, s, %d;", stages),
		"@Q mov.b32 s, 0;",
		"@Q xor.b32 ph, ph, 1;",
		"add.s32 kt, kt, 1;",
		"bra.uni " + l + "_LOOP;",
	}
}

// loopEnd writes the ring's stage and phase to the operands after the na
// accumulators and closes the statement.
func loopEnd(na int) []string {
	return []string{fmt.Sprintf("mov.b32 $%d, s;", na), fmt.Sprintf("mov.b32 $%d, ph;", na+1), "}"}
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
	return b.AsmCallN(fmt.Sprintf("wgmma.wait_group.sync.aligned %d;", n), accConstraints(len(acc), true), f32s(len(acc)), acc...)
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
	return b.WGMMABF16Major(n, acc, descA, descB, offA, offB, WGMMAMajor{})
}

// WGMMAMajor says how WGMMABF16Major reads its operands and whether it
// waits for them.
type WGMMAMajor struct {
	// TransA reads A M-major (imm-trans-a = 1), TransB reads B N-major
	// (imm-trans-b = 1), from MN-major tiles whose descriptors carry the
	// column stride as LBO (layouts.NewSmemTileMN).
	TransA, TransB bool
	// Wait ends the statement with wgmma.wait_group 0: the accumulators
	// are outputs of the one statement that also waits for them, so no
	// register copy can read them in flight.
	Wait bool
}

// WGMMABF16Major is WGMMABF16 with the operand majorness and the wait of
// mj.
func (b *Builder) WGMMABF16Major(n int, acc []value.Value, descA, descB value.Value, offA, offB []int, mj WGMMAMajor) ([]value.Value, error) {
	if err := checkWGMMAN(n); err != nil {
		return nil, err
	}
	if len(acc) != n/2 {
		return nil, fmt.Errorf("codegen: wgmma m64n%dk16 needs %d accumulators per thread, got %d", n, n/2, len(acc))
	}
	if len(offA) < 1 || len(offA) != len(offB) {
		return nil, fmt.Errorf("codegen: wgmma with %d A and %d B descriptor offsets", len(offA), len(offB))
	}
	na := n / 2
	lines := []string{"{", ".reg .b64 da, db;", "wgmma.fence.sync.aligned;"}
	lines = append(lines, wgmmaSteps(n, regList(0, na), fmt.Sprintf("$%d", na), fmt.Sprintf("$%d", na+1), offA, offB, mj.TransA, mj.TransB)...)
	lines = append(lines, "wgmma.commit_group.sync.aligned;")
	if mj.Wait {
		lines = append(lines, "wgmma.wait_group.sync.aligned 0;")
	}
	lines = append(lines, "}")
	args := append([]value.Value{descA, descB}, acc...)
	return b.AsmCallN(asmLines(lines...), accConstraints(na, true, "l", "l"), f32s(na), args...), nil
}

// WGMMAMainloop describes the consumer K loop of an sm_90a GEMM work item,
// emitted as one inline-PTX statement by (*Builder).WGMMAMainloop.
type WGMMAMainloop struct {
	N          int    // wgmma N (B-tile rows), 8..256
	Stages     int    // ring depth S
	StageBytes int    // bytes of one ring stage (A atoms, then B atoms)
	BOffset    int    // offset of the B atoms inside a stage
	OffA, OffB []int  // per k16 step: descriptor offsets (16-byte units) from the stage's A / B descriptors
	DescHi     uint64 // address-independent descriptor bits of A (SM90DescK128B)
	// DescHiB is B's; TransB reads B N-major (its descriptor then carries
	// the column stride as LBO, see layouts.NewSmemTileMN).
	DescHiB uint64
	TransB  bool
	// TransA reads A M-major (imm-trans-a = 1; DescHi then that of an
	// MN-major tile): the weight gradient's A, stored [rows, M].
	TransA bool
	// ProxyFence adds fence.proxy.async.shared::cta after each full-barrier
	// wait: needed when (part of) the stage was written by generic-proxy
	// stores or cp.async rather than TMA.
	ProxyFence bool
	// Peer releases each stage in the other CTA of a 2-CTA cluster too
	// (its empty barrier at the same offset, through mapa): the stage's
	// A rows come by TMA multicast from both CTAs, so neither may refill
	// a stage before the two CTAs' consumers have read it.
	Peer bool
	// OffBHi, when not nil, splits each k16 step into two wgmma
	// m64n(N/2)k16: accumulators 0 .. N/4-1 from B's rows 0 .. N/2-1 (at
	// OffB), the others from its rows N/2 .. (at OffBHi, the descriptor
	// offsets per step, 16-byte units). The fragment layout is that of one
	// wgmma of N (accumulator 4j+i: column 8j + 2*(lane%4) + i%2), so the
	// epilogue is the same; no instruction needs more than N/4
	// accumulators (blocks of two per SM launch with 128 registers a
	// thread: PTX ISA 9.7.15.5, register fragments of wgmma.mma_async).
	OffBHi []int
}

// peerArrive is the PTX that lets lane 0 of each warp (predicate pred)
// also arrive on the barrier at the shared offset in register bar of the
// other CTA of its 2-CTA cluster (PTX ISA "mapa", "mbarrier.arrive": a
// shared::cluster address, the default .release.cta semantics). The
// arrive follows the wgmma.wait_group that retired the reads of the stage,
// so the peer's TMA cannot overwrite what is still being read; a
// .release.cluster arrive would add a cluster-scope memory barrier to
// every stage of every consumer warp (ncu: warps stalled on it about a
// third of their cycles, the GEMMs 18-40% slower; docs/perf.md "cluster
// v1") for no ordering the pipeline needs.
func peerArrive(pred string) []string {
	return []string{
		"{",
		".reg .b32 pr, rb;",
		"mov.u32 pr, %cluster_ctarank;",
		"xor.b32 pr, pr, 1;",
		"mapa.shared::cluster.u32 rb, bar, pr;",
		"@" + pred + " mbarrier.arrive.shared::cluster.b64 _, [rb];",
		"}",
	}
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
	if err := checkWGMMAN(ml.N); err != nil {
		return nil, nil, nil, err
	}
	if ml.OffBHi != nil && (len(ml.OffBHi) != len(ml.OffB) || checkWGMMAN(ml.N/2) != nil) {
		return nil, nil, nil, fmt.Errorf("codegen: wgmma mainloop split into two of N = %d with %d of %d B offsets", ml.N/2, len(ml.OffBHi), len(ml.OffB))
	}
	if len(ml.OffA) == 0 || len(ml.OffA) != len(ml.OffB) || ml.Stages < 2 {
		return nil, nil, nil, fmt.Errorf("codegen: wgmma mainloop with %d/%d steps and %d stages", len(ml.OffA), len(ml.OffB), ml.Stages)
	}
	na := ml.N / 2
	cons := accConstraints(na, false, "=r", "=r", "r", "r", "r", "r", "r", "r", "r")
	outs := b.AsmCallN(ml.asm(), cons, append(f32s(na), ir.I32, ir.I32),
		stage, phase, ktiles, bars, smem, aOff, lead)
	return outs[:na], outs[na], outs[na+1], nil
}

// mainloopIns are the asm operands of WGMMAMainloop's inputs, after the
// N/2 accumulator and 2 ring outputs.
type mainloopIns struct{ stage, phase, kt, bars, smem, aOff, lead string }

// asm is the PTX text of WGMMAMainloop: set up, the K loop, drain.
func (ml WGMMAMainloop) asm() string {
	na := ml.N / 2
	in := func(i int) string { return fmt.Sprintf("$%d", na+2+i) } // inputs after the outputs
	ins := mainloopIns{in(0), in(1), in(2), in(3), in(4), in(5), in(6)}
	L := loopStart([]string{".reg .pred P, Q;", ".reg .b32 s, ph, kt, bar, sa, t;", ".reg .b64 d0a, d0b, da, db;"},
		ins.stage, ins.phase, na)
	L = append(L, ml.loopBody(ins)...)
	L = append(L, "WGML_DONE:")
	L = append(L, ml.waitRelease(ins, 0)...)
	return asmLines(append(L, loopEnd(na)...)...)
}

// loopBody is one K tile of WGMMAMainloop: wait for the stage, build its
// descriptors, issue and commit the wgmma group, wait for the previous
// group, release the previous stage and advance the ring.
func (ml WGMMAMainloop) loopBody(ins mainloopIns) []string {
	L := loopHead("WGML", ins.kt, ins.bars)
	if ml.ProxyFence {
		L = append(L, "fence.proxy.async.shared::cta;")
	}
	L = append(L, stageDescs(ml.StageBytes, ins.smem, ins.aOff, ml.BOffset, ml.DescHi, ml.DescHiB)...)
	L = append(L, "wgmma.fence.sync.aligned;")
	if ml.OffBHi != nil {
		L = append(L, wgmmaStepsSplit(ml.N, "d0a", "d0b", ml.OffA, ml.OffB, ml.OffBHi, ml.TransA, ml.TransB)...)
	} else {
		L = append(L, wgmmaSteps(ml.N, regList(0, ml.N/2), "d0a", "d0b", ml.OffA, ml.OffB, ml.TransA, ml.TransB)...)
	}
	L = append(L, "wgmma.commit_group.sync.aligned;")
	L = append(L, ml.waitRelease(ins, 1)...)
	return append(L, loopAdvance("WGML", ml.Stages)...)
}

// descPTX is the PTX that builds descriptor dst from the 32-bit shared
// address in register addr: hi | ((addr >> 4) & 0x3FFF) (scratch register t).
func descPTX(dst, addr string, hi uint64) []string {
	return []string{
		"shr.u32 t, " + addr + ", 4;",
		"and.b32 t, t, 16383;",
		"cvt.u64.u32 " + dst + ", t;",
		fmt.Sprintf("or.b64 %s, %s, %d;", dst, dst, int64(hi)),
	}
}

// waitRelease is the PTX that waits until at most n wgmma groups are
// pending, then, when kt > 0, lets lane 0 of each warp arrive on the empty
// barrier of the stage before s (its reads are done).
func (ml WGMMAMainloop) waitRelease(ins mainloopIns, n int) []string {
	L := []string{
		fmt.Sprintf("wgmma.wait_group.sync.aligned %d;", n),
		"setp.gt.s32 P, kt, 0;",
		"setp.ne.b32 Q, " + ins.lead + ", 0;",
		"and.pred P, P, Q;",
		"setp.eq.s32 Q, s, 0;",
		"add.s32 t, s, -1;",
		fmt.Sprintf("selp.b32 t, %d, t, Q;", ml.Stages-1),
		fmt.Sprintf("mad.lo.s32 bar, t, 8, %s;", ins.bars),
		fmt.Sprintf("add.s32 bar, bar, %d;", 8*ml.Stages),
		"@P mbarrier.arrive.shared::cta.b64 _, [bar];",
	}
	if ml.Peer {
		L = append(L, peerArrive("P")...)
	}
	return L
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
	}
	if ml.Peer {
		L = append(L, peerArrive("Q")...)
	}
	L = append(L,
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
	)
	outs := b.AsmCallN(asmLines(L...), "=r,=r,r,r,r,r,r,~{memory}", []types.Type{ir.I32, ir.I32},
		stage, phase, ktiles, bars, lead)
	return outs[0], outs[1]
}
