package codegen

import (
	"fmt"

	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"

	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/layouts"
	"github.com/mokc/mokc/moe"
	"github.com/mokc/mokc/target"
)

// The weight gradient on sm_90a's warpgroup MMA: the same grid, rows and
// epilogue as emitWeightGradMMA (Main_e[m, n] += sum_{r of e} A[r, m] *
// B[r, n] over 128 x 128 tiles, 256 threads, two blocks per SM), with
// wgmma.mma_async m64n128k16 reading both operands from shared memory in
// the MN-major layout they have in the dispatch order (A M-major:
// imm-trans-a = 1; B N-major: imm-trans-b = 1; PTX ISA 9.7.15.5.1.2).
// Warpgroup w owns rows 64w.. of the tile. A stage holds wgradWGRows expert
// rows of both operands as MN-major tiles (layouts.NewSmemTileMN: two
// columns of 64 elements, each wgradWGRows rows of 128 bytes with the
// 128-byte swizzle), copied by cp.async (rows past the expert zero-filled:
// a TMA box could not stop at the expert's last row) and handed to the
// async proxy with fence.proxy.async before the block barrier. Per stage,
// after the barrier, the threads issue the copies of the stage two ahead,
// then each warpgroup issues four k16 steps as one wgmma group and waits
// for it in the same inline-PTX statement (the copies stay in flight). The
// sums of a tile run in a
// fixed order (rows ascending) and round once into the main grad:
// repeated runs give the same bits, with no atomics.

const (
	wgradWGRows   = 64 // expert rows per stage (four k16 steps)
	wgradWGStages = 3  // cp.async ring depth
	wgradWGTile   = 128
)

// wgradTiles are the MN-major A (tm x rows) and B (tn x rows) tiles of
// one stage of a wgmma weight-gradient kernel, with the address-independent
// bits of their wgmma descriptors and the descriptor offsets of each k16
// step (stepOffsets).
type wgradTiles struct {
	a, b       *layouts.SmemTile
	hiA, hiB   uint64
	offA, offB []int
}

// newWGradTiles lays out op's stage tiles of tm and tn columns by rows
// expert rows (128-byte swizzle); errors name op.
func newWGradTiles(op moe.WeightGrad, tm, tn, rows int) (wgradTiles, error) {
	var t wgradTiles
	var err error
	if t.a, err = layouts.NewSmemTileMN(target.SM90a, layouts.OperandA, layouts.DTypeBF16, tm, rows, layouts.Swizzle128B); err == nil {
		t.b, err = layouts.NewSmemTileMN(target.SM90a, layouts.OperandB, layouts.DTypeBF16, tn, rows, layouts.Swizzle128B)
	}
	if err == nil {
		t.hiA, err = t.a.Descriptor(0, 0, 0)
	}
	if err == nil {
		t.hiB, err = t.b.Descriptor(0, 0, 0)
	}
	if err == nil {
		t.offA, t.offB, err = stepOffsets(t.a, t.b)
	}
	if err != nil {
		return t, fmt.Errorf("codegen: %s: %w", op.Name(), err)
	}
	return t, nil
}

// wgradWGRing is the wgmma kernel's ring: each operand's tile is two
// 64-column MN-major columns of wgradWGRows rows x 128 bytes; chunk ch
// (columns 8ch..) of row r sits in column ch/8 at r*128 + ((ch%8) ^
// (r%8))*16, the tile's layouts.SmemTile.ByteOffset of element (8ch, r)
// (128-byte swizzle: 16-byte chunk index XOR row mod 8).
func wgradWGRing(a, bt *layouts.SmemTile) wgRing {
	col := int64(a.AtomBytes())
	return wgRing{Rows: wgradWGRows, Stages: wgradWGStages, StageBytes: int64(a.Bytes() + bt.Bytes()),
		BOff: int64(a.Bytes()), RowBytes: 128,
		Place: func(b *Builder, r, ch value.Value) value.Value {
			sw := b.Xor(b.And(ch, ir.Int32(7)), b.And(r, ir.Int32(7)))
			off := b.Add(b.MulI(b.LShr(ch, ir.Int32(3)), col), b.Add(b.MulI(r, 128), b.MulI(sw, 16)))
			return b.Wide(off)
		}}
}

// wgradOnWGMMA reports whether op's weight gradient runs on wgmma on
// target t: sm_90a and the tensor-core kernel's conditions.
func wgradOnWGMMA(t target.Target, op moe.WeightGrad) bool {
	return t == target.SM90a && wgradOnTensorCores(op)
}

