package codegen

import (
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"

	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/layouts"
)

// sm80Chunk is one 16-byte cp.async chunk a thread copies in every stage,
// fixed for the whole K loop.
type sm80Chunk struct {
	sOff     value.Value // i64 byte offset inside the stage
	gAddr    value.Value // i64 global address of the chunk at kt = 0
	rowOK    value.Value // i1: the chunk's row (N-major B: its columns) exists
	kElem    value.Value // i32 first (N-major B: only) k of the chunk inside a K block
	fallback value.Value // i64 an in-bounds address for masked chunks
	kStep    int64       // global bytes from one K block to the next
}

// sm80Loader is the cp.async side of the sm_80 ring: each thread owns
// aChunks + bChunks 16-byte chunks of a stage.
type sm80Loader struct {
	l        sm80Layout
	b        *Builder
	smemAddr value.Value // i64 address of stage 0
	chunks   []sm80Chunk
}

// loader emits the chunk addresses of the calling thread: chunk i of A
// (then of B) is chunk tid + i*threads of the tile's rows of BK/8 chunks,
// stored at its PaddedTile offset; B rows follow the gate/up layout
// (layouts.GateUpRows, sm_80: gate and up rows interleaved in the tile).
// An N-major B's chunks are those of its BK lines of BNB/8 chunks (8
// columns of one k each).
func (l sm80Layout) loader(b *Builder, tid value.Value, w gemmWork, bBase, smemAddr value.Value) *sm80Loader {
	ld := &sm80Loader{l: l, b: b, smemAddr: smemAddr}
	K := int64(l.k)
	cpr := int64(l.chunksPerRow)
	rb := int64(l.a.RowBytes())
	aFallback := b.PtrToInt(b.Param("a"))
	bFallback := b.PtrToInt(bBase)
	for i := 0; i < l.aChunks+l.bChunks; i++ {
		isA := i < l.aChunks
		idx := i
		if !isA {
			idx = i - l.aChunks
		}
		c := b.AddI(tid, int64(idx*l.threads))
		if !isA && l.bMN {
			ld.chunks = append(ld.chunks, l.chunkMN(b, c, w.n0, bFallback))
			continue
		}
		r := b.UDiv(c, ir.Int32(cpr))
		kc := b.URem(c, ir.Int32(cpr))
		kByte := b.MulI(b.Wide(kc), 16)
		ch := sm80Chunk{kElem: b.MulI(kc, 8), kStep: int64(l.BK) * 2}
		var grow value.Value
		if isA {
			ch.sOff = b.Add(b.MulI(b.Wide(r), rb), kByte)
			grow = b.Add(w.row0, r)
			ch.rowOK = b.ICmp(enum.IPredSLT, grow, w.rowEnd)
			ch.fallback = aFallback
		} else {
			ch.sOff = b.Add(ir.Int64(int64(l.a.Bytes())), b.Add(b.MulI(b.Wide(r), rb), kByte))
			grow, ch.rowOK = l.bRow(b, w.n0, r)
			ch.fallback = bFallback
		}
		ch.gAddr = b.Add(ch.fallback, b.Add(b.MulI(b.Wide(grow), K*2), kByte))
		ld.chunks = append(ld.chunks, ch)
	}
	return ld
}

// chunkMN is chunk c of an N-major B stage: line c/(BNB/8) (k), columns
// n0 + 8*(c%(BNB/8)).. of B_e [K, N], at its MN-major PaddedTile offset.
func (l sm80Layout) chunkMN(b *Builder, c, n0, bBase value.Value) sm80Chunk {
	cpl := int64(l.BNB / 8)
	kr := b.UDiv(c, ir.Int32(cpl))
	col := b.Add(n0, b.MulI(b.URem(c, ir.Int32(cpl)), 8))
	ch := sm80Chunk{kElem: kr, fallback: bBase, kStep: int64(l.BK) * int64(l.n) * 2,
		rowOK: b.ICmp(enum.IPredSLT, col, ir.Int32(int64(l.n)))}
	ch.sOff = b.Add(ir.Int64(int64(l.a.Bytes())), b.Add(b.MulI(b.Wide(kr), int64(l.bLine)), b.MulI(b.Wide(b.URem(c, ir.Int32(cpl))), 16)))
	ch.gAddr = b.Add(bBase, b.Add(b.MulI(b.Wide(kr), int64(l.n)*2), b.MulI(b.Wide(col), 2)))
	return ch
}

