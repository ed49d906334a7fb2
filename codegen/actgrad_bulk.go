package codegen

import (
	"fmt"

	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"

	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/moe"
	"github.com/mokc/mokc/target"
)

// The act_grad of the persistent backward (sm_90a), moe_act_grad as a
// phase of one block per SM that streams its rows' inputs into shared
// memory by bulk copies (PTX ISA "Data Movement: cp.async.bulk"), where
// the row-wise act_grad (emitActGrad) loads them into registers, a
// virtual block at a time, with at most what its registers hold in flight
// (qwen3-30b-a3b T = 4096 on an H100: 232 µs as virtual blocks, 166 in this
// form, per-op's kernel 176; its 453 MB, f32 gu and dh in, bf16 hs and dgu
// out, take about 150 µs at 3 TB/s: docs/perf.md, run 59).
//
// A stage is R consecutive rows (actGradBulkPlan: 8, one per consumer
// warp, or 4, 2 or 1 where that leaves fewer than two stages), each its GU
// row (2N values), its DH row (N) and with FC1X its FC1·x row (2N f32), in that
// order, contiguous as in global memory, and a header of the rows' scales
// s_r, which lane 0 of the producer writes (the row lanes' values by
// shuffles) and publishes by its arrival on the full barrier. Block b
// takes the stages b, b+grid, ... of the rows below the bound (Offsets[E],
// or T dense rows).
// Roles:
//   - warp 0, the producer: lane j < R holds row j of the
//     stage and its scale, loaded one stage ahead; per stage it waits for
//     the stage to be free, lane 0 writes the header and arrives on the
//     full barrier expecting the stage's bytes, then every lane whose row
//     is below the bound copies the row's inputs into the stage;
//   - the block's last 256 threads (warps 4..11 of the persistent GEMMs'
//     384), the consumers: 8/R warps take each row of the stage (warp k:
//     row k/(8/R), part q = k%(8/R)). They run the row-wise kernel's
//     threads of the row in turn: for each warp w of the row's G threads
//     (G/32 warps, G as actGradShape) with w%(8/R) = q, lane l sums chunks
//     32w+l, 32w+l+G, ... (8 columns each, actGradChunk: stores hs and
//     dgu), then the warp's butterfly sum; the row's dot is +0 plus those
//     sums in w order, plus +0 for each warp short of utilThreads/32: the
//     row-wise kernel's order (emitActGrad), so the same bits. With one
//     warp a row (R = 8) it sums them itself; with several, each part's
//     lane 0 writes its sums over the first 4 bytes of chunk 32w's DH
//     values in the stage (read only by that lane, in the first step of
//     warp w's chunks, before its butterfly sum), fences them for the
//     async proxy that refills the stage (fence.proxy.async) and arrives
//     on the stage's dot barrier (in the header: 8/R·R = 8 arrivals, every
//     consumer warp's lane 0, a row below the bound or not), on which part
//     0's lane 0 waits before it sums them. Every consumer thread then
//     arrives on the stage's empty barrier.
//   - the warps between wait at the block's last barrier.
//
// Not for MX (its dot's MXFP8 values) nor where a stage of one row leaves
// fewer than two in the phase's shared memory (actGradBulkFits,
// checkBulkShape), which keep the row-wise act_grad.

// actGradBulkRows is the most rows of a stage of emitActGradBulk: one per
// consumer warp.
const actGradBulkRows = bulkConsumers / 32

// actGradBulkMaxStages bounds the ring of emitActGradBulk (stages of eight
// rows of 256 columns or fewer fill the GEMM phases' shared memory at six:
// the backward's gu and dh are f32, moe's expertGrad, 12 bytes a column;
// qwen3-30b-a3b's rows take two stages of 72 KB).
const actGradBulkMaxStages = 6

// actGradHeaderBytes is the bytes of a stage's header: with fewer than
// actGradBulkRows rows, the dot barrier (8 bytes), then the rows' scales (4
// each), rounded up to 8 so that the ring's mbarriers after the headers
// stay 8-byte aligned (PTX ISA, "mbarrier": an 8-byte object).
func actGradHeaderBytes(rows int) int {
	n := 4 * rows
	if rows < actGradBulkRows {
		n += 8
	}
	return (n + 7) / 8 * 8
}

