package codegen

import (
	"fmt"

	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"

	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/moe"
	"github.com/mokc/mokc/target"
)

// The combine of the persistent forward (sm_90a), moe_combine as a phase
// of one block per SM that streams the routed rows into shared memory by
// bulk copies (PTX ISA "Data Movement: cp.async.bulk", sm_90: one
// contiguous global range per instruction, completing on an mbarrier),
// where the row-wise combine (emitCombine) loads them into registers, a
// virtual block at a time, with at most what its registers hold in flight
// (about 64 KB per SM: its phase ran at 2.2 TB/s where its kernel, eight
// blocks per SM, streams 2.8).
//
// A stage is one token's slice of columns: the K routed rows' (and the
// shared expert's row's) elements [c0, c0+w), rows·w·2 bytes (about
// combineBulkStageBytes at most: w is rounded up to a multiple of 8), and
// a header of the K slots' row indices and weights, which lane 0 writes
// (the slot lanes' values by shuffles) and publishes by its arrival on the
// full barrier (release semantics: PTX ISA, "mbarrier"). Block b takes
// tokens b, b+grid, ...; each in nSlices slices of w columns (the last one
// narrower where w does not divide H).
// Roles:
//   - warp 0, the producer: lane k < K holds slot k of the token (its row
//     index and weight, loaded one token ahead), lane K the shared
//     expert's row; per stage they wait for the stage to be free (empty
//     barrier), lane 0 writes the header and arrives on the full barrier
//     expecting the stage's bytes, then every lane with a routed row (or
//     the shared row) copies its slice into the stage;
//   - the block's last 256 threads (warps 4..11 of the persistent GEMMs'
//     384), the consumers: per stage they wait for the full barrier, then
//     each thread takes 8-column chunks of the slice, y = shared_out
//     (times 1) + sum over routed k, in k order, of w_k · row_k by fma in
//     fp32, rounded once to bf16: the arithmetic of emitCombine in its
//     order, so the same bits; each thread then arrives on the stage's
//     empty barrier.
//   - the warps between have nothing to do and wait at the block's last
//     barrier.
//
// After the last stage the block synchronises and thread 0 invalidates
// the barriers (the persistent kernel's next phase, if any, starts from
// free shared memory). Not for a shared expert output gate or a weight on
// the input (combineBulkFits), which keep the row-wise combine.

const (
	combineBulkStageBytes = 36 * 1024 // a stage's rows at most
	combineBulkMaxStages  = 6
)

// combineBulkFits reports whether the persistent forward's combine of op
// takes the bulk-copy form (emitCombineBulk): sm_90a, no shared expert
// output gate, no weight on the input, top-k (plus the shared row) within
// the producer warp's 32 lanes.
func combineBulkFits(tg target.Target, d dims, op moe.Combine) bool {
	return tg == target.SM90a && op.SharedGate == nil && !op.WeightOnInput && d.K+1 <= 32 && d.H%8 == 0
}

// combineBulkPlan is the stage shape of emitCombineBulk for hidden size H,
// top-k K and rows per token (K, plus 1 with a shared expert) in smem
// bytes of shared memory (the GEMM phases'): slices per token, the slice
// width w in elements (a multiple of 8), the bytes of a stage's rows
// (rows·w·2) and the stages that fit, each with its header (8·K bytes)
// and barriers (16), after 1024 bytes of alignment.
func combineBulkPlan(H, K, rows, smem int) (slices, w, stageBytes, stages int) {
	slices = (rows*H*2 + combineBulkStageBytes - 1) / combineBulkStageBytes
	w = ((H+slices-1)/slices + 7) / 8 * 8
	slices = (H + w - 1) / w
	stageBytes = rows * w * 2
	stages = min(combineBulkMaxStages, (smem-1024)/(stageBytes+8*K+16))
	return slices, w, stageBytes, stages
}

