package codegen

import (
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/layouts"
)

// The architecture-neutral part of a grouped GEMM: the work list a block
// walks (tiles of the list written by the scan, or BM-row blocks of a dense
// A, times column blocks), the (stage, phase) ring every pipeline shares,
// the gate/up layout of the B tile, and the epilogue of a work item. The
// atoms (atom_sm80.go, atom_sm90.go, atom_sm100.go) supply what differs per
// target: how a stage is laid out, loaded and multiplied, and where the
// accumulator lives.

// gemmWork is one work item of a grouped GEMM: a BM-row tile of one expert
// and one column block.
type gemmWork struct {
	e, row0, rowEnd, n0 value.Value // expert, first row, row bound, first output column (i32)
	tile                value.Value // the row tile's index in the tile list (or among the dense rows' tiles)
	// split and kt0 (GemmSpec.SplitK; nil without): the item's part of
	// the reduction and its first K block.
	split, kt0 value.Value
}

// workList is the persistent walk over the work items of a grouped GEMM:
// block blockIdx.x takes items blockIdx.x, +gridDim.x, ... of items (tile
// it/nBlocks of the list or of the dense rows, column block it%nBlocks).
// Every role of a block walks the same sequence, so rings continue from
// item to item.
//
// With GemmSpec.QueueItems (q set) the walk is dynamic: items first and
// first+step, then the numbers the producer's lead thread (writer, set on
// its copy of the list) takes from the queue and hands out through q.
type workList struct {
	spec                      GemmSpec
	bm, bn, nBlocks           int
	tiles, items, first, step value.Value // row tiles; item count; this block's first item and stride
	q                         *itemRing   // the item ring (nil: the fixed walk)
	writer                    value.Value // i1: the calling thread takes the items and fills q (nil: it reads q)
	// lane0 (i1: lane 0 of the calling warp) makes lane 0 the warp's only
	// reader of q: it waits on the slot and loads the entry, and shfl.sync
	// over the full mask gives it to the other lanes, so all 32 lanes of
	// the warp must walk together. Set on the consumers' copy, whose warps
	// release the GEMM's stages by lane 0's arrival alone (see itemRing).
	lane0 value.Value
	// rank is the CTA's rank in a 2-CTA cluster whose CTAs walk the
	// items together (newPairWork; nil: none): an item is then a row tile
	// and a pair of neighbouring column blocks (bn and nBlocks the pair's),
	// of which the CTA takes the rank-th, rankBN columns wide.
	rank   value.Value
	rankBN int
}

// newPairWork emits the walk of a 2-CTA cluster (Tile.Cluster = 2,
// nBlocks even) over spec's items of bm x bn tiles: the cluster's items,
// numbered from its index in the grid (%clusterid.x) with the cluster
// count as stride, each a row tile and a pair of column blocks 2c, 2c+1,
// of which CTA rank r takes block 2c+r. Both CTAs decode the same tile at
// the same step of their walks.
func newPairWork(b *Builder, spec GemmSpec, bm, bn, nBlocks int) workList {
	wl := workList{spec: spec, bm: bm, bn: 2 * bn, nBlocks: nBlocks / 2, rank: b.ClusterCTARank(), rankBN: bn}
	wl.tiles, wl.items = gemmItems(b, spec, bm, wl.nBlocks)
	wl.first, wl.step = b.ClusterID(), b.ClusterCount()
	return wl
}

// newWorkList emits the item count and the block's first item and stride.
func newWorkList(b *Builder, spec GemmSpec, bm, bn, nBlocks int) workList {
	wl := workList{spec: spec, bm: bm, bn: bn, nBlocks: nBlocks}
	wl.tiles, wl.items = gemmItems(b, spec, bm, nBlocks)
	wl.first, wl.step = b.BlockIdx(ir.X), b.GridDim(ir.X)
	return wl
}

// kTiles is the K loop's length of each work item: the K blocks of BK
// (the tile's reduction per stage), divided among the SplitK parts.
func kTiles(s GemmSpec, bk int) int { return (s.K + bk - 1) / bk / s.splits() }

