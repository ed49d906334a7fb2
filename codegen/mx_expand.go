package codegen

import (
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"

	"github.com/mokc/mokc/ir"
)

// The sm_90a MXFP8 GEMM by expansion (GemmSpec.MXExpand; docs/mxfp8.md):
// the same values as the MX GEMM, computed by the bf16 pipeline. The
// consumer warpgroups, the ring of 128-byte-swizzled K-major bf16 tiles
// (K blocks of BK/2 = 64), the work list and the epilogue are those of the
// bf16 GEMM (sm90Layout.bf); the producer warpgroup, all 128 threads,
// fills each stage itself: for its chunks of 8 elements (chunk column
// tid%8 of rows tid/8 + 16i of the A tile, then of the B tile by the
// gate/up row map) it loads the 8 e4m3 bytes and the chunk's UE8M0 scale
// code from global memory (expandBatch chunks' loads at a time, so they
// are in flight together), widens each byte exactly (cvt.rn.f16x2.e4m3x2, then
// to f32), multiplies by 2^(code-127) (exact), rounds to bf16 (exact for
// scales of at least 2^-124, layouts.TestMXValuesInBF16) and stores the
// 16 bytes at the chunk's swizzled place (row*128 + ((c ^ row%8) * 16));
// then fence.proxy.async (generic-proxy stores read by wgmma) and an
// arrival on the stage's full barrier (128 per stage). Rows past the
// expert's rows or the B rows, and K past K (K is a multiple of 32, not
// always of 64), are stored as zeros. The consumers wait, fence again and
// run WGMMAMainloop as for a bf16 GEMM: one f32 accumulation, no
// per-block promotion.

// expandProdRegs are the producer's registers after setmaxnreg.dec, and
// expandBatch the chunks whose loads it issues together before converting
// them (each chunk's two words and scale code live until its conversion):
// with 96 the consumers keep 200 registers with two consumer warpgroups
// and 136 with three (192-row tiles), and ptxas spills nowhere on the
// 128x128, 128x256 and 192x128 tiles (with 72, or 88 and 8 chunks, the
// producer spilled).
const (
	expandProdRegs = 96
	expandBatch    = 8
)

// expandChunk is one chunk a producer thread widens per stage: its 8 e4m3
// bytes (two i32) and scale code as loaded, whether it exists, and its
// byte offset in the stage.
type expandChunk struct {
	lo, hi, code value.Value // zero words and code 127 for a chunk past the edges
	off          value.Value // i32 offset in the stage
	inTile       value.Value // i1: the row is one of the tile's (nil: always)
}

