package codegen

import (
	"fmt"

	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"

	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/layouts"
	"github.com/mokc/mokc/target"
)

// The load side of the TMA ring of the sm_90a and sm_100a atoms: the
// producer (TMA boxes by the B tile's gate/up layout) and, for weights in
// one allocation per expert, the cp.async copy of B into the same swizzled
// layout.

// tmaMaps emits the generic addresses of the kernel's tensor maps (tmB nil
// for BTable, tmA nil with GatherK) and the arrivals each full barrier
// expects: the producer's arrive.expect_tx, plus one cp.async arrival per
// copying thread for BTable and for GatherK (with MX the lanes of the
// codeWarps warps copy the gathered rows), plus (MX) one arrival per lane
// of the codeWarps warps staging the scale codes.
func tmaMaps(b *Builder, spec GemmSpec, copiers, codeWarps int) (tmA, tmB value.Value, fullCount int) {
	fullCount = 1
	switch {
	case spec.GatherK > 0 && spec.MX:
		fullCount += 32 * codeWarps // the code warps' lanes copying the gathered A rows (gatherChunkCopy)
	case spec.GatherK > 0:
		fullCount += copiers // the threads copying the gathered A rows (gatherCopy)
	default:
		tmA = b.PtrToInt(b.Param("tmap_a"))
	}
	if spec.B == BTable {
		fullCount += copiers
	} else {
		tmB = b.PtrToInt(b.Param("tmap_b"))
	}
	if spec.MX {
		fullCount += 32 * codeWarps // the lanes staging the scale codes
	}
	return tmA, tmB, fullCount
}

// gemmProducer emits the load side of the TMA ring shared by the sm_90a and
// sm_100a atoms: for every work item and K block, wait for the stage to
// be empty, then fill it (A with TMA; B with TMA, or with cp.async from the
// expert's allocation for BTable) and arrive on its full barrier.
type gemmProducer struct {
	tmaRing
	spec      GemmSpec
	threads   int // producer threads (BTable's and GatherK's copies use all of them)
	base      value.Value
	ring      mbarRing
	tmA, tmB  value.Value
	tableCopy bTableLoad
	// codeWarps is the number of the producer's warps staging the MX
	// scale codes (1 to 4; each takes the row groups of codeGroups, the
	// first warp's lane 0 also issues the TMA loads); tmaMaps counts
	// their lanes' arrivals.
	codeWarps int
	// rank is the CTA's rank in a 2-CTA cluster (newPairWork; nil:
	// none): the TMA thread loads the rank-th half of the A tile's rows
	// and multicasts it to both CTAs.
	rank value.Value
	// extraArrivals is the arrivals the TMA thread adds on each full
	// barrier beside its arrive.expect_tx: a chained kernel's second GEMM
	// loaded by TMA alone, after a first whose copying threads the
	// barriers count (GatherK).
	extraArrivals int
}

func newProducer(r tmaRing, spec GemmSpec, threads int, base value.Value, ring mbarRing, tmA, tmB value.Value) gemmProducer {
	return gemmProducer{tmaRing: r, spec: spec, threads: threads, base: base, ring: ring, tmA: tmA, tmB: tmB,
		tableCopy: bTableLoad{tmaRing: r, N: spec.N, K: spec.K, BRows: spec.BRows(), threads: threads}, codeWarps: 1}
}

// mxGroups is the number of 32-row groups of scale rows a stage's codes
// come in: the A tile's mxGroupsA, then the B tile's scaleRowsB()/32
// (rounded up; group g of lane l is A-tile row l+32g, or B-tile row
// l+32(g-mxGroupsA)).
func (p gemmProducer) mxGroups() int { return p.mxGroupsA() + (p.scaleRowsB()+31)/32 }

// mxGroupsA is the number of the A tile's 32-row groups of scale rows:
// BM/32, rounded up; none when A is bf16 (GemmSpec.MXRegisterFed).
func (p gemmProducer) mxGroupsA() int {
	if p.spec.MXRegisterFed {
		return 0
	}
	return (p.BM + 31) / 32
}

// codeGroups is the row groups warp wi of the codeWarps stages: g with
// codeWarps-1-g%codeWarps == wi, so the first warp (which also issues the
// TMA loads) has the fewest.
func (p gemmProducer) codeGroups(wi int) []int {
	var gs []int
	for g := range p.mxGroups() {
		if p.codeWarps-1-g%p.codeWarps == wi {
			gs = append(gs, g)
		}
	}
	return gs
}