// bRow emits the row of B_e that B-tile row r holds, and whether it exists.
func (l sm80Layout) bRow(b *Builder, n0, r value.Value) (grow, ok value.Value) {
	switch l.gate {
	case layouts.GateUpNone:
		grow = b.Add(n0, r)
		ok = b.ICmp(enum.IPredSLT, grow, ir.Int32(int64(l.n)))
	case layouts.GateUpInterleaved:
		grow = b.Add(b.MulI(n0, 2), r)
		ok = b.ICmp(enum.IPredSLT, grow, ir.Int32(int64(2*l.n)))
	default: // halves: smem row 2j gate, 2j+1 up
		j := b.Add(n0, b.LShr(r, ir.Int32(1)))
		odd := b.And(r, ir.Int32(1))
		grow = b.Add(j, b.MulI(odd, int64(l.n)))
		ok = b.ICmp(enum.IPredSLT, j, ir.Int32(int64(l.n)))
	}
	return grow, ok
}

// load issues the cp.async of K block kt (i32) into stage st (i32).
func (ld *sm80Loader) load(kt, st value.Value) {
	b, l := ld.b, ld.l
	stBase := b.Add(ld.smemAddr, b.MulI(b.Wide(st), int64(l.smem.StageBytes)))
	kBytes := map[int64]value.Value{} // kt * kStep, once per distinct step
	for _, ch := range ld.chunks {
		if _, ok := kBytes[ch.kStep]; !ok {
			kBytes[ch.kStep] = b.MulI(b.Wide(kt), ch.kStep)
		}
	}
	kFirst := b.MulI(kt, int64(l.BK))
	for _, ch := range ld.chunks {
		ok := b.And(ch.rowOK, b.ICmp(enum.IPredSLT, b.Add(kFirst, ch.kElem), ir.Int32(int64(l.k))))
		src := b.Select(ok, b.Add(ch.gAddr, kBytes[ch.kStep]), ch.fallback)
		size := b.Select(ok, ir.Int32(16), ir.Int32(0))
		b.CpAsync16(b.Add(stBase, ch.sOff), src, size)
	}
}

// commit closes the thread's cp.async group (one stage).
func (ld *sm80Loader) commit() { ld.b.cpAsyncCommit() }

// waitGroup waits until at most n of the thread's cp.async groups are pending.
func (ld *sm80Loader) waitGroup(n int) {
	ld.b.cpAsyncWait(n)
}

// sm80WarpTile is a warp's MT x NT tile of the block tile and its lanes'
// ldmatrix addresses.
type sm80WarpTile struct {
	mRow0, nRow0 value.Value // first A row and first B-tile row of the warp tile (i32)
	aLane, bLane value.Value // i64 byte offsets in a stage of the lane's ldmatrix rows
}

// warpTile emits the warp tile origin and the per-lane ldmatrix offsets in
// the PaddedTiles: A lane l addresses row l%16, k 8*(l/16); B lane l
// addresses row 8*(l/16) + l%8, k 8*((l/8)%2).
func (l sm80Layout) warpTile(b *Builder, lane, warp value.Value) sm80WarpTile {
	var t sm80WarpTile
	wm := b.UDiv(warp, ir.Int32(int64(l.WN)))
	wn := b.URem(warp, ir.Int32(int64(l.WN)))
	t.mRow0 = b.MulI(wm, int64(l.MT))
	t.nRow0 = b.MulI(wn, int64(l.NT))
	rb := int64(l.a.RowBytes())
	t.aLane = b.Add(b.MulI(b.Wide(b.Add(t.mRow0, b.And(lane, ir.Int32(15)))), rb), b.MulI(b.Wide(b.LShr(lane, ir.Int32(4))), 16))
	if l.bMN {
		// ldmatrix .trans (layouts.PaddedTile.LdmatrixX4Offsets): lane l
		// gives line 8*((l/8)%2) + l%8, columns nRow0 + 8*(l/16)..
		line := b.Add(b.MulI(b.And(b.LShr(lane, ir.Int32(3)), ir.Int32(1)), 8), b.And(lane, ir.Int32(7)))
		col := b.Add(t.nRow0, b.MulI(b.LShr(lane, ir.Int32(4)), 8))
		t.bLane = b.Add(ir.Int64(int64(l.a.Bytes())), b.Add(b.MulI(b.Wide(line), int64(l.bLine)), b.MulI(b.Wide(col), 2)))
		return t
	}
	bRowL := b.Add(t.nRow0, b.Add(b.MulI(b.LShr(lane, ir.Int32(4)), 8), b.And(lane, ir.Int32(7))))
	t.bLane = b.Add(ir.Int64(int64(l.a.Bytes())), b.Add(b.MulI(b.Wide(bRowL), rb), b.MulI(b.Wide(b.And(b.LShr(lane, ir.Int32(3)), ir.Int32(1))), 16)))
	return t
}

// fragments is the warp tile in m16n8 fragments: mFr x nFr.
func (l sm80Layout) fragments() (mFr, nFr int) { return l.MT / 16, l.NT / 8 }