// each emits the loop over the block's work items, carrying vars from
// item to item (init: their values before the first); body gets the
// decoded item and returns the vars for the next.
func (wl workList) each(b *Builder, init []value.Value, body func(w gemmWork, v []value.Value) []value.Value) []value.Value {
	return wl.walk(b, init, func(it value.Value, _ func() value.Value, v []value.Value) []value.Value {
		return body(wl.decode(b, it), v)
	})
}

// walk emits the loop over the block's item numbers: body gets the
// current one and a function emitting the block's next (items or more
// after the last). The fixed walk steps by gridDim.x; the dynamic one (q)
// is itemRing.walk's.
func (wl workList) walk(b *Builder, init []value.Value, body func(it value.Value, next func() value.Value, v []value.Value) []value.Value) []value.Value {
	if wl.q != nil {
		return wl.q.walk(b, wl, init, body)
	}
	return b.Loop(wl.first, wl.items, wl.step, init, func(it value.Value, v []value.Value) []value.Value {
		return body(it, func() value.Value { return b.Add(it, wl.step) }, v)
	})
}

// decode emits the decoding of work item it (gemmDecode).
// With SplitK = S the items are S rounds of the tiles' items: item it is
// part it / (tiles*nBlocks) of item it % (tiles*nBlocks).
func (wl workList) decode(b *Builder, it value.Value) gemmWork {
	if wl.rank != nil {
		w := gemmDecode(b, wl.spec, it, wl.tiles, wl.bm, wl.bn, wl.nBlocks)
		w.n0 = b.Add(w.n0, b.MulI(wl.rank, int64(wl.rankBN)))
		return w
	}
	if wl.spec.splits() == 1 {
		return gemmDecode(b, wl.spec, it, wl.tiles, wl.bm, wl.bn, wl.nBlocks)
	}
	per := b.MulI(wl.tiles, int64(wl.nBlocks))
	w := gemmDecode(b, wl.spec, b.URem(it, per), wl.tiles, wl.bm, wl.bn, wl.nBlocks)
	w.split = b.UDiv(it, per)
	w.kt0 = b.MulI(w.split, int64(kTiles(wl.spec, wl.spec.Tile.BK)))
	return w
}

// eachAhead is each with the block's next work item decoded beside the
// current one (the current one again when it is the block's last), for a
// role that loads ahead across items.
func (wl workList) eachAhead(b *Builder, init []value.Value, body func(w, next gemmWork, v []value.Value) []value.Value) []value.Value {
	return wl.walk(b, init, func(it value.Value, next func() value.Value, v []value.Value) []value.Value {
		n := next()
		n = b.Select(b.ICmp(enum.IPredSLT, n, wl.items), n, it)
		return body(wl.decode(b, it), wl.decode(b, n), v)
	})
}

// ahead emits the work item and K block d blocks after block kt of item
// w along the block's walk (next: the item after w, from eachAhead; d <=
// kTiles, the K loop's length), for a role that loads ahead across items.
func (wl workList) ahead(b *Builder, w, next gemmWork, kt value.Value, d, kTiles int) (gemmWork, value.Value) {
	ka := b.AddI(kt, int64(d))
	in := b.ICmp(enum.IPredSLT, ka, ir.Int32(int64(kTiles)))
	sel := func(x, y value.Value) value.Value { return b.Select(in, x, y) }
	a := gemmWork{e: sel(w.e, next.e), row0: sel(w.row0, next.row0), rowEnd: sel(w.rowEnd, next.rowEnd), n0: sel(w.n0, next.n0)}
	if w.split != nil {
		a.split, a.kt0 = sel(w.split, next.split), sel(w.kt0, next.kt0)
	}
	return a, sel(ka, b.AddI(ka, -int64(kTiles)))
}