// actGradBulkFits reports whether the persistent backward's act_grad of op
// takes the bulk-copy form (emitActGradBulk): sm_90a, not MX, N a multiple
// of 8 (16-byte rows of bf16 and f32).
func actGradBulkFits(tg target.Target, op moe.ActGrad) bool {
	return tg == target.SM90a && !op.MX && op.N%8 == 0
}

// actGradRowBytes is the bytes of one row of a stage of emitActGradBulk:
// the row's GU (2N values), DH (N values) and, with FC1X, FC1·x (2N f32).
func actGradRowBytes(op moe.ActGrad) (gu, dh, fc1x int64) {
	N := int64(op.N)
	gu, dh = 2*N*op.GU.DType.Size(), N*op.DH.DType.Size()
	if op.FC1X != nil {
		fc1x = 2 * N * moe.F32.Size()
	}
	return gu, dh, fc1x
}

// actGradBulkPlan is the stage shape of emitActGradBulk for op in smem
// bytes of shared memory (the GEMM phases'): the rows per stage (the most
// of 8, 4, 2 and 1 that leaves two stages, else 1), the bytes of a stage's
// rows and the stages that fit, each with its header (actGradHeaderBytes)
// and barriers (16), after 1024 bytes of alignment.
func actGradBulkPlan(op moe.ActGrad, smem int) (rows, stageBytes, stages int) {
	gu, dh, fc1x := actGradRowBytes(op)
	for rows = actGradBulkRows; ; rows /= 2 {
		stageBytes = rows * int(gu+dh+fc1x)
		stages = min(actGradBulkMaxStages, (smem-1024)/(stageBytes+actGradHeaderBytes(rows)+16))
		if stages >= 2 || rows == 1 {
			return rows, stageBytes, stages
		}
	}
}