// emit emits the producer loop for the calling thread (tid in
// 0..threads-1). With BTable every thread works; with MX the first
// 32*codeWarps (the scale codes; each warp its own copy of the loop with
// its row groups, codeGroups; with GatherK they also copy the A rows,
// gatherChunkCopy); with a bf16 GatherK every thread (the A rows,
// gatherCopy; tid 0 also issues B's TMA loads); else only tid 0. The other
// threads return. With next (a chained kernel's second GEMM) the threads
// that load it (tid 0, or an MXFP8 GEMM's code warps) go on to next's
// items, the ring's stage and phase continuing.
func (p gemmProducer) emit(b *Builder, tid value.Value, wl workList, next *chainedProducer) error {
	var err error
	lead := b.ICmp(enum.IPredEQ, tid, ir.Int32(0))
	if wl.q != nil {
		wl.writer = lead // the lead takes the work items from the queue
	}
	if next != nil && (p.spec.B == BTable || next.p.spec.B == BTable || next.p.spec.GatherK > 0 || p.spec.MX != next.p.spec.MX ||
		p.spec.MX && (p.spec.GatherK > 0 || p.codeWarps != next.p.codeWarps)) {
		return fmt.Errorf("codegen: %s: a chained kernel's producer loads the second GEMM's tiles by TMA, in the first's precision (MXFP8: the same code warps, the first not gathering)", p.spec.Name)
	}
	// first runs the calling thread's loop over wl; then goes on to next's
	// items (none without next) from its final stage and phase (an MX
	// loop drains its code copies, cpAsyncWait(0): the second starts at
	// code slot 0).
	first := func(tma bool, copier value.Value, gs []int) []value.Value {
		v, e := p.loop(b, tid, lead, wl, tma, copier, gs, nil)
		err = joinErr(err, e)
		return v
	}
	then := func(v []value.Value, tma bool, copier value.Value, gs []int) {
		if next == nil {
			return
		}
		if p.spec.MX {
			v = []value.Value{v[0], v[1], ir.Int32(0)}
		}
		b.phaseMark(1, false)
		b.withParams(chainPrefix, chainShared, func() {
			_, e := next.p.loop(b, tid, lead, next.wl, tma, copier, gs, v)
			err = joinErr(err, e)
		})
	}
	switch {
	case p.spec.B == BTable, p.spec.GatherK > 0 && !p.spec.MX:
		v := first(true, nil, nil)
		if next != nil { // every thread copied the first GEMM's rows; tid 0 goes on
			b.If(lead, func() {
				b.FenceProxyAsync() // the stages' A tiles, written by cp.async, are TMA's from here on
				then(v, true, nil, nil)
			})
		}
	case p.spec.MX:
		// Warp wi's copy of the loop; lead (tid 0) lies in warp 0, the one
		// issuing the TMA loads.
		warp, lane := b.WarpUniform(b.LShr(tid, ir.Int32(5))), b.And(tid, ir.Int32(31))
		copier := tid
		tid = lane // the code slots and scale rows are by lane
		for wi := range p.codeWarps {
			b.If(b.ICmp(enum.IPredEQ, warp, ir.Int32(int64(wi))), func() {
				v := first(wi == 0, copier, p.codeGroups(wi))
				if next != nil {
					then(v, wi == 0, copier, next.p.codeGroups(wi))
				}
			})
		}
	default:
		b.If(lead, func() { then(first(true, nil, nil), true, nil, nil) })
	}
	return err
}

// chainedProducer is the second GEMM of a chained kernel as its producer
// runs it (emit's next): the GEMM's producer and work list, emitted with
// chainPrefix's parameters.
type chainedProducer struct {
	p  gemmProducer
	wl workList
}