// itemRing is the shared-memory ring of a QueueItems GEMM's block
// (GemmSpec.QueueItems, layouts.GemmConfig.ItemSlots). A block runs the
// fixed walk's first R items (first + i*step, i < R, R = fixedRounds:
// every round of the fixed walk but its last, at least two) and takes
// every later one from the queue: the fixed order, whose consecutive items
// (a GroupM group's row tiles of one weight column block) run on
// consecutive blocks at the same time and share their B tile in L2, for
// most of the kernel, and a dynamic tail. Entry e >= 0 of the ring (the
// block's item R+e, the number R*gridDim.x plus the queue word's old
// value) lies in slot e mod slots: an mbarrier of one arrival, completed
// once per entry, and the u32 number. The writer (the producer's lead
// thread) takes entry e from the queue word by an atomic add when it
// starts item R+e-1 (the add's latency falls on the producer, a ring of
// stages ahead of the consumers), stores it and arrives on its slot's
// mbarrier; every other thread that walks waits on the slot's phase of
// parity (e/slots)&1 and loads the number. An entry of items or more ends
// the walk; numbers only grow and start past every fixed item, so once a
// block takes one, every later take is past the end too: no item is lost
// or taken twice.
//
// The writer rewrites a slot only after every thread has read it: each
// reader's load is to come before the rewrite through arrivals on the
// barriers the writer waits on, directly or through the roles between them
// (mbarrier.arrive has release semantics, and mbarrier.try_wait acquire
// semantics, at CTA scope by default: PTX ISA, "mbarrier.arrive",
// "mbarrier.test_wait/mbarrier.try_wait"). A consumer warp releases the
// ring's stages by lane 0's arrival alone, which orders lane 0's loads but
// not the other lanes', so in a consumer warp lane 0 alone loads the entry
// and hands it to the other lanes by shfl.sync (workList.lane0); racecheck
// reported the other lanes' loads as hazards with a slot's rewrite before
// (docs/runs/run56/call1). The producer's threads that copy rows by
// cp.async (BTable, a gathering bf16 producer) each load the entry and
// arrive on a stage only by cp.async.mbarrier.arrive.noinc, whose order
// for the thread's earlier loads the PTX ISA does not state. The writer
// starts item j (and writes item j+1's entry) once it has issued every
// stage of item j-1, which needs the consumers to have released every
// stage but the last S of it (S the ring's stages, each item at least one
// K block), so the consumers (and the producer's other warps, which arrive
// on every stage before the consumers take it) have started item j-1-S (a
// role reads item i+1's entry when it starts item i). The staged
// epilogue's store warps follow the consumers' K loop by up to two items
// (the consumers release item m's stages before they wait for the staging
// tile of item m-1), so they have started item j-3-S. With slots = S+4
// (itemSlots) the slot of item j+1's entry last held item j-S-3's, which
// every role read when it started item j-S-4: it is free (one item to
// spare), and no reader waits on a phase two rounds back.
type itemRing struct {
	slots int
	at    value.Value // i32 shared address of the first slot's mbarrier
	words kernelQueue // gemmQueueWords: the next number taken, the blocks done
}

// itemSlots is the item ring's slots for spec (layouts.ItemSlots of its
// stages with QueueItems, else 0; see itemRing).
func itemSlots(s GemmSpec) int {
	if !s.QueueItems {
		return 0
	}
	return layouts.ItemSlots(s.Tile.Stages)
}

// initBars emits the initialisation of the slots' mbarriers (one arrival
// each) by the calling thread (mbarRing.init's extra).
func (q *itemRing) initBars(b *Builder) {
	if q == nil {
		return
	}
	for i := range q.slots {
		b.MbarInit(b.AddI(q.at, int64(8*i)), 1)
	}
}

// slot returns entry e's mbarrier, its number's shared address and the
// parity of the phase that completes when it is stored (e >= 0).
func (q *itemRing) slot(b *Builder, e value.Value) (bar, num, parity value.Value) {
	s := b.URem(e, ir.Int32(int64(q.slots)))
	bar = b.Add(q.at, b.MulI(s, 8))
	num = b.Add(b.AddI(q.at, int64(8*q.slots)), b.MulI(s, 4))
	return bar, num, b.And(b.UDiv(e, ir.Int32(int64(q.slots))), ir.Int32(1))
}

// fixedRounds emits R, the block's items taken by the fixed walk: the
// fixed walk's full rounds but the last, items/gridDim.x - 1, and at
// least two (see itemRing).
func fixedRounds(b *Builder, wl workList) value.Value {
	r := b.AddI(b.UDiv(wl.items, wl.step), -1)
	return b.Select(b.ICmp(enum.IPredSGT, r, ir.Int32(2)), r, ir.Int32(2))
}

