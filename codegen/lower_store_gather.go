package codegen

import (
	"fmt"
	"slices"

	"github.com/mokc/mokc/launch"
	"github.com/mokc/mokc/moe"
	"github.com/mokc/mokc/schedule"
)

// The persistent bf16 forward's gather beside FC1 (store_gather.go): where
// FC1's kernel forms above the decode sizes have store warps that can
// gather (Engine.StoresGather), they copy the dispatched rows themselves
// and the kernel has no gather phase at those T (all of them with
// schedule.GatherStoreWarps; with GatherFC1 from Schedule.StoreGatherRows
// mean rows per expert, as the kernel form moe_<fc1>_store_gathered beside
// the plain one, which follows the gather phase below it); FC1's producer
// waits for each row tile's chunks through counters of the tile list
// (tileList.gathered), zeroed by the kernel that writes the list.

// planStoreGather plans the gather beside FC1 in a forward whose schedule
// lets FC1's store warps gather (schedule.Schedule.StoresGather: the
// persistent lowering of a bf16 forward with GatherStoreWarps, or
// GatherFC1 and StoreGatherRows, without a chained FC1 and FC2, clusters
// or blocks sharing an SM): for the gather and the GEMM that alone reads its
// rows (gatherPair), each of the GEMM's kernel forms whose store warps
// gather (storesGather) gets its tile list's counters, and storeGatherFrom
// the least T at which they gather. It runs before the ops are lowered,
// so that the kernels writing the tile lists zero the counters.
func (lw *perOp) planStoreGather() {
	s := lw.sched
	if !s.StoresGather(lw.src.Layer) || !forwardProgram(lw.src) {
		return
	}
	from := int64(1) // GatherStoreWarps: every T where the gather kernel would run
	if s.Gather == schedule.GatherFC1 {
		from = max(1, (int64(s.StoreGatherRows)*int64(lw.d.E)+int64(lw.d.K)-1)/int64(lw.d.K)) // T·K/E >= rows
	}
	if from > launch.MaxTokens {
		return
	}
	for i := range lw.src.Ops {
		_, g, ok := lw.gatherPair(lw.src.Ops[i:])
		if !ok {
			continue
		}
		for _, k := range lw.gemmKernels(g) {
			if lw.storesGather(g, k.s) {
				lw.gatherCounters(lw.gemmSpec(g, k.s).Tile.BM)
				lw.storeGatherFrom = from
			}
		}
		return
	}
}

// gatherPair reports whether ops begin with a Gather of plain bf16 rows
// (no routing weight, no quantized form) and the GEMM over dispatched
// rows that alone reads them (the forward's gather and FC1, the
// backward's rows of FC1·x), a bf16 layer's, not register-fed.
func (lw *perOp) gatherPair(ops []moe.Op) (moe.Gather, moe.GEMM, bool) {
	if len(ops) < 2 {
		return moe.Gather{}, moe.GEMM{}, false
	}
	ga, okA := ops[0].(moe.Gather)
	g, okG := ops[1].(moe.GEMM)
	if !okA || !okG || ga.XS == nil || ga.Weights != nil || ga.Q != nil || ga.S != nil || ga.V != nil ||
		g.A != ga.XS || g.Rows != moe.Dispatched || g.AScales != nil || g.ARegisterFed || g.BMajor == moe.NMajor ||
		!lw.onlyReader(ga.XS, g) {
		return moe.Gather{}, moe.GEMM{}, false
	}
	if _, rf := lw.rfOps[g.Name()]; rf || lw.src.Layer.Precision == schedule.MXFP8 {
		// Register-fed forms, and the bf16 GEMMs of an mxfp8 layer
		// (llama4-scout's backward FC1·x), have not run gathered on the
		// H200: they keep the gather kernel.
		return moe.Gather{}, moe.GEMM{}, false
	}
	return ga, g, true
}

// checkStoreGather refuses a forward under a schedule with
// GatherStoreWarps none of whose kernels gathers in its store warps: the
// setting would change nothing. A backward keeps its gathers (a forward
// and backward built with one schedule: the forward's check refuses).
func (lw *perOp) checkStoreGather() error {
	gathers := slices.ContainsFunc(lw.prog.Kernels, func(k launch.Kernel) bool {
		return slices.ContainsFunc(k.Params, func(p launch.Param) bool { return p.Role == RoleGatherDone })
	})
	if lw.sched.Gather != schedule.GatherStoreWarps || !forwardProgram(lw.src) || gathers {
		return nil
	}
	return fmt.Errorf("codegen: %s: Schedule.Gather store-warps: no FC1 kernel of this forward gathers its rows in its store warps (they do in the persistent bf16 forward on sm_90a of a plain gather: no routing weight on the rows, no mxfp8 rows, grouped weights, FC1 and FC2 not chained): leave Schedule.Gather at fc1", lw.src.Layer.Name)
}

// storesGather reports whether g's kernel under schedule s gathers its
// rows in its store warps (Engine.StoresGather), in the form
// gemmKernelSpec gives it (with the item queue where it takes one).
func (lw *perOp) storesGather(g moe.GEMM, s schedule.Schedule) bool {
	spec := lw.gemmSpec(g, s)
	spec.Name = "moe_" + g.Name()
	spec.QueueItems = lw.queuesItems(spec)
	return lw.eng.StoresGather(spec, lw.d.K)
}

// gatherCounters returns the counters of the gathered chunks of the tile
// list of bm-row tiles (tileList.gathered), adding them to the program
// once.
func (lw *perOp) gatherCounters(bm int) *moe.Buffer {
	lw.listFor(bm)
	return lw.listCounters(bm, func(t *tileList) **moe.Buffer { return &t.gathered }, "gather_done", func(tiles string) string {
		return fmt.Sprintf("the counters of FC1's wait for its gathered rows: per tile of %s, the chunks of the tile's rows the store warps have copied (zeroed with the list)", tiles)
	})
}