// loop is the producer loop of the calling thread over the work items of
// wl (see emit), from the ring's stage and phase in init (nil: the
// first), returning them after the last item; with tma false it issues
// no TMA load (an MX code warp after the first). copier is the thread's
// index among the MX code warps' lanes (their gathered A chunks), gs the
// calling warp's MX row groups. With waitTiles (the second GEMM of a
// chained kernel, the persistent forward's FC2) each item's loads wait
// for its row tile's signals (waitTile); with storeGatherK, for its row
// tile's gathered chunks (waitGathered).
func (p gemmProducer) loop(b *Builder, tid, lead value.Value, wl workList, tma bool, copier value.Value, gs []int, init []value.Value) ([]value.Value, error) {
	var err error
	table, mx, gather := p.spec.B == BTable, p.spec.MX, p.spec.GatherK > 0
	if !tma {
		wl.writer = nil // an MX code warp after the first reads the items
	}
	// MX: the producer's lanes copy the scale codes of the K block
	// ahead blocks on (across items) into the code slots by cp.async,
	// one group per K block (see mxCodesAhead).
	ahead := p.smem.CodeSlots
	if mx {
		b.If(b.ICmp(enum.IPredSLT, wl.first, wl.items), func() {
			w := wl.decode(b, wl.first)
			if p.spec.waitTiles > 0 { // the A rows' codes come from the first GEMM
				p.waitTile(b, w)
			}
			for d := range ahead {
				p.mxCodeCopy(b, tid, w, ir.Int32(int64(d)), ir.Int32(int64(d)), gs)
			}
		})
	}
	walk := wl.eachAhead
	if !mx { // only the scale codes load ahead across items
		walk = func(b *Builder, init []value.Value, body func(w, next gemmWork, v []value.Value) []value.Value) []value.Value {
			return wl.each(b, init, func(w gemmWork, v []value.Value) []value.Value { return body(w, w, v) })
		}
	}
	// The vars: stage, phase and (MX) the code slot of the K block.
	if init == nil {
		init = []value.Value{ir.Int32(0), ir.Int32(0)}
		if mx {
			init = append(init, ir.Int32(0))
		}
	}
	out := walk(b, init, func(w, nextItem gemmWork, v []value.Value) []value.Value {
		if p.spec.storeGatherK > 0 {
			p.waitGathered(b, w)
		}
		if p.spec.waitTiles > 0 {
			p.waitTile(b, w)
		}
		var ptrE value.Value
		if table {
			ptrE = b.LoadAt(ir.I64, b.ByteOffset(b.Param("b"), b.MulI(b.Wide(w.e), 8)), 8)
		}
		var rowSrc, rowLive []value.Value
		var chunks []gatherChunk
		switch {
		case gather && mx:
			chunks = p.gatherChunks(b, copier, 32*p.codeWarps, w)
		case gather:
			rowSrc, rowLive = p.gatherRows(b, tid, w)
		}
		return b.Loop(ir.Int32(0), ir.Int32(int64(p.kTiles)), ir.Int32(1), v, func(kt value.Value, v []value.Value) []value.Value {
			stage, phase := v[0], v[1]
			var slot value.Value
			if mx {
				slot = v[2]
			}
			// In a 2-CTA cluster the peer CTA's consumers release the stage
			// too (the empty barrier counts both CTAs' warps; peerArrive).
			b.MbarWait(p.ring.empty(b, stage), b.Xor(phase, ir.Int32(1)))
			fb := p.ring.full(b, stage)
			sa := b.Add(p.base, b.MulI(stage, int64(p.stageBytes)))
			switch {
			case table:
				b.If(lead, func() { err = joinErr(err, p.tma(b, w, kt, sa, fb)) })
				p.tableCopy.emit(b, tid, b.AddI(sa, int64(p.atoms*p.aAtom)), kt, w.n0, ptrE)
				b.CpAsyncMbarArrive(fb)
			case gather && !mx:
				b.If(lead, func() { err = joinErr(err, p.tma(b, w, kt, sa, fb)) })
				p.gatherCopy(b, tid, kt, sa, rowSrc, rowLive)
				b.CpAsyncMbarArrive(fb)
			case mx:
				if tma {
					b.If(lead, func() { err = joinErr(err, p.tma(b, w, kt, sa, fb)) })
				}
				if gather {
					// The A chunks join the next committed group
					// (mxCodeCopy's), which the waits below do not
					// wait for: the full barrier counts them.
					p.gatherChunkCopy(b, kt, sa, chunks)
					b.CpAsyncMbarArrive(fb)
				}
				b.cpAsyncWait(ahead - 1) // this K block's codes (the later blocks' may be in flight)
				codes := p.mxScaleCodes(b, tid, w, kt, slot, gs)
				if p.sfTiles() {
					p.mxStoreScaleTiles(b, tid, codes, sa)
					b.FenceProxyAsync() // tcgen05.cp reads them through the async proxy
				} else {
					p.mxStoreScales(b, tid, codes, sa, gs)
				}
				b.MbarArrive(fb)
				// The codes were read (stored above): the slot takes
				// those of the block ahead, from kTiles-ahead on the
				// next item's (whose A rows' codes a chained kernel's
				// second GEMM waits for first: this holds back the
				// current item's last ahead-1 stages when the next
				// item's row tile is not done, which the fixed walk
				// makes rare, as FC2's items reach a tile well after
				// FC1's do).
				if p.spec.waitTiles > 0 {
					b.If(b.ICmp(enum.IPredEQ, kt, ir.Int32(int64(p.kTiles-ahead))), func() { p.waitTile(b, nextItem) })
				}
				wa, kta := wl.ahead(b, w, nextItem, kt, ahead, p.kTiles)
				p.mxCodeCopy(b, tid, wa, kta, slot, gs)
				s1 := b.AddI(slot, 1)
				slot = b.Select(b.ICmp(enum.IPredEQ, s1, ir.Int32(int64(ahead))), ir.Int32(0), s1)
			default:
				err = joinErr(err, p.tma(b, w, kt, sa, fb))
				if p.extraArrivals > 0 {
					b.MbarArriveCount(fb, p.extraArrivals)
				}
			}
			s2, p2 := ringNext(b, stage, phase, p.S)
			if mx {
				return []value.Value{s2, p2, slot}
			}
			return []value.Value{s2, p2}
		})
	})
	if mx {
		b.cpAsyncWait(0) // no copy outlives the block
	}
	return out, err
}

// mxCodeRow is one scale row a producer lane stages per K block: the
// address of its first UE8M0 code in global memory (i64; row 0's when the
// row does not exist) and whether it exists.
type mxCodeRow struct{ src, ok value.Value }

// mxCodeRows emits the scale rows of work item w that producer lane tid
// stages in row groups gs (mxGroups): A-tile row tid+32g (existing below
// the expert's end), B-tile row tid+32(g-mxGroupsA) (the gate/up row map;
// existing below BRows and NB).
func (p gemmProducer) mxCodeRows(b *Builder, tid value.Value, w gemmWork, gs []int) []mxCodeRow {
	nsf := int64(p.spec.K / 32)
	var rows []mxCodeRow
	na := p.mxGroupsA()
	for _, g := range gs {
		var src, ok value.Value
		if g < na {
			src, ok = scaleRowA(b, w, b.AddI(tid, int64(32*g)), nsf, p.spec.GatherK)
		} else {
			src, ok = scaleRowB(b, p.tableCopy, w, b.AddI(tid, int64(32*(g-na))), p.NB, nsf)
		}
		rows = append(rows, mxCodeRow{b.PtrToInt(src), ok})
	}
	return rows
}