// expandProducer is the producer warpgroup of an MXExpand kernel (see
// above); mx is the MX spec (e4m3 operands, their scales and K).
func (l sm90Layout) expandProducer(b *Builder, k *sm90Block, mx GemmSpec) {
	if l.prodRegs > 0 {
		b.SetMaxNReg(false, l.prodRegs)
	}
	K := int64(mx.K)
	nsf := K / 32
	brows := int64(mx.BRows())
	bRows := bTableLoad{tmaRing: l.tmaRing, N: mx.N, K: mx.K, BRows: mx.BRows(), threads: 128} // the gate/up row map
	kc := b.And(k.tid, ir.Int32(7))                                                            // the thread's chunk column
	rowT := b.LShr(k.tid, ir.Int32(3))                                                         // its first row in a tile
	aBase, bBase := b.PtrToInt(b.Param("a")), b.PtrToInt(b.Param("b"))
	aSc, bSc := b.PtrToInt(b.Param("a_scales")), b.PtrToInt(b.Param("b_scales"))
	aBytes := int64(l.atoms * l.aAtom)
	k.work.each(b, []value.Value{ir.Int32(0), ir.Int32(0)}, func(w gemmWork, v []value.Value) []value.Value {
		return b.Loop(ir.Int32(0), ir.Int32(int64(l.kTiles)), ir.Int32(1), v, func(kt value.Value, v []value.Value) []value.Value {
			stage, phase := v[0], v[1]
			b.MbarWait(k.ring.empty(b, stage), b.Xor(phase, ir.Int32(1)))
			k0 := b.Add(b.MulI(kt, int64(l.BK)), b.MulI(kc, 8))
			kOK := b.ICmp(enum.IPredSLT, k0, ir.Int32(K))
			blk := b.Wide(b.LShr(k0, ir.Int32(5)))
			// A chunk: global row grow (i32; valid when ok) of a matrix at
			// base with scales at sc, stored at off.
			type chunkAt struct{ base, sc, grow, ok, off, inTile value.Value }
			var at []chunkAt
			for i := 0; i < l.BM/16; i++ {
				r := b.AddI(rowT, int64(16*i))
				grow := b.Add(w.row0, r)
				ok := b.And(kOK, b.ICmp(enum.IPredSLT, grow, w.rowEnd))
				at = append(at, chunkAt{base: aBase, sc: aSc, grow: grow, ok: ok, off: swizzled(b, r, kc)})
			}
			for i := 0; 16*i < l.NB; i++ {
				j := b.AddI(rowT, int64(16*i))
				grow := bRows.bRow(b, w.n0, j)
				ok := b.And(kOK, b.And(b.ICmp(enum.IPredSLT, grow, ir.Int32(brows)), b.ICmp(enum.IPredSLT, j, ir.Int32(int64(l.NB)))))
				c := chunkAt{base: bBase, sc: bSc, grow: b.Add(b.MulI(w.e, brows), grow), ok: ok, off: b.AddI(swizzled(b, j, kc), aBytes)}
				if 16*(i+1) > l.NB { // the last rows when NB is not a multiple of 16
					c.inTile = b.ICmp(enum.IPredSLT, j, ir.Int32(int64(l.NB)))
				}
				at = append(at, c)
			}
			// load issues a chunk's loads (the matrix's first bytes when
			// not ok) and keeps its words and code: zero words and the code
			// of 1.0 when not ok (so the chunk widens to zeros).
			load := func(c chunkAt) expandChunk {
				row := b.Wide(b.Select(c.ok, c.grow, ir.Int32(0)))
				k0w := b.Wide(b.Select(c.ok, k0, ir.Int32(0)))
				src := b.Add(c.base, b.Add(b.MulI(row, K), k0w))
				v := b.LoadAt(ir.Vec(2, ir.I32), b.IntToPtr(src, GPtr), 8)
				code := b.ZExt(b.LoadAt(ir.I8, b.IntToPtr(b.Add(c.sc, b.Add(b.MulI(row, nsf), b.Select(c.ok, blk, ir.Int64(0)))), GPtr), 1), ir.I32)
				zero := ir.Int32(0)
				return expandChunk{lo: b.Select(c.ok, b.ExtractElement(v, 0), zero), hi: b.Select(c.ok, b.ExtractElement(v, 1), zero),
					code: b.Select(c.ok, code, ir.Int32(127)), off: c.off, inTile: c.inTile}
			}
			sa := b.Add(k.base, b.MulI(stage, int64(l.stageBytes)))
			for i0 := 0; i0 < len(at); i0 += expandBatch {
				var chunks []expandChunk
				for _, c := range at[i0:min(i0+expandBatch, len(at))] {
					chunks = append(chunks, load(c))
				}
				for _, c := range chunks {
					expandStore(b, sa, c)
				}
			}
			b.FenceProxyAsync()
			b.MbarArrive(k.ring.full(b, stage))
			s2, p2 := ringNext(b, stage, phase, l.S)
			return []value.Value{s2, p2}
		})
	})
}

// expandStore widens chunk c (8 e4m3 bytes times 2^(code-127), exactly),
// rounds to bf16 and stores the 16 bytes at stage address sa + c.off
// (when c.inTile, if set, is true).
func expandStore(b *Builder, sa value.Value, c expandChunk) {
	scale := b.ue8m0F32(c.code)
	var vals []value.Value
	for _, word := range []value.Value{c.lo, c.hi} {
		for _, x := range b.e4m3x4F32(word) {
			vals = append(vals, b.FMul(x, scale))
		}
	}
	var vec value.Value = ir.Undef(ir.Vec(4, ir.I32))
	for i := 0; i < 4; i++ {
		vec = b.InsertElement(vec, b.PackBF16(vals[2*i], vals[2*i+1]), i)
	}
	store := func() { b.StoreAt(vec, b.IntToPtr(b.ZExt(b.Add(sa, c.off), ir.I64), SPtr), 16) }
	if c.inTile != nil {
		b.If(c.inTile, store)
	} else {
		store()
	}
}

// swizzled is the byte offset of 16-byte chunk c of row r of a K-major
// tile of 128-byte rows with the 128-byte swizzle: r*128 + ((c ^ r%8) *
// 16) (layouts.SmemTile.ByteOffset of element (r, 8c) in the one atom of a
// 64-wide bf16 K block).
func swizzled(b *Builder, r, c value.Value) value.Value {
	return b.Add(b.MulI(r, 128), b.MulI(b.Xor(c, b.And(r, ir.Int32(7))), 16))
}