// take emits the writer's atomic add on the queue word: the next item
// number, fixed (R*gridDim.x, the first past every fixed item) plus the
// word's old value.
func (q *itemRing) take(b *Builder, fixed value.Value) value.Value {
	return b.Add(fixed, b.AtomicAdd(q.words.word(b, 0), ir.Int32(1)))
}

// walk is workList.walk over the ring (see itemRing): it carries the
// item and its index j in the block's walk; item j+1 is first+(j+1)*step
// while j+1 < R, else entry e = j+1-R of the ring. After the loop the
// writer counts the block done, the last block zeroing the words
// (kernelQueue.leave).
func (q *itemRing) walk(b *Builder, wl workList, init []value.Value, body func(it value.Value, next func() value.Value, v []value.Value) []value.Value) []value.Value {
	r := fixedRounds(b, wl)
	fixed := b.Mul(r, wl.step)
	start := append([]value.Value{wl.first, b.Sub(ir.Int32(1), r)}, init...)
	out := b.While(start, func(v []value.Value) value.Value { return b.ICmp(enum.IPredSLT, v[0], wl.items) }, func(v []value.Value) []value.Value {
		it, e := v[0], v[1] // e: the entry of the block's next item
		queued := b.ICmp(enum.IPredSGE, e, ir.Int32(0))
		if wl.writer != nil {
			b.If(b.And(wl.writer, queued), func() {
				bar, num, _ := q.slot(b, e)
				b.StoreAt(q.take(b, fixed), sharedPtr(b, num), 4)
				b.MbarArrive(bar)
			})
		}
		next := b.IfElseVals(queued, func() []value.Value {
			read := func() []value.Value {
				bar, num, parity := q.slot(b, e)
				b.MbarWait(bar, parity)
				return []value.Value{b.LoadAt(ir.I32, sharedPtr(b, num), 4)}
			}
			if wl.lane0 == nil {
				return read()
			}
			return []value.Value{b.shflIdx(b.IfVals(wl.lane0, []value.Value{ir.Int32(0)}, read)[0], ir.Int32(0))}
		}, func() []value.Value { return []value.Value{b.Add(it, wl.step)} })[0]
		return append([]value.Value{next, b.AddI(e, 1)}, body(it, func() value.Value { return next }, v[2:])...)
	})
	if wl.writer != nil {
		b.If(wl.writer, func() { q.words.leave(b, 1, wl.step) })
	}
	return out[2:]
}

// gemmItems emits the row-tile count of a persistent grouped GEMM with bm
// rows per tile, *ntiles (ATiled) or ceil(rows/bm) (ADense), and its
// work-item count, tiles times the nBlocks column blocks (times SplitK).
func gemmItems(b *Builder, s GemmSpec, bm, nBlocks int) (tiles, items value.Value) {
	if s.A == ATiled {
		tiles = b.LoadAt(ir.I32, b.Param("ntiles"), 4)
	} else {
		tiles = b.UDiv(b.AddI(b.Param("rows"), int64(bm-1)), ir.Int32(int64(bm)))
	}
	return tiles, b.MulI(tiles, int64(nBlocks*s.splits()))
}