// scaleRowA is the first UE8M0 code in global memory ("a_scales", nsf
// codes per row) of A-tile row r of work item w and whether the row exists
// (below the expert's end); a row that does not exist gets row 0's. With
// gatherK > 0 (GemmSpec.GatherK) the scale row is the row's token's,
// a_rows[row] / gatherK.
func scaleRowA(b *Builder, w gemmWork, r value.Value, nsf int64, gatherK int) (src, ok value.Value) {
	ra := b.Add(w.row0, r)
	ok = b.ICmp(enum.IPredSLT, ra, w.rowEnd)
	ra = b.Select(ok, ra, ir.Int32(0))
	if gatherK > 0 {
		ra = b.UDiv(b.LoadAt(ir.I32, b.elemPtr(b.Param("a_rows"), ra, 4), 4), ir.Int32(int64(gatherK)))
		ra = b.Select(ok, ra, ir.Int32(0))
	}
	return b.ByteOffset(b.Param("a_scales"), b.MulI(b.Wide(ra), nsf)), ok
}

// scaleRowB is the first UE8M0 code in global memory ("b_scales", nsf
// codes per row, BRows rows per expert) of B-tile row j of work item w
// under gate's gate/up row map and whether the row exists (below BRows,
// and, when nb > 0, j below nb); a row that does not exist gets the
// expert's row 0's.
func scaleRowB(b *Builder, gate bTableLoad, w gemmWork, j value.Value, nb int, nsf int64) (src, ok value.Value) {
	r := gate.bRow(b, w.n0, j)
	ok = b.ICmp(enum.IPredSLT, r, ir.Int32(int64(gate.BRows)))
	if nb > 0 {
		ok = b.And(ok, b.ICmp(enum.IPredSLT, j, ir.Int32(int64(nb))))
	}
	gi := b.Add(b.MulI(w.e, int64(gate.BRows)), b.Select(ok, r, ir.Int32(0)))
	return b.ByteOffset(b.Param("b_scales"), b.MulI(b.Wide(gi), nsf)), ok
}

// cpAsyncCodeWindow copies into the 8 bytes at shared address dst the
// aligned window of a scale row holding its codes of K block kt (kb codes
// per block, nsf in the row; first: the block's first code in global
// memory, i64): the aligned 4-byte word holding the first and, when the
// block's codes run past it, the next word (an aligned 8-byte window
// holds any 4 consecutive bytes); a row that does not exist (ok false)
// and a word without a code of the block read nothing (src-size 0,
// zero-filled). codeWindowOffset is the first code's byte in the window.
func (b *Builder) cpAsyncCodeWindow(dst, first, ok, kt value.Value, kb, nsf int64) {
	four := b.Select(ok, ir.Int32(4), ir.Int32(0))
	word := b.And(first, ir.Int64(^3))
	off := b.Trunc(b.And(first, ir.Int64(3)), ir.I32)
	n := b.Sub(ir.Int32(nsf), b.MulI(kt, kb)) // the row's codes from the block's first on
	n = b.Select(b.ICmp(enum.IPredSLT, n, ir.Int32(kb)), n, ir.Int32(kb))
	more := b.And(ok, b.ICmp(enum.IPredSGT, b.Add(off, n), ir.Int32(4)))
	b.cpAsync4(dst, word, four)
	b.cpAsync4(b.AddI(dst, 4), b.Select(more, b.AddI(word, 4), word), b.Select(more, ir.Int32(4), ir.Int32(0)))
}

// codeWindowOffset is the byte, in the window cpAsyncCodeWindow copied,
// of a row's first code of K block kt (row: the row's first code's
// address, kb codes per block).
func (b *Builder) codeWindowOffset(row, kt value.Value, kb int64) value.Value {
	return b.And(b.Add(b.Trunc(row, ir.I32), b.MulI(kt, kb)), ir.Int32(3))
}

// mxWholeWords reports whether every row's codes of a K block are one
// aligned 4-byte word: 4 codes per block (K block 128) and K a multiple of
// it, so each row's codes start 4-byte aligned (every tensor is 16-byte
// aligned, runtime.TensorAlign).
func (p gemmProducer) mxWholeWords() bool { return p.BK == 128 && p.spec.K%128 == 0 }

// mxCodeSlot is the shared address of lane tid's 8 bytes of row group g in
// code slot slot (layouts.GemmSmem.CodeOffset).
func (p gemmProducer) mxCodeSlot(b *Builder, tid, slot value.Value, g int) value.Value {
	base := b.AddI(p.base, int64(p.smem.CodeOffset+256*g))
	return b.Add(b.Add(base, b.MulI(slot, int64(p.smem.CodeSlotBytes))), b.MulI(tid, 8))
}

// mxCodeCopy emits, by producer lane tid, the cp.async copies of the UE8M0
// codes of K block kt of work item w of row groups gs into code slot slot
// and commits them as one group: per row its window (cpAsyncCodeWindow;
// one word when mxWholeWords), so no byte outside the row's codes' words
// is read; the word of a tensor's last code reaches past its end when the
// tensor is not a multiple of 4 bytes (the runtime's scale tensors are:
// [E, rows, K/32] with rows a multiple of 32, scratch rounded up to 256
// bytes).
func (p gemmProducer) mxCodeCopy(b *Builder, tid value.Value, w gemmWork, kt, slot value.Value, gs []int) {
	kb := int64(p.BK / 32)
	nsf := int64(p.spec.K / 32)
	for i, row := range p.mxCodeRows(b, tid, w, gs) {
		dst := p.mxCodeSlot(b, tid, slot, gs[i])
		addr := b.Add(row.src, b.Wide(b.MulI(kt, kb))) // the block's first code
		if p.mxWholeWords() {
			b.cpAsync4(dst, addr, b.Select(row.ok, ir.Int32(4), ir.Int32(0)))
			continue
		}
		b.cpAsyncCodeWindow(dst, addr, row.ok, kt, kb, nsf)
	}
	b.cpAsyncCommit()
}