// emitActGradBulk emits moe_act_grad<suffix> in the bulk-copy form (see
// the top of this file) for grid, blocks of threads (at least 32 + 256,
// whole warps) launched with launchRegs registers per thread, in at most
// smem bytes of shared memory: the persistent GEMMs' grid, block,
// .maxnreg and shared memory, whose phases it follows. Errors: op does not
// fit (actGradBulkFits), blocks too small, fewer than two stages.
func emitActGradBulk(m *ir.Module, suffix string, d dims, op moe.ActGrad, grid Expr, threads, launchRegs, smem int) (Kernel, error) {
	if !actGradBulkFits(target.SM90a, op) {
		return Kernel{}, fmt.Errorf("codegen: moe_%s: the bulk-copy act_grad takes no MX and N a multiple of 8 (N %d)", op.Name(), op.N)
	}
	if err := checkBulkBlock("moe_"+op.Name(), threads); err != nil {
		return Kernel{}, err
	}
	R, stageBytes, S := actGradBulkPlan(op, smem)
	if err := checkBulkStages("moe_"+op.Name(), stageBytes, S, smem); err != nil {
		return Kernel{}, err
	}
	N := int64(op.N)
	guBytes, dhBytes, xBytes := actGradRowBytes(op)
	rowBytes := guBytes + dhBytes + xBytes
	rowsPer := int64(R)
	b, k := opKernelNamed(m, "moe_"+op.Name()+suffix, op, threads, op.Offsets == nil)
	hdrBytes := int64(actGradHeaderBytes(R))
	p := newBulkPhase(b, threads, launchRegs, int64(S), int64(stageBytes), hdrBytes)
	lane, ring := p.lane, p.ring
	var bound value.Value
	if op.Offsets != nil {
		bound = b.LoadAt(ir.I32, b.ByteOffsetC(b.Param("offsets"), 4*int64(d.E)), 4)
	} else {
		bound = b.Param("T")
	}
	split := R < actGradBulkRows // several consumer warps a row
	tid := p.tid
	dotBarAt := func(s int64) value.Value { // stage s's dot barrier: its header's first 8 bytes
		return b.AddI(p.base, int64(S*stageBytes)+s*hdrBytes)
	}
	if split { // the dot barriers, one per stage: a part's arrival each
		b.If(b.ICmp(enum.IPredEQ, tid, ir.Int32(0)), func() {
			for s := range int64(S) {
				b.MbarInit(dotBarAt(s), actGradBulkRows)
			}
			b.FenceMbarInit()
		})
	}
	p.sync()
	stages := b.UDiv(b.AddI(bound, rowsPer-1), ir.Int32(rowsPer)) // of the whole grid
	header := func(st value.Value) value.Value {
		return b.Add(p.base, b.AddI(b.MulI(st, hdrBytes), int64(S*stageBytes)))
	}
	scales := func(st value.Value) value.Value { // the header's scales
		if split {
			return b.AddI(header(st), 8)
		}
		return header(st)
	}
	p.roles(func() {
		// The producer. Lane j < rowsPer: row rowsPer·i + j and its scale
		// (0 past the bound), one stage ahead.
		isRow := b.ICmp(enum.IPredULT, lane, ir.Int32(rowsPer))
		load := func(i value.Value) []value.Value {
			r := b.Add(b.MulI(i, rowsPer), lane)
			in := b.And(isRow, b.ICmp(enum.IPredSLT, r, bound))
			s := b.IfVals(in, []value.Value{ir.Float32(0)}, func() []value.Value { return []value.Value{b.actGradScale(op, r)} })[0]
			return []value.Value{r, in, s}
		}
		p.each(stages, 1, load(p.block), func(i value.Value, _ []value.Value) []value.Value {
			return load(b.Add(i, p.nblocks))
		}, func(_ value.Value, _ int64, st, ph value.Value, cur []value.Value) {
			r, in, s := cur[0], cur[1], cur[2]
			b.MbarWait(ring.empty(b, st), b.Xor(ph, ir.Int32(1)))
			// Lane 0 writes the header, the row lanes' scales by shuffles,
			// so that its own arrival (release) publishes it.
			hs := make([]value.Value, rowsPer)
			for j := range rowsPer {
				hs[j] = b.ShflIdx(ir.FullMask, s, ir.Int32(j))
			}
			b.If(b.ICmp(enum.IPredEQ, lane, ir.Int32(0)), func() {
				for j := range rowsPer {
					b.StoreAt(hs[j], p.sptr(b.AddI(scales(st), 4*j)), 4)
				}
			})
			p.arriveExpect(st, b.Popc(b.ballot(in)), rowBytes)
			b.If(in, func() {
				dst := b.Add(p.stage(st), b.MulI(lane, rowBytes))
				copyRow := func(param string, off, bytes int64) {
					src := b.ByteOffset(b.Param(param), b.MulI(b.Wide(r), bytes))
					b.BulkCopyG2S(b.AddI(dst, off), src, ir.Int32(bytes), ring.full(b, st))
				}
				copyRow("gu", 0, guBytes)
				copyRow("dh", guBytes, dhBytes)
				if op.FC1X != nil {
					copyRow("fc1x", guBytes+dhBytes, xBytes)
				}
			})
		})
	}, func(ct value.Value) {
		parts := int64(actGradBulkRows / R) // consumer warps a row
		cw := b.UDiv(ct, ir.Int32(32))
		j, q := cw, value.Value(ir.Int32(0)) // the warp's row of each stage, and its part
		if split {
			j, q = b.UDiv(cw, ir.Int32(parts)), b.URem(cw, ir.Int32(parts))
		}
		act := activation(op.Act)
		G := actGradRowThreads(N)
		W := G / 32
		lane0 := func() value.Value { return b.ICmp(enum.IPredEQ, lane, ir.Int32(0)) }
		p.each(stages, 1, nil, nil, func(i value.Value, _ int64, st, ph value.Value, _ []value.Value) {
			b.MbarWait(ring.full(b, st), ph)
			r := b.Add(b.MulI(i, rowsPer), j)
			live := b.ICmp(enum.IPredSLT, r, bound)
			scale := func() value.Value { return b.LoadAt(ir.F32, p.sptr(b.Add(scales(st), b.MulI(j, 4))), 4) }
			rowAt := func() value.Value { return b.Add(p.stage(st), b.MulI(j, rowBytes)) } // row j's stage address
			// ptrs are the row's GU, DH and FC1·x (or nil) in the stage
			ptrs := func(row value.Value) (gu, dh, x value.Value) {
				gu, dh = p.sptr(row), p.sptr(b.AddI(row, guBytes))
				if op.FC1X != nil {
					x = p.sptr(b.AddI(row, guBytes+dhBytes))
				}
				return gu, dh, x
			}
			// sum is the warp's butterfly sum of warp w's chunks of the row
			sum := func(gu, dh, x, s value.Value, w int64) value.Value {
				part := b.Loop(b.AddI(lane, 32*w), ir.Int32(N/8), ir.Int32(G), []value.Value{ir.Float32(0)}, func(c value.Value, acc []value.Value) []value.Value {
					g, u := b.gateUpRow8(op.GateUp, op.GU.DType, gu, ir.Int32(0), c, N)
					dhv := b.loadRow8(op.DH.DType, dh, ir.Int32(0), c, N)
					var xg, xu []value.Value
					if x != nil {
						xg, xu = b.gateUpRow8(op.GateUp, moe.F32, x, ir.Int32(0), c, N)
					}
					return []value.Value{b.actGradChunk(op, act, r, c, s, g, u, dhv, xg, xu, acc[0])}
				})[0]
				return b.WarpSum(part)
			}
			storeDot := func(dot value.Value) {
				b.If(lane0(), func() { b.StoreAt(dot, b.elemPtr(b.Param("dot"), r, 4), 4) })
			}
			if !split {
				b.If(live, func() {
					s := scale()
					gu, dh, x := ptrs(rowAt())
					storeDot(b.actGradDot(W, func(w int64) value.Value { return sum(gu, dh, x, s, w) }))
				})
				p.release(st)
				return
			}
			// warp w's sum over the first 4 bytes of chunk 32w's DH values
			slot := func(row value.Value, w int64) value.Value {
				return p.sptr(b.AddI(row, guBytes+32*w*8*op.DH.DType.Size()))
			}
			b.If(live, func() {
				s, row := scale(), rowAt()
				gu, dh, x := ptrs(row)
				for w := int64(0); w < W; w++ {
					b.If(b.ICmp(enum.IPredEQ, q, ir.Int32(w%parts)), func() {
						v := sum(gu, dh, x, s, w)
						b.If(lane0(), func() { b.StoreAt(v, slot(row, w), 4) })
					})
				}
			})
			dotBar := header(st)
			b.If(lane0(), func() {
				b.Asm("fence.proxy.async.shared::cta;", "~{memory}")
				b.MbarArrive(dotBar)
			})
			b.If(b.And(live, b.ICmp(enum.IPredEQ, q, ir.Int32(0))), func() {
				b.If(lane0(), func() {
					b.MbarWait(dotBar, ph)
					row := rowAt()
					storeDot(b.actGradDot(W, func(w int64) value.Value { return b.LoadAt(ir.F32, slot(row, w), 4) }))
				})
			})
			p.release(st)
		})
	})
	if split { // every thread has passed roles' block barrier
		b.If(b.ICmp(enum.IPredEQ, tid, ir.Int32(0)), func() {
			for s := range int64(S) {
				b.MbarInval(dotBarAt(s))
			}
		})
	}
	p.finish(&k, grid)
	return k, nil
}

// actGradScale loads row r's scale s_r of op: Weights[SrcSlot[r]] for
// dispatched rows, Scale[r] for dense rows, else 1 (moe.ActGrad).
func (b *Builder) actGradScale(op moe.ActGrad, r value.Value) value.Value {
	switch {
	case op.Weights != nil:
		slot := b.LoadAt(ir.I32, b.elemPtr(b.Param("src_slot"), r, 4), 4)
		return b.LoadAt(ir.F32, b.elemPtr(b.Param("weights"), slot, 4), 4)
	case op.Scale != nil:
		return b.LoadAt(ir.F32, b.elemPtr(b.Param("scale"), r, 4), 4)
	}
	return ir.Float32(1)
}
