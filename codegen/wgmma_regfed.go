package codegen

import (
	"fmt"
	"strings"

	"github.com/llir/llvm/ir/value"
	"github.com/mokc/mokc/ir"
)

// WGMMAMainloopRegFed describes the consumer K loop of the sm_90a
// register-fed MXFP8 GEMM (GemmSpec.MXRegisterFed; docs/mxfp8.md, "the
// register-fed expansion"). A stage holds the token rows as bf16 (the
// exact values of their MX quantization; K/64 atoms of BM rows x 128
// bytes, 128-byte swizzle, as TMA writes them), the B tile's weights as
// e4m3 (NB rows x 128 bytes, one atom) and their scales as the bf16x2
// factors of regFedFactor ([K/32][NB] words at the stage's B scale
// offset). Per 32-wide block c and 64-row slice s
// of the B tile, each consumer thread
//
//   - loads the block's e4m3 bytes 8q..8q+7 (q = lane%4) of its rows r =
//     16*(warp%4) + lane/4 and r+8 of the slice, one ld.shared.v2.b32
//     each, at row*128 + ((chunk ^ row%8) * 16) + byte (the 128-byte
//     swizzle); of each 4-byte word the odd bytes and the even bytes
//     make two bf16 pairs of wgmma's A fragment (PTX ISA 9.7.15.5.1.1,
//     .bf16 m64nNk16: the pairs at K 2q, 2q+8 of each k16 step), which is
//     why the activations come in layouts.RegisterFedOrder,
//   - widens each byte by a bit copy (S.EEEE.MMM becomes the bf16
//     S.0000EEEE.MMM0000, the e4m3 value times 2^-120, as widenE4M3) and
//     one mul.rn.bf16x2 by the row's factor 2^(code-7), its scale times
//     2^120 (regFedFactor), so each element is the bf16 value of e4m3
//     times scale, exact for scales of at least 2^-124 and codes up to 134
//     (see GemmSpec.MXRegisterFed),
//   - issues two wgmma m64nWk16.f32.bf16.bf16 (W = BM, or a narrower
//     width for a work item of few token rows: widths; the block's two k16
//     steps) with these registers as A and the token rows as B (K-major,
//     from the stage's descriptor) into slice s's accumulators, commits
//     them as one group and waits until Sets/2 groups are pending.
//
// A warpgroup computes Slices slices, SliceRows B-tile rows apart, from
// its first row (which the caller's offsets hold): with two consumer
// warpgroups each takes its half of the B tile (of 256 rows, or of 128
// with 192 or 256 token rows, one slice each). The A registers
// come in Sets sets by the group's index (4 blocks times the slices per
// stage: a multiple of 4), so the widening of the next group overlaps the
// tensor cores' work on the pending ones. The stage is released (lane 0
// of each warp arrives on empty[stage]) once the next stage's group
// Sets/2-1 has been waited for, which leaves the previous stage's groups
// complete; the last stage after the loop.
// The accumulators (slice s at registers s*BM/2.., register 4j+i: the
// slice's row 16*(warp%4) + lane/4 + 8*(i/2), token row 8j + 2*(lane%4) +
// i%2) are those of the operand swap (WGMMAMainloopMX.Swap, swapRuns).
type WGMMAMainloopRegFed struct {
	BM         int    // token rows of the tile: wgmma's N (a multiple of 8 up to 256)
	Slices     int    // 64-row slices of the B tile this warpgroup computes: 1 or 2
	SliceRows  int    // B-tile rows from the warpgroup's first slice to its second
	Stages     int    // ring depth
	StageBytes int    // bytes between stages
	BOffset    int    // the e4m3 B tile's offset in a stage (after the bf16 token tile)
	OffTok     []int  // per k16 step of the stage (BK/16): the token tile's descriptor offset (16-byte units)
	DescHi     uint64 // the token tile's descriptor bits (K-major, 128-byte swizzle)
	ScaleBlock int    // bytes between two 32-wide blocks' scales of the B rows (4*NB)
	// Sets is the number of A-register sets (2 or 4; group g widens into
	// set g%Sets) and Sets/2 the groups left pending after each commit:
	// the widening of group g+1 overlaps the pending groups, and its set
	// was last read by group g+1-Sets, complete by then. Four where one
	// consumer warpgroup must hide the widening itself, two where two
	// warpgroups share the tensor cores (and the registers).
	Sets int
	// Peer releases each stage in the other CTA of a 2-CTA cluster too
	// (WGMMAMainloop.Peer).
	Peer bool
	// OneWidth: one K loop, of width BM, whatever the item's token rows.
	// The narrower copy (widths) costs registers: within the 168 of two
	// blocks per SM of one producer warp (Tile.BlocksPerSM) ptxas
	// serialized the wgmma of 96 token rows with it (C7512) and kept them
	// pipelined without (154 registers), and within the 200 of a consumer
	// warpgroup of two per SM with a producer warpgroup it serialized the
	// gated FC1's of 128 token rows; 64 token rows keep both widths.
	OneWidth bool
}