// mainloop emits the K loop: wait for stage kt, multiply it, refill the
// stage S-1 ahead. Returns the mFr*nFr*4 accumulators (fragment (mi, nj) at
// 4*(mi*nFr+nj)).
func (l sm80Layout) mainloop(b *Builder, ld *sm80Loader, wt sm80WarpTile) []value.Value {
	mFr, nFr := l.fragments()
	acc := b.Loop(ir.Int32(0), ir.Int32(int64(l.kTiles)), ir.Int32(1), zerosF32(mFr*nFr*4), func(kt value.Value, acc []value.Value) []value.Value {
		ld.waitGroup(l.S - 2)
		b.SyncThreads()
		st := b.URem(kt, ir.Int32(int64(l.S)))
		stBase := b.Add(ld.smemAddr, b.MulI(b.Wide(st), int64(l.smem.StageBytes)))
		out := make([]value.Value, len(acc))
		copy(out, acc)
		for kk := 0; kk < l.BK/16; kk++ {
			l.mmaStep(b, stBase, wt, kk, out)
		}
		next := b.AddI(kt, int64(l.S-1))
		b.If(b.ICmp(enum.IPredSLT, next, ir.Int32(int64(l.kTiles))), func() {
			ld.load(next, b.URem(next, ir.Int32(int64(l.S))))
		})
		ld.commit()
		return out
	})
	return acc
}

// mmaStep emits k16 step kk of a stage at stBase: ldmatrix.x4 of the warp's
// A and B fragments, then mma.sync into acc (updated in place). ldmatrix
// and mma.sync touch registers (ldmatrix reads stages that
// cp.async.wait_group and bar.sync order): no memory clobber.
func (l sm80Layout) mmaStep(b *Builder, stBase value.Value, wt sm80WarpTile, kk int, acc []value.Value) {
	mFr, nFr := l.fragments()
	rb := int64(l.a.RowBytes())
	ldsm := func(off value.Value, at int64) [4]value.Value {
		return b.ldmatrixX4(b.Add(stBase, b.Add(off, ir.Int64(at))), false)
	}
	aFr := make([][4]value.Value, mFr)
	for mi := 0; mi < mFr; mi++ {
		aFr[mi] = ldsm(wt.aLane, int64(mi*16)*rb+int64(kk*32))
	}
	bFr := make([][2]value.Value, nFr)
	for nj := 0; nj < nFr; nj += 2 {
		var r [4]value.Value
		if l.bMN { // k16 step kk is lines 16kk.., columns 8nj.. bytes 16nj..
			r = b.ldmatrixX4(b.Add(stBase, b.Add(wt.bLane, ir.Int64(int64(kk*16*l.bLine+nj*16)))), true)
		} else {
			r = ldsm(wt.bLane, int64(nj*8)*rb+int64(kk*32))
		}
		bFr[nj], bFr[nj+1] = [2]value.Value{r[0], r[1]}, [2]value.Value{r[2], r[3]}
	}
	for mi := 0; mi < mFr; mi++ {
		for nj := 0; nj < nFr; nj++ {
			b.mmaBF16(aFr[mi], bFr[nj], acc[(mi*nFr+nj)*4:][:4])
		}
	}
}

// epilogue stores the accumulators through the shared Epilogue: fragment
// (mi, nj) holds rows g, g+8 (g = lane/4) and B-tile columns 2*(lane%4), +1
// of the m16n8 block; for gated GEMMs that pair is (gate, up) of output
// column n0 + colB/2.
func (l sm80Layout) epilogue(b *Builder, spec GemmSpec, w gemmWork, wt sm80WarpTile, lane, biasRow value.Value, acc []value.Value) error {
	mFr, nFr := l.fragments()
	ep := NewEpilogue(spec, EpilogueArgs{C: b.Param("c"), Bias: biasRow, RowEnd: w.rowEnd})
	g := b.LShr(lane, ir.Int32(2))
	q := b.And(lane, ir.Int32(3))
	for mi := 0; mi < mFr; mi++ {
		r0 := b.Add(w.row0, b.Add(wt.mRow0, b.AddI(g, int64(mi*16))))
		r1 := b.AddI(r0, 8)
		for nj := 0; nj < nFr; nj++ {
			base := (mi*nFr + nj) * 4
			colB := b.Add(wt.nRow0, b.AddI(b.MulI(q, 2), int64(nj*8))) // B-tile column of c0
			var col value.Value
			if l.gate != layouts.GateUpNone {
				col = b.Add(w.n0, b.LShr(colB, ir.Int32(1)))
			} else {
				col = b.Add(w.n0, colB)
			}
			if err := ep.Emit(b, r0, col, acc[base:base+2]); err != nil {
				return err
			}
			if err := ep.Emit(b, r1, col, acc[base+2:base+4]); err != nil {
				return err
			}
		}
	}
	b.Ret(nil)
	return nil
}