// gemmDecode emits the decoding of work item it of tiles row tiles: tile
// it/nBlocks, column block it%nBlocks. With Tile.GroupM = G > 0 the row
// tiles form groups of at most G consecutive tiles of one expert (an
// expert's R tiles: groups of G from its first, the last of R mod G), and
// the items of a group of gsize tiles starting at tile t0 are items
// t0*nBlocks.. (t0+gsize)*nBlocks-1, row tiles fastest: r = it - t0*nBlocks
// is column block r/gsize of tile t0 + r%gsize. The group of item it is
// that of tile it/nBlocks, whose index k within its expert (from the work
// list's first row and offsets) gives t0 = it/nBlocks - k%G. A group never
// spans experts, so an expert with one row tile runs its column blocks in
// order, as with G = 0 (a bijection of each group's items onto its tiles
// and blocks; TestGroupedItems). Dense rows are one expert.
func gemmDecode(b *Builder, s GemmSpec, it, tiles value.Value, bm, bn, nBlocks int) gemmWork {
	var t, nb value.Value
	if g := int64(s.Tile.GroupM); g > 0 && s.A == ATiled {
		q := b.UDiv(it, ir.Int32(int64(nBlocks))) // a tile of the item's group
		qp := b.ByteOffset(b.Param("tiles"), b.MulI(b.Wide(q), 8))
		e := b.LoadAt(ir.I32, qp, 4)
		first := b.LoadAt(ir.I32, b.ByteOffset(b.Param("offsets"), b.MulI(b.Wide(e), 4)), 4)
		end := b.LoadAt(ir.I32, b.ByteOffset(b.Param("offsets"), b.MulI(b.Wide(b.AddI(e, 1)), 4)), 4)
		k := b.UDiv(b.Sub(b.LoadAt(ir.I32, b.ByteOffsetC(qp, 4), 4), first), ir.Int32(int64(bm)))
		R := b.UDiv(b.AddI(b.Sub(end, first), int64(bm-1)), ir.Int32(int64(bm)))
		kin := b.URem(k, ir.Int32(g))
		t0 := b.Sub(q, kin)
		left := b.Sub(R, b.Sub(k, kin))
		gsize := b.Select(b.ICmp(enum.IPredSLT, left, ir.Int32(g)), left, ir.Int32(g))
		r := b.Sub(it, b.MulI(t0, int64(nBlocks)))
		nb = b.UDiv(r, gsize)
		t = b.Add(t0, b.URem(r, gsize))
	} else if g > 0 {
		per := g * int64(nBlocks)
		first := b.MulI(b.UDiv(it, ir.Int32(per)), g)
		r := b.URem(it, ir.Int32(per))
		left := b.Sub(tiles, first)
		gsize := b.Select(b.ICmp(enum.IPredSLT, left, ir.Int32(g)), left, ir.Int32(g))
		nb = b.UDiv(r, gsize)
		t = b.Add(first, b.URem(r, gsize))
	} else {
		t = b.UDiv(it, ir.Int32(int64(nBlocks)))
		nb = b.URem(it, ir.Int32(int64(nBlocks)))
	}
	w := gemmWork{tile: t}
	w.n0 = b.MulI(nb, int64(bn))
	if s.A == ATiled {
		q := b.ByteOffset(b.Param("tiles"), b.MulI(b.Wide(t), 8))
		w.e = b.LoadAt(ir.I32, q, 4)
		w.row0 = b.LoadAt(ir.I32, b.ByteOffsetC(q, 4), 4)
		w.rowEnd = b.LoadAt(ir.I32, b.ByteOffset(b.Param("offsets"), b.MulI(b.Wide(b.AddI(w.e, 1)), 4)), 4)
	} else {
		w.e = ir.Int32(0)
		w.row0 = b.MulI(t, int64(bm))
		w.rowEnd = b.Param("rows")
	}
	return w
}

// gemmEpilogue is the shared Epilogue of work item w: C, the bias row of
// w's expert (fp32 [BRows], when the spec has a bias), rows below w.rowEnd;
// with SplitK, C of w's part (f32, rows * N elements per part).
func gemmEpilogue(b *Builder, spec GemmSpec, w gemmWork) *Epilogue {
	var bias value.Value
	if spec.Bias {
		bias = b.ByteOffset(b.Param("bias"), b.MulI(b.Wide(w.e), int64(4*spec.BRows())))
	}
	c := b.Param("c")
	if w.split != nil {
		c = b.ByteOffset(c, b.MulI(b.Mul(b.Wide(w.split), b.Wide(b.Param("rows"))), int64(4*spec.N)))
	}
	return NewEpilogue(spec, EpilogueArgs{C: c, Bias: bias, RowEnd: w.rowEnd})
}

// persistentGrid is the block count of a persistent engine kernel: t.Grid, or
// def (the target's SM count) times t's blocks per SM when it is 0.
func persistentGrid(t Tile, def int) Expr { return Const(int64(gridCTAs(t, def))) }

// gridCTAs is the CTA count of a persistent engine kernel: t.Grid, or def
// (the target's SM count) times the blocks per SM when it is 0.
func gridCTAs(t Tile, def int) int {
	if t.Grid > 0 {
		return t.Grid
	}
	return def * blocksPerSM(t)
}

// blocksPerSM is t.BlocksPerSM, 1 for its zero value.
func blocksPerSM(t Tile) int { return max(1, t.BlocksPerSM) }

