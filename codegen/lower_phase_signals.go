package codegen

import (
	"slices"

	"github.com/mokc/mokc/launch"
	"github.com/mokc/mokc/moe"
	"github.com/mokc/mokc/schedule"
)

// Dependency counters in place of a grid barrier (persistent lowering of a
// bf16 forward, sm_90a): the FC2 phase of the persistent kernel starts
// without a grid-wide barrier after FC1's; instead each FC2 work item
// waits for the row tile of h it reads.
//
// Each FC1 item's storing warps (the staged epilogue's store warps, or
// every consumer warp) add their share of hSignalPerItem to tile_done[t]
// once their part of h is stored (lane 0, after the warp's barrier:
// signalItem; GemmSpec.signalPerItem), in every FC1 kernel form (the
// gathering one at decode sizes too), and FC2's producer waits until the
// word holds FC1's column blocks times hSignalPerItem (waitTile: an
// acquire poll bounded by the wait limit, awaitCount, then a proxy fence
// before its TMA loads), as the chained kernels' second GEMM does
// (gemm_chain.go). It is the release and acquire pattern of the chained
// kernels (PTX ISA, "Memory Consistency Model"), with the proxy fence on
// the waiting side only: after its acquire, before its TMA loads, it
// orders every store that precedes the release (proxy-preserved causality
// order). The staged epilogue's store warps free the staging tile before
// they signal, so their release's wait for their stores holds no other
// role. Every block runs its FC1 items before its FC2 items, an FC2 item
// waits only for FC1 items, and the grid's blocks are all resident
// (launch.Kernel.CoResident), so every wait ends; the kernel writing the
// tile list zeroes the counters with it, every run. Each GEMM's order of
// work is unchanged: the same bits. (An FC2 item of a tile shorter than
// BM loads, in its TMA box, rows past the tile's end, of the next
// expert's tile, which FC1 may still be writing: they feed only
// accumulator rows that are never stored, as in the chained kernel.) FC2 starts without the barrier only
// where, at each T it runs at, the last phase before it is an FC1 kernel
// that signals (followsSignals).
//
// The same counters between the gather and FC1 (the gather's stages
// walking FC1's tile list and signalling each chunk) were correct on the
// GPU but made the gather phase 1.35x slower with the release in its
// storing warps (docs/perf.md, phase counters v1 and v2).

// signalPhases enables planHSignals; tests turn it off to compare with the
// grid barrier it replaces.
var signalPhases = true

// hSignalPerItem is the sum of the signals of one FC1 item to its row
// tile's word of tile_done (GemmSpec.signalPerItem): a multiple of every
// sm_90a count of signalling warps (the staged epilogue's 3 store warps;
// 4 per consumer warpgroup, 1 to 3 of them), so that the gathering and
// the plain FC1 kernels, which FC2's one kernel waits for at different T,
// send the same count.
const hSignalPerItem = 24

// hSignal is the plan of FC1's signals to FC2 (see the top of this file):
// the two GEMM ops, their row tiles, FC1's column blocks, the counters
// (the list's tile_done), FC1's kernels that signal and FC2's that wait,
// for the kernel forms of one block shape (warps: their MMA warps).
type hSignal struct {
	warps      int
	fc1, fc2   string
	bm         int
	nBlocks    int
	counters   *moe.Buffer
	signalling []string
	waiting    []string
	mismatch   bool // an FC1 kernel of other tiles: FC2 keeps the barrier
}

