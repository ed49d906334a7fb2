package codegen

import (
	"fmt"

	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"

	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/moe"
	"github.com/mokc/mokc/target"
)

// The gathers of the persistent kernels (sm_90a; the forward's x, the
// backward's x and dy), each a phase of one block per SM of the GEMM
// phases' shape, the counterpart of the
// bulk-copy combine (combine_bulk.go): xs[row] = x[src_slot[row] / K] for
// row < offsets[E], where the row-wise gather (emitGather) runs as virtual
// blocks of 256 threads, each with what its registers hold in flight.
//
// A stage is R consecutive dispatched rows (R·H·2 bytes at most
// gatherBulkStageBytes); block b takes stages b, b+grid, ... (rows
// R·(b + i·grid) + r). Roles:
//   - warp 0, the producer: lane r < R holds row r's token, loaded one
//     stage ahead; per stage the lanes wait for the stage to be free
//     (empty barrier), lane 0 arrives on the full barrier expecting the
//     stage's bytes, and every lane with a row below the count copies
//     its token's row of x into the stage (cp.async.bulk, PTX ISA "Data
//     Movement: cp.async.bulk", sm_90);
//   - the block's last 256 threads, the consumers: per stage they wait for
//     the full barrier, copy the stage's rows to xs in 16-byte chunks
//     (plain stores, which the grid barrier after the phase makes visible
//     to the next phase's TMA loads like the row-wise gather's), then
//     each thread arrives on the stage's empty barrier.
//
// The rows are copied unchanged: the same bytes as the row-wise gather.
// Only the plain gather takes this form (gatherBulkFits): not one that
// scales the rows by the routing weight or quantizes them.

const (
	gatherBulkStageBytes = 32 * 1024
	gatherBulkMaxStages  = 6
)

// gatherBulkFits reports whether a persistent kernel's gather of op
// takes the bulk-copy form (emitGatherBulk): sm_90a, a plain copy of the
// rows into XS (no routing weight, no quantized or register-fed form),
// H a multiple of 8 and a row within a stage.
func gatherBulkFits(tg target.Target, d dims, op moe.Gather) bool {
	return tg == target.SM90a && op.XS != nil && op.Weights == nil && op.Q == nil && op.V == nil &&
		d.H%8 == 0 && 2*d.H <= gatherBulkStageBytes
}

// gatherBulkPlan is the stage shape of emitGatherBulk for hidden size H in
// smem bytes of shared memory (the GEMM phases'): rows per stage (at most
// 32, the producer warp's lanes), the bytes of a stage and the stages
// that fit, each with its barriers (16 bytes), after 1024 bytes of
// alignment.
func gatherBulkPlan(H, smem int) (rows, stageBytes, stages int) {
	rows = min(32, gatherBulkStageBytes/(2*H))
	stageBytes = rows * 2 * H
	return rows, stageBytes, min(gatherBulkMaxStages, (smem-1024)/(stageBytes+16))
}

// emitGatherBulk emits moe_gather<suffix> in the bulk-copy form (see the
// top of this file) for grid, blocks of threads (at least 32 + 256, whole warps)
// launched with launchRegs registers per thread, in at most smem bytes of
// shared memory: the persistent GEMMs'.
func emitGatherBulk(m *ir.Module, suffix string, d dims, op moe.Gather, grid Expr, threads, launchRegs, smem int) (Kernel, error) {
	if !gatherBulkFits(target.SM90a, d, op) {
		return Kernel{}, fmt.Errorf("codegen: moe_gather: the bulk-copy gather copies plain bf16 rows of H a multiple of 8 within %d bytes (H %d)", gatherBulkStageBytes, d.H)
	}
	if err := checkBulkBlock("moe_"+op.Name(), threads); err != nil {
		return Kernel{}, err
	}
	H := int64(d.H)
	R, stageBytes, S := gatherBulkPlan(d.H, smem)
	if err := checkBulkStages("moe_gather", stageBytes, S, smem); err != nil {
		return Kernel{}, err
	}
	rowBytes := 2 * H
	b, k := opKernelNamed(m, "moe_"+op.Name()+suffix, op, threads, false)
	p := newBulkPhase(b, threads, launchRegs, int64(S), int64(stageBytes), 0)
	lane, ring := p.lane, p.ring
	total := b.LoadAt(ir.I32, b.ByteOffsetC(b.Param("offsets"), 4*int64(d.E)), 4)
	p.sync()
	stages := b.UDiv(b.AddI(total, int64(R)-1), ir.Int32(int64(R))) // stages of the whole grid
	p.roles(func() {
		// The producer. Lane r < R: the token of row R·i + r (-1 past the
		// count), one stage ahead.
		token := func(i value.Value) value.Value {
			row := b.Add(b.MulI(i, int64(R)), lane)
			in := b.And(b.ICmp(enum.IPredULT, lane, ir.Int32(int64(R))), b.ICmp(enum.IPredSLT, row, total))
			return b.IfVals(in, []value.Value{ir.Int32(-1)}, func() []value.Value {
				s := b.LoadAt(ir.I32, b.elemPtr(b.Param("src_slot"), row, 4), 4)
				return []value.Value{b.UDiv(s, ir.Int32(int64(d.K)))}
			})[0]
		}
		p.each(stages, 1, []value.Value{token(p.block)}, func(i value.Value, _ []value.Value) []value.Value {
			return []value.Value{token(b.Add(i, p.nblocks))}
		}, func(i value.Value, _ int64, st, ph value.Value, v []value.Value) {
			t := v[0]
			b.MbarWait(ring.empty(b, st), b.Xor(ph, ir.Int32(1)))
			live := b.ICmp(enum.IPredSGE, t, ir.Int32(0))
			p.arriveExpect(st, b.Popc(b.ballot(live)), rowBytes)
			b.If(live, func() {
				src := b.ByteOffset(b.Param("x"), b.MulI(b.Wide(t), rowBytes))
				b.BulkCopyG2S(b.Add(p.stage(st), b.MulI(lane, rowBytes)), src, ir.Int32(rowBytes), ring.full(b, st))
			})
		})
	}, func(ct value.Value) {
		v4 := ir.Vec(4, ir.I32)
		p.each(stages, 1, nil, nil, func(i value.Value, _ int64, st, ph value.Value, _ []value.Value) {
			b.MbarWait(ring.full(b, st), ph)
			row0 := b.MulI(i, int64(R))
			// chunk c of the stage: row c / (H/8), its chunk c % (H/8)
			b.Loop(ct, ir.Int32(int64(R)*H/8), ir.Int32(bulkConsumers), nil, func(c value.Value, _ []value.Value) []value.Value {
				row := b.Add(row0, b.UDiv(c, ir.Int32(H/8)))
				b.If(b.ICmp(enum.IPredSLT, row, total), func() {
					v := b.LoadAt(v4, p.sptr(b.Add(p.stage(st), b.MulI(c, 16))), 16)
					b.StoreAt(v, b.rowPtr(b.Param("xs"), row, b.URem(c, ir.Int32(H/8)), H, 2), 16)
				})
				return nil
			})
			p.release(st)
		})
	})
	p.finish(&k, grid)
	return k, nil
}