// accs is the number of accumulators per thread: BM/2 per slice.
func (ml WGMMAMainloopRegFed) accs() int { return ml.Slices * ml.BM / 2 }

// WGMMAMainloopRegFed emits the K loop of one work item of the consumer
// warpgroup (see WGMMAMainloopRegFed) over ktiles K tiles from ring state
// (stage, phase). bars is the shared address of full[0] (empty[s] at bars +
// 8(Stages+s)), smem the ring's base, wRow the thread's byte offset in the
// B tile (its first row, the warpgroup's first row + 16*(warp%4) +
// lane/4, times 128, plus 8*(lane%4%2)), wX the swizzle of its first
// chunk (row%8 ^ (lane%4)/2, times 16), lead nonzero in lane 0 of each warp, scOff the byte offset from a
// stage's base of the factor of the thread's first row in block 0 (its
// row +8 is 32 bytes on, its second slice 4*SliceRows).
// Returns the accumulators and the advanced stage and phase.
//
// live is the work item's token rows (at least 1): the loop issues wgmma
// m64nWk16 with W the narrowest of widths holding them, one loop per
// width chosen once per work item, so the ragged last tile of an expert
// (a few rows) costs the tensor cores a fraction of a full tile. The
// accumulators of token rows past W stay zero (those rows are never
// stored); the rows below W get the same products in the same order
// whatever W, so the same bits.
func (b *Builder) WGMMAMainloopRegFed(ml WGMMAMainloopRegFed, stage, phase, ktiles, bars, smem, wRow, wX, lead, scOff, live value.Value) (acc []value.Value, stageOut, phaseOut value.Value, err error) {
	if err := checkWGMMAN(ml.BM); err != nil {
		return nil, nil, nil, err
	}
	if (ml.Slices != 1 && ml.Slices != 2) || (ml.Sets != 2 && ml.Sets != 4) || ml.Stages < 2 || len(ml.OffTok) != 8 {
		return nil, nil, nil, fmt.Errorf("codegen: register-fed MXFP8 mainloop with %d slices (1 or 2), %d register sets (2 or 4), %d stages, %d k16 steps (8: K blocks of 128)", ml.Slices, ml.Sets, ml.Stages, len(ml.OffTok))
	}
	na := ml.accs()
	cons := accConstraints(na, false, "=r", "=r", "r", "r", "r", "r", "r", "r", "r", "r", "r", "r")
	outs := b.AsmCallN(ml.asm(), cons, append(f32s(na), ir.I32, ir.I32),
		stage, phase, ktiles, bars, smem, wRow, wX, lead, scOff, live)
	return outs[:na], outs[na], outs[na+1], nil
}