// emitCombineBulk emits moe_combine<suffix> in the bulk-copy form (see the
// top of this file) for grid, blocks of threads (at least 32 + 256, whole warps)
// launched with launchRegs registers per thread, in at most smem bytes of
// shared memory: the persistent GEMMs' grid, block, .maxnreg and shared
// memory, whose phases it follows.
func emitCombineBulk(m *ir.Module, suffix string, d dims, op moe.Combine, grid Expr, threads, launchRegs, smem int) (Kernel, error) {
	if !combineBulkFits(target.SM90a, d, op) {
		return Kernel{}, fmt.Errorf("codegen: moe_combine: the bulk-copy combine takes no shared output gate, no weight on the input, top-k at most 31 and H a multiple of 8 (top-k %d, H %d)", d.K, d.H)
	}
	if err := checkBulkBlock("moe_combine", threads); err != nil {
		return Kernel{}, err
	}
	shared := op.SharedOut != nil
	H, K := int64(d.H), int64(d.K)
	rows := K
	if shared {
		rows++
	}
	nSlices, w, stageBytes, S := combineBulkPlan(d.H, d.K, int(rows), smem)
	if err := checkBulkStages("moe_combine", stageBytes, S, smem); err != nil {
		return Kernel{}, err
	}
	hdrBytes := 8 * K // per stage: K row indices (i32), K weights (f32)
	b, k := opKernelNamed(m, "moe_"+op.Name()+suffix, op, threads, true)
	p := newBulkPhase(b, threads, launchRegs, int64(S), int64(stageBytes), hdrBytes)
	lane, ring := p.lane, p.ring
	p.sync()
	T := b.Param("T")
	header := func(s value.Value) value.Value {
		return b.Add(p.base, b.AddI(b.MulI(s, hdrBytes), int64(S*stageBytes)))
	}
	slot := func(t value.Value, kk value.Value) value.Value { return b.Add(b.MulI(t, K), kk) }
	// slice s of a token's columns: its first column and its width
	slice := func(s int64) (c0, cw int64) { return s * int64(w), min(int64(w), H-s*int64(w)) }
	p.roles(func() {
		// The producer. Lane k < K: slot k's row index and weight, one
		// token ahead; lane K with a shared expert: its row.
		isSlot := b.ICmp(enum.IPredULT, lane, ir.Int32(K))
		load := func(t value.Value) []value.Value {
			in := b.And(isSlot, b.ICmp(enum.IPredSLT, t, T))
			return b.IfVals(in, []value.Value{ir.Int32(-1), ir.Float32(0)}, func() []value.Value {
				s := slot(t, lane)
				return []value.Value{
					b.LoadAt(ir.I32, b.elemPtr(b.Param("row_of_slot"), s, 4), 4),
					b.LoadAt(ir.F32, b.elemPtr(b.Param("weights"), s, 4), 4),
				}
			})
		}
		p.each(T, int64(nSlices), load(p.block), func(t value.Value, _ []value.Value) []value.Value {
			return load(b.Add(t, p.nblocks))
		}, func(t value.Value, s int64, st, ph value.Value, cur []value.Value) {
			c0, cw := slice(s)
			row, wt := cur[0], cur[1]
			b.MbarWait(ring.empty(b, st), b.Xor(ph, ir.Int32(1)))
			// Lane 0 writes the header, the slot lanes' values by
			// shuffles, so that its own arrival (release) publishes it.
			hr, hw := make([]value.Value, K), make([]value.Value, K)
			for kk := range K {
				hr[kk] = b.ShflIdx(ir.FullMask, row, ir.Int32(kk))
				hw[kk] = b.ShflIdx(ir.FullMask, wt, ir.Int32(kk))
			}
			b.If(b.ICmp(enum.IPredEQ, lane, ir.Int32(0)), func() {
				h := header(st)
				for kk := range K {
					b.StoreAt(hr[kk], p.sptr(b.AddI(h, 4*kk)), 4)
					b.StoreAt(hw[kk], p.sptr(b.AddI(h, 4*(K+kk))), 4)
				}
			})
			routed := b.ICmp(enum.IPredSGE, row, ir.Int32(0))
			copies := routed
			if shared {
				copies = b.Or(routed, b.ICmp(enum.IPredEQ, lane, ir.Int32(K)))
			}
			n := b.Popc(b.ballot(copies))
			sliceBytes := cw * 2
			p.arriveExpect(st, n, sliceBytes)
			dst := b.Add(p.stage(st), b.MulI(lane, cw*2)) // lane k's row at k·cw·2 of the stage
			b.If(routed, func() {
				src := b.ByteOffset(b.Param("out_rows"), b.MulI(b.Add(b.MulI(b.Wide(row), H), ir.Int64(c0)), 2))
				b.BulkCopyG2S(dst, src, ir.Int32(sliceBytes), ring.full(b, st))
			})
			if shared {
				b.If(b.ICmp(enum.IPredEQ, lane, ir.Int32(K)), func() {
					src := b.ByteOffset(b.Param("shared_out"), b.MulI(b.Add(b.MulI(b.Wide(t), H), ir.Int64(c0)), 2))
					b.BulkCopyG2S(dst, src, ir.Int32(sliceBytes), ring.full(b, st))
				})
			}
		})
	}, func(ct value.Value) {
		p.each(T, int64(nSlices), nil, nil, func(t value.Value, s int64, st, ph value.Value, _ []value.Value) {
			c0, cw := slice(s)
			b.MbarWait(ring.full(b, st), ph)
			h := header(st)
			rowsK, wts := make([]value.Value, K), make([]value.Value, K)
			for kk := range K {
				rowsK[kk] = b.LoadAt(ir.I32, p.sptr(b.AddI(h, 4*kk)), 4)
				wts[kk] = b.LoadAt(ir.F32, p.sptr(b.AddI(h, 4*(K+kk))), 4)
			}
			// slot k's row at k·cw·2 of the stage, the shared row at K·cw·2
			data := p.stage(st)
			v4 := ir.Vec(4, ir.I32)
			b.Loop(ct, ir.Int32(cw/8), ir.Int32(bulkConsumers), nil, func(c value.Value, _ []value.Value) []value.Value {
				at := func(j int64) value.Value {
					return b.LoadAt(v4, p.sptr(b.Add(data, b.AddI(b.MulI(c, 16), j*cw*2))), 16)
				}
				acc := make([]value.Value, 8)
				if shared {
					sv := b.bf16x8(at(K))
					for i := range acc {
						acc[i] = b.FMul(sv[i], ir.Float32(1))
					}
				} else {
					for i := range acc {
						acc[i] = ir.Float32(0)
					}
				}
				for kk := range K {
					routed := b.ICmp(enum.IPredSGE, rowsK[kk], ir.Int32(0))
					acc = b.IfVals(routed, acc, func() []value.Value {
						ov := b.bf16x8(at(kk))
						n := make([]value.Value, 8)
						for i := range n {
							n[i] = b.FMA(wts[kk], ov[i], acc[i])
						}
						return n
					})
				}
				StoreBF16(b, b.rowPtr(b.Param("y"), t, b.AddI(c, c0/8), H, 2), acc)
				return nil
			})
			p.release(st)
		})
	})
	p.finish(&k, grid)
	return k, nil
}