// emitWeightGradWGMMA is the sm_90a kernel of op (see the comment above):
// grid (ceil(N/128), ceil(M/128), E), 256 threads, 3 x 32 KB (+1 KB to
// realign) of shared memory. A block of an expert without rows exits at
// once; rows and columns past the expert's rows, M or N are zero-filled in
// shared memory and never stored. The bias gradient is emitWeightGradBias's.
func emitWeightGradWGMMA(m *ir.Module, op moe.WeightGrad) (Kernel, error) {
	tl, err := newWGradTiles(op, wgradWGTile, wgradWGTile, wgradWGRows)
	if err != nil {
		return Kernel{}, err
	}
	aT, bT, hiA, hiB, offA, offB := tl.a, tl.b, tl.hiA, tl.hiB, tl.offA, tl.offB
	ring := wgradWGRing(aT, bT)
	b, k, w := wgradBlockStart(m, op, wgradWGTile, wgradWGRows)
	tid, lane, warp, n0, m0, e, lo, hi, kTiles := w.tid, w.lane, w.warp, w.n0, w.m0, w.e, w.lo, w.hi, w.kTiles
	M, N := int64(op.M), int64(op.N)
	base := b.SharedBase1024()
	smem := b.ZExt(base, ir.I64)
	ld := b.wgLoader(ring, tid, lo, hi, m0, n0, M, N)
	for s := int64(0); s < wgradWGStages-1; s++ {
		b.If(b.ICmp(enum.IPredSLT, ir.Int32(s), kTiles), func() { ld.load(smem, ir.Int32(s)) })
		b.cpAsyncCommit()
	}
	wg := b.LShr(warp, ir.Int32(2))
	aOff := b.MulI(wg, int64(aT.AtomBytes())) // the warpgroup's 64-column of A
	var werr error
	acc := b.Loop(ir.Int32(0), kTiles, ir.Int32(1), zerosF32(wgradWGTile/2), func(kt value.Value, acc []value.Value) []value.Value {
		b.cpAsyncWait(wgradWGStages - 2)
		b.FenceProxyAsync()
		b.SyncThreads()
		// The stage the next copies fill was read by every warpgroup's
		// previous (waited-for) wgmma before this barrier.
		next := b.AddI(kt, wgradWGStages-1)
		b.If(b.ICmp(enum.IPredSLT, next, kTiles), func() { ld.load(smem, next) })
		b.cpAsyncCommit()
		sa := b.Add(base, b.MulI(b.URem(kt, ir.Int32(wgradWGStages)), ring.StageBytes))
		out, err := b.WGMMABF16Major(wgradWGTile, acc, b.SM90Desc(b.Add(sa, aOff), hiA), b.SM90Desc(b.AddI(sa, ring.BOff), hiB), offA, offB,
			WGMMAMajor{TransA: true, TransB: true, Wait: true})
		if err != nil {
			werr = err
			return acc
		}
		return out
	})
	if werr != nil {
		return Kernel{}, werr
	}
	b.cpAsyncWait(0)
	b.wgradStorePairs(op, e, m0, n0, b.wgmmaPairGroups(wg, lane, warp, acc, wgradWGTile, 4))
	b.Ret(nil)
	k.SharedBytes = int(wgradWGStages*ring.StageBytes) + 1024
	k.SkipIfZeroT = true
	k.Grid = [3]Expr{Const((N + wgradWGTile - 1) / wgradWGTile), Const((M + wgradWGTile - 1) / wgradWGTile), Const(int64(op.Experts))}
	return k, nil
}

// wgRing is the cp.async ring of the wgmma weight-gradient kernel: Stages
// stages of Rows expert rows of both operands (A's tile at stage offset 0,
// B's at BOff), each operand's tile 128 columns wide and copied in 16-byte
// chunks by wgradMMAWarps*32 threads.
type wgRing struct {
	Rows, Stages, StageBytes, BOff int64
	// RowBytes is the byte step of the tile between stage rows r and r+8
	// (divided by 8) in one column of chunks; Place the byte offset in the
	// operand's tile of chunk ch (0..15: columns 8ch..) of stage row r.
	RowBytes int64
	Place    func(b *Builder, r, ch value.Value) value.Value
}

// wgChunk is one 16-byte cp.async chunk a thread copies per stage, and
// its repetitions every repRows rows.
type wgChunk struct {
	sOff  int64       // byte offset of the operand's tile in the stage
	row   value.Value // i32 row of the chunk inside the stage
	sByte value.Value // i64 byte offset of the chunk in the operand's tile
	gBase value.Value // i64 address of the operand's row lo, column col
	colOK value.Value // i1 the chunk's columns exist
	pitch int64       // bytes per operand row in global memory
}

