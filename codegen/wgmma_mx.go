package codegen

import (
	"fmt"
	"strings"

	"github.com/llir/llvm/ir/value"
	"github.com/mokc/mokc/ir"
)

// WGMMAMainloopMX describes the consumer K loop of an MXFP8 sm_90a GEMM
// work item (docs/mxfp8.md): per 32-wide block of K, wgmma.mma_async
// m64nNk32.f32.e4m3.e4m3 into partial accumulators (scale-d = 0), then the
// promotion into the f32 accumulators with the block's scales: acc +=
// (partial * X_b[col]) * X_a[row], both scales powers of two, so each
// promotion rounds once and no block accumulates at FP8 precision. Emitted
// as one inline-PTX statement by (*Builder).WGMMAMainloopMX (the partials
// are registers of the statement). When N is a multiple of 16 each block's
// wgmma is split in the B tile's two column halves, one promoted while the
// other runs, in every warp (asmSplit; docs/perf.md mxfp8 v8b); otherwise
// one wgmma per block, waited for at once, and a warp whose 16 rows all
// lie past the work item's rows skips the promotions (asmWhole; a
// warp-uniform branch after the wait; those rows are never stored). With
// Swap the B tile's rows are wgmma's A and the token rows its B (asmSwap).
type WGMMAMainloopMX struct {
	WGMMAMainloop // N, Stages, StageBytes, BOffset, OffA/OffB (per 32-wide block), DescHi; the rest unused
	// ABlock and BBlock are the byte strides between two blocks' f32 scales
	// of the accumulator rows and of the accumulator columns: 4*BM and
	// 4*NB (the A rows', the B-tile rows'), or with Swap 4*NB and 4*BM.
	ABlock, BBlock int
	// Swap is the operand swap of an A tile of BM (a multiple of 8 up to
	// 256) token rows (docs/mxfp8.md, "the operand swap"; asmSwap): the B
	// tile's N rows (weights, N a multiple of 64) are wgmma's A, in 64-row
	// slices, and the token rows its B: per slice and 32-wide block one
	// wgmma m64nWk32, W the narrowest of swapWidths holding the work
	// item's token rows, BM/2 accumulators per thread per slice (slice s
	// at registers s*BM/2.., register 4j+i: B-tile row 64s + 16*(warp%4) +
	// lane/4 + 8*(i/2), token row 8j + 2*(lane%4) + i%2).
	Swap bool
	// BM is the A tile's token rows (the work item's tile rows); read with
	// Swap only, where it is wgmma's N.
	BM int
}

// accs is the number of accumulators per thread: N/2, or with Swap
// BM/2 per 64-row slice of the B tile.
func (ml WGMMAMainloopMX) accs() int {
	if ml.Swap {
		return ml.N / 64 * ml.BM / 2
	}
	return ml.N / 2
}

// WGMMAMainloopMX emits the K loop of one work item of a consumer
// warpgroup: per K tile, wait on full[stage] (parity phase), then per
// 32-wide block issue, wait and promote (see WGMMAMainloopMX; the last
// block's wgmma complete before the release), then lane
// 0 of each warp (lead != 0) arrives on empty[stage] and (stage, phase)
// advance. aScOff is the byte offset, from a stage's base, of the f32
// scale of the thread's first accumulator row in block 0 (its second row,
// 8 below, is 32 bytes on; with Swap, slice s's 256*s bytes on); bScOff
// that of its first column (2*(lane%4); the next column 4 bytes on,
// column 8j+c at 32j more). bars, smem and aOff as for WGMMAMainloop.
// Returns the accumulators (accs of them: the fragment layout of
// WGMMABF16, or Swap's) and the advanced stage and phase. live is the number
// of the work item's rows from the warp's first row on (<= 0: skip the
// promotions; used by the one-wgmma loop), or with Swap the work item's
// token rows (at least 1; the width of asmSwap's loop).
func (b *Builder) WGMMAMainloopMX(ml WGMMAMainloopMX, stage, phase, ktiles, bars, smem, aOff, lead, aScOff, bScOff, live value.Value) (acc []value.Value, stageOut, phaseOut value.Value, err error) {
	n := ml.N
	if ml.Swap {
		if ml.N%64 != 0 {
			return nil, nil, nil, fmt.Errorf("codegen: MXFP8 operand swap of a %d-row B tile (64-row slices)", ml.N)
		}
		n = ml.BM
	}
	if err := checkWGMMAN(n); err != nil {
		return nil, nil, nil, err
	}
	if len(ml.OffA) == 0 || len(ml.OffA) != len(ml.OffB) || ml.Stages < 2 {
		return nil, nil, nil, fmt.Errorf("codegen: MXFP8 wgmma mainloop with %d/%d blocks and %d stages", len(ml.OffA), len(ml.OffB), ml.Stages)
	}
	na := ml.accs()
	cons := accConstraints(na, false, "=r", "=r", "r", "r", "r", "r", "r", "r", "r", "r", "r", "r")
	outs := b.AsmCallN(ml.asm(), cons, append(f32s(na), ir.I32, ir.I32),
		stage, phase, ktiles, bars, smem, aOff, lead, aScOff, bScOff, live)
	return outs[:na], outs[na], outs[na+1], nil
}