// mxScaleCodes reads, by producer lane tid, the UE8M0 codes of K block kt
// of work item w of row groups gs from code slot slot (mxCodeCopy,
// completed): per row of mxCodeRows one i32 with code c of the block in
// bits 8c..8c+7 (BK/32 <= 4: the MX K block is 128), 127 (1.0) for rows
// that do not exist and for codes past K (where TMA filled zeros), in the
// order mxStoreScales and mxStoreScaleTiles store them.
func (p gemmProducer) mxScaleCodes(b *Builder, tid value.Value, w gemmWork, kt, slot value.Value, gs []int) []value.Value {
	kb := p.BK / 32
	nsf := p.spec.K / 32
	ones := int64(0x7F7F7F7F) >> (8 * (4 - kb)) // 127 in each of the block's kb bytes
	var codes []value.Value
	for i, row := range p.mxCodeRows(b, tid, w, gs) {
		ptr := b.IntToPtr(b.ZExt(p.mxCodeSlot(b, tid, slot, gs[i]), ir.I64), SPtr)
		var word value.Value
		if p.mxWholeWords() {
			word = b.LoadAt(ir.I32, ptr, 4)
		} else {
			pair := b.LoadAt(ir.I64, ptr, 8) // the two words, the first in the low half
			off := b.codeWindowOffset(row.src, kt, int64(kb))
			word = b.Trunc(b.LShr(pair, b.ZExt(b.MulI(off, 8), ir.I64)), ir.I32)
			if kb < 4 {
				word = b.And(word, ir.Int32(int64(1)<<(8*kb)-1))
			}
			if tail := nsf % kb; tail != 0 { // the last block has tail codes
				keep := int64(1)<<(8*tail) - 1
				last := b.ICmp(enum.IPredEQ, kt, ir.Int32(int64(p.kTiles-1)))
				word = b.Select(last, b.Or(b.And(word, ir.Int32(keep)), ir.Int32(ones&^keep)), word)
			}
		}
		codes = append(codes, b.Select(row.ok, word, ir.Int32(ones)))
	}
	return codes
}

// sfTiles reports whether the stage's scales are UE8M0 bytes in
// scale-factor tiles for tcgen05.cp (sm_100a) rather than f32 values read
// by the consumers (sm_90a).
func (p gemmProducer) sfTiles() bool { return p.smem.Target == target.SM100a }

// scaleRowsB is the number of B-tile rows whose scale codes mxScaleCodes
// loads: NB, or on sm_100a NB rounded up to whole 128-row scale-factor
// tiles (the rows past NB get 1.0, so tcgen05.cp copies no stale bytes).
func (p gemmProducer) scaleRowsB() int {
	if p.sfTiles() {
		return (p.NB + layouts.SFTileRows - 1) / layouts.SFTileRows * layouts.SFTileRows
	}
	return p.NB
}

// mxStoreScaleTiles stores the codes of mxScaleCodes into the stage at
// shared address sa as UE8M0 bytes in scale-factor tiles after the A and B
// tiles (sm_100a; layouts.SFOffset's layout, layouts.SM100ScaleBytes): A's
// 128 rows in the first 512-byte tile, then one tile per 128 B-tile rows.
// A row r's 4 codes (its word, code c in byte c) are the 4 bytes at
// (r%32)*16 + (r%128/32)*4 of its tile, so each lane stores one word per
// row group: lane tid, group g (row tid+32g) at tid*16 + (g%4)*4 of tile
// g/4, so a lane's four words of one tile are 16 contiguous bytes: one
// 16-byte store per tile (A's 4 groups fill tile 0, B's 4 per tile after
// it; mxScaleCodes gives B whole tiles of groups). codes are every group's
// (one code warp).
func (p gemmProducer) mxStoreScaleTiles(b *Builder, tid value.Value, codes []value.Value, sa value.Value) {
	off := int64(p.smem.ScaleOffset) // after the A and B tiles
	lane := b.Add(b.AddI(sa, off), b.MulI(tid, 16))
	for t := 0; 4*t < len(codes); t++ {
		var v value.Value = ir.Undef(ir.Vec(4, ir.I32))
		for q := 0; q < 4; q++ {
			v = b.InsertElement(v, codes[4*t+q], q)
		}
		b.StoreAt(v, b.IntToPtr(b.ZExt(b.AddI(lane, int64(t*layouts.SFTileBytes)), ir.I64), SPtr), 16)
	}
}