// wgChunks is the calling thread's chunks of a stage and the rows.
type wgChunks struct {
	b       *Builder
	ring    wgRing
	lo, hi  value.Value
	chunks  []wgChunk
	reps    int64 // copies of each chunk per stage, repRows rows apart
	repRows int64
}

// wgLoader emits the thread's chunk addresses for ring: chunk c = tid +
// i*256 of an operand is stage row c/16, columns 8*(c%16).. of its
// Rows x 128 tile (i = 0..Rows*16/256-1: the same column, 16 rows on).
func (b *Builder) wgLoader(ring wgRing, tid, lo, hi, m0, n0 value.Value, M, N int64) *wgChunks {
	threads := int64(wgradMMAWarps * 32)
	ld := &wgChunks{b: b, ring: ring, lo: lo, hi: hi, reps: ring.Rows * 16 / threads, repRows: threads / 16}
	for _, o := range []struct {
		base, c0 value.Value
		width    int64
		sOff     int64
	}{{b.Param("a"), m0, M, 0}, {b.Param("b"), n0, N, ring.BOff}} {
		ch := b.And(tid, ir.Int32(15))
		c := wgChunk{sOff: o.sOff, row: b.LShr(tid, ir.Int32(4)), pitch: 2 * o.width}
		col := b.Add(o.c0, b.MulI(ch, 8))
		c.sByte = ring.Place(b, c.row, ch)
		c.colOK = b.ICmp(enum.IPredSLT, col, ir.Int32(o.width))
		c.gBase = b.PtrToInt(b.ByteOffset(o.base, b.Add(b.MulI(b.Wide(lo), 2*o.width), b.MulI(b.Wide(col), 2))))
		ld.chunks = append(ld.chunks, c)
	}
	return ld
}

// load issues the cp.async of rows lo+Rows*kt.. into stage kt%Stages at
// smem (i64 shared address); chunks past hi or the operand's width are
// zero-filled (source size 0, from the operand's first row).
func (ld *wgChunks) load(smem, kt value.Value) {
	b, ring := ld.b, ld.ring
	st := b.Add(smem, b.MulI(b.Wide(b.URem(kt, ir.Int32(ring.Stages))), ring.StageBytes))
	for _, ch := range ld.chunks {
		for i := int64(0); i < ld.reps; i++ {
			r := b.Add(b.MulI(kt, ring.Rows), b.AddI(ch.row, i*ld.repRows))
			ok := b.And(ch.colOK, b.ICmp(enum.IPredSLT, b.Add(ld.lo, r), ld.hi))
			src := b.Select(ok, b.Add(ch.gBase, b.MulI(b.Wide(r), ch.pitch)), ch.gBase)
			size := b.Select(ok, ir.Int32(16), ir.Int32(0))
			dst := b.Add(st, b.Add(ir.Int64(ch.sOff+i*ld.repRows*ring.RowBytes), ch.sByte))
			b.CpAsync16(dst, src, size)
		}
	}
}

// wgmmaPairGroups are the accumulator pairs of consumer warpgroup c's
// wgmma D fragment of n columns (WGMMABF16: register 4j+i holds row
// 16*(warp%4) + lane/4 + 8*(i/2), column 8j + 2*(lane%4) + i%2 of the
// warpgroup's 64 rows, which are rows 64c.. of the tile), per values of j
// (2*per pairs) per group, the last group what is left, for
// wgradStorePairs. per and n/8 are even, so that every group, the last
// too, holds its pairs as column neighbours (pair 2i+1 eight columns
// right of pair 2i, same row), as wgradStoreBF16 takes them; it panics
// otherwise (the callers' constants).
func (b *Builder) wgmmaPairGroups(c, lane, warp value.Value, acc []value.Value, n, per int64) [][]wgradPair {
	if per%2 != 0 || (n/8)%2 != 0 {
		panic(fmt.Sprintf("codegen: wgmmaPairGroups: %d column blocks in groups of %d: each group needs an even number (wgradStoreBF16 pairs neighbours)", n/8, per))
	}
	g, q := b.LShr(lane, ir.Int32(2)), b.And(lane, ir.Int32(3))
	r0 := b.Add(b.MulI(c, 64), b.Add(b.MulI(b.And(warp, ir.Int32(3)), 16), g))
	var groups [][]wgradPair
	for j0 := int64(0); j0 < n/8; j0 += per {
		var ps []wgradPair
		for h := int64(0); h < 2; h++ {
			for j := j0; j < min(j0+per, n/8); j++ {
				ps = append(ps, wgradPair{row: b.AddI(r0, 8*h), col: b.AddI(b.MulI(q, 2), 8*j), acc: acc[4*j+2*h:][:2]})
			}
		}
		groups = append(groups, ps)
	}
	return groups
}