// asm is the PTX text of WGMMAMainloopMX: split (asmSplit) when the B
// tile halves into wgmma N of whole 8-row groups, else one wgmma per block.
func (ml WGMMAMainloopMX) asm() string {
	if ml.Swap {
		return ml.asmSwap()
	}
	if ml.N%16 == 0 {
		return ml.asmSplit()
	}
	return ml.asmWhole()
}

// asmSplit is the K loop with each 32-wide block's wgmma split into the B
// tile's two column halves (m64n(N/2)k32 each, into the halves of the
// partial sums, one commit group each) and software-pipelined so that the
// tensor cores work on one half while the warpgroup promotes the other:
// issue half 0 of block 0; per block c: issue half 1, wait until one group
// is pending (half 0 done), promote half 0, issue half 0 of block c+1 and
// wait again (half 1 done; the stage's last block waits for both), promote
// half 1. The B tile's rows N/2.. start N/2*128 bytes on (whole 8-row
// swizzle groups, 1024 bytes each). Every warp promotes, rows or not (see
// promote). The same products and promotions as asmWhole in the same
// order per stored accumulator, so the same bits.
func (ml WGMMAMainloopMX) asmSplit() string {
	na := ml.N / 2
	L, parts, lead, bars := ml.prologue(false)
	half := na / 2 // partial sums per half: registers [h*half, (h+1)*half)
	issue := func(c, h int) {
		L = append(L,
			fmt.Sprintf("add.s64 da, d0a, %d;", ml.OffA[c]),
			fmt.Sprintf("add.s64 db, d0b, %d;", ml.OffB[c]+h*(ml.N/2)*8), // 8 descriptor units (128 bytes) per B row
			"wgmma.fence.sync.aligned;",
			fmt.Sprintf("wgmma.mma_async.sync.aligned.m64n%dk32.f32.e4m3.e4m3 {%s}, da, db, 0, 1, 1;", ml.N/2, strings.Join(parts[h*half:(h+1)*half], ", ")),
			"wgmma.commit_group.sync.aligned;")
	}
	// promote promotes half h of block c, in every warp: no branch may
	// lie between a wgmma and its wait (ptxas serializes the wgmma
	// pipeline around divergent paths, C7518), and a warp without rows
	// costs the warps with rows nothing (each warp of a warpgroup issues
	// on its own sub-partition). Register 4j+i: row +8*(i/2), column 8j +
	// 2*(lane%4) + i%2.
	promote := func(c, h int) {
		if h == 0 {
			L = append(L, ml.aScales(c)...)
		}
		L = append(L, ml.promoteCols(c, h*ml.N/16, (h+1)*ml.N/16)...)
	}
	nb := len(ml.OffA)
	issue(0, 0)
	for c := 0; c < nb; c++ {
		issue(c, 1)
		L = append(L, "wgmma.wait_group.sync.aligned 1;")
		promote(c, 0)
		if c+1 < nb {
			issue(c+1, 0)
			L = append(L, "wgmma.wait_group.sync.aligned 1;")
		} else {
			L = append(L, "wgmma.wait_group.sync.aligned 0;")
		}
		promote(c, 1)
	}
	L = append(L, ml.release("WGMX", lead, bars)...)
	return asmLines(append(L, loopEnd(na)...)...)
}

