package codegen

import (
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"

	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/layouts"
)

// sm100Chunk is a run of accumulator columns one tcgen05.ld reads.
type sm100Chunk struct{ col, n int }

// sm100Chunks splits w columns into tcgen05.ld runs of 32, 16 and 8.
func sm100Chunks(w int) []sm100Chunk {
	var out []sm100Chunk
	for c := 0; c < w; {
		n := 32
		for n > w-c {
			n /= 2
		}
		out = append(out, sm100Chunk{c, n})
		c += n
	}
	return out
}

// epilogueWarps emits the epilogue warps' loop: wait for a finished
// accumulator buffer, read this warp's lane quarter and column chunks with
// tcgen05.ld, store through the shared Epilogue, release the buffer.
func (l sm100Layout) epilogueWarps(b *Builder, k *sm100Block, lane, warp value.Value) error {
	var err error
	quarter := b.And(warp, ir.Int32(3))
	group := b.LShr(warp, ir.Int32(2))
	laneBase := b.Shl(b.MulI(quarter, 32), ir.Int32(16)) // TMEM lane field of this warp's quarter
	isLead := b.ZExt(b.ICmp(enum.IPredEQ, lane, ir.Int32(0)), ir.I32)
	// Chunks over the output columns of the tile (h columns for gated).
	units := l.NB
	if l.gate != layouts.GateUpNone {
		units = l.BN
	}
	chunks := sm100Chunks(units)
	k.work.each(b, []value.Value{ir.Int32(0), ir.Int32(0)}, func(w gemmWork, v []value.Value) []value.Value {
		buf, bphase := v[0], v[1]
		b.MbarWait(k.tmemFull(b, buf), bphase)
		b.TCGen05FenceAfter()
		ep := gemmEpilogue(b, k.spec, w)
		row := b.Add(w.row0, b.Add(b.MulI(quarter, 32), lane))
		taddr := b.Add(b.Add(k.tmem, laneBase), b.MulI(buf, int64(l.NB)))
		for ci, ch := range chunks {
			emit := func() { err = joinErr(err, l.storeChunk(b, ep, row, w.n0, taddr, ch)) }
			if l.groups == 1 {
				emit()
			} else {
				b.If(b.ICmp(enum.IPredEQ, group, ir.Int32(int64(ci%l.groups))), emit)
			}
		}
		b.TCGen05FenceBefore()
		b.MbarArriveIf(k.tmemEmpty(b, buf), isLead)
		b2, bp2 := ringNext(b, buf, bphase, 2)
		return []value.Value{b2, bp2}
	})
	return err
}

// storeChunk reads output columns ch.col..ch.col+ch.n-1 of the thread's row
// from the accumulator at TMEM address taddr by the gate/up layout
// (layouts.GateUpRows: halves, gate columns ch.col.. and up columns
// BN+ch.col..; interleaved, column pairs (2c, 2c+1); plain, the columns
// themselves) and stores them in runs of 8 outputs (fewer for a short
// interleaved chunk).
func (l sm100Layout) storeChunk(b *Builder, ep *Epilogue, row, n0, taddr value.Value, ch sm100Chunk) error {
	switch l.gate {
	case layouts.GateUpHalves:
		gv, e1 := b.TCGen05Load32x32b(b.AddI(taddr, int64(ch.col)), ch.n)
		uv, e2 := b.TCGen05Load32x32b(b.AddI(taddr, int64(l.BN+ch.col)), ch.n)
		if err := joinErr(e1, e2); err != nil {
			return err
		}
		var err error
		for r := 0; r < ch.n; r += 8 {
			vals := make([]value.Value, 0, 16)
			for i := 0; i < 8; i++ {
				vals = append(vals, gv[r+i], uv[r+i])
			}
			err = joinErr(err, ep.Emit(b, row, b.AddI(n0, int64(ch.col+r)), vals))
		}
		return err
	case layouts.GateUpInterleaved:
		vv, err := b.TCGen05Load32x32b(b.AddI(taddr, int64(2*ch.col)), 2*ch.n)
		if err != nil {
			return err
		}
		run := min(8, ch.n)
		for r := 0; r < ch.n; r += run {
			err = joinErr(err, ep.Emit(b, row, b.AddI(n0, int64(ch.col+r)), vv[2*r:2*(r+run)]))
		}
		return err
	}
	vv, err := b.TCGen05Load32x32b(b.AddI(taddr, int64(ch.col)), ch.n)
	if err != nil {
		return err
	}
	for r := 0; r < ch.n; r += 8 {
		err = joinErr(err, ep.Emit(b, row, b.AddI(n0, int64(ch.col+r)), vv[r:r+8]))
	}
	return err
}