// ringNext advances a (stage, phase) pair of an S-stage ring: the phase
// parity flips each time the stage wraps to 0.
func ringNext(b *Builder, stage, phase value.Value, S int) (value.Value, value.Value) {
	n := b.AddI(stage, 1)
	wrap := b.ICmp(enum.IPredEQ, n, ir.Int32(int64(S)))
	return b.Select(wrap, ir.Int32(0), n), b.Select(wrap, b.Xor(phase, ir.Int32(1)), phase)
}

// mbarRing is the pair of mbarrier arrays guarding an S-stage ring in shared
// memory: full[s] at bars + 8s (the stage holds data), empty[s] at
// bars + 8(S+s) (its readers are done).
type mbarRing struct {
	bars value.Value // i32 shared address of full[0]
	S    int
}

// inval ends a phase of a persistent kernel that initialised r: once
// every thread of the block has reached it (bar.sync), thread tid 0
// invalidates r's full and empty barriers, then runs more (nil: nothing;
// the phase's other mbarriers), so that the next phase may initialise
// barriers of its own in the same shared memory (PTX ISA,
// "mbarrier.inval").
func (r mbarRing) inval(b *Builder, tid value.Value, more func()) {
	b.SyncThreads()
	b.If(b.ICmp(enum.IPredEQ, tid, ir.Int32(0)), func() {
		for s := range 2 * r.S {
			b.MbarInval(b.AddI(r.bars, int64(8*s)))
		}
		if more != nil {
			more()
		}
	})
}

// full is the shared address of full[stage] (i32).
func (r mbarRing) full(b *Builder, stage value.Value) value.Value {
	return b.Add(r.bars, b.MulI(stage, 8))
}

// empty is the shared address of empty[stage] (i32).
func (r mbarRing) empty(b *Builder, stage value.Value) value.Value {
	return b.Add(r.bars, b.AddI(b.MulI(stage, 8), int64(8*r.S)))
}

// init emits, in thread 0, the initialisation of the ring's barriers
// (full[s] expecting fullCount arrivals, empty[s] emptyCount), then extra
// (the atom's other barriers; nil: none), the mbarrier-init fence and the
// prefetch of the tensor maps tmA and tmB (nil: none).
func (r mbarRing) init(b *Builder, tid value.Value, fullCount, emptyCount int, extra func(), tmA, tmB value.Value) {
	b.If(b.ICmp(enum.IPredEQ, tid, ir.Int32(0)), func() {
		r.initBars(b, fullCount, emptyCount)
		if extra != nil {
			extra()
		}
		b.FenceMbarInit()
		if tmA != nil {
			b.PrefetchTensorMap(tmA)
		}
		if tmB != nil {
			b.PrefetchTensorMap(tmB)
		}
	})
}

// initBars emits the initialisation of the ring's barriers (full[s]
// expecting fullCount arrivals, empty[s] emptyCount) by the calling thread.
func (r mbarRing) initBars(b *Builder, fullCount, emptyCount int) {
	for s := 0; s < r.S; s++ {
		b.MbarInit(b.AddI(r.bars, int64(8*s)), fullCount)
		b.MbarInit(b.AddI(r.bars, int64(8*(r.S+s))), emptyCount)
	}
}

// bTile is the gate/up layout of a GEMM's B tile (layouts.GateUp): plain,
// gate and up halves, or interleaved (gate, up) row pairs.
func (s GemmSpec) bTile() layouts.GateUp {
	switch {
	case s.Epilogue != EpiGated:
		return layouts.GateUpNone
	case s.Gate == GateInterleaved:
		return layouts.GateUpInterleaved
	}
	return layouts.GateUpHalves
}

// bTileRows is the B-tile rows of one CTA: BN, or 2*BN (gate and up) for
// a gated GEMM; the MMA's N.
func (s GemmSpec) bTileRows() int {
	if s.Epilogue == EpiGated {
		return 2 * s.Tile.BN
	}
	return s.Tile.BN
}

// zerosF32 returns n float 0.0 constants.
func zerosF32(n int) []value.Value {
	z := make([]value.Value, n)
	for i := range z {
		z[i] = constant.NewFloat(types.Float, 0)
	}
	return z
}

// joinErr keeps the first non-nil error.
func joinErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