// asmSwap is the K loop of the operand swap (see Swap): per 32-wide block
// c and slice s of the B tile, wgmma m64nWk32 of the slice (wgmma's A,
// 64 rows of 128 bytes: 512 descriptor units on) by the first W token
// rows (wgmma's B) into slice s's partial sums, one commit group each,
// software-pipelined as asmSplit: the next slice (or the next block's
// first) is issued before the current one is waited for and promoted
// (with one slice, issue, wait, promote). Promotion as asmSplit's with the
// roles of rows and columns exchanged: acc += (partial * X_b[row]) *
// X_a[col], the weight's scale first, as unswapped.
//
// W is the narrowest of swapWidths holding the work item's token rows
// (operand live, at least 1): one loop per width, chosen once per work
// item before any wgmma is issued, so a decode item of 4 rows issues
// m64n8k32 and promotes 4 of its 16 partial sums per slice. The columns
// past W are never promoted (their accumulators stay zero and their token
// rows are never stored); the columns below W get the same products and
// promotions in the same order whatever W, so the same bits.
func (ml WGMMAMainloopMX) asmSwap() string {
	na := ml.accs()
	L, _, lead, bars, live := ml.open(false, false)
	ws := ml.swapWidths()
	for _, w := range ws {
		L = append(L, fmt.Sprintf(".reg .f32 mw%d_<%d>;", w, ml.N/64*w/2))
	}
	L = append(L, swapScaleRegs(ml.N/64, ws[len(ws)-1]))
	for _, w := range ws[:len(ws)-1] {
		L = append(L, fmt.Sprintf("setp.le.s32 P, %s, %d;", live, w), fmt.Sprintf("@P bra.uni WGMX%d_LOOP;", w))
	}
	for i := len(ws) - 1; i >= 0; i-- {
		l := fmt.Sprintf("WGMX%d", ws[i])
		L = append(L, ml.loopTop(l, bars)...)
		L = append(L, ml.swapStage(ws[i])...)
		L = append(L, ml.release(l, lead, bars)...)
		if i > 0 {
			L = append(L, "bra.uni WGMX_END;")
		}
	}
	return asmLines(append(append(L, "WGMX_END:"), loopEnd(na)...)...)
}

// swapWidths is the wgmma N of asmSwap's loops, ascending: every multiple
// of 8 up to BM when BM is a multiple of 8 up to 32 (the decode tiles),
// else BM alone.
func (ml WGMMAMainloopMX) swapWidths() []int {
	if ml.BM > 32 || ml.BM%8 != 0 {
		return []int{ml.BM}
	}
	var ws []int
	for w := 8; w <= ml.BM; w += 8 {
		ws = append(ws, w)
	}
	return ws
}

// swapStage is one stage's body of asmSwap's loop of width w: the
// wgmma m64nwk32 of each slice and 32-wide block, pipelined, and the
// promotions of the partial sums of the first w token rows. Each width
// has its own partial sums (mw<w>_<s*w/2+k>, k < w/2): with registers
// shared between the widths' wgmma ptxas serializes every wgmma of the
// kernel (C7511, "insufficient register resources"). Block c's scales are
// loaded right after its first wgmma is issued (swapScales), a wgmma's
// latency before their first use, into the registers of block parity c%2.
func (ml WGMMAMainloopMX) swapStage(w int) []string {
	var L []string
	S, per := ml.N/64, ml.BM/2
	parts := make([]string, S*w/2)
	for k := range parts {
		parts[k] = fmt.Sprintf("mw%d_%d", w, k)
	}
	issue := func(c, s int) {
		L = append(L,
			fmt.Sprintf("add.s64 da, d0b, %d;", ml.OffB[c]+s*64*8), // 8 descriptor units (128 bytes) per B row
			fmt.Sprintf("add.s64 db, d0a, %d;", ml.OffA[c]),
			"wgmma.fence.sync.aligned;",
			fmt.Sprintf("wgmma.mma_async.sync.aligned.m64n%dk32.f32.e4m3.e4m3 {%s}, da, db, 0, 1, 1;", w, strings.Join(parts[s*w/2:(s+1)*w/2], ", ")),
			"wgmma.commit_group.sync.aligned;")
		if s == 0 {
			L = append(L, ml.swapScales(c, w)...)
		}
	}
	promote := func(c, s int) {
		for j := 0; j < w/8; j++ {
			for i := 0; i < 4; i++ {
				r := s*per + 4*j + i
				L = append(L,
					fmt.Sprintf("mul.rn.f32 pr, %s, %s;", parts[s*w/2+4*j+i], swapScaleA(c, s, i/2)),
					fmt.Sprintf("fma.rn.f32 $%d, pr, %s, $%d;", r, swapScaleB(c, j, i%2), r))
			}
		}
	}
	nb := len(ml.OffA)
	if S > 1 {
		issue(0, 0)
	}
	for c := 0; c < nb; c++ {
		for s := 0; s < S; s++ {
			switch {
			case S == 1:
				issue(c, 0)
				L = append(L, "wgmma.wait_group.sync.aligned 0;")
			case s+1 < S:
				issue(c, s+1)
				L = append(L, "wgmma.wait_group.sync.aligned 1;")
			case c+1 < nb:
				issue(c+1, 0)
				L = append(L, "wgmma.wait_group.sync.aligned 1;")
			default:
				L = append(L, "wgmma.wait_group.sync.aligned 0;")
			}
			promote(c, s)
		}
	}
	return L
}