// mxStoreScales stores the codes of mxScaleCodes into the stage at shared
// address sa, decoded from UE8M0 to f32 (2^(code-127), NaN for 255; for
// the register-fed GEMM the bf16x2 factors of regFedFactor), [block]
// [row] after the stage's A and B tiles (layouts.GemmSmem.ScaleOffset), so
// that a consumer reads one column's scale of a block with one load. B-tile
// rows past NB (a lane's last row group when NB is not a multiple of 32)
// are not stored. codes are row groups gs's, in that order.
func (p gemmProducer) mxStoreScales(b *Builder, tid value.Value, codes []value.Value, sa value.Value, gs []int) {
	kb := p.BK / 32
	off := int64(p.smem.ScaleOffset) // after the A and B tiles
	store := func(dst, word value.Value, stride int64) {
		for c := 0; c < kb; c++ {
			code := b.And(b.LShr(word, ir.Int32(int64(8*c))), ir.Int32(0xFF))
			v := b.ue8m0F32(code)
			if p.spec.MXRegisterFed { // the widening's bf16x2 factor
				v = regFedFactor(b, code)
			}
			b.StoreAt(v, b.IntToPtr(b.ZExt(b.AddI(dst, int64(c)*stride), ir.I64), SPtr), 4)
		}
	}
	bOff := off + int64(kb*p.BM*4)
	na := p.mxGroupsA()
	for i, g := range gs {
		if g < na {
			r := b.AddI(tid, int64(32*g))
			store(b.Add(b.AddI(sa, off), b.MulI(r, 4)), codes[i], int64(4*p.BM))
			continue
		}
		j := b.AddI(tid, int64(32*(g-na)))
		word := codes[i]
		b.If(b.ICmp(enum.IPredSLT, j, ir.Int32(int64(p.NB))), func() {
			store(b.Add(b.AddI(sa, bOff), b.MulI(j, 4)), word, int64(4*p.NB))
		})
	}
}

// tma issues the TMA loads of K block kt of work item w into the stage at
// shared address sa, completing on full barrier fb: A's boxes of BM rows,
// one per atom (a 128-byte row along K), then B's by the gate/up layout
// (layouts.GateUpRows: halves, two boxes of BN rows at n0 and N+n0;
// interleaved, one box of 2*BN rows at 2*n0; plain, one box at n0), one
// set per B atom (as many as A's but with MXRegisterFed, whose bf16 A
// has two atoms to B's one); an N-major B, one box of 64 columns by BK
// rows per column of the tile. BTable loads A only, GatherK B only.
func (p gemmProducer) tma(b *Builder, w gemmWork, kt, sa, fb value.Value) error {
	var err error
	if w.kt0 != nil { // SplitK: the item's K blocks start at kt0
		kt = b.Add(kt, w.kt0)
	}
	aBytes := p.atoms * p.aAtom
	table, gather := p.spec.B == BTable, p.spec.GatherK > 0
	switch {
	case table:
		b.MbarArriveExpectTx(fb, aBytes)
	case gather:
		b.MbarArriveExpectTx(fb, p.smem.B.Bytes()) // A comes by cp.async (gatherCopy)
	default:
		b.MbarArriveExpectTx(fb, p.smem.A.Bytes()+p.smem.B.Bytes()) // the scales (MX) are not TMA's
	}
	for a := 0; a < max(p.atoms, p.bAtoms); a++ {
		k0 := b.AddI(b.MulI(kt, int64(p.BK)), int64(p.atomK*a))
		dA := b.AddI(sa, int64(a*p.aAtom))
		var dB value.Value
		if a < p.bAtoms {
			dB = b.AddI(sa, int64(aBytes+a*p.bAtom))
		}
		switch {
		case a >= p.atoms || gather:
		case p.rank != nil:
			// Half of the rows, into the same offsets of both CTAs' stages,
			// completing on both CTAs' full barriers (each expects the
			// whole tile's bytes).
			half := int64(p.BM / 2)
			err = joinErr(err, b.TMALoadMulticast(p.tmA, b.Add(dA, b.MulI(p.rank, half*128)), fb, ir.Int16(3), k0, b.Add(w.row0, b.MulI(p.rank, half))))
		default:
			err = joinErr(err, b.TMALoad(p.tmA, dA, fb, k0, w.row0))
		}
		if table || p.spec.BNMajor || a >= p.bAtoms {
			continue
		}
		if p.bAtomK != p.atomK {
			k0 = b.AddI(b.MulI(kt, int64(p.BK)), int64(p.bAtomK*a))
		}
		switch p.gate {
		case layouts.GateUpHalves:
			err = joinErr(err, b.TMALoad(p.tmB, dB, fb, k0, w.n0, w.e))
			err = joinErr(err, b.TMALoad(p.tmB, b.AddI(dB, int64(p.BN*128)), fb, k0, b.AddI(w.n0, int64(p.spec.N)), w.e))
		case layouts.GateUpInterleaved:
			if p.pairs { // from halves (GemmSpec.BHalvesInPairs): coordinates (k, gate/up, column, expert)
				err = joinErr(err, b.TMALoad(p.tmB, dB, fb, k0, ir.Int32(0), w.n0, w.e))
				break
			}
			err = joinErr(err, b.TMALoad(p.tmB, dB, fb, k0, b.MulI(w.n0, 2), w.e))
		default:
			err = joinErr(err, b.TMALoad(p.tmB, dB, fb, k0, w.n0, w.e))
		}
	}
	if p.spec.BNMajor {
		// N-major B: one box of 64 columns by BK rows per 64-wide column.
		k0 := b.MulI(kt, int64(p.BK))
		for j := 0; j < p.NB/64; j++ {
			dB := b.AddI(sa, int64(aBytes+j*p.bAtom))
			err = joinErr(err, b.TMALoad(p.tmB, dB, fb, b.AddI(w.n0, int64(64*j)), k0, w.e))
		}
	}
	return err
}