// widths is the wgmma N of the K loop's copies, descending: BM and, for
// the ragged last tiles of experts, BM/4 (else BM/2) where that is a
// multiple of 8 of at least 16; BM alone with OneWidth. Two for the tiles
// of two 64-row slices per warpgroup: with three (128, 64, 32) ptxas
// serialized the wgmma of gated GEMMs with a bias for want of registers
// (C7512), and with four (128, 64, 32, 16) those of qwen3-30b-a3b's FC1.
// Three for 192 token rows of one slice (192, 128, 64), whose 96
// accumulators leave the registers for them: an expert of 256 rows is
// then one item of 192 and one of 64.
func (ml WGMMAMainloopRegFed) widths() []int {
	if ml.OneWidth {
		return []int{ml.BM}
	}
	if ml.BM == 192 && ml.Slices == 1 {
		return []int{192, 128, 64}
	}
	for _, d := range []int{4, 2} {
		if w := ml.BM / d; ml.BM%d == 0 && w >= 16 && w%8 == 0 {
			return []int{ml.BM, w}
		}
	}
	return []int{ml.BM}
}

// regFedFactor is the bf16x2 factor (both halves) of the register-fed
// widening for the UE8M0 code (i32 0..255), which the producer stores in
// place of the f32 scale (gemmProducer.mxStoreScales): 2^(code-7), the
// scale 2^(code-127) times 2^120, exact for codes up to 134; +Inf for
// 135..254 (a factor beyond bf16's range: GemmSpec.MXRegisterFed) and NaN
// for 255.
func regFedFactor(b *Builder, code value.Value) value.Value {
	// expandFactor of 135 is +Inf; codes 136..254 are taken as 135.
	return expandFactor(b, b.Select(expandBeyond(b, code), ir.Int32(135), code))
}

// asm is the PTX text of WGMMAMainloopRegFed.
func (ml WGMMAMainloopRegFed) asm() string {
	na := ml.accs()
	in := func(i int) string { return fmt.Sprintf("$%d", na+2+i) }
	stage, phase, ktiles, bars, smem, wRow, wX, lead, scOff, live := in(0), in(1), in(2), in(3), in(4), in(5), in(6), in(7), in(8), in(9)
	ins := mainloopIns{stage: stage, phase: phase, kt: ktiles, bars: bars, smem: smem, lead: lead}
	L := loopStart([]string{
		".reg .pred P, Q;",
		".reg .b32 s, ph, kt, bar, sa, t, xs, e, w, msgn;",
		fmt.Sprintf(".reg .b32 ad<4>, u<8>, ra<%d>, m<4>;", 8*ml.Sets),
		".reg .b64 d0b, db;",
	}, stage, phase, na)
	L = append(L, "mov.b32 msgn, 0x80008000;")
	ws := ml.widths()
	for i := len(ws) - 1; i > 0; i-- { // the narrowest width holding the item's rows
		L = append(L, fmt.Sprintf("setp.le.s32 P, %s, %d;", live, ws[i]), fmt.Sprintf("@P bra.uni WGRF%d_LOOP;", ws[i]))
	}
	for i, w := range ws {
		L = append(L, ml.loop(w, ktiles, bars, smem, wRow, wX, scOff, ins)...)
		if i+1 < len(ws) {
			L = append(L, "bra.uni WGRF_DONE;")
		}
	}
	L = append(L, "WGRF_DONE:")
	L = append(L, WGMMAMainloop{Stages: ml.Stages, Peer: ml.Peer}.waitRelease(ins, 0)...)
	return asmLines(append(L, loopEnd(na)...)...)
}

