package codegen

import (
	"slices"

	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"

	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/layouts"
)

// The epilogue side of the sm_90a atom: a consumer thread's wgmma
// accumulator fragment (WGMMABF16: register 4j+i holds row
// 16*(warp%4) + lane/4 + 8*(i/2), B-tile column 8j + 2*(lane%4) + i%2) walked
// as runs of outputs by the gate/up layout, stored directly or through the
// staging tile.

// wgmmaRuns calls run for every output run of a consumer thread's
// accumulators acc, rows half h = 0, 1 (row(h): the thread's row, +8 for
// h = 1): run gets the row, the column base colBase(interleaved) (taken
// once per half), the column offset of the run from it, and the run's
// values:
//   - gate/up halves: 2 outputs of columns 8j + 2*(lane%4) + {0,1}, values
//     (gate, up, gate, up) from accumulator columns j and BN+j;
//   - interleaved: 1 output of column 4j + lane%4, values (gate, up);
//   - plain: 2 outputs of columns 8j + 2*(lane%4) + {0,1}.
func (l sm90Layout) wgmmaRuns(acc []value.Value, row func(h int) value.Value, colBase func(interleaved bool) value.Value,
	run func(row, base value.Value, off int, vals []value.Value) error) error {
	for h := 0; h < 2; h++ {
		r := row(h)
		switch l.gate {
		case layouts.GateUpHalves:
			base, up := colBase(false), l.BN/8
			for j := 0; j < l.BN/8; j++ {
				g0, g1 := acc[4*j+2*h], acc[4*j+2*h+1]
				u0, u1 := acc[4*(j+up)+2*h], acc[4*(j+up)+2*h+1]
				if err := run(r, base, 8*j, []value.Value{g0, u0, g1, u1}); err != nil {
					return err
				}
			}
		case layouts.GateUpInterleaved:
			base := colBase(true)
			for j := 0; j < l.NB/8; j++ {
				if err := run(r, base, 4*j, []value.Value{acc[4*j+2*h], acc[4*j+2*h+1]}); err != nil {
					return err
				}
			}
		default:
			base := colBase(false)
			for j := 0; j < l.NB/8; j++ {
				if err := run(r, base, 8*j, []value.Value{acc[4*j+2*h], acc[4*j+2*h+1]}); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// swapRuns calls run for every output of a consumer thread's accumulators
// under the operand swap (WGMMAMainloopMX.Swap: register s*BM/2 + 4j+i
// holds B-tile row 64s + 16*(warp%4) + lane/4 + 8*(i/2), token row 8j +
// 2*(lane%4) + i%2; with the two consumer warpgroups of a register-fed
// GEMM, the S = NB/128 slices of warpgroup c's half, its columns from
// regFedHalf's on): run gets the token row in the tile, the output column
// in the tile and the output's values:
//   - gate/up halves: (gate, up) from the gate slice s and the up slice
//     s + S/2 (the tile's output column is the gate row);
//   - interleaved: B-tile rows 2c (gate) and 2c+1 (up) of output column c
//     lie in lanes 4 apart; each pair trades one value (shfl.xor 4) so
//     that the gate lane (lane/4 even) holds (gate, up) of token row
//     8j + 2*(lane%4) and the up lane those of the next token row;
//   - plain: the one value (column = B-tile row).
//
// Runs of one output: a thread's outputs of one token row are 8 (4
// interleaved) columns apart. The 8-row groups of token rows at or past
// live (the work item's token rows, at least 1) are skipped by a
// warp-uniform branch: their accumulators were never promoted
// (WGMMAMainloopMX.asmSwap) and their rows are never stored.
func (l sm90Layout) swapRuns(b *Builder, acc []value.Value, c, lane, warp, live value.Value,
	run func(tr, tc value.Value, vals []value.Value) error) error {
	S, per := l.NB/64/l.WG, l.BM/2
	at := func(tc value.Value) value.Value { return tc }
	if l.WG > 1 { // the register-fed GEMM's warpgroup c: its half's columns
		_, col0 := l.regFedHalf(b, c)
		at = func(tc value.Value) value.Value { return b.Add(col0, tc) }
	}
	wq := b.And(warp, ir.Int32(3))
	var err error
	group := func(j int, body func()) { liveGroup(b, live, j, body) }
	if l.gate == layouts.GateUpInterleaved {
		p := b.And(b.LShr(lane, ir.Int32(2)), ir.Int32(1)) // 1: the up lane of the pair
		up := b.ICmp(enum.IPredNE, p, ir.Int32(0))
		t0 := b.Add(b.MulI(b.And(lane, ir.Int32(3)), 2), p)
		c0 := b.Add(b.MulI(wq, 8), b.LShr(lane, ir.Int32(3)))
		for s := 0; s < S; s++ {
			for j := 0; j < per/4; j++ {
				group(j, func() {
					for r := 4 * j; r < 4*j+4; r += 2 {
						h := (r % 4) / 2
						v0, v1 := acc[s*per+r], acc[s*per+r+1] // tokens 2*(lane%4) + 8j and the next
						got := b.shflXor(b.Select(up, v0, v1), 4)
						g, u := b.Select(up, got, v0), b.Select(up, v1, got)
						err = joinErr(err, run(b.AddI(t0, int64(8*j)), at(b.AddI(c0, int64(32*s+4*h))), []value.Value{g, u}))
					}
				})
			}
		}
		return err
	}
	f0 := b.Add(b.MulI(wq, 16), b.LShr(lane, ir.Int32(2)))
	t0 := b.MulI(b.And(lane, ir.Int32(3)), 2)
	slices := S
	if l.gate == layouts.GateUpHalves {
		slices = S / 2
	}
	for s := 0; s < slices; s++ {
		for j := 0; j < per/4; j++ {
			group(j, func() {
				for i := 0; i < 4; i++ {
					r := 4*j + i
					tr, tc := b.AddI(t0, int64(8*j+i%2)), at(b.AddI(f0, int64(64*s+8*(i/2))))
					vals := []value.Value{acc[s*per+r]}
					if l.gate == layouts.GateUpHalves {
						vals = append(vals, acc[(s+slices)*per+r])
					}
					err = joinErr(err, run(tr, tc, vals))
				}
			})
		}
	}
	return err
}

// liveGroup runs body for the group j of 8 token rows (8j..8j+7) when the
// work item's live token rows reach it: group 0 always, the others under a
// warp-uniform branch.
func liveGroup(b *Builder, live value.Value, j int, body func()) {
	if j == 0 {
		body()
		return
	}
	b.If(b.ICmp(enum.IPredSGT, live, ir.Int32(int64(8*j))), body)
}

// epilogue stores consumer warpgroup c's 64 rows of the accumulator tile
// (with the operand swap, the tile's token rows, by swapRuns, or for the
// register-fed GEMMs' plain bf16 C by swapStoreBF16) through the Epilogue
// ep of work item w (bias, activation, bf16 rounding, predicated stores).
// With the operand swap, keep (nil: none) also gets each stored run's fp32
// outputs with its token row and column in the tile (Epilogue.EmitThen).
func (l sm90Layout) epilogue(b *Builder, ep *Epilogue, w gemmWork, c, lane, warp value.Value, acc []value.Value,
	keep func(tr, tc value.Value, outs []value.Value)) error {
	if l.swap {
		if keep == nil && ep.spec.MXRegisterFed && !ep.spec.COutF32 {
			if ep.spec.Epilogue == EpiGated && l.gate == layouts.GateUpInterleaved {
				return l.swapStoreBF16Interleaved(b, ep, w, c, lane, warp, acc)
			}
			return l.swapStoreBF16(b, ep, w, c, lane, warp, acc)
		}
		return l.swapRuns(b, acc, c, lane, warp, b.Sub(w.rowEnd, w.row0), func(tr, tc value.Value, vals []value.Value) error {
			var then func([]value.Value)
			if keep != nil {
				then = func(outs []value.Value) { keep(tr, tc, outs) }
			}
			return ep.EmitThen(b, b.Add(w.row0, tr), b.Add(w.n0, tc), vals, then)
		})
	}
	wq := b.And(warp, ir.Int32(3))
	r0 := b.Add(b.Add(w.row0, b.MulI(c, 64)), b.Add(b.MulI(wq, 16), b.LShr(lane, ir.Int32(2))))
	t2 := b.MulI(b.And(lane, ir.Int32(3)), 2)
	return l.wgmmaRuns(acc, func(h int) value.Value { return b.AddI(r0, int64(8*h)) }, func(interleaved bool) value.Value {
		if interleaved {
			return b.And(lane, ir.Int32(3))
		}
		return t2
	}, func(row, base value.Value, off int, vals []value.Value) error {
		return ep.Emit(b, row, b.Add(b.AddI(w.n0, int64(off)), base), vals)
	})
}

// swapStoreBF16 is the operand swap's epilogue of a bf16 C, plain
// (EpiStore) or gated with gate/up halves, used by the register-fed GEMMs
// (the forward's FC2, and FC1 storing h rounded to odd: GemmSpec.CRoundOdd).
// Per output slice s (gated: the pairs of gate slice s and up slice s +
// S/2, as swapRuns pairs them) and group j of 8 token rows, a thread's four
// outputs (swapRuns' layout: B-tile rows f and f+8, f = 16*(warp%4) +
// lane/4 of the slice, which are output columns; token rows 8j + 2q and
// +1, q = lane%4) are rounded (to nearest even, or to odd with CRoundOdd)
// into two bf16x2, each the thread's fragment of an 8x8 block transposed across
// the warp by movmatrix (PTX ISA, warp-level matrix instructions,
// "movmatrix" with .trans: afterwards the thread holds token row 8j +
// lane/4, output columns 2q and 2q+1 of the block); one shfl.xor 1 pairs
// neighbouring lanes' halves into four consecutive columns (even q:
// columns 2q..2q+3 of the warp's 16, odd q: 8 + 2(q-1)..), stored with one
// 8-byte store. A warp store then writes 8 token rows x 32 bytes (whole
// 32-byte sectors when N is a multiple of 16); swapRuns' run-of-one stores
// wrote 4 rows x 16 bytes per instruction with a quarter of the bytes. The
// outputs, their bf16 rounding and the predicates (token row below the
// item's end, column below N; N is a multiple of 8, so a run of 4 is
// wholly in or out) are those of Epilogue.Emit; the bias of a column past
// N (never stored) is read at N-1. Every group of token rows is computed,
// those at or past the item's rows too (their accumulators are never
// stored), and each store is predicated (storeBF16x4If) rather than
// branched around, so that ptxas may interleave the groups' movmatrix →
// shfl → select → store chains; movmatrix and shfl run in every lane.
func (l sm90Layout) swapStoreBF16(b *Builder, ep *Epilogue, w gemmWork, c, lane, warp value.Value, acc []value.Value) error {
	N := int64(ep.spec.N)
	S, per := l.NB/64/l.WG, l.BM/2
	slices := S
	if ep.spec.Epilogue == EpiGated {
		slices = S / 2
	}
	pack := ep.packBF16(b)
	_, col0 := l.regFedHalf(b, c) // 0 with one warpgroup
	live := b.Sub(w.rowEnd, w.row0)
	wq := b.And(warp, ir.Int32(3))
	q := b.And(lane, ir.Int32(3))
	odd := b.ICmp(enum.IPredNE, b.And(q, ir.Int32(1)), ir.Int32(0))
	first := b.Add(w.n0, b.Add(col0, b.MulI(wq, 16)))                                              // the warp's first output column of slice 0
	f0 := b.Add(first, b.LShr(lane, ir.Int32(2)))                                                  // column f of the thread
	c4 := b.Add(first, b.Add(b.MulI(b.LShr(q, ir.Int32(1)), 4), b.MulI(b.And(q, ir.Int32(1)), 8))) // its stored run
	tok := b.LShr(lane, ir.Int32(2))
	for s := 0; s < slices; s++ {
		// The columns of the thread's outputs, clamped below N for the bias.
		var cols [2]value.Value
		for h := range cols {
			col := b.AddI(f0, int64(64*s+8*h))
			cols[h] = b.Select(b.ICmp(enum.IPredSLT, col, ir.Int32(N)), col, ir.Int32(N-1))
		}
		for j := 0; j < per/4; j++ {
			outs := make([]value.Value, 4)
			for i := 0; i < 4; i++ {
				vals := []value.Value{acc[s*per+4*j+i]}
				if ep.spec.Epilogue == EpiGated {
					vals = append(vals, acc[(s+slices)*per+4*j+i])
				}
				o, e := ep.Values(b, cols[i/2], vals)
				if e != nil {
					return e
				}
				outs[i] = o[0]
			}
			y0 := b.movMatrixTrans(pack(outs[0], outs[1])) // column f's 8x8 block
			y1 := b.movMatrixTrans(pack(outs[2], outs[3])) // column f+8's
			got := b.shflXorI32(b.Select(odd, y0, y1), 1)
			lo, hi := b.Select(odd, got, y0), b.Select(odd, y1, got)
			tr := b.AddI(tok, int64(8*j))
			col := b.AddI(c4, int64(64*s))
			ok := b.And(b.ICmp(enum.IPredSLT, tr, live), b.ICmp(enum.IPredSLT, col, ir.Int32(N)))
			storeBF16x4If(b, ep.args.C, w.row0, tr, col, N, lo, hi, ok)
		}
	}
	return nil
}

// swapStoreBF16Interleaved is swapStoreBF16 for interleaved gate/up rows
// (GPT-OSS): after swapRuns' exchange (shfl.xor 4) a thread holds, per
// slice s and group j of 8 token rows, the outputs of token row R = 8j +
// 2q + p (q = lane%4, p = lane/4%2) at output columns c and c+4 of the
// warp's 8 (c = lane/8, 8*(warp%4) + 32s on from its first column). They
// are rounded into one bf16x2 (to nearest even, or to odd with CRoundOdd),
// which one shfl.xor 8 trades with the lane of column c^1: lanes of even c
// keep columns c, c+1, lanes of odd c columns c+3, c+4; one shfl.xor 16
// then gives lane c = 0 columns 0..3 and lane c = 1 columns 4..7 of row
// R, each stored with one 8-byte store (a warp store: 8 token rows x 16
// bytes; swapRuns stored each output alone). Outputs, rounding and
// predicates as Epilogue.Emit's (a run of 4 columns below N, N a multiple
// of 8), each store predicated as in swapStoreBF16, every group computed;
// the bias of a column past N is read at N-1. The shuffles run in every
// lane.
func (l sm90Layout) swapStoreBF16Interleaved(b *Builder, ep *Epilogue, w gemmWork, c, lane, warp value.Value, acc []value.Value) error {
	N := int64(ep.spec.N)
	S, per := l.NB/64/l.WG, l.BM/2
	pack := ep.packBF16(b)
	_, col0 := l.regFedHalf(b, c) // 0 with one warpgroup
	live := b.Sub(w.rowEnd, w.row0)
	wq := b.And(warp, ir.Int32(3))
	p := b.And(b.LShr(lane, ir.Int32(2)), ir.Int32(1))
	up := b.ICmp(enum.IPredNE, p, ir.Int32(0))
	cl := b.LShr(lane, ir.Int32(3))                                   // c
	oddC := b.ICmp(enum.IPredNE, b.And(cl, ir.Int32(1)), ir.Int32(0)) // odd c
	store := b.ICmp(enum.IPredULT, cl, ir.Int32(2))                   // c = 0 and 1 store
	tr0 := b.Add(b.MulI(b.And(lane, ir.Int32(3)), 2), p)              // token row R of group 0
	first := b.Add(w.n0, b.Add(col0, b.MulI(wq, 8)))                  // the warp's first output column of slice 0
	lo16, hi16 := ir.Int32(0xFFFF), ir.Int32(-65536)
	for s := 0; s < S; s++ {
		base := b.AddI(first, int64(32*s))
		var cols [2]value.Value // the thread's output columns, clamped below N for the bias
		for h := range cols {
			col := b.Add(base, b.AddI(cl, int64(4*h)))
			cols[h] = b.Select(b.ICmp(enum.IPredSLT, col, ir.Int32(N)), col, ir.Int32(N-1))
		}
		for j := 0; j < per/4; j++ {
			var outs [2]value.Value
			for h := range outs {
				r := 4*j + 2*h
				v0, v1 := acc[s*per+r], acc[s*per+r+1] // tokens 2q + 8j and the next
				got := b.shflXor(b.Select(up, v0, v1), 4)
				g, u := b.Select(up, got, v0), b.Select(up, v1, got)
				o, e := ep.Values(b, cols[h], []value.Value{g, u})
				if e != nil {
					return e
				}
				outs[h] = o[0]
			}
			mine := pack(outs[0], outs[1]) // columns c (low half) and c+4
			other := b.shflXorI32(mine, 8) // columns c^1 and c^1+4
			// even c: (c, c+1) from the low halves; odd c: (c+3, c+4) from the high halves.
			x := b.Select(oddC,
				b.Or(b.LShr(other, ir.Int32(16)), b.And(mine, hi16)),
				b.Or(b.And(mine, lo16), b.Shl(other, ir.Int32(16))))
			y := b.shflXorI32(x, 16) // lane c^2's pair: columns 2, 3 for c = 0, 6, 7 for c = 1
			tr := b.AddI(tr0, int64(8*j))
			col := b.Add(base, b.MulI(cl, 4)) // c = 0: columns 0..3, c = 1: 4..7
			ok := b.And(store, b.And(b.ICmp(enum.IPredSLT, tr, live), b.ICmp(enum.IPredSLT, col, ir.Int32(N))))
			storeBF16x4If(b, ep.args.C, w.row0, tr, col, N, x, y, ok)
		}
	}
	return nil
}

// storeBF16x4If stores the two bf16x2 words lo, hi (columns col..col+3
// of row row0+tr of the bf16 C at c, N columns) where ok (an i1) holds:
// one st.global.v2.b32 under a predicate (PTX ISA, "st"), no branch, so
// that ptxas may schedule the groups of an epilogue together; the
// address, computed in every lane, is not accessed where ok is false.
func storeBF16x4If(b *Builder, c, row0, tr, col value.Value, N int64, lo, hi, ok value.Value) {
	off := b.MulI(b.Add(b.MulI(b.Wide(b.Add(row0, tr)), N), b.Wide(col)), 2)
	b.Asm("{\n\t.reg .pred p;\n\tsetp.ne.u32 p, $0, 0;\n\t@p st.global.v2.b32 [$1], {$2, $3};\n\t}", "r,l,r,r,~{memory}",
		b.ZExt(ok, ir.I32), b.ByteOffset(c, off), lo, hi)
}

// epilogueQuantize is the operand swap's epilogue with GemmSpec.QuantizeC:
// the outputs stored as epilogue stores them and kept in the f32 tile at
// quantAt (token row tr at tr*quantStride floats); after named barrier 1
// of the consumer warpgroup, thread t < BM·quantCols/32 (at most its 128
// threads: sm90Plan) quantizes block t mod (quantCols/32) of token row
// t / (quantCols/32) when the row is the
// work item's and the block lies below N (quantizeBlock: the bytes
// moe.Quantize makes of the stored row), into c_q and c_scales; a second
// barrier frees the tile for the next work item.
func (l sm90Layout) epilogueQuantize(b *Builder, k *sm90Block, w gemmWork, c, lane, warp value.Value, acc []value.Value) error {
	spec := k.spec
	ep := gemmEpilogue(b, spec, w)
	stride := int64(l.quantStride(spec))
	tile := b.AddI(k.base, int64(l.quantAt))
	at := func(tr, tc value.Value) value.Value { // the tile's float (tr, tc)
		return sharedPtr(b, b.Add(tile, b.MulI(b.Add(b.MulI(tr, stride), tc), 4)))
	}
	err := l.epilogue(b, ep, w, c, lane, warp, acc, func(tr, tc value.Value, outs []value.Value) {
		for i, o := range outs {
			b.StoreAt(o, at(tr, b.AddI(tc, int64(i))), 4)
		}
	})
	wgBarrier := func() { b.BarrierSync(ir.Int32(1), ir.Int32(128)) }
	wgBarrier()
	nblk := int64(l.quantCols(spec) / 32)
	t := b.Add(b.MulI(b.And(warp, ir.Int32(3)), 32), lane)
	b.If(b.ICmp(enum.IPredSLT, t, ir.Int32(int64(l.BM)*nblk)), func() {
		tr, blk := b.UDiv(t, ir.Int32(nblk)), b.URem(t, ir.Int32(nblk))
		row, col := b.Add(w.row0, tr), b.Add(w.n0, b.MulI(blk, 32))
		in := b.And(b.ICmp(enum.IPredSLT, row, w.rowEnd), b.ICmp(enum.IPredSLT, col, ir.Int32(int64(spec.N))))
		b.If(in, func() {
			vals := make([]value.Value, 32)
			src := b.MulI(blk, 32)
			for i := 0; i < 8; i++ {
				v := b.LoadAt(ir.Vec(4, ir.F32), at(tr, b.AddI(src, int64(4*i))), 16)
				for j := 0; j < 4; j++ {
					vals[4*i+j] = b.ExtractElement(v, j)
				}
			}
			first := b.Add(b.MulI(b.Wide(row), int64(spec.N)), b.Wide(col))
			b.quantizeBlock(vals, b.ByteOffset(b.Param("c_q"), first),
				b.ByteOffset(b.Param("c_scales"), b.Add(b.MulI(b.Wide(row), int64(spec.N/32)), b.Wide(b.LShr(col, ir.Int32(5))))))
		})
	})
	wgBarrier()
	return err
}

// epilogueQuantizeRF is the register-fed GEMM's epilogue with QuantizeC
// (QuantizeCValues; gate/up halves, 128 B-tile rows per consumer
// warpgroup: 64 output columns, the 32-column blocks of warps 0-1 and
// 2-3; two blocks per SM, so that it runs beside the other block's K
// loop): the outputs (Epilogue.Values', stored as f32 C unless
// QuantizeCOnly) quantized in registers to the values moe.Quantize with V
// writes from the stored C, bit for bit (mxValues8's steps):
//  1. per 8-row group j of token rows, a thread's four outputs (token
//     rows 8j + 2q and +1, q = lane%4; columns f and f+8 of its warp's 16);
//     the warp's amax of each token row over its 16 columns (absMaxBits,
//     shfl.xor 4, 8 and 16 among the lanes of equal q), its UE8M0 code
//     (mxScale), written as one byte per (warp, token row) at quantAt;
//  2. named barrier 1+2c+(warp%4)/2 of the pair of warps (64 threads);
//     the block's code is the larger of the two warps' (mxScale is
//     monotone in amax, NaN highest), so max(code) is the code of the
//     block's amax;
//  3. each output times the code's reciprocal to E4M3 and back times its
//     scale (mxValues8's steps), rounded to bf16 (exact); the two 8x8
//     blocks of a group transposed across the warp (movmatrix, as
//     swapStoreBF16), and neighbouring lanes trade halves (shfl.xor 1)
//     so that each thread holds four consecutive positions of the block's
//     register-fed order (layouts.RegisterFedOrder: a pair of elements
//     8g+2q' and +1 lies at positions p and p+8): even q' positions
//     16(q'/2) + 4(warp%2) .. +3, odd q' those 8 on; one 8-byte store
//     each, predicated on the token row and the block's column below N;
//  4. the same barrier again before the bytes are reused.
//
// Token rows past the work item are computed (from accumulators that
// hold no sum) and never stored; their codes are only their own rows'.
func (l sm90Layout) epilogueQuantizeRF(b *Builder, k *sm90Block, w gemmWork, c, lane, warp value.Value, acc []value.Value) error {
	spec := k.spec
	ep := gemmEpilogue(b, spec, w)
	N := int64(spec.N)
	per := l.BM / 2
	live := b.Sub(w.rowEnd, w.row0)
	wq := b.And(warp, ir.Int32(3))
	q := b.And(lane, ir.Int32(3))
	_, col0 := l.regFedHalf(b, c)
	cols := b.Add(w.n0, col0)                                           // the warpgroup's first output column
	f0 := b.Add(cols, b.Add(b.MulI(wq, 16), b.LShr(lane, ir.Int32(2)))) // column f of the thread
	tok := b.Add(b.MulI(q, 2), ir.Int32(0))                             // token row 2q of group 0
	slot := func(warp value.Value) value.Value {                        // the code bytes of a warp, one per token row
		return b.Add(b.AddI(k.base, int64(l.quantAt)), b.MulI(b.Add(b.MulI(c, 4), warp), int64(l.BM)))
	}
	// 1. The outputs, each token row's amax over the warp's columns, its code.
	outs := make([][4]value.Value, per/4)
	codes := make([][2]value.Value, per/4)
	var err error
	for j := range outs {
		for i := 0; i < 4; i++ {
			col := b.AddI(f0, int64(8*(i/2)))
			col = b.Select(b.ICmp(enum.IPredSLT, col, ir.Int32(N)), col, ir.Int32(N-1)) // the bias of a column past N: read at N-1, never stored
			o, e := ep.Values(b, col, []value.Value{acc[4*j+i], acc[per+4*j+i]})
			if e != nil {
				return e
			}
			outs[j][i] = o[0]
		}
		for h := 0; h < 2; h++ { // token rows 8j+2q+h: outputs h and h+2
			amax := b.absMaxBits([]value.Value{outs[j][h], outs[j][h+2]}, ir.Int32(0))
			for _, d := range []int{4, 8, 16} {
				o := b.shflXorI32(amax, d)
				amax = b.Select(b.ICmp(enum.IPredUGT, o, amax), o, amax)
			}
			codes[j][h], _ = b.mxScale(amax)
		}
	}
	own, partner := slot(wq), slot(b.Xor(wq, ir.Int32(1)))
	b.If(b.ICmp(enum.IPredULT, lane, ir.Int32(4)), func() { // lanes 0-3 hold every token row's code
		for j := range codes {
			pair := b.Or(b.And(codes[j][0], ir.Int32(0xFF)), b.Shl(b.And(codes[j][1], ir.Int32(0xFF)), ir.Int32(8)))
			b.StoreAt(b.Trunc(pair, ir.I16), sharedPtr(b, b.Add(own, b.AddI(tok, int64(8*j)))), 2)
		}
	})
	bar := b.AddI(b.Add(b.MulI(c, 2), b.LShr(wq, ir.Int32(1))), 1)
	b.BarrierSync(bar, ir.Int32(64))
	// 3. The values, transposed into the register-fed order, stored.
	odd := b.ICmp(enum.IPredNE, b.And(q, ir.Int32(1)), ir.Int32(0))
	blockCol := b.Add(cols, b.MulI(b.LShr(wq, ir.Int32(1)), 32))
	pos := b.Add(b.Add(b.MulI(b.LShr(q, ir.Int32(1)), 16), b.MulI(b.And(wq, ir.Int32(1)), 4)), b.MulI(b.And(q, ir.Int32(1)), 8))
	lo16 := func(x value.Value) value.Value { return b.And(x, ir.Int32(0xFFFF)) }
	hi16 := func(x value.Value) value.Value { return b.LShr(x, ir.Int32(16)) }
	pack := func(lo, hi value.Value) value.Value { return b.Or(lo, b.Shl(hi, ir.Int32(16))) }
	for j := range outs {
		body := func() {
			pw := b.ZExt(b.LoadAt(ir.I16, sharedPtr(b, b.Add(partner, b.AddI(tok, int64(8*j)))), 2), ir.I32)
			var inv, scale [2]value.Value
			for h := 0; h < 2; h++ {
				pc := b.And(b.LShr(pw, ir.Int32(int64(8*h))), ir.Int32(0xFF))
				code := b.Select(b.ICmp(enum.IPredUGT, pc, codes[j][h]), pc, codes[j][h])
				inv[h], scale[h] = b.mxInv(code), b.ue8m0F32(code)
			}
			o := outs[j]
			wd := b.e4m3x4(b.FMul(o[0], inv[0]), b.FMul(o[2], inv[0]), b.FMul(o[1], inv[1]), b.FMul(o[3], inv[1]))
			x := b.e4m3x4F32(wd) // outputs 0, 2, 1, 3
			m0, m2, m1, m3 := b.FMul(x[0], scale[0]), b.FMul(x[1], scale[0]), b.FMul(x[2], scale[1]), b.FMul(x[3], scale[1])
			y0 := b.movMatrixTrans(b.PackBF16(m0, m1)) // column f's 8x8 block: token row lane/4, elements 8g+2q, +1
			y1 := b.movMatrixTrans(b.PackBF16(m2, m3)) // column f+8's
			send := b.Select(odd, pack(lo16(y0), lo16(y1)), pack(hi16(y0), hi16(y1)))
			got := b.shflXorI32(send, 1)
			w0 := b.Select(odd, pack(lo16(got), hi16(y0)), pack(lo16(y0), lo16(got)))
			w1 := b.Select(odd, pack(hi16(got), hi16(y1)), pack(lo16(y1), hi16(got)))
			tr := b.AddI(b.LShr(lane, ir.Int32(2)), int64(8*j))
			ok := b.And(b.ICmp(enum.IPredSLT, tr, live), b.ICmp(enum.IPredSLT, blockCol, ir.Int32(N)))
			b.If(ok, func() {
				var v value.Value = ir.Undef(ir.Vec(2, ir.I32))
				v = b.InsertElement(b.InsertElement(v, w0, 0), w1, 1)
				el := b.Add(b.MulI(b.Wide(b.Add(w.row0, tr)), N), b.Wide(b.Add(blockCol, pos)))
				b.StoreAt(v, b.ByteOffset(b.Param("c_v"), b.MulI(el, 2)), 8)
			})
		}
		if j == 0 {
			body()
		} else {
			b.If(b.ICmp(enum.IPredSGT, live, ir.Int32(int64(8*j))), body)
		}
	}
	// The f32 C, as Epilogue.EmitThen stores it (not with QuantizeCOnly).
	if !spec.QuantizeCOnly {
		for j := range outs {
			for i := 0; i < 4; i++ {
				tr := b.AddI(tok, int64(8*j+i%2))
				col := b.AddI(f0, int64(8*(i/2)))
				ok := b.And(b.ICmp(enum.IPredSLT, tr, live), b.ICmp(enum.IPredSLT, col, ir.Int32(N)))
				b.If(ok, func() {
					off := b.MulI(b.Add(b.MulI(b.Wide(b.Add(w.row0, tr)), N), b.Wide(col)), 4)
					StoreF32(b, b.ByteOffset(ep.args.C, off), []value.Value{outs[j][i]})
				})
			}
		}
	}
	b.BarrierSync(bar, ir.Int32(64))
	return err
}

// stageOut is the consumer side of the staged epilogue: wait until the
// store warps have drained the staging tile (parity sph^1), compute this
// warpgroup's outputs with the shared Epilogue (Values: bias, activation),
// round them to bf16 into the staging tile (row-major, BN columns, rows
// padded by 16 bytes: layouts.GemmSmem.StagingStride), and arrive on
// staging-full. Columns at or past N are skipped (their bias would be out
// of range); rows past the segment are written and never stored.
func (l sm90Layout) stageOut(b *Builder, k *sm90Block, w gemmWork, c, lane, warp value.Value, acc []value.Value, sph value.Value) error {
	var err error
	stgFull, stgEmpty := b.AddI(k.ring.bars, int64(16*l.S)), b.AddI(k.ring.bars, int64(16*l.S+8))
	b.MbarWait(stgEmpty, b.Xor(sph, ir.Int32(1)))
	ep := gemmEpilogue(b, k.spec, w)
	// The fragment's tile row and column bases (no staging with the
	// operand swap: layouts.PlanGemmSmem).
	wq := b.And(warp, ir.Int32(3))
	rl := b.Add(b.MulI(c, 64), b.Add(b.MulI(wq, 16), b.LShr(lane, ir.Int32(2)))) // tile row
	t := b.And(lane, ir.Int32(3))
	t2 := b.MulI(t, 2)
	stg := b.AddI(k.base, int64(l.smem.StagingOffset))
	put := func(row value.Value, lc value.Value, vals []value.Value) {
		col := b.Add(w.n0, lc)
		b.If(b.ICmp(enum.IPredSLT, col, ir.Int32(int64(k.spec.N))), func() {
			outs, e := ep.Values(b, col, vals)
			if e != nil {
				err = joinErr(err, e)
				return
			}
			addr := b.Add(b.Add(stg, b.MulI(row, int64(l.smem.StagingStride))), b.MulI(lc, 2))
			p := b.IntToPtr(b.ZExt(addr, ir.I64), SPtr)
			if len(outs) == 2 {
				b.StoreAt(b.PackBF16(outs[0], outs[1]), p, 4)
			} else {
				b.StoreAt(b.ToBF16(outs[0]), p, 2)
			}
		})
	}
	_ = l.wgmmaRuns(acc, func(h int) value.Value { return b.AddI(rl, int64(8*h)) }, func(interleaved bool) value.Value {
		if interleaved {
			return t
		}
		return t2
	}, func(row, base value.Value, off int, vals []value.Value) error {
		put(row, b.AddI(base, int64(off)), vals)
		return nil
	})
	b.MbarArrive(stgFull)
	return err
}

// storeWarps emits the store side of the staged epilogue, run by warps 1-3
// of the producer warpgroup (t = 0..95): for every work item, wait for
// staging-full, copy the tile's rows below RowEnd and columns below N to C
// in 16-byte chunks (consecutive threads take consecutive chunks of a row:
// coalesced), (signalTiles) signal the item's row tile (signalTile), and
// arrive on staging-empty; with storeGatherK the warps copy their chunks
// of the gather while they wait for the staging tile and after their
// last item (storeGather). init is the staging tile's parity before the
// first item (nil: 0); it returns the parity after the last.
func (l sm90Layout) storeWarps(b *Builder, k *sm90Block, t value.Value, init []value.Value) []value.Value {
	stgFull, stgEmpty := b.AddI(k.ring.bars, int64(16*l.S)), b.AddI(k.ring.bars, int64(16*l.S+8))
	stg := b.AddI(k.base, int64(l.smem.StagingOffset))
	stride := int64(l.smem.StagingStride)
	cpr := l.BN / 8 // 16-byte chunks per staging row
	total := l.BM * cpr
	v4 := ir.Vec(4, ir.I32)
	N := int64(k.spec.N)
	if init == nil {
		init = []value.Value{ir.Int32(0)}
	}
	gathers := k.spec.storeGatherK > 0
	var g storeGather
	if gathers { // the warp's next chunk of the gather (store_gather.go) rides along
		g = newStoreGather(b, k, t)
		init = append(slices.Clip(init), g.first)
	}
	out := k.work.each(b, init, func(w gemmWork, v []value.Value) []value.Value {
		sph := v[0]
		var chunk value.Value
		if gathers {
			chunk = g.wait(b, k.spec, stgFull, sph, v[1])
		} else {
			b.MbarWait(stgFull, sph)
		}
		b.Loop(t, ir.Int32(int64(total)), ir.Int32(96), nil, func(q value.Value, _ []value.Value) []value.Value {
			r := b.UDiv(q, ir.Int32(int64(cpr)))
			ch := b.URem(q, ir.Int32(int64(cpr)))
			row := b.Add(w.row0, r)
			col := b.Add(w.n0, b.MulI(ch, 8))
			ok := b.And(b.ICmp(enum.IPredSLT, row, w.rowEnd), b.ICmp(enum.IPredSLT, col, ir.Int32(N)))
			b.If(ok, func() {
				src := b.Add(b.Add(stg, b.MulI(r, stride)), b.MulI(ch, 16))
				val := b.LoadAt(v4, b.IntToPtr(b.ZExt(src, ir.I64), SPtr), 16)
				off := b.MulI(b.Add(b.MulI(b.Wide(row), N), b.Wide(col)), 2)
				b.StoreAt(val, b.ByteOffset(b.Param("c"), off), 16)
			})
			return nil
		})
		switch {
		case !k.spec.signalTiles:
			b.MbarArrive(stgEmpty)
		case k.spec.signalPerItem == 0: // a chained kernel's: the signal first
			l.signalItem(b, k.spec, w)
			b.MbarArrive(stgEmpty)
		default: // the staging tile is read: freed before the signal waits for the stores
			b.MbarArrive(stgEmpty)
			l.signalItem(b, k.spec, w)
		}
		if gathers {
			return []value.Value{b.Xor(sph, ir.Int32(1)), chunk}
		}
		return []value.Value{b.Xor(sph, ir.Int32(1))}
	})
	if gathers {
		g.drain(b, k.spec, out[1])
		return out[:1]
	}
	return out
}