// bTableLoad describes the B tile of one ring stage loaded with cp.async
// from a per-expert weight allocation (BTable), for atoms whose TMA
// tensor maps cannot follow a pointer table.
type bTableLoad struct {
	tmaRing
	N, K, BRows int
	threads     int // threads sharing the copy (tid in 0..threads-1)
}

// emit issues this thread's 16-byte chunks of the B tile of K block kt into
// the stage at shared address dst, in the 128-byte swizzled K-major layout
// TMA's CU_TENSOR_MAP_SWIZZLE_128B produces (16-byte chunk c of row j of an
// atom at j*128 + ((c ^ j%8) * 16), atoms 1024-byte aligned). Rows past BRows
// and K past K are zero-filled (src-size 0, nothing read). ptrE is expert
// e's B allocation (i64), n0 the first output column.
func (t bTableLoad) emit(b *Builder, tid, dst, kt, n0, ptrE value.Value) {
	c := b.And(tid, ir.Int32(7))
	jb := b.LShr(tid, ir.Int32(3))
	perPass := t.threads / 8
	cx := b.Shl(c, ir.Int32(4))
	for a := 0; a < t.atoms; a++ {
		k := b.Add(b.AddI(b.MulI(kt, int64(t.BK)), int64(64*a)), b.MulI(c, 8))
		kOK := b.ICmp(enum.IPredSLT, k, ir.Int32(int64(t.K)))
		for p := 0; p*perPass < t.NB; p++ {
			j := b.AddI(jb, int64(p*perPass))
			grow := t.bRow(b, n0, j)
			ok := b.And(b.And(kOK, b.ICmp(enum.IPredSLT, grow, ir.Int32(int64(t.BRows)))), b.ICmp(enum.IPredSLT, j, ir.Int32(int64(t.NB))))
			src := b.Add(ptrE, b.MulI(b.Add(b.MulI(b.Wide(grow), int64(t.K)), b.Wide(k)), 2))
			src = b.Select(ok, src, ptrE)
			sw := b.Xor(cx, b.Shl(b.And(j, ir.Int32(7)), ir.Int32(4)))
			d := b.Add(b.AddI(dst, int64(a*t.bAtom)), b.Add(b.MulI(j, 128), sw))
			n := b.Select(ok, ir.Int32(16), ir.Int32(0))
			if (p+1)*perPass > t.NB {
				b.If(b.ICmp(enum.IPredSLT, j, ir.Int32(int64(t.NB))), func() { b.CpAsync16(d, src, n) })
			} else {
				b.CpAsync16(d, src, n)
			}
		}
	}
}

// bRow emits the row of B_e that B-tile row j holds (layouts.GateUpRows;
// with tmaRing.pairs, pair j/2's gate row n0+j/2 or its up row N+n0+j/2,
// and BRows, past every row, for a pair past the N output columns, whose
// TMA box rows are zero).
func (t bTableLoad) bRow(b *Builder, n0, j value.Value) value.Value {
	if t.pairs {
		c := b.Add(n0, b.LShr(j, ir.Int32(1)))
		r := b.Add(c, b.MulI(b.And(j, ir.Int32(1)), int64(t.N)))
		return b.Select(b.ICmp(enum.IPredSGE, c, ir.Int32(int64(t.N))), ir.Int32(int64(t.BRows)), r)
	}
	switch t.gate {
	case layouts.GateUpHalves:
		up := b.ICmp(enum.IPredSGE, j, ir.Int32(int64(t.BN)))
		return b.Add(n0, b.Select(up, b.AddI(j, int64(t.N-t.BN)), j))
	case layouts.GateUpInterleaved:
		return b.Add(b.MulI(n0, 2), j)
	}
	return b.Add(n0, j)
}

// gatherRows emits, for producer thread tid (of p.threads) of a GatherK
// GEMM, the global address (i64) of the token row of each tile row
// tid+threads*i of work item w (i < BM/threads, rounded up; rows past BM
// are not live): x ("a", [T, K] bf16) row a_rows[row]/GatherK (the row's
// slot over the top-k), and whether the row lies in the expert's segment
// (a row past it is not copied: its stale shared-memory bytes reach only
// accumulator rows that are never stored, as the rows TMA loads past a
// segment).
func (p gemmProducer) gatherRows(b *Builder, tid value.Value, w gemmWork) (src, live []value.Value) {
	x := b.PtrToInt(b.Param("a"))
	for i := 0; i*p.threads < p.BM; i++ {
		j := b.AddI(tid, int64(p.threads*i))
		s, ok := p.gatherRow(b, x, w, j)
		src, live = append(src, s), append(live, ok)
	}
	return src, live
}

// gatherRow is the global address (i64) of the token row of A-tile row j
// of work item w of a GatherK GEMM (x: A's address, i64; row
// a_rows[row0+j] / GatherK, AElemBytes*K bytes per row) and whether it is
// live: j < BM and the row lies in the expert's segment. A row that is not
// live gets token 0's address.
func (p gemmProducer) gatherRow(b *Builder, x value.Value, w gemmWork, j value.Value) (src, live value.Value) {
	r := b.Add(w.row0, j)
	ok := b.And(b.ICmp(enum.IPredSLT, r, w.rowEnd), b.ICmp(enum.IPredSLT, j, ir.Int32(int64(p.BM))))
	slot := b.LoadAt(ir.I32, b.ByteOffset(b.Param("a_rows"), b.MulI(b.Wide(b.Select(ok, r, ir.Int32(0))), 4)), 4)
	tok := b.UDiv(slot, ir.Int32(int64(p.spec.GatherK)))
	return b.Add(x, b.MulI(b.Wide(b.Select(ok, tok, ir.Int32(0))), int64(p.spec.AElemBytes()*p.spec.K))), ok
}