// swapScales loads block c's f32 scales for asmSwap's width w into the
// registers of parity c%2: the thread's two weight rows per slice
// (swapScaleA) and its two token columns per 8-column group below w
// (swapScaleB).
func (ml WGMMAMainloopMX) swapScales(c, w int) []string {
	var L []string
	for s := 0; s < ml.N/64; s++ {
		row := c*ml.ABlock + 256*s
		L = append(L,
			fmt.Sprintf("ld.shared.f32 %s, [xa+%d];", swapScaleA(c, s, 0), row),
			fmt.Sprintf("ld.shared.f32 %s, [xa+%d];", swapScaleA(c, s, 1), row+32))
	}
	for j := 0; j < w/8; j++ {
		L = append(L, fmt.Sprintf("ld.shared.v2.f32 {%s, %s}, [xb+%d];", swapScaleB(c, j, 0), swapScaleB(c, j, 1), c*ml.BBlock+32*j))
	}
	return L
}

// swapScaleA is the register of block c's scale of the thread's weight row
// 8i (i = 0, 1) of slice s; swapScaleB that of its token column i of
// 8-column group j. Two sets, by the parity of c.
func swapScaleA(c, s, i int) string { return fmt.Sprintf("xa%d_%d_%d", c%2, s, i) }
func swapScaleB(c, j, i int) string { return fmt.Sprintf("xb%d_%d_%d", c%2, j, i) }

// swapScaleRegs declares swapScaleA's and swapScaleB's registers for S
// slices and widths up to w.
func swapScaleRegs(S, w int) string {
	var r []string
	for p := 0; p < 2; p++ {
		for s := 0; s < S; s++ {
			r = append(r, swapScaleA(p, s, 0), swapScaleA(p, s, 1))
		}
		for j := 0; j < w/8; j++ {
			r = append(r, swapScaleB(p, j, 0), swapScaleB(p, j, 1))
		}
	}
	return ".reg .f32 " + strings.Join(r, ", ") + ";"
}

// asmWhole is the K loop with one wgmma per 32-wide block, waited for at
// once.
func (ml WGMMAMainloopMX) asmWhole() string {
	na := ml.N / 2
	L, parts, lead, bars := ml.prologue(true)
	for c := range ml.OffA {
		step, a, bb := stepDescs("d0a", "d0b", ml.OffA[c], ml.OffB[c])
		L = append(L, step...)
		L = append(L,
			"wgmma.fence.sync.aligned;",
			fmt.Sprintf("wgmma.mma_async.sync.aligned.m64n%dk32.f32.e4m3.e4m3 {%s}, %s, %s, 0, 1, 1;", ml.N, strings.Join(parts, ", "), a, bb),
			"wgmma.commit_group.sync.aligned;",
			"wgmma.wait_group.sync.aligned 0;",
			fmt.Sprintf("@R bra.uni WGMX_P%d;", c),
		)
		L = append(L, ml.aScales(c)...)
		L = append(L, ml.promoteCols(c, 0, ml.N/8)...)
		L = append(L, fmt.Sprintf("WGMX_P%d:", c))
	}
	L = append(L, ml.release("WGMX", lead, bars)...)
	return asmLines(append(L, loopEnd(na)...)...)
}

// prologue is the PTX every one-loop statement opens with: open's, then
// the loop head "WGMX" with the stage's descriptors and scale addresses
// (loopTop).
func (ml WGMMAMainloopMX) prologue(skip bool) (L, parts []string, lead, bars string) {
	L, parts, lead, bars, _ = ml.open(skip, true)
	return append(L, ml.loopTop("WGMX", bars)...), parts, lead, bars
}