// wgradPair is one pair of a thread's accumulators: row and first column
// (of two adjacent ones) in the block's tile of Main_e.
type wgradPair struct {
	row, col value.Value
	acc      []value.Value
}

// wgradStorePairs adds the pairs to Main_e (tile at m0, n0), one group at
// a time: the group's pairs are loaded first (one 8-byte f32 pair each,
// from the expert's first element when outside M x N), so they are in
// flight together, then added and stored, each rounded once; bf16 main
// grads go through wgradStoreBF16. The wgmma kernel's groups of 8 pairs
// keep its registers within two blocks per SM; wgmma-ws's one group
// of 32 pairs (wsPairGroup 16 column blocks: all of its 128-column tile)
// fits its consumers' setmaxnreg budget.
func (b *Builder) wgradStorePairs(op moe.WeightGrad, e, m0, n0 value.Value, groups [][]wgradPair) {
	M, N := int64(op.M), int64(op.N)
	main := b.mainGradBase(op, e)
	if op.MainDType() == moe.BF16 {
		b.wgradStoreBF16(op, main, m0, n0, groups)
		return
	}
	size := op.MainDType().Size()
	for _, g := range groups {
		var ps []mainPair
		for _, p := range g {
			ps = append(ps, b.mainPairAt(main, b.Add(m0, p.row), b.Add(n0, p.col), M, N, size, p.acc))
		}
		b.addPairs(moe.F32, ps)
	}
}

// wgradStoreBF16 is wgradStorePairs for bf16 main grads. Each group's
// pairs come as column neighbours (pair 2i+1 eight columns right of pair
// 2i, same row; the four threads of a quad, lane%4 = q, hold columns 2q,
// 2q+1 of each): a quad's 4-byte pairs alone would fill half of each
// 32-byte sector. So lanes swap one pair with their neighbour (shfl.bfly
// 1): an even lane takes its neighbour's left pair and holds four
// consecutive columns from its own left pair, an odd lane takes its
// neighbour's right pair and holds four from there; each then loads, adds
// (f32, rounded once) and stores 8 bytes, a quad 32 bytes of a row.
func (b *Builder) wgradStoreBF16(op moe.WeightGrad, main, m0, n0 value.Value, groups [][]wgradPair) {
	M, N := int64(op.M), int64(op.N)
	odd := b.ICmp(enum.IPredNE, b.And(b.ThreadIdx(ir.X), ir.Int32(1)), ir.Int32(0))
	type quad struct {
		ptr, in value.Value
		acc     [4]value.Value
		old     [4]value.Value
	}
	for _, g := range groups {
		var qs []quad
		for i := 0; i+1 < len(g); i += 2 {
			l, r := g[i], g[i+1]
			var q quad
			for c := 0; c < 2; c++ {
				// even lanes send their right pair, odd lanes their left
				got := b.shflXor(b.Select(odd, l.acc[c], r.acc[c]), 1)
				q.acc[c] = b.Select(odd, got, l.acc[c])
				q.acc[2+c] = b.Select(odd, r.acc[c], got)
			}
			row := b.Add(m0, l.row)
			col := b.Add(n0, b.Select(odd, b.AddI(r.col, -2), l.col))
			q.in = b.And(b.ICmp(enum.IPredSLT, row, ir.Int32(M)), b.ICmp(enum.IPredSLT, col, ir.Int32(N)))
			idx := b.Select(q.in, b.Add(b.MulI(b.Wide(row), N), b.Wide(col)), ir.Int64(0))
			q.ptr = b.elemPtr(main, idx, 2)
			qs = append(qs, q)
		}
		for i := range qs {
			v := b.LoadAt(ir.Vec(2, ir.I32), qs[i].ptr, 8)
			w0, w1 := b.ExtractElement(v, 0), b.ExtractElement(v, 1)
			qs[i].old = [4]value.Value{b.BF16Lo(w0), b.BF16Hi(w0), b.BF16Lo(w1), b.BF16Hi(w1)}
		}
		for _, q := range qs {
			var s [4]value.Value
			for c := range s {
				s[c] = b.FAdd(q.old[c], q.acc[c])
			}
			b.If(q.in, func() {
				v := b.InsertElement(b.InsertElement(ir.Undef(ir.Vec(2, ir.I32)), b.PackBF16(s[0], s[1]), 0), b.PackBF16(s[2], s[3]), 1)
				b.StoreAt(v, q.ptr, 8)
			})
		}
	}
}