// planHSignals plans FC1's signals to FC2 under the persistent lowering of
// a bf16 forward without a chained FC1 and FC2 (Schedule.Chain), clusters
// or blocks sharing an SM: its gated FC1 over dispatched rows followed by
// the FC2 that reads its C, one plan per block shape of their kernel forms
// (gemmKernels; a GEMM variant of other warps runs in a persistent kernel
// of its own, persistGroups), where every form of both of that shape has
// one row tile and every FC1 form the same column blocks: the counters of
// that row tile's list. It runs before the ops are lowered, so that the
// kernels writing the tile lists take the counters.
func (lw *perOp) planHSignals() {
	s := lw.sched
	if !signalPhases || s.Lowering != schedule.LoweringPersistent || s.Chain == schedule.ChainFC || s.Cluster > 1 || s.BlocksPerSM > 1 ||
		!forwardProgram(lw.src) || lw.src.Layer.Precision != schedule.BF16 {
		return
	}
	for i := range lw.src.Ops {
		g1, g2, q, ok := fcPair(lw.src.Ops, i)
		if !ok || q != nil {
			continue
		}
		k1, k2 := lw.gemmKernels(g1), lw.gemmKernels(g2)
		var shapes []int // the forms' MMA warps, the base GEMMs' first
		for _, k := range k1 {
			if !slices.Contains(shapes, k.s.Warps.MMA) {
				shapes = append(shapes, k.s.Warps.MMA)
			}
		}
	shape:
		for _, w := range shapes {
			bm, nBlocks := 0, 0
			for _, k := range k1 {
				if k.s.Warps.MMA != w {
					continue
				}
				sp := lw.gemmSpec(g1, k.s)
				if bm == 0 {
					bm, nBlocks = sp.Tile.BM, colBlocks(sp)
				}
				if sp.Tile.BM != bm || colBlocks(sp) != nBlocks {
					continue shape
				}
			}
			for _, k := range k2 {
				if k.s.Warps.MMA == w && lw.gemmSpec(g2, k.s).Tile.BM != bm {
					continue shape
				}
			}
			if counters := lw.tileCounters(bm, "the persistent kernel's moe_"+g2.Name()+" phase"); counters != nil {
				lw.hSigs = append(lw.hSigs, &hSignal{warps: w, fc1: g1.Name(), fc2: g2.Name(), bm: bm, nBlocks: nBlocks, counters: counters})
			}
		}
		return
	}
}

// colBlocks is the column blocks of spec's work items per row tile.
func colBlocks(spec GemmSpec) int { return (spec.N + spec.Tile.BN - 1) / spec.Tile.BN }

// hSignals sets spec's signals or wait for FC1's row tiles when g is the
// FC1 or FC2 of the plan (planHSignals), binding the counters. An FC1
// kernel that cannot signal (other tiles, a fused quantize or a split
// reduction) marks the plan mismatched: FC2 then neither waits nor skips
// its barrier (waitsFor).
func (lw *perOp) hSignals(g moe.GEMM, spec *GemmSpec, bind map[string]string, f fused) {
	i := slices.IndexFunc(lw.hSigs, func(h *hSignal) bool { return h.warps == spec.Tile.Warps })
	if i < 0 {
		return
	}
	h := lw.hSigs[i]
	switch g.Name() {
	case h.fc1:
		if f.quant != nil || f.splitK != 0 || spec.Tile.BM != h.bm || colBlocks(*spec) != h.nBlocks {
			h.mismatch = true
			return
		}
		spec.signalTiles, spec.signalPerItem = true, hSignalPerItem
		bind[RoleTileDone] = h.counters.Name
		h.signalling = append(h.signalling, spec.Name)
	case h.fc2:
		if h.mismatch || len(h.signalling) == 0 || spec.Tile.BM != h.bm || f.quant != nil || f.splitK != 0 {
			return
		}
		spec.waitTiles = h.nBlocks * hSignalPerItem
		bind[RoleTileDone] = h.counters.Name
		h.waiting = append(h.waiting, spec.Name)
	}
}

// waitsFor is the kernels whose phases the phase of kernel name waits for
// through counters (none: it follows a grid barrier).
func (lw *perOp) waitsFor(name string) []string {
	for _, h := range lw.hSigs {
		if !h.mismatch && slices.Contains(h.waiting, name) {
			return h.signalling
		}
	}
	return nil
}

// followsSignals reports whether phase i of ks starts without a grid
// barrier: at every T it runs at, the last phase before it that runs is
// one it waits for through counters (waitsFor).
func (lw *perOp) followsSignals(ks []Kernel, i int) bool {
	from := lw.waitsFor(ks[i].Name)
	if len(from) == 0 {
		return false
	}
	open := runRanges(ks[i]) // i's token counts not yet found to follow a signaller
	for j := i - 1; j >= 0 && len(open) > 0; j-- {
		r := runRanges(ks[j])
		if len(intersectAll(open, r)) == 0 {
			continue
		}
		if !slices.Contains(from, ks[j].Name) {
			return false
		}
		open = subtract(open, r)
	}
	return len(open) == 0
}

// runRanges is the token counts kernel k may run at by its Tokens and
// SkipIfZeroT (launch.Kernel.RunsAt's rules but a row-wise grid's empty
// extent: a superset, which followsSignals may take, as the kernels that
// signal are GEMMs).
func runRanges(k Kernel) []launch.TokenRange {
	lo := int64(0)
	if k.SkipIfZeroT {
		lo = 1
	}
	if len(k.Tokens) == 0 {
		return []launch.TokenRange{{Min: lo, Max: launch.MaxTokens}}
	}
	var out []launch.TokenRange
	for _, r := range k.Tokens {
		if r.Min = max(r.Min, lo); r.Min <= r.Max {
			out = append(out, r)
		}
	}
	return out
}