// open is the PTX every K loop statement opens with: the statement's
// registers, the accumulators zeroed and, with skip, the predicate R =
// (live <= 0) (operand 9; the one-wgmma loop's warps without rows). With
// mp, the partial sums' registers mp<accs>, named by parts, and the scale
// registers sa0, sa1, sb0, sb1 of aScales and promoteCols (asmSwap
// declares its own per width, swapScaleRegs); lead and bars are release's
// operands, live the operand of the work item's rows.
func (ml WGMMAMainloopMX) open(skip, mp bool) (L, parts []string, lead, bars, live string) {
	na, in := ml.accs(), ml.input
	stage, phase := in(0), in(1)
	lead, bars, live = in(6), in(3), in(9)
	preds := ".reg .pred P, Q;"
	if skip {
		preds = ".reg .pred P, Q, R;"
	}
	decls := []string{preds, ".reg .b32 s, ph, kt, bar, sa, t, xa, xb;", ".reg .b64 d0a, d0b, da, db;"}
	if mp {
		parts = make([]string, na)
		for i := range parts {
			parts[i] = fmt.Sprintf("mp%d", i)
		}
		decls = append(decls, fmt.Sprintf(".reg .f32 mp<%d>;", na), ".reg .f32 sa0, sa1, sb0, sb1;")
	}
	L = loopStart(append(decls, ".reg .f32 pr;"), stage, phase, na)
	if skip {
		L = append(L, "setp.le.s32 R, "+live+", 0;")
	}
	return L, parts, lead, bars, live
}

// input is the asm operand of WGMMAMainloopMX's input i (0 stage, 1
// phase, 2 ktiles, 3 bars, 4 smem, 5 aOff, 6 lead, 7 aScOff, 8 bScOff, 9
// live): after the accs accumulators and the stage and phase outputs.
func (ml WGMMAMainloopMX) input(i int) string { return fmt.Sprintf("$%d", ml.accs()+2+i) }

// loopTop is the head of K loop l (loopHead: leave at the last K tile,
// wait on the stage's full barrier; with ProxyFence the fence after it),
// the stage's descriptors and the scale addresses xa, xb.
func (ml WGMMAMainloopMX) loopTop(l, bars string) []string {
	in := ml.input
	kt, smem, aOff, aSc, bSc := in(2), in(4), in(5), in(7), in(8)
	L := loopHead(l, kt, bars)
	if ml.ProxyFence {
		L = append(L, "fence.proxy.async.shared::cta;")
	}
	L = append(L, stageDescs(ml.StageBytes, smem, aOff, ml.BOffset, ml.DescHi, ml.DescHi)...)
	return append(L, "add.s32 xa, sa, "+aSc+";", "add.s32 xb, sa, "+bSc+";")
}

// aScales is the PTX loading the thread's two rows' A scales (sa0, sa1) of
// 32-wide block c.
func (ml WGMMAMainloopMX) aScales(c int) []string {
	return []string{
		fmt.Sprintf("ld.shared.f32 sa0, [xa+%d];", c*ml.ABlock),
		fmt.Sprintf("ld.shared.f32 sa1, [xa+%d];", c*ml.ABlock+32),
	}
}

// promoteCols is the PTX promoting the partial sums of 8-column groups
// j0..j1-1 of block c into the accumulators: acc += (partial * X_b[col])
// * X_a[row]. Register 4j+i: row +8*(i/2), column 8j + 2*(lane%4) + i%2.
func (ml WGMMAMainloopMX) promoteCols(c, j0, j1 int) []string {
	var L []string
	for j := j0; j < j1; j++ {
		L = append(L, fmt.Sprintf("ld.shared.v2.f32 {sb0, sb1}, [xb+%d];", c*ml.BBlock+32*j))
		for i := 0; i < 4; i++ {
			r := 4*j + i
			sbv, sav := []string{"sb0", "sb1"}[i%2], []string{"sa0", "sa1"}[i/2]
			L = append(L,
				fmt.Sprintf("mul.rn.f32 pr, mp%d, %s;", r, sbv),
				fmt.Sprintf("fma.rn.f32 $%d, pr, %s, $%d;", r, sav, r))
		}
	}
	return L
}

// release is the PTX ending a stage of K loop l: lane 0 of each warp
// (lead != 0) arrives on empty[s], the ring advances, back to l's head;
// then l's exit label.
func (ml WGMMAMainloopMX) release(l, lead, bars string) []string {
	L := []string{
		"setp.ne.b32 Q, " + lead + ", 0;",
		fmt.Sprintf("mad.lo.s32 bar, s, 8, %s;", bars),
		fmt.Sprintf("add.s32 bar, bar, %d;", 8*ml.Stages),
		"@Q mbarrier.arrive.shared::cta.b64 _, [bar];",
	}
	L = append(L, loopAdvance(l, ml.Stages)...)
	return append(L, l+"_DONE:")
}