// gatherCopy issues thread tid's 16-byte cp.async chunks of the A tile of K
// block kt of a GatherK GEMM into the stage at shared address sa, in the
// 128-byte swizzled K-major layout TMA's CU_TENSOR_MAP_SWIZZLE_128B
// produces (chunk c of tile row j of an atom at j*128 + ((c ^ j%8) * 16)).
// Every producer thread copies its own rows (gatherRows: src, live), all
// eight chunks of each atom: the chunks at constant offsets from the row's
// address, and a warp instruction writes 32 rows' chunks at eight distinct
// swizzled positions (four wavefronts, no more). The copies go through L1
// (cp.async.ca), so the chunk a thread reads after the neighbouring half of
// a 32-byte sector hits there instead of L2. Chunks past K are zero-filled
// (src-size 0, nothing read); rows past the segment are not copied.
func (p gemmProducer) gatherCopy(b *Builder, tid, kt, sa value.Value, src, live []value.Value) {
	l8 := b.And(tid, ir.Int32(7))
	K := int64(p.spec.K)
	for a := 0; a < p.atoms; a++ {
		k := b.AddI(b.MulI(kt, int64(p.BK)), int64(64*a)) // the atom's first element along K
		koff := b.MulI(b.Wide(k), 2)
		for i := range src {
			j := b.AddI(tid, int64(p.threads*i))
			row := b.Add(b.AddI(sa, int64(a*p.aAtom)), b.MulI(j, 128))
			from := b.Add(src[i], koff)
			b.If(live[i], func() {
				for c := 0; c < 8; c++ {
					// A chunk past K reads nothing (src-size 0; its
					// address, up to 112 bytes past the row, is not
					// dereferenced: memcheck clean, docs/device-log.md run 29).
					n := b.Select(b.ICmp(enum.IPredSLT, b.AddI(k, int64(8*c)), ir.Int32(K)), ir.Int32(16), ir.Int32(0))
					d := b.Add(row, b.Shl(b.Xor(l8, ir.Int32(int64(c))), ir.Int32(4)))
					b.cpAsync16CA(d, b.AddI(from, int64(16*c)), n)
				}
			})
		}
	}
}

// gatherChunk is one 16-byte chunk of the A tile a copier thread copies
// per K block of a gathered MXFP8 GEMM (gatherChunks): its source in the
// token row at the K block's start (i64), its destination's offset in the
// stage's A atom (the 128-byte swizzle: chunk c of tile row j at j*128 +
// ((c ^ j%8) * 16)), its first element along K within the atom's row, and
// whether it is live (its row is: gatherRow).
type gatherChunk struct {
	src, dst, k0, live value.Value
}

// gatherChunks emits, for copier thread t of n (the MX code warps' lanes)
// and work item w of a GatherK GEMM, the A tile's chunks the thread copies:
// chunk u = t + n*i (i < BM*8/n, rounded up) of the tile's BM rows of
// eight chunks each per atom, row u/8, chunk u%8; each row's token
// address loaded once per work item (gatherRow).
func (p gemmProducer) gatherChunks(b *Builder, t value.Value, n int, w gemmWork) []gatherChunk {
	x := b.PtrToInt(b.Param("a"))
	per := int64(16 / p.spec.AElemBytes()) // elements per chunk
	var cs []gatherChunk
	for i := 0; i*n < 8*p.BM; i++ {
		u := b.AddI(t, int64(n*i))
		j, c := b.LShr(u, ir.Int32(3)), b.And(u, ir.Int32(7))
		src, live := p.gatherRow(b, x, w, j)
		sw := b.Shl(b.Xor(c, b.And(j, ir.Int32(7))), ir.Int32(4))
		cs = append(cs, gatherChunk{src: b.Add(src, b.Wide(b.MulI(c, 16))), dst: b.Add(b.MulI(j, 128), sw),
			k0: b.MulI(c, per), live: live})
	}
	return cs
}

// gatherChunkCopy issues the cp.async copies (through L1) of chunks
// (gatherChunks) of the A tile of K block kt into the stage at shared
// address sa, one per atom: the chunk's elements along K from
// kt*BK + atomK*a + k0; a chunk past K is zero-filled (src-size 0, nothing
// read: K is a multiple of 32, so a chunk is whole or past it); a chunk
// whose row is not live is not copied.
func (p gemmProducer) gatherChunkCopy(b *Builder, kt, sa value.Value, chunks []gatherChunk) {
	eb := int64(p.spec.AElemBytes())
	for a := 0; a < p.atoms; a++ {
		k := b.AddI(b.MulI(kt, int64(p.BK)), int64(p.atomK*a))
		for _, ch := range chunks {
			b.If(ch.live, func() {
				kc := b.Add(k, ch.k0)
				n := b.Select(b.ICmp(enum.IPredSLT, kc, ir.Int32(int64(p.spec.K))), ir.Int32(16), ir.Int32(0))
				from := b.Add(ch.src, b.MulI(b.Wide(k), eb))
				b.cpAsync16CA(b.Add(b.AddI(sa, int64(a*p.aAtom)), ch.dst), from, n)
			})
		}
	}
}