// loop is the K loop of width w (wgmma m64nwk16 into the first w/2
// accumulators of each slice) of asm, labels WGRF<w>_*.
func (ml WGMMAMainloopRegFed) loop(w int, ktiles, bars, smem, wRow, wX, scOff string, ins mainloopIns) []string {
	S := ml.Slices
	l := fmt.Sprintf("WGRF%d", w)
	var L []string
	L = append(L, loopHead(l, ktiles, bars)...)
	L = append(L, fmt.Sprintf("mad.lo.s32 sa, s, %d, %s;", ml.StageBytes, smem))
	L = append(L, descPTX("d0b", "sa", ml.DescHi)...)
	// ad_c: the thread's 8 bytes of block c in its row: 16-byte chunk
	// 2c + q/2 (the swizzle: chunk ^ row%8), byte 8*(q%2).
	L = append(L, fmt.Sprintf("add.s32 w, sa, %d;", ml.BOffset), "add.s32 w, w, "+wRow+";", "add.s32 xs, sa, "+scOff+";")
	for c := 0; c < 4; c++ {
		L = append(L, fmt.Sprintf("xor.b32 t, %s, %d;", wX, c<<5), fmt.Sprintf("add.s32 ad%d, w, t;", c))
	}
	accs := func(s int) string {
		r := make([]string, w/2)
		for i := range r {
			r[i] = fmt.Sprintf("$%d", s*ml.BM/2+i)
		}
		return "{" + strings.Join(r, ", ") + "}"
	}
	// load is group g's loads (block g/S, slice g%S) into the register
	// set v of its bytes u and factors m: issued one group ahead, so the
	// shared loads' latency overlaps the group before (the stage's first
	// group: after the full barrier).
	load := func(g, v int) {
		c, s := g/S, g%S
		for h := 0; h < 2; h++ {
			L = append(L,
				fmt.Sprintf("ld.shared.v2.b32 {u%d, u%d}, [ad%d+%d];", 4*v+2*h, 4*v+2*h+1, c, s*ml.SliceRows*128+h*8*128),
				fmt.Sprintf("ld.shared.b32 m%d, [xs+%d];", 2*v+h, c*ml.ScaleBlock+4*ml.SliceRows*s+32*h))
		}
	}
	G := 4 * S
	load(0, 0)
	for g := 0; g < G; g++ {
		c, s, v := g/S, g%S, g%2
		set := 8 * (g % ml.Sets)
		// Word i of row h: its odd bytes (1, 3) are the pair of the
		// A-fragment register 4i+2+h, its even bytes (0, 2), shifted
		// into the same places, that of register 4i+h.
		for h := 0; h < 2; h++ {
			for i := 0; i < 2; i++ {
				u := fmt.Sprintf("u%d", 4*v+2*h+i)
				for odd := 1; odd >= 0; odd-- {
					src := u
					if odd == 0 {
						L = append(L, "shl.b32 e, "+u+", 8;")
						src = "e"
					}
					L = append(L,
						"shr.b32 t, "+src+", 4;",
						"and.b32 t, t, 0x07f007f0;",           // exponent and mantissa at bf16's low exponent bits
						"lop3.b32 e, "+src+", msgn, t, 0xEA;", // (x & signs) | t
						fmt.Sprintf("mul.rn.bf16x2 ra%d, e, m%d;", set+4*i+2*odd+h, 2*v+h))
				}
			}
		}
		L = append(L, "wgmma.fence.sync.aligned;")
		for j := 0; j < 2; j++ {
			L = append(L, fmt.Sprintf("add.s64 db, d0b, %d;", ml.OffTok[2*c+j]),
				fmt.Sprintf("wgmma.mma_async.sync.aligned.m64n%dk16.f32.bf16.bf16 %s, {ra%d, ra%d, ra%d, ra%d}, db, 1, 1, 1, 0;",
					w, accs(s), set+4*j, set+4*j+1, set+4*j+2, set+4*j+3))
		}
		L = append(L, "wgmma.commit_group.sync.aligned;")
		if g+1 < G {
			load(g+1, (g+1)%2)
		}
		if pend := ml.Sets / 2; g == pend-1 {
			// The previous stage's last group is done: release it.
			L = append(L, WGMMAMainloop{Stages: ml.Stages, Peer: ml.Peer}.waitRelease(ins, pend)...)
		} else {
			L = append(L, fmt.Sprintf("wgmma.wait_group.sync.aligned %d;", pend))
		}
	}
	L = append(L, loopAdvance(l, ml.Stages)...)
	return append(L, l+"_DONE:")
}
