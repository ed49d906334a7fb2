package schedule

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/mokc/mokc/layouts"
	"github.com/mokc/mokc/target"
)

// Tile is a CTA tile of a grouped GEMM: M rows (routed tokens of one
// expert), N output columns, K reduction elements per pipeline stage.
// For FC1, N counts gate and up columns together (N/2 of each for the same
// intermediate indices, so the activation epilogue is local to the tile); the
// reduction is over H. For FC2, N counts columns of H and the reduction is
// over I.
type Tile struct {
	M int // rows of A per tile (token rows; one expert's in the routed GEMMs)
	N int // output columns per tile (FC1: N/2 gate + N/2 up)
	K int // reduction elements per pipeline stage (one K block)
}

// String formats the tile as MxNxK.
func (t Tile) String() string { return fmt.Sprintf("%dx%dx%d", t.M, t.N, t.K) }

// WarpRoles is the number of warps in each role of a CTA.
//   - Producer: warps that only load (TMA on sm_90a: one warpgroup of 4
//     with reduced registers, or one warp in blocks of two per SM,
//     Schedule.BlocksPerSM; sm_100a: 1 TMA warp). 0 on sm_80, where the
//     MMA warps issue their own cp.async.
//   - MMA: warps issuing MMAs (sm_80: mma.sync warps; sm_90a: consumer
//     warpgroups x 4, each warpgroup owning 64 rows per wgmma; sm_100a: 1,
//     one thread issues tcgen05.mma).
//   - Epilogue: warps that only run the epilogue (sm_100a: 4, one per TMEM
//     lane quadrant); 0 on sm_80/sm_90a, where the MMA warps run it.
type WarpRoles struct {
	Producer int // load-only warps (TMA); 0 on sm_80
	MMA      int // warps that issue MMAs (sm_90a: 4 per consumer warpgroup)
	Epilogue int // epilogue-only warps (sm_100a: 4); 0 on sm_80/sm_90a
}

// Total is the number of warps of a CTA.
func (w WarpRoles) Total() int { return w.Producer + w.MMA + w.Epilogue }

// Threads is the number of threads of a CTA (32 per warp).
func (s Schedule) Threads() int { return 32 * s.Warps.Total() }

// Schedule says HOW a layer runs on one target: CTA tiles of the two grouped
// GEMMs, the depth of the shared-memory pipeline, warp roles, and the grid.
type Schedule struct {
	Target target.Target // GPU architecture the schedule is compiled for
	// FC1 and FC2 are the tiles of the two grouped GEMMs; the shared
	// experts' GEMMs use the same tiles. Shared experts are BF16: with
	// mxfp8 routed weights they use K/2 (the same bytes per stage).
	FC1 Tile
	FC2 Tile // tile of FC2 (see FC1)
	// Stages is the number of shared-memory pipeline stages (buffers of one
	// K block of A and B each).
	Stages int
	Warps  WarpRoles // warps per role of a CTA (Threads = 32 * Warps.Total())
	// Persistent: a fixed grid of GridCTAs CTAs loops over the tiles
	// (MoK's megakernel design); otherwise one CTA per tile. The sm_90a and
	// sm_100a engines are persistent; the sm_80 engine launches one CTA per
	// tile and its default schedule says so.
	Persistent bool
	// GridCTAs is the persistent grid size; 0 = Target.SMs() (one CTA per
	// SM of the target's reference part). Must be 0 when not Persistent.
	GridCTAs int
	// GroupM orders a persistent grid's work items (row tile, column
	// block): 0 walks the column blocks of one row tile after another, so
	// the CTAs running at once share a row tile and each reads a different
	// slice of the weights, which a large expert streams from HBM once per
	// row tile; G > 0 walks groups of up to G row tiles of one expert
	// column block by column block, so G CTAs read each weight slice while
	// it is in L2 (Triton's GROUP_SIZE_M); an expert with one row tile runs
	// as with 0. The results do not change (each tile is computed the same
	// way wherever it runs). Must be 0 when not Persistent (the sm_80 grid
	// already runs row tiles fastest). DefaultSchedule takes
	// DefaultGroupM on sm_90a and sm_100a.
	GroupM int
	// Cluster is the number of CTAs per cluster: 1, or 2 on sm_90a
	// (Validate refuses 2 on sm_100a, whose engine builds no clusters yet;
	// with cta_group::2 the pair would compute a 2M x N tile, each CTA
	// holding M rows of A and N/2 rows of B, as GemmSmem plans it). On
	// sm_90a the pair
	// walks the routed GEMMs' work items together, the two CTAs on
	// neighbouring column blocks of one row tile: each loads half of the
	// tile's A rows by TMA multicast into both CTAs' shared memory, so A
	// crosses from L2 once per pair (codegen's sm_90a atom; GEMMs over
	// bf16 rows, bf16 or register-fed MXFP8, with grouped weights and an
	// even number of column blocks).
	Cluster int
	// BlocksPerSM is how many blocks of each persistent GEMM kernel an SM
	// holds at once: 0 or 1 for one; 2 on sm_90a, where the GEMMs of the
	// FC1 and FC2 tiles that codegen's engine builds so (bf16 and
	// register-fed MXFP8 GEMMs loading grouped weights and dispatched or
	// dense rows by TMA: Engine.SharesSM) run as blocks of one consumer
	// warpgroup per 64 tile rows (register-fed: per 128 B-tile rows) and
	// the producer of Warps.Producer (4: a warpgroup that gives registers
	// to the consumers with setmaxnreg; 1: one warp, no setmaxnreg), each
	// within half the SM's registers and shared memory, two per SM, so
	// that one block's epilogue runs while the other's wgmma keep the
	// tensor cores busy (and an mxfp8 FC1 of gate/up halves and at most 64
	// token rows quantizes h in its epilogue: moe_quantize_h_rf does not
	// run).
	// The other GEMMs (those the
	// engine does not build so, such as the promoted MXFP8 decode tiles
	// and gathered rows) run one per SM. Not with clusters, the queue
	// walk, the chain, per-expert storage or the expansion.
	BlocksPerSM int
	// Variant, when not nil, is a second shape of the routed-expert GEMMs
	// that the forward runs instead of FC1/FC2 when the mean rows per
	// expert, T*K/E, lies in [Variant.MinRows, Variant.MaxRows]: the
	// program holds both and the runtime picks by T (launch.Kernel.Tokens).
	// The shared-expert GEMMs always use FC1/FC2.
	Variant *TileVariant
	// Decode, when not nil, is a shape of the forward's GEMMs, the routed
	// and the shared experts' (bf16 layers, sm_90a), for the fewest mean
	// rows per expert, [Decode.MinRows, Decode.MaxRows], below the
	// Variant's range: the program holds it beside FC1/FC2 and the
	// Variant, and the runtime picks by T. The default schedule's is
	// decodeVariant's (64-row tiles of 128 columns, one consumer
	// warpgroup, 6 stages, at most 4 mean rows per expert). The backward's
	// GEMMs keep FC1/FC2 (and the Variant).
	Decode *TileVariant
	// FC2Large, when its Tile is not zero, is the routed FC2's tile from
	// FC2Large.MinRows mean rows per expert (T*K/E) on and in the band
	// FC2Large.MidRows below: the register-fed mxfp8 FC2 (sm_90a,
	// MXGemmRegFed) runs it there as moe_fc2_large, the same program form
	// and sums as FC2's kernel (so the same bits), and FC2 elsewhere. Its
	// token ranges lie above the Variant's. The default schedule's
	// (largeRowsFC2) is 192x128x128 in 120..192 rows and from 320 on.
	FC2Large LargeRowsTile
	// WGrad is the backward's weight-gradient kernel (the GEMM whose
	// reduction runs over each expert's rows): WGradMMA (any target; the
	// sm_80 and sm_100a default), WGradWGMMA (sm_90a only, and its
	// default: on the H200 it ran forward + backward 2-25% faster than
	// WGradMMA on four models, docs/perf.md, backward v2) or WGradWS
	// (sm_90a only; the persistent lowering's default there for GEMM
	// blocks of its shape, PersistentWGrad via WithLowering; docs/perf.md,
	// backward v5 and run 55).
	WGrad WGradKernel
	// MXGemm is how the routed GEMMs of an mxfp8 layer run on sm_90a:
	// MXGemmPromote (the zero value: e4m3 wgmma per 32-wide block, promoted
	// with the scales), MXGemmExpand (e4m3 tiles by TMA widened to bf16
	// in shared memory, the bf16 wgmma loop; the same values, docs/mxfp8.md;
	// correct on the H200 and 1.2-1.9x promote's time, docs/perf.md,
	// mxfp8 v9) or MXGemmRegFed (the register-fed GEMM: bf16 MXFP8 values
	// of the rows, the weights widened in registers; docs/mxfp8.md; the
	// default where it runs, DefaultMXGemm). Expand
	// and regfed are refused for bf16 layers and on other targets, and take
	// tiles of K = 128. The default schedule's decode Variant is
	// promote's (its 32-row tiles read the e4m3 rows): expand cannot run
	// it, so Validate refuses it there (switch a schedule with WithMXGemm,
	// which drops it); under regfed an MXOnly variant stays promote's
	// (VariantSchedule) and the program holds both forms of the GEMMs'
	// rows, each written in its GEMMs' token range (codegen.Lower).
	MXGemm MXGemmKind
	// Gather is where the forward's dispatched rows (and the bf16
	// backward's rows of FC1·x) are gathered:
	// GatherFC1 (the zero value) lets FC1 read each row from x by its slot
	// at decode sizes (at most 16 mean rows per expert) where the target's
	// engine does (codegen.Engine.GathersA: sm_90a, bf16 rows without the
	// routing weight on them; and, for T <= 4, the MXFP8 decode FC1's
	// e4m3 rows from x's per-token quantization), one launch and one
	// [T*K, H] round trip fewer (docs/perf.md, gather v2 and v3);
	// GatherSeparate keeps the gather kernel before FC1 at every T (the
	// same results, bitwise); GatherStoreWarps (LoweringPersistent only)
	// is GatherFC1 with, at every T above the decode sizes, a
	// bf16 forward's FC1 phase gathering its rows in its store warps where
	// its kernel form has them (codegen.Engine.StoresGather), with no
	// gather phase there (docs/megakernel.md, "The gather beside FC1");
	// under LoweringPersistent, GatherFC1 does so too from StoreGatherRows
	// mean rows per expert.
	Gather GatherKind
	// StoreGatherRows is the fewest mean rows per expert (T·K/E) from
	// which the persistent kernel of a bf16 forward with GatherFC1
	// gathers FC1's rows in FC1's store warps instead of a gather phase
	// (as GatherStoreWarps does from the first T above the decode sizes;
	// the same results); 0: never. Only LoweringPersistent reads it. The
	// sm_90a default for bf16 layers with grouped weights is
	// DefaultStoreGatherRows, else 0.
	StoreGatherRows int
	// SplitK is whether the dense GEMMs (the shared experts) split their
	// reduction at decode sizes: SplitKAuto (the zero value) where the
	// target's engine does (codegen.Engine.SplitsK: sm_90a) and the
	// lowering's cost model expects a gain (T <= 128 rows, one row tile;
	// docs/perf.md split-K v1); SplitKOff keeps one kernel per GEMM at
	// every T. The split sums in another order: deterministic, not the
	// same bits as the unsplit kernel.
	SplitK SplitKKind
	// Dispatch is how the forward's routing ops init, count, scan and
	// permute run, with the ids form of the routing, past T·top-k = 8192
	// (up to 2048 one block does all four, codegen's moe_dispatch_small;
	// from 2049 to 8192, and with a routing map, the four kernels run
	// whatever this says): DispatchQueue (the zero value) as one kernel,
	// moe_dispatch, whose blocks take numbered work items from a queue in
	// global memory (the count of each 2048-slot chunk, the scan, the
	// permutation of each chunk) and wait for the items they depend on
	// through counters (docs/megakernel.md, step 1); DispatchOps as the
	// four kernels, one per op. The same bytes either way (counts,
	// offsets, work lists, row_of_slot, src_slot, error word).
	Dispatch DispatchKind
	// Items is how the persistent GEMMs over dispatched rows (the routed
	// FC1 and FC2 and their variants, forward and backward) give out their
	// work items: ItemsFixed (the zero value) as a fixed walk, block b
	// taking items b, b + grid, b + 2·grid, ...; ItemsQueue with the fixed
	// walk's rounds but its last (at least two) as before and every later
	// item taken from a queue in global memory (the scratch
	// launch.BufWorkQueue) when the block's producer starts the item before
	// it, so SMs that run fast take more of the tail
	// (docs/megakernel.md, "GEMM items from a queue"). The same bits
	// either way (each output tile is one item, in one K order).
	// DefaultSchedule's on sm_90a with grouped weights: at T = 4096 this
	// walk ran the mxfp8 forward 2-5% faster than the fixed one on four
	// of five presets (olmoe-1b-7b level) and qwen3-30b-a3b's bf16 forward
	// 2% faster, gpt-oss-20b's level, and the T = 64 forwards within 1%
	// (H100 and H200, docs/perf.md, items v3). Validate refuses
	// ItemsQueue off sm_90a, with MXGemmExpand, per-expert weights,
	// clusters, two blocks per SM and a chain (FixedItemsWhereNeeded gives
	// the fixed walk there).
	Items ItemsKind
	// Chain is whether the forward's routed FC1 and FC2 run as one
	// persistent kernel (docs/megakernel.md, step 2): ChainOff (the zero
	// value) launches the two GEMM kernels; ChainFC runs FC1's work items
	// and then FC2's in one kernel, moe_fc1_fc2, each FC2 item starting
	// once its row tile of h is stored (a counter per row tile in the
	// lowering's scratch tile_done<i>, zeroed by the kernel that writes the
	// tile list), so blocks without FC1 items left start FC2 while others
	// finish FC1. The same bits either way. bf16: at every T where FC1
	// and FC2 run kernels of the same tiles (their base kernels over
	// dispatched rows, the GEMM variant's, moe_fc1_fc2_<name>, and at
	// decode sizes FC1's gathering kernel with FC2's,
	// moe_fc1_fc2_gathered, FC2 then without the staged epilogue); mxfp8:
	// the decode tiles' kernels (moe_fc1_fc2_<variant>, FC1's epilogue
	// writing h's MXFP8 form), not where a kernel quantizes h between the
	// GEMMs. sm_90a, grouped weights, without SaveFC1, the fixed walk, one
	// block per SM (an FC2 item waits for other blocks' FC1 items, so all
	// must be resident; Validate refuses the rest, the lowering a schedule
	// whose GEMMs share no kernel).
	Chain ChainKind
	// Lowering is how the program becomes kernels (docs/megakernel.md):
	// LoweringPerOp (the zero value) launches one kernel per op (the
	// kernels of codegen.PerOp); LoweringPersistent runs those kernels as
	// the phases of one persistent kernel per direction (moe_forward,
	// moe_backward: one block per SM, all resident), each phase guarded by
	// the token counts its kernel runs at and followed by a grid-wide
	// barrier (a counter in the scratch work_queue), so the forward is one
	// launch at every T with the same bits as the per-op kernels. sm_90a,
	// one block shape for every GEMM kernel (a GEMM variant of other warps
	// is left out: VariantSchedule), no clusters, one block per SM, the
	// default grid. Validate refuses the rest; the lowering, a program
	// with kernels it cannot run as phases, naming them. Checked on a GPU
	// (docs/perf.md, persistent v1-v3): the bf16 and mxfp8 forwards (the
	// per-op bits, shared experts included) and the bf16 backward (the
	// float64 reference); the mxfp8 backward is built and assembled, not
	// yet run.
	Lowering LoweringKind
	// PhaseTimes instruments the program (the forward's and the
	// backward's): every kernel also takes the scratch buffer
	// launch.BufPhaseTimes and records there, with %globaltimer (ns), when
	// its blocks start (after the wait for the previous kernel) and when
	// their warps return, so that a launcher reads each kernel's place on
	// the device's own timeline without events between the launches (mokc
	// bench --phases; runtime.Layer.PhaseTimes and BackwardPhaseTimes). The
	// outputs do not change; the cost is one reduction per block and one
	// per warp.
	PhaseTimes bool
}

// SplitKKind selects whether the dense GEMMs split their reduction.
type SplitKKind int

// The split-K kinds.
const (
	// SplitKAuto: at decode sizes, where the engine does and the cost
	// model gains (codegen.GemmSpec.SplitK).
	SplitKAuto SplitKKind = iota
	// SplitKOff: one work item per output tile at every T.
	SplitKOff
)

// String returns "auto" or "off".
func (k SplitKKind) String() string {
	if k == SplitKOff {
		return "off"
	}
	return "auto"
}

// UnmarshalText sets k from "auto" or "off" (ParseSplitKKind).
func (k *SplitKKind) UnmarshalText(b []byte) (err error) {
	*k, err = ParseSplitKKind(string(b))
	return err
}

// ParseSplitKKind accepts "auto" and "off" (in any case); any other value
// is an error naming it.
func ParseSplitKKind(v string) (SplitKKind, error) {
	switch strings.ToLower(v) {
	case "auto":
		return SplitKAuto, nil
	case "off":
		return SplitKOff, nil
	}
	return 0, fmt.Errorf("%q: want auto or off", v)
}

// DispatchKind selects how the routing ops run past decode sizes.
type DispatchKind int

// The dispatch kinds.
const (
	// DispatchQueue: one kernel with a work queue and dependency counters.
	DispatchQueue DispatchKind = iota
	// DispatchOps: one kernel per op (init, count, scan, permute).
	DispatchOps
)

// String returns "queue" or "ops".
func (k DispatchKind) String() string {
	if k == DispatchOps {
		return "ops"
	}
	return "queue"
}

// UnmarshalText sets k from "queue" or "ops" (ParseDispatchKind).
func (k *DispatchKind) UnmarshalText(b []byte) (err error) {
	*k, err = ParseDispatchKind(string(b))
	return err
}

// ParseDispatchKind accepts "queue" and "ops" (in any case); any other
// value is an error naming it.
func ParseDispatchKind(v string) (DispatchKind, error) {
	switch strings.ToLower(v) {
	case "queue":
		return DispatchQueue, nil
	case "ops":
		return DispatchOps, nil
	}
	return 0, fmt.Errorf("%q: want queue or ops", v)
}

// ItemsKind selects how the persistent GEMMs give out their work items.
type ItemsKind int

// The item kinds.
const (
	// ItemsFixed: block b runs items b, b + grid, ...
	ItemsFixed ItemsKind = iota
	// ItemsQueue: past the fixed walk's rounds but its last, a block takes
	// its items from a queue.
	ItemsQueue
)

// String returns "fixed" or "queue".
func (k ItemsKind) String() string {
	if k == ItemsQueue {
		return "queue"
	}
	return "fixed"
}

// UnmarshalText sets k from "fixed" or "queue" (ParseItemsKind).
func (k *ItemsKind) UnmarshalText(b []byte) (err error) {
	*k, err = ParseItemsKind(string(b))
	return err
}

// ParseItemsKind accepts "fixed" and "queue" (in any case); any other
// value is an error naming it.
func ParseItemsKind(v string) (ItemsKind, error) {
	switch strings.ToLower(v) {
	case "fixed":
		return ItemsFixed, nil
	case "queue":
		return ItemsQueue, nil
	}
	return 0, fmt.Errorf("%q: want fixed or queue", v)
}

// ChainKind selects whether the forward's FC1 and FC2 share a kernel.
type ChainKind int

// The chain kinds.
const (
	// ChainOff: FC1 and FC2 are a kernel each.
	ChainOff ChainKind = iota
	// ChainFC: FC1's and FC2's work items in one kernel, moe_fc1_fc2.
	ChainFC
)

// String returns "off" or "fc1-fc2".
func (k ChainKind) String() string {
	if k == ChainFC {
		return "fc1-fc2"
	}
	return "off"
}

// UnmarshalText sets k from "off" or "fc1-fc2" (ParseChainKind).
func (k *ChainKind) UnmarshalText(b []byte) (err error) {
	*k, err = ParseChainKind(string(b))
	return err
}

// ParseChainKind accepts "off" and "fc1-fc2" (in any case); any other
// value is an error naming it.
func ParseChainKind(v string) (ChainKind, error) {
	switch strings.ToLower(v) {
	case "off":
		return ChainOff, nil
	case "fc1-fc2":
		return ChainFC, nil
	}
	return 0, fmt.Errorf("%q: want off or fc1-fc2", v)
}

// LoweringKind selects how a program becomes kernels (Schedule.Lowering).
type LoweringKind int

// The lowering kinds.
const (
	// LoweringPerOp: one kernel per op, launched in op order.
	LoweringPerOp LoweringKind = iota
	// LoweringPersistent: one persistent kernel per direction whose
	// phases are the per-op kernels.
	LoweringPersistent
)

// WithLowering returns s with Lowering k and, under LoweringPersistent,
// with PersistentWGrad(s) where s has its target's DefaultWGrad (set WGrad
// after it for another weight-gradient kernel). codegen.Lower takes a
// schedule's WGrad as it is: only this method picks the persistent
// default.
func (s Schedule) WithLowering(k LoweringKind) Schedule {
	if k == LoweringPersistent && s.WGrad == DefaultWGrad(s.Target) {
		s.WGrad = PersistentWGrad(s)
	}
	s.Lowering = k
	return s
}

// String returns "per-op" or "persistent".
func (k LoweringKind) String() string {
	if k == LoweringPersistent {
		return "persistent"
	}
	return "per-op"
}

// UnmarshalText sets k from "per-op" or "persistent" (ParseLoweringKind).
func (k *LoweringKind) UnmarshalText(b []byte) (err error) {
	*k, err = ParseLoweringKind(string(b))
	return err
}

// ParseLoweringKind accepts "per-op" and "persistent" (in any case); any
// other value is an error naming it.
func ParseLoweringKind(v string) (LoweringKind, error) {
	switch strings.ToLower(v) {
	case "per-op":
		return LoweringPerOp, nil
	case "persistent":
		return LoweringPersistent, nil
	}
	return 0, fmt.Errorf("%q: want per-op or persistent", v)
}

// GatherKind selects where the forward's dispatched rows are gathered.
type GatherKind int

// The gather kinds.
const (
	// GatherFC1: at decode sizes FC1's producer copies each dispatched row
	// from x where the engine does (codegen.GemmSpec.GatherK), else a
	// gather kernel writes the rows.
	GatherFC1 GatherKind = iota
	// GatherSeparate: a gather kernel writes the dispatched rows, FC1
	// reads them.
	GatherSeparate
	// GatherStoreWarps: as GatherFC1, and where the gather kernel would
	// run, the persistent kernel's FC1 phase gathers the rows in the
	// staged epilogue's store warps instead (LoweringPersistent, a bf16
	// forward on sm_90a; codegen/store_gather.go).
	GatherStoreWarps
)

// DefaultStoreGatherRows is Schedule.StoreGatherRows of sm_90a bf16 layers
// with grouped weights: measured on an H100 (docs/perf.md, run 51), the
// gather beside FC1 made the persistent forward 0.9% faster than its
// gather phase at 256 mean rows per expert (qwen3-30b-a3b T = 4096) and
// 6.8% at 1024 (T = 16384), and 1.6% slower at 128 (gpt-oss-120b T =
// 4096), where FC1 streams its weights and the gather's bytes slow it
// more than the gather phase takes.
const DefaultStoreGatherRows = 256

// String returns "fc1", "separate" or "store-warps".
func (k GatherKind) String() string {
	switch k {
	case GatherSeparate:
		return "separate"
	case GatherStoreWarps:
		return "store-warps"
	}
	return "fc1"
}

// UnmarshalText sets k from "fc1", "separate" or "store-warps"
// (ParseGatherKind).
func (k *GatherKind) UnmarshalText(b []byte) (err error) {
	*k, err = ParseGatherKind(string(b))
	return err
}

// ParseGatherKind accepts "fc1", "separate" and "store-warps" (in any
// case); any other value is an error naming it.
func ParseGatherKind(v string) (GatherKind, error) {
	switch strings.ToLower(v) {
	case "fc1":
		return GatherFC1, nil
	case "separate":
		return GatherSeparate, nil
	case "store-warps":
		return GatherStoreWarps, nil
	}
	return 0, fmt.Errorf("%q: want fc1, separate or store-warps", v)
}

// WithMXGemm returns s with its mxfp8 routed GEMMs run by k; with
// MXGemmExpand without a GEMM variant, since the default schedule's decode
// variant is promote's (see MXGemm), and with the fixed walk of work items
// (the expansion's converter warps have no queue), and with MXGemmRegFed
// without a variant that is not MXOnly (one for the bf16 GEMMs too, which
// cannot be promote's), and without FC2Large but for MXGemmRegFed. The
// tiles stay: DefaultScheduleMX gives each kind's.
func (s Schedule) WithMXGemm(k MXGemmKind) Schedule {
	s.MXGemm = k
	if k != MXGemmRegFed {
		s.FC2Large = LargeRowsTile{}
	}
	if k == MXGemmExpand || k == MXGemmRegFed && s.Variant != nil && !s.Variant.MXOnly {
		s.Variant = nil
	}
	if k == MXGemmExpand {
		s.Items = ItemsFixed
	}
	return s
}

// FixedItemsWhereNeeded returns s with the fixed walk of work items
// (ItemsFixed) where one of its other settings needs it and the queue
// (ItemsQueue, DefaultSchedule's on sm_90a) cannot run: CTA pairs
// (Cluster 2), two blocks per SM, a chained FC1 and FC2 kernel, the
// mxfp8 expansion, a target other than sm_90a or per-expert weights; s
// unchanged otherwise. For callers that change a default schedule's other
// fields and keep its walk where it can run (mokc's flags without
// --items).
func (s Schedule) FixedItemsWhereNeeded(l Layer) Schedule {
	if s.Items == ItemsQueue && (s.Cluster > 1 || s.BlocksPerSM == 2 || s.Chain != ChainOff || s.MXGemm == MXGemmExpand ||
		s.Target != target.SM90a || l.Storage != GroupedWeights) {
		s.Items = ItemsFixed
	}
	return s
}

// StoresGather reports whether the persistent kernel of layer l's forward
// under s gathers FC1's rows in FC1's store warps at some T
// (GatherStoreWarps, or GatherFC1 with StoreGatherRows): sm_90a, the
// persistent lowering, bf16 weights in grouped storage, no routing weight
// on the rows (Layer.RouterWeightOnInput), FC1 and FC2 not chained, one
// block per SM and no clusters (codegen/lower_store_gather.go).
func (s Schedule) StoresGather(l Layer) bool {
	return (s.Gather == GatherStoreWarps || s.Gather == GatherFC1 && s.StoreGatherRows > 0) &&
		s.Target == target.SM90a && s.Lowering == LoweringPersistent && l.Precision == BF16 && l.Storage == GroupedWeights &&
		!l.RouterWeightOnInput && s.Chain == ChainOff && s.Cluster <= 1 && s.BlocksPerSM <= 1
}

// MXGemmKind selects how an MXFP8 GEMM runs on sm_90a.
type MXGemmKind int

// The MXFP8 GEMM kinds.
const (
	// MXGemmPromote: wgmma m64nNk32 on e4m3 per 32-wide K block into
	// partial sums, each promoted into the f32 accumulators times the two
	// block scales.
	MXGemmPromote MXGemmKind = iota
	// MXGemmExpand: the producer widens e4m3 times scale to bf16 in shared
	// memory (exact) and the consumers run the bf16 wgmma loop.
	MXGemmExpand
	// MXGemmRegFed: the gather and the quantization of h write the rows'
	// MXFP8 values as bf16 (moe.RegisterFed), and the consumers widen the
	// e4m3 weights times their scales to bf16 in registers and run bf16
	// wgmma with them as A (codegen.GemmSpec.MXRegisterFed; exact).
	MXGemmRegFed
)

// String returns "promote", "expand" or "regfed".
func (k MXGemmKind) String() string {
	switch k {
	case MXGemmExpand:
		return "expand"
	case MXGemmRegFed:
		return "regfed"
	}
	return "promote"
}

// UnmarshalText sets k from "promote" or "expand" (ParseMXGemmKind).
func (k *MXGemmKind) UnmarshalText(b []byte) (err error) {
	*k, err = ParseMXGemmKind(string(b))
	return err
}

// ParseMXGemmKind accepts "promote", "expand" and "regfed" (in any case).
func ParseMXGemmKind(v string) (MXGemmKind, error) {
	switch strings.ToLower(v) {
	case "promote":
		return MXGemmPromote, nil
	case "expand":
		return MXGemmExpand, nil
	case "regfed":
		return MXGemmRegFed, nil
	}
	return 0, fmt.Errorf("mxfp8 GEMM %q: want promote, expand or regfed", v)
}

// WGradKernel selects the tensor-core instruction of the backward's
// weight gradients.
type WGradKernel int

// The weight-gradient kernels.
const (
	// WGradMMA: mma.sync.m16n8k16 over ldmatrix.trans fragments (sm_80 and
	// later; PTX ISA 9.7.14).
	WGradMMA WGradKernel = iota
	// WGradWGMMA: wgmma.mma_async m64n128k16 over MN-major shared-memory
	// tiles (sm_90a; PTX ISA 9.7.15).
	WGradWGMMA
	// WGradWS: wgmma.mma_async m64n128k16 in a warp-specialized kernel (a
	// cp.async producer warpgroup, consumer warpgroups that keep a wgmma
	// group in flight; sm_90a). Per-op level with WGradWGMMA at
	// qwen3-30b-a3b T = 4096 and 1.7% slower at T = 1100 on an H100
	// (docs/perf.md, run 59); the persistent lowering's default
	// (PersistentWGrad), where its blocks are GEMM phases (run 55). The
	// same bits as WGradWGMMA (each row summed in the same k16 steps;
	// equal digests on qwen3-30b-a3b, runs 55 and 59).
	WGradWS
)

// DefaultWGrad is target's default weight-gradient kernel: WGradWGMMA on
// sm_90a (docs/perf.md, backward v2: faster than WGradMMA on every model
// timed), WGradMMA on the others.
func DefaultWGrad(t target.Target) WGradKernel {
	if t == target.SM90a {
		return WGradWGMMA
	}
	return WGradMMA
}

// WGradWSThreads is the threads of a block of WGradWS's kernel: a
// producer warpgroup and two consumer warpgroups (codegen's
// emitWeightGradWS), the default sm_90a schedule's GEMM block.
const WGradWSThreads = 384

// PersistentWGrad is the weight-gradient kernel the persistent lowering
// takes by default for schedule s (Schedule.WithLowering): WGradWS on
// sm_90a where s's GEMM blocks have WGradWSThreads threads, so the weight
// gradients run as GEMM phases of the same block (a persistent kernel
// runs blocks of one shape); the row-wise WGradWGMMA runs there as virtual
// blocks, one per SM at a time, and made the backward 4-7% slower at
// qwen3-30b-a3b T = 1100..4096 on an H100 (docs/perf.md, run 55).
// DefaultWGrad otherwise.
func PersistentWGrad(s Schedule) WGradKernel {
	if s.Target == target.SM90a && s.Threads() == WGradWSThreads {
		return WGradWS
	}
	return DefaultWGrad(s.Target)
}

// String returns "mma", "wgmma" or "wgmma-ws".
func (k WGradKernel) String() string {
	switch k {
	case WGradWGMMA:
		return "wgmma"
	case WGradWS:
		return "wgmma-ws"
	}
	return "mma"
}

// UnmarshalText sets k from "mma", "wgmma" or "wgmma-ws" (ParseWGradKernel).
func (k *WGradKernel) UnmarshalText(b []byte) (err error) {
	*k, err = ParseWGradKernel(string(b))
	return err
}

// ParseWGradKernel accepts "mma", "wgmma" and "wgmma-ws".
func ParseWGradKernel(v string) (WGradKernel, error) {
	switch v {
	case "mma":
		return WGradMMA, nil
	case "wgmma":
		return WGradWGMMA, nil
	case "wgmma-ws":
		return WGradWS, nil
	}
	return 0, fmt.Errorf("weight-gradient kernel %q: want mma, wgmma or wgmma-ws", v)
}

// maxGridCTAs bounds Schedule.GridCTAs (16 CTAs per SM of a 4096-SM part
// would still fit).
const maxGridCTAs = 65535

// DefaultGroupM is the default schedules' Schedule.GroupM on the
// persistent targets. On the H200 (docs/perf.md, raster v2; device run 17)
// groups of 8 row tiles within one expert ran mixtral-8x7b's forward at
// T = 4096 in 4.21 ms instead of 5.26 (FC1 4.03 -> 3.17 ms) and left the GEMMs of layers
// whose experts have one or two row tiles (deepseek-v3, qwen3-30b-a3b,
// gpt-oss-120b) within 3% (deepseek-v3's FC1 and FC2 2-3% faster).
const DefaultGroupM = 8

// maxGroupM bounds Schedule.GroupM: a group's row tiles times the column
// blocks it walks at once stay within a persistent grid.
const maxGroupM = 1024

// TileVariant is a second tile shape of the routed-expert GEMMs, chosen by
// the mean rows per expert. Its Stages and MMAWarps replace the
// schedule's for these two kernels; everything else is the schedule's.
type TileVariant struct {
	// Name is the suffix of the variant's kernels (moe_fc1_<Name>): lower
	// case letters and digits.
	Name             string
	FC1, FC2         Tile // replace Schedule.FC1 and Schedule.FC2
	Stages           int  // replaces Schedule.Stages
	MMAWarps         int  // replaces Schedule.Warps.MMA
	MinRows, MaxRows int  // mean rows per expert T*K/E, inclusive
	// MXOnly: the variant replaces the tiles of the MXFP8 GEMMs only (the
	// forward's routed GEMMs, the backward's FC1 recompute); the bf16
	// GEMMs of an mxfp8 layer's backward (the data gradients) keep
	// FC1/FC2. 32-row tiles (the sm_90a operand swap) need it: they run
	// the promoted MXFP8 GEMMs only.
	MXOnly bool
}

// LargeRowsTile is a second tile of the register-fed mxfp8 FC2 for many
// rows per expert (Schedule.FC2Large). The zero value is none.
type LargeRowsTile struct {
	Tile Tile // the FC2 tile, MxNxK (M: token rows)
	// MinRows is the fewest mean rows per expert T*K/E from which the tile
	// runs at every larger T; 0: none (the tile runs in MidRows only).
	MinRows int
	// MidRows is a band of mean rows per expert in which the tile runs
	// too, ending at or below MinRows (HI = MinRows joins the two ranges:
	// mean rows are T*K/E, not whole numbers); the zero value is none.
	MidRows RowsBand
}

// Set reports whether r holds a tile.
func (r LargeRowsTile) Set() bool { return r.Tile != Tile{} }

// MinTokens returns the smallest T >= 1 at which r's tile runs from
// MinRows on for a layer with top-k k and e experts (T*k/e >= MinRows);
// it runs at every larger T. Meaningless when MinRows is 0.
func (r LargeRowsTile) MinTokens(k, e int) int64 {
	return firstTokens(r.MinRows, k, e)
}

// String is "MxNxK from MIN rows per expert", with "in LO..HI and"
// before "from" for a band, or "MxNxK in LO..HI rows per expert" for a
// band alone; "none" for the zero value.
func (r LargeRowsTile) String() string {
	switch {
	case !r.Set():
		return "none"
	case r.MidRows.Set():
		return fmt.Sprintf("%v in %s rows per expert", r.Tile, r.rowsText())
	}
	return fmt.Sprintf("%v %s rows per expert", r.Tile, r.rowsText())
}

// rowsText is where r's tile runs in mean rows per expert: "LO..HI and
// from MIN", either part alone when the other is not set.
func (r LargeRowsTile) rowsText() string {
	var parts []string
	if r.MidRows.Set() {
		parts = append(parts, r.MidRows.String())
	}
	if r.MinRows > 0 {
		parts = append(parts, fmt.Sprintf("from %d", r.MinRows))
	}
	return strings.Join(parts, " and ")
}

// Where describes where r's tile runs on a layer with top-k k and e
// experts, in mean rows per expert and tokens: for mixtral-8x7b's default
// "in 120..192 mean rows per expert (T = 480..768) and from 320 mean rows
// per expert on (T >= 1280)", either part alone when the other is not
// set.
func (r LargeRowsTile) Where(k, e int) string {
	var parts []string
	if r.MidRows.Set() {
		lo, hi := r.MidRows.Tokens(k, e)
		parts = append(parts, fmt.Sprintf("in %v mean rows per expert (T = %d..%d)", r.MidRows, lo, hi))
	}
	if r.MinRows > 0 {
		parts = append(parts, fmt.Sprintf("from %d mean rows per expert on (T >= %d)", r.MinRows, r.MinTokens(k, e)))
	}
	return strings.Join(parts, " and ")
}

// midHoldsT reports whether r's band holds a token count T >= 1 of l
// (RowsBand.Tokens not empty).
func (r LargeRowsTile) midHoldsT(l Layer) bool {
	lo, hi := r.MidRows.Tokens(l.TopK, l.Experts)
	return lo <= hi
}

// RowsBand is the inclusive band Lo..Hi of mean rows per expert T*K/E in
// which a tile runs (LargeRowsTile.MidRows). The zero value is none.
type RowsBand struct{ Lo, Hi int }

// Set reports whether b is a band (Lo or Hi not zero; Validate checks
// 1 <= Lo <= Hi).
func (b RowsBand) Set() bool { return b != RowsBand{} }

// String is "LO..HI", or "off" for the zero value.
func (b RowsBand) String() string {
	if !b.Set() {
		return "off"
	}
	return fmt.Sprintf("%d..%d", b.Lo, b.Hi)
}

// UnmarshalText parses "LO..HI" (whole numbers) or "off" (also "0": the
// zero value); "0..0" is refused (not a band; off says none). Validate
// checks the band against the layer and the schedule.
func (b *RowsBand) UnmarshalText(text []byte) error {
	t := strings.TrimSpace(string(text))
	if t == "off" || t == "0" {
		*b = RowsBand{}
		return nil
	}
	lo, hi, ok := strings.Cut(t, "..")
	var v RowsBand
	var err1, err2 error
	v.Lo, err1 = strconv.Atoi(lo)
	v.Hi, err2 = strconv.Atoi(hi)
	if !ok || err1 != nil || err2 != nil || v == (RowsBand{}) {
		return fmt.Errorf("%q: want LO..HI mean rows per expert (e.g. 120..192) or off", t)
	}
	*b = v
	return nil
}

// Tokens returns the token range [lo, hi] of the band for a layer with
// top-k k and e experts: the T >= 1 with Lo <= T*k/e <= Hi (as
// TileVariant.VariantTokens); lo > hi when no T is in it.
func (b RowsBand) Tokens(k, e int) (lo, hi int64) {
	return firstTokens(b.Lo, k, e), int64(b.Hi) * int64(e) / int64(k)
}

// firstTokens is the smallest T >= 1 with T*k/e >= rows (mean rows per
// expert of a layer with top-k k and e experts).
func firstTokens(rows, k, e int) int64 {
	K, E := int64(k), int64(e)
	return max((int64(rows)*E+K-1)/K, 1)
}

// LargeSchedule returns s with FC2 = s.FC2Large.Tile and neither the
// variant nor FC2Large: the schedule of the moe_fc2_large kernel. ok is
// false when s has no FC2Large.
func (s Schedule) LargeSchedule() (v Schedule, ok bool) {
	if !s.FC2Large.Set() {
		return s, false
	}
	v = s
	v.FC2, v.Variant, v.Decode, v.FC2Large = s.FC2Large.Tile, nil, nil, LargeRowsTile{}
	return v, true
}

// WithFC2LargeFrom returns s with FC2Large running from minRows mean rows
// per expert on: the default's tile (largeRowsFC2's, 192x128x128 with K as
// s.FC2) where s has none. minRows <= 0 drops that range: s keeps
// FC2Large for its band (MidRows) alone, or has none without one.
// Validate says whether the layer and s allow it.
func (s Schedule) WithFC2LargeFrom(minRows int) Schedule {
	return s.withFC2Large(max(minRows, 0), s.FC2Large.MidRows)
}

// WithFC2LargeMid returns s with FC2Large also running in the band b of
// mean rows per expert: the default's tile where s has none. The zero b
// drops the band: s keeps FC2Large from its MinRows on, or has none
// without it. Validate says whether the layer and s allow it.
func (s Schedule) WithFC2LargeMid(b RowsBand) Schedule {
	return s.withFC2Large(s.FC2Large.MinRows, b)
}

// withFC2Large is s with FC2Large from minRows on and in band b: none
// when neither is set, else s's tile or the default's.
func (s Schedule) withFC2Large(minRows int, b RowsBand) Schedule {
	if minRows == 0 && !b.Set() {
		s.FC2Large = LargeRowsTile{}
		return s
	}
	if !s.FC2Large.Set() {
		s.FC2Large.Tile = largeRowsTile(s)
	}
	s.FC2Large.MinRows, s.FC2Large.MidRows = minRows, b
	return s
}

// FC2LargeWhereValid returns s without the parts of FC2Large that l and
// the rest of s do not allow: without its band (MidRows) when that makes s
// valid (a GEMM variant reaching into the band: --variant-max-rows), else
// without FC2Large when that does (a schedule flag such as --cluster 2 or
// --chain fc1-fc2 that the large tile does not run with); else s.
func (s Schedule) FC2LargeWhereValid(l Layer) Schedule {
	if !s.FC2Large.Set() || s.Validate(l) == nil {
		return s
	}
	if s.FC2Large.MidRows.Set() && s.FC2Large.MinRows > 0 {
		if t := s.WithFC2LargeMid(RowsBand{}); t.Validate(l) == nil {
			return t
		}
	}
	t := s
	t.FC2Large = LargeRowsTile{}
	if t.Validate(l) == nil {
		return t
	}
	return s
}

// variantName is the form of TileVariant.Name.
var variantName = regexp.MustCompile(`^[a-z0-9]+$`)

// VariantSchedule returns s with the variant's tiles, stages and MMA warps
// and neither the variant nor FC2Large (the schedule of the variant's two GEMMs). ok is false when
// s has no variant. The result's tiles apply to the variant's GEMMs only: an
// MXOnly variant's 32-row tiles (the operand swap) are valid there and
// nowhere else, so Validate refuses v itself; validate s, which checks them.
// An MXOnly variant of a MXGemmRegFed schedule runs promote's GEMMs (v's
// MXGemm is MXGemmPromote).
func (s Schedule) VariantSchedule() (v Schedule, ok bool) {
	if s.Variant == nil {
		return s, false
	}
	v = s.withTiles(*s.Variant)
	if v.MXGemm == MXGemmRegFed && s.Variant.MXOnly {
		v.MXGemm = MXGemmPromote // the decode tiles are promote's operand swap
	}
	return v, true
}

// DecodeSchedule returns s with the Decode variant's tiles, stages and MMA
// warps and neither variant nor FC2Large: the schedule of the forward's
// routed GEMMs at the token counts of Decode. ok is false when s has no
// Decode.
func (s Schedule) DecodeSchedule() (v Schedule, ok bool) {
	if s.Decode == nil {
		return s, false
	}
	return s.withTiles(*s.Decode), true
}

// withTiles is s with t's tiles, stages and MMA warps and neither variant
// nor FC2Large: the schedule of the GEMMs t runs (VariantSchedule,
// DecodeSchedule).
func (s Schedule) withTiles(t TileVariant) Schedule {
	s.FC1, s.FC2, s.Stages, s.Warps.MMA = t.FC1, t.FC2, t.Stages, t.MMAWarps
	s.Variant, s.Decode, s.FC2Large = nil, nil, LargeRowsTile{}
	return s
}

// SameBlocks reports whether the variant's GEMM kernels run blocks of
// the same warps as the base GEMMs of s (its MMA warps are s's): the
// persistent lowering (Schedule.Lowering) runs them as phases of the base
// GEMMs' persistent kernel, and a variant of other blocks in a persistent
// kernel of its own, launched in the variant's token range instead.
func (v TileVariant) SameBlocks(s Schedule) bool { return v.MMAWarps == s.Warps.MMA }

// VariantTokens returns the inclusive token range [lo, hi] in which the
// variant runs for a layer with top-k k and e experts: the T >= 1 with
// MinRows <= T*k/e <= MaxRows (T = 0 launches no GEMM). lo > hi when no T
// qualifies.
func (v TileVariant) VariantTokens(k, e int) (lo, hi int64) {
	return RowsBand{v.MinRows, v.MaxRows}.Tokens(k, e)
}

// GridText describes the grid: "one CTA per tile" or "persistent, N CTAs".
func (s Schedule) GridText() string {
	switch {
	case !s.Persistent:
		return "one CTA per tile"
	case s.GridCTAs > 0:
		return fmt.Sprintf("persistent, %d CTAs%s", s.GridCTAs, s.groupText())
	}
	return fmt.Sprintf("persistent, %d CTAs (one per SM)%s", s.Target.SMs(), s.groupText())
}

// groupText is ", row tiles in groups of G" for GroupM = G > 0, else "".
func (s Schedule) groupText() string {
	if s.GroupM > 0 {
		return fmt.Sprintf(", row tiles in groups of %d", s.GroupM)
	}
	return ""
}

// String is a one-line summary of the schedule (the weight-gradient
// kernel only when it is not the target's DefaultWGrad).
func (s Schedule) String() string {
	grid := s.GridText()
	text := fmt.Sprintf("%v: FC1 %v FC2 %v stages=%d warps=%d+%d+%d (producer+mma+epilogue) cluster=%d %s",
		s.Target, s.FC1, s.FC2, s.Stages, s.Warps.Producer, s.Warps.MMA, s.Warps.Epilogue, s.Cluster, grid)
	if s.BlocksPerSM > 1 {
		text += fmt.Sprintf("; %d blocks per SM where the GEMM's tiles fit (%d CTAs)", s.BlocksPerSM, s.BlocksPerSM*s.Target.SMs())
	}
	for _, v := range []*TileVariant{s.Decode, s.Variant} {
		if v != nil {
			text += fmt.Sprintf("; %d..%d rows per expert: FC1 %v FC2 %v stages=%d mma warps=%d",
				v.MinRows, v.MaxRows, v.FC1, v.FC2, v.Stages, v.MMAWarps)
		}
	}
	if r := s.FC2Large; r.Set() {
		text += fmt.Sprintf("; %s rows per expert: FC2 %v", r.rowsText(), r.Tile)
	}
	if s.Gather != GatherFC1 {
		text += fmt.Sprintf("; gather %v", s.Gather)
	}
	if s.SplitK != SplitKAuto {
		text += fmt.Sprintf("; split-k %v", s.SplitK)
	}
	if s.Dispatch != DispatchQueue {
		text += fmt.Sprintf("; dispatch %v", s.Dispatch)
	}
	if s.Items != ItemsFixed {
		text += fmt.Sprintf("; GEMM items from a %v", s.Items)
	}
	if s.Chain != ChainOff {
		text += fmt.Sprintf("; chain %v", s.Chain)
	}
	if s.Lowering != LoweringPerOp {
		text += fmt.Sprintf("; lowering %v", s.Lowering)
		if s.Gather == GatherFC1 && s.StoreGatherRows > 0 {
			text += fmt.Sprintf("; store-gather-min-rows %d", s.StoreGatherRows)
		}
	}
	if s.MXGemm != MXGemmPromote {
		text += fmt.Sprintf("; mxfp8 GEMMs by %v", s.MXGemm)
	}
	if s.WGrad != DefaultWGrad(s.Target) {
		text += fmt.Sprintf("; backward weight gradients on %v", s.WGrad)
	}
	if s.PhaseTimes {
		text += "; kernels record phase times"
	}
	return text
}

// operandBytes is the size of one element of the GEMM operands: 2 (bf16) or
// 1 (e4m3 for mxfp8; both operands are quantized, as tensor cores need).
func operandBytes(l Layer) int {
	if l.Precision == MXFP8 {
		return 1
	}
	return 2
}

// GemmSmem is the shared-memory (and sm_100a tensor-memory) plan of one CTA
// of GEMM tile t (fc1: the gated FC1, whose staged epilogue holds N/2 output
// columns), computed by layouts.PlanGemmSmem, the one computation the
// engines of package codegen lay out their kernels with:
//   - sm_80: Stages buffers of A (M rows) and B (N rows), each row K
//     elements plus 16 bytes of padding (ldmatrix without bank conflicts).
//   - sm_90a: 1024 bytes of alignment slack, Stages buffers of A and B
//     (128-byte swizzled), a full and an empty mbarrier per stage, and, when
//     it fits, the weights are grouped and the output is bf16 (not the
//     mxfp8 FC1, not the operand swap), the staged epilogue's bf16 tile
//     of M rows of N/2 (FC1) or N (FC2) columns plus 16 bytes of padding.
//   - sm_100a: the same ring and mbarriers, the accumulator mbarriers and
//     the TMEM address slot (48 bytes); with Cluster = 2 each CTA holds N/2
//     rows of B. TMEMColumns: two accumulator buffers of N columns (and the
//     MXFP8 scales), a power of two.
//
// mxfp8 tiles are e4m3 with their scales (one per 32 K elements per row;
// f32 on sm_90a) and the producer's code slots (layouts.MXCodeSlots); with MXGemmExpand they are the bf16 tiles of K/2 the
// expansion writes beside the e4m3 tiles TMA fills (E4M3Staging), with no
// scales and no staging tile. A promoted mxfp8 tile of 32 rows on sm_90a
// is planned for the operand swap (layouts.GemmConfig.SwapAB: the token
// tile laid out as wgmma's B). The tile must have passed the shape rules
// of Validate.
func (s Schedule) GemmSmem(l Layer, t Tile, fc1 bool) (*layouts.GemmSmem, error) {
	mx := l.Precision == MXFP8
	expand := mx && s.MXGemm == MXGemmExpand
	regFed := mx && s.MXGemm == MXGemmRegFed
	c := layouts.GemmConfig{Target: s.Target, DType: layouts.DTypeBF16, M: t.M, BRows: t.N, K: t.K, Stages: s.Stages,
		Scales: mx && !expand, N: l.Hidden}
	if fc1 {
		c.GateUp, c.N = layouts.GateUpHalves, l.Intermediate
		switch {
		case l.GateUpInterleaved:
			c.GateUp = layouts.GateUpInterleaved
		case s.FC1HalvesInPairs(l, t):
			c.GateUp = layouts.GateUpHalvesInPairs
		}
	}
	switch {
	case expand:
		c.K, c.E4M3Staging = t.K/2, true
	case mx:
		k := l.Hidden // the GEMM's reduction: FC1 over H, FC2 over I
		if !fc1 {
			k = l.Intermediate
		}
		c.DType, c.CodeSlots = layouts.DTypeE4M3, layouts.MXCodeSlots((k+t.K-1)/t.K)
	}
	if s.Cluster == 2 && s.Target == target.SM100a {
		c.BRows = t.N / 2
	}
	c.SwapAB = mx && !expand && s.Target == target.SM90a && (t.M == 32 || regFed)
	c.ABF16 = regFed
	if s.Items == ItemsQueue {
		c.ItemSlots = layouts.ItemSlots(s.Stages) // the routed GEMMs' item ring (the dense ones have none: an upper bound)
	}
	if s.Target == target.SM90a && l.Storage != PerExpertWeights && !expand && !(mx && fc1) {
		// The producer warps store the staged tile; with per-expert
		// weights they copy B instead, and there is no staging (nor for
		// the mxfp8 FC1, whose output h is f32; PlanGemmSmem plans none
		// for the operand swap).
		c.StagingCols = t.N
		if fc1 {
			c.StagingCols /= 2
		}
	}
	return layouts.PlanGemmSmem(c)
}

// SharedMemoryBytes is the dynamic shared memory one CTA of the schedule
// allocates for GEMM tile t (GemmSmem's Bytes; the larger of FC1 and FC2 is
// what counts), 0 when the tile has no valid layout.
func (s Schedule) SharedMemoryBytes(l Layer, t Tile, fc1 bool) int {
	p, err := s.GemmSmem(l, t, fc1)
	if err != nil {
		return 0
	}
	return p.Bytes
}

// TMEMColumns is the number of tensor-memory columns (of 128 lanes x 32
// bits) an sm_100a CTA allocates for tile t (GemmSmem's TMEMColumns); 0 on
// other targets.
func (s Schedule) TMEMColumns(l Layer, t Tile) int {
	p, err := s.GemmSmem(l, t, false)
	if err != nil {
		return 0
	}
	return p.TMEMColumns
}

// Validate checks the schedule against the layer it runs and returns the
// first broken rule as a *FieldError naming the field, its value and the
// rule (MMA shape multiples, warp-role counts, shared-memory and TMEM
// budgets of the target). The layer itself is validated first. It never
// panics.
func (s Schedule) Validate(l Layer) error {
	return s.validate(l, false)
}

// validate is Validate; mxOnly: s is the schedule of an MXOnly variant's
// GEMMs (VariantSchedule), whose tiles run the MXFP8 GEMMs only, which
// alone take the sm_90a 32-row tiles of the operand swap (validateSwap).
func (s Schedule) validate(l Layer, mxOnly bool) error {
	if err := l.Validate(); err != nil {
		return err
	}
	if !s.Target.Valid() {
		return fieldErr("Schedule.Target", s.Target, "must be sm_80, sm_90a or sm_100a")
	}
	if l.Precision == MXFP8 && s.Target == target.SM80 {
		return fieldErr("Schedule.Target", s.Target, "mxfp8 weights need sm_90a or sm_100a: sm_80 has no fp8 MMA")
	}
	if s.Stages < 2 || s.Stages > 16 {
		return fieldErr("Schedule.Stages", s.Stages, "must be in 2..16")
	}
	if s.Cluster != 1 && !(s.Cluster == 2 && s.Target == target.SM90a) {
		return fieldErr("Schedule.Cluster", s.Cluster, "must be 1, or 2 on sm_90a (the sm_100a engine builds no clusters yet: its cta_group::2 pairs are planned, GemmSmem, not built)")
	}
	if s.GridCTAs < 0 || s.GridCTAs > maxGridCTAs {
		return fieldErr("Schedule.GridCTAs", s.GridCTAs, "must be in 0..%d (0 = one CTA per SM; a persistent grid beyond a few CTAs per SM only adds idle CTAs)", maxGridCTAs)
	}
	if s.GroupM < 0 || s.GroupM > maxGroupM {
		return fieldErr("Schedule.GroupM", s.GroupM, "must be in 0..%d", maxGroupM)
	}
	if !s.Persistent && s.GroupM != 0 {
		return fieldErr("Schedule.GroupM", s.GroupM, "must be 0 for a grid of one CTA per tile, as on sm_80, whose grid already runs row tiles fastest (it orders the persistent grids of sm_90a and sm_100a)")
	}
	if !s.Persistent && s.GridCTAs != 0 {
		return fieldErr("Schedule.GridCTAs", s.GridCTAs, "must be 0 for a grid of one CTA per tile: no grid size to set (the sm_80 engine is not persistent)")
	}
	if s.BlocksPerSM < 0 || s.BlocksPerSM > 2 || s.BlocksPerSM == 2 && s.Target != target.SM90a {
		return fieldErr("Schedule.BlocksPerSM", s.BlocksPerSM, "must be 0 or 1 (one block per SM), or 2 on sm_90a (this schedule is for %v)", s.Target)
	}
	if s.BlocksPerSM == 2 {
		switch {
		case s.Cluster > 1:
			return fieldErr("Schedule.BlocksPerSM", s.BlocksPerSM, "two blocks per SM do not run in clusters (Schedule.Cluster %d)", s.Cluster)
		case s.Items != ItemsFixed:
			return fieldErr("Schedule.BlocksPerSM", s.BlocksPerSM, "two blocks per SM walk the fixed order of work items (Schedule.Items fixed)")
		case l.Storage != GroupedWeights:
			return fieldErr("Schedule.BlocksPerSM", s.BlocksPerSM, "two blocks per SM load grouped weights with TMA (Layer.Storage)")
		case s.MXGemm == MXGemmExpand && l.Precision == MXFP8:
			return fieldErr("Schedule.BlocksPerSM", s.BlocksPerSM, "two blocks per SM are not built with the expansion's converter warps (Schedule.MXGemm expand)")
		case s.Chain != ChainOff:
			return fieldErr("Schedule.BlocksPerSM", s.BlocksPerSM, "a chained FC1 and FC2 kernel (Schedule.Chain %v) runs one block per SM: its blocks wait for one another", s.Chain)
		}
	}
	if s.Persistent && s.GridCTAs%s.Cluster != 0 {
		return fieldErr("Schedule.GridCTAs", s.GridCTAs, "must be a multiple of Schedule.Cluster (%d)", s.Cluster)
	}
	if err := s.validateWarps(); err != nil {
		return err
	}
	if (s.WGrad == WGradWGMMA || s.WGrad == WGradWS) && s.Target != target.SM90a {
		return fieldErr("Schedule.WGrad", s.WGrad, "wgmma exists on sm_90a only (use mma)")
	}
	if s.WGrad != WGradMMA && s.WGrad != WGradWGMMA && s.WGrad != WGradWS {
		return fieldErr("Schedule.WGrad", int(s.WGrad), "must be mma, wgmma or wgmma-ws")
	}
	if s.MXGemm != MXGemmPromote && s.MXGemm != MXGemmExpand && s.MXGemm != MXGemmRegFed {
		return fieldErr("Schedule.MXGemm", int(s.MXGemm), "must be promote, expand or regfed")
	}
	if s.MXGemm != MXGemmPromote && (l.Precision != MXFP8 || s.Target != target.SM90a) {
		return fieldErr("Schedule.MXGemm", s.MXGemm, "%v needs an mxfp8 layer (Layer.Precision) on sm_90a (Schedule.Target; sm_100a runs the block-scaled MMA, promote only); this layer is %v, the target %v", s.MXGemm, l.Precision, s.Target)
	}
	if s.Items != ItemsFixed && s.Items != ItemsQueue {
		return fieldErr("Schedule.Items", int(s.Items), "must be fixed or queue")
	}
	if s.Items == ItemsQueue && s.Target != target.SM90a {
		return fieldErr("Schedule.Items", s.Items, "the queue walk is the sm_90a persistent GEMMs' (sm_80 runs one CTA per tile, sm_100a has none yet); this schedule is for %v (Schedule.Target)", s.Target)
	}
	if s.Items == ItemsQueue && s.MXGemm == MXGemmExpand {
		return fieldErr("Schedule.Items", s.Items, "the queue walk is not built with the expansion's converter warps (Schedule.MXGemm expand)")
	}
	if s.Gather < GatherFC1 || s.Gather > GatherStoreWarps {
		return fieldErr("Schedule.Gather", int(s.Gather), "must be fc1, separate or store-warps")
	}
	if s.StoreGatherRows < 0 || s.StoreGatherRows > 1<<30 {
		return fieldErr("Schedule.StoreGatherRows", s.StoreGatherRows, "must be 0 (never) or mean rows per expert from 1 to 2^30")
	}
	if s.Gather == GatherStoreWarps && s.Lowering != LoweringPersistent {
		return fieldErr("Schedule.Gather", s.Gather, "the store warps gather in the sm_90a persistent kernel's FC1 phase: give Schedule.Lowering persistent (on sm_90a), or leave Schedule.Gather at fc1")
	}
	if s.Chain != ChainOff && s.Chain != ChainFC {
		return fieldErr("Schedule.Chain", int(s.Chain), "must be off or fc1-fc2")
	}
	if s.Lowering != LoweringPerOp && s.Lowering != LoweringPersistent {
		return fieldErr("Schedule.Lowering", int(s.Lowering), "must be per-op or persistent")
	}
	if s.Lowering == LoweringPersistent {
		switch {
		case s.Target != target.SM90a:
			return fieldErr("Schedule.Lowering", s.Lowering, "the persistent kernel is built for sm_90a only (its GEMM phases are sm_90a's persistent GEMMs, one block per SM); this schedule is for %v (Schedule.Target): lower it per op there, or build for sm_90a (a run of several targets takes one lowering for all: run each target on its own)", s.Target)
		case s.Cluster > 1:
			return fieldErr("Schedule.Lowering", s.Lowering, "the persistent kernel runs single blocks, not clusters of %d: leave Schedule.Cluster at 1", s.Cluster)
		case s.BlocksPerSM > 1:
			return fieldErr("Schedule.Lowering", s.Lowering, "the persistent kernel runs one block per SM, all resident (its phases end in grid-wide barriers), not %d (Schedule.BlocksPerSM)", s.BlocksPerSM)
		case s.GridCTAs != 0:
			return fieldErr("Schedule.Lowering", s.Lowering, "the persistent kernel runs one block per SM of the device, all resident (its phases end in grid-wide barriers): leave Schedule.GridCTAs out (%d is set)", s.GridCTAs)
		case l.Precision == MXFP8 && s.MXGemm == MXGemmExpand:
			return fieldErr("Schedule.Lowering", s.Lowering, "the persistent kernel's GEMM phases give back their registers by role; the expansion's converter warpgroup does not (Schedule.MXGemm expand)")
		}
	}
	if s.Chain == ChainFC {
		switch {
		case s.Target != target.SM90a:
			return fieldErr("Schedule.Chain", s.Chain, "the chained FC1 and FC2 kernel is built for sm_90a's persistent GEMMs; this schedule is for %v (Schedule.Target)", s.Target)
		case l.Storage != GroupedWeights:
			return fieldErr("Schedule.Chain", s.Chain, "the chained FC1 and FC2 kernel needs grouped weights, which it loads with TMA (Layer.Storage)")
		case l.SaveFC1:
			return fieldErr("Schedule.Chain", s.Chain, "the chained FC1 and FC2 kernel needs the activation in FC1's epilogue; a layer that saves FC1's output (Layer.SaveFC1) activates it in a kernel of its own between the GEMMs")
		case s.Items != ItemsFixed:
			return fieldErr("Schedule.Chain", s.Chain, "the chained FC1 and FC2 kernel needs the fixed walk of its work items (Schedule.Items fixed)")
		case s.GridCTAs != 0:
			return fieldErr("Schedule.Chain", s.Chain, "the chained FC1 and FC2 kernel needs one block per SM of the device, the default grid (leave Schedule.GridCTAs out: %d is set): its FC2 items wait for other blocks' FC1 items, so every block must be resident", s.GridCTAs)
		case s.regFedWideShape(l, s.FC1) || s.regFedWideShape(l, s.FC2):
			return fieldErr("Schedule.Chain", s.Chain, "the chained FC1 and FC2 kernel is built and tested with tiles of at most 128 token rows, not the register-fed tiles of %d and %d (Schedule.FC1, Schedule.FC2)", s.FC1.M, s.FC2.M)
		}
	}
	if s.Cluster == 2 && s.Target == target.SM90a {
		// The sm_90a pairs share the rows of grouped GEMMs walked in the
		// fixed order (codegen's checkSM90Cluster): refused here where no
		// routed GEMM could pair, with the setting that prevents it.
		switch {
		case l.Storage != GroupedWeights:
			return fieldErr("Schedule.Cluster", s.Cluster, "the sm_90a CTA pairs load grouped weights with TMA (Layer.Storage)")
		case s.Items != ItemsFixed:
			return fieldErr("Schedule.Cluster", s.Cluster, "the sm_90a CTA pairs walk the fixed order of work items (Schedule.Items fixed): a queue gives items to single CTAs")
		case s.MXGemm == MXGemmExpand && l.Precision == MXFP8:
			return fieldErr("Schedule.Cluster", s.Cluster, "the sm_90a CTA pairs share bf16 rows: not the expansion's e4m3 tiles (Schedule.MXGemm expand)")
		case s.regFedWideShape(l, s.FC1) || s.regFedWideShape(l, s.FC2):
			return fieldErr("Schedule.Cluster", s.Cluster, "the sm_90a CTA pairs are built and tested with tiles of at most 128 token rows, not the register-fed tiles of %d and %d (Schedule.FC1, Schedule.FC2)", s.FC1.M, s.FC2.M)
		}
	}
	if s.MXGemm == MXGemmRegFed && l.Storage != GroupedWeights {
		return fieldErr("Schedule.MXGemm", s.MXGemm, "regfed loads grouped weights with TMA (Layer.Storage)")
	}
	if s.Items == ItemsQueue && l.Storage != GroupedWeights {
		return fieldErr("Schedule.Items", s.Items, "the queue walk is built and tested for grouped weights only (Layer.Storage is %v)", l.Storage)
	}
	if s.MXGemm == MXGemmRegFed && s.Variant != nil && !s.Variant.MXOnly {
		return fieldErr("Schedule.Variant", *s.Variant, "a GEMM variant under regfed must be MXOnly (promote's tiles for the mxfp8 GEMMs of its token range)")
	}
	if v, ok := s.VariantSchedule(); ok {
		vr := s.Variant
		if err := vr.checkRowsAndName("Schedule.Variant"); err != nil {
			return err
		}
		if s.Target == target.SM80 {
			return fieldErr("Schedule.Variant", *vr, "sm_80 has one tile shape per GEMM")
		}
		if vr.FC1.M != vr.FC2.M {
			return fieldErr("Schedule.Variant", *vr, "needs FC1 and FC2 tiles of the same rows (one work list of row tiles serves both GEMMs)")
		}
		if vr.MXOnly && l.Precision != MXFP8 {
			return fieldErr("Schedule.Variant", *vr, "MXOnly replaces the tiles of the mxfp8 GEMMs only, and this layer is %v: it would never run", l.Precision)
		}
		if err := v.validate(l, vr.MXOnly); err != nil {
			return fmt.Errorf("Schedule.Variant: %w", err)
		}
	}
	if err := s.validateDecode(l); err != nil {
		return err
	}
	eb := operandBytes(l)
	for _, c := range []struct {
		name string
		t    Tile
		fc1  bool
	}{{"Schedule.FC1", s.FC1, true}, {"Schedule.FC2", s.FC2, false}} {
		if err := s.validateTile(l, c.name, c.t, c.fc1, eb, mxOnly); err != nil {
			return err
		}
	}
	// Last: a refusal of the schedule without FC2Large names its own
	// field first, and one of FC2Large's kernel alone names FC2Large.
	return s.validateFC2Large(l)
}

// checkRowsAndName refuses v, the schedule's field (Schedule.Variant,
// Schedule.Decode), unless 0 <= MinRows <= MaxRows, MaxRows >= 1 and its
// Name is lower case letters and digits (the kernels' suffix).
func (v TileVariant) checkRowsAndName(field string) error {
	if v.MinRows < 0 || v.MaxRows < max(v.MinRows, 1) {
		return fieldErr(field, v, "needs 0 <= MinRows <= MaxRows and MaxRows >= 1")
	}
	if !variantName.MatchString(v.Name) {
		return fieldErr(field, v, "needs a Name of lower case letters and digits (the kernels' suffix)")
	}
	return nil
}

// validateDecode checks s.Decode: sm_90a, a bf16 layer, not MXOnly, rows
// 0 <= MinRows <= MaxRows (MaxRows >= 1) below the Variant's MinRows, a
// kernel suffix of its own, FC1 and FC2 tiles of the same rows, and its
// schedule (DecodeSchedule) valid.
func (s Schedule) validateDecode(l Layer) error {
	d := s.Decode
	if d == nil {
		return nil
	}
	switch {
	case s.Target != target.SM90a:
		return fieldErr("Schedule.Decode", *d, "the decode tiles are sm_90a's (this schedule is for %v)", s.Target)
	case l.Precision != BF16 || d.MXOnly:
		return fieldErr("Schedule.Decode", *d, "the decode tiles are a bf16 layer's (an mxfp8 layer's are its Variant, not MXOnly here)")
	}
	if err := d.checkRowsAndName("Schedule.Decode"); err != nil {
		return err
	}
	switch {
	case d.Name == "large" || s.Variant != nil && d.Name == s.Variant.Name:
		return fieldErr("Schedule.Decode", *d, "needs a Name of lower case letters and digits (the kernels' suffix), not the Variant's nor \"large\"")
	case d.FC1.M != d.FC2.M:
		return fieldErr("Schedule.Decode", *d, "needs FC1 and FC2 tiles of the same rows (one work list of row tiles serves both GEMMs)")
	case s.Variant != nil && d.MaxRows >= s.Variant.MinRows:
		return fieldErr("Schedule.Decode", *d, "runs up to %d mean rows per expert, into the GEMM variant %q's %d..%d: its range must lie below the variant's", d.MaxRows, s.Variant.Name, s.Variant.MinRows, s.Variant.MaxRows)
	}
	v, _ := s.DecodeSchedule()
	if err := v.validate(l, false); err != nil {
		return fmt.Errorf("Schedule.Decode: %w", err)
	}
	return nil
}

// validateFC2Large checks s.FC2Large: its kind of GEMM, its two ranges
// (from MinRows on, and the band MidRows, which must hold a T of l, end
// at or below MinRows and start above the variant's rows) against each
// other and the variant's, and the schedule of its kernel (LargeSchedule)
// as an MXOnly one, since the tile runs the mxfp8 FC2 alone.
func (s Schedule) validateFC2Large(l Layer) error {
	r := s.FC2Large
	if !r.Set() {
		return nil
	}
	switch {
	case l.Precision != MXFP8:
		return fieldErr("Schedule.FC2Large", r, "sets the 192-row tile of the register-fed mxfp8 FC2 (moe_fc2_large), which runs only in an mxfp8 layer: this one is %v", l.Precision)
	case s.Target != target.SM90a || s.MXGemm != MXGemmRegFed:
		return fieldErr("Schedule.FC2Large", r, "sets the 192-row tile of the register-fed mxfp8 FC2 (moe_fc2_large), which runs only on sm_90a with Schedule.MXGemm regfed (here %v, %v)", s.Target, s.MXGemm)
	case r.MinRows < 0 || r.MinRows == 0 && !r.MidRows.Set():
		return fieldErr("Schedule.FC2Large", r, "needs MinRows >= 1 or a band MidRows")
	case r.MinRows > 0 && s.Variant != nil && r.MinRows <= s.Variant.MaxRows:
		return fieldErr("Schedule.FC2Large", r, "runs from %d mean rows per expert on, inside the GEMM variant's %d..%d: its range must lie above the variant's", r.MinRows, s.Variant.MinRows, s.Variant.MaxRows)
	case r.MidRows.Set() && (r.MidRows.Lo < 1 || r.MidRows.Hi < r.MidRows.Lo):
		return fieldErr("Schedule.FC2Large.MidRows", r.MidRows, "needs 1 <= LO <= HI (whole mean rows per expert, both included)")
	case r.MidRows.Set() && r.MinRows > 0 && r.MidRows.Hi > r.MinRows:
		return fieldErr("Schedule.FC2Large.MidRows", r.MidRows, "must end at or below the %d mean rows per expert from which the tile runs at every larger T (Schedule.FC2Large.MinRows)", r.MinRows)
	case r.MidRows.Set() && !r.midHoldsT(l):
		lo, hi := r.MidRows.Tokens(l.TopK, l.Experts)
		return fieldErr("Schedule.FC2Large.MidRows", r.MidRows, "holds no token count of this layer (T*K/E in the band: T = %d..%d is empty with top-k %d and %d experts)", lo, hi, l.TopK, l.Experts)
	case r.MidRows.Set() && s.Variant != nil && r.MidRows.Lo <= s.Variant.MaxRows:
		return fieldErr("Schedule.FC2Large.MidRows", r.MidRows, "reaches into the %d..%d mean rows per expert of the GEMM variant %q, whose tiles run there: the band must start above %d", s.Variant.MinRows, s.Variant.MaxRows, s.Variant.Name, s.Variant.MaxRows)
	case s.Chain != ChainOff:
		return fieldErr("Schedule.FC2Large", r, "the chained FC1 and FC2 (Schedule.Chain) pair one FC1 kernel with one FC2 kernel per token range: give Schedule.Chain or Schedule.FC2Large, not both")
	case s.Variant != nil && s.Variant.Name == "large":
		return fieldErr("Schedule.FC2Large", r, "runs as moe_fc2_large, the name of the GEMM variant %q's FC2 kernel", s.Variant.Name)
	}
	v, _ := s.LargeSchedule()
	if err := v.validate(l, true); err != nil {
		// A FieldError on FC2Large itself, so that a caller naming the
		// field that set the tile (mokc's --fc2-large-min-rows) names
		// it; the rule quotes the refusal of the tile's schedule.
		return fieldErr("Schedule.FC2Large", r, "its kernel's schedule (FC2 %v) is refused: %v", r, err)
	}
	return nil
}

func (s Schedule) validateWarps() error {
	w := s.Warps
	if w.Producer < 0 || w.MMA < 1 || w.Epilogue < 0 {
		return fieldErr("Schedule.Warps", w, "needs at least 1 MMA (consumer) warp and no negative producer or epilogue warp count")
	}
	if w.Total() > 32 {
		return fieldErr("Schedule.Warps", w, "%d warps exceed 1024 threads per CTA", w.Total())
	}
	switch s.Target {
	case target.SM80:
		if w.Producer != 0 || w.Epilogue != 0 {
			return fieldErr("Schedule.Warps", w, "sm_80 has no producer or epilogue warps (MMA warps issue cp.async and run the epilogue)")
		}
	case target.SM90a:
		if w.Producer != 4 && (w.Producer != 1 || s.BlocksPerSM != 2) {
			return fieldErr("Schedule.Warps.Producer", w.Producer, "sm_90a needs one producer warpgroup (4 warps; setmaxnreg acts per warpgroup), or with two blocks per SM (Schedule.BlocksPerSM 2) 4 or 1 (one producer warp, no setmaxnreg)")
		}
		if w.MMA%4 != 0 || w.MMA > 12 {
			return fieldErr("Schedule.Warps.MMA", w.MMA, "sm_90a needs 1 to 3 whole consumer warpgroups (4, 8 or 12 warps)")
		}
		if w.Epilogue != 0 {
			return fieldErr("Schedule.Warps.Epilogue", w.Epilogue, "must be 0 on sm_90a (consumer warpgroups run the epilogue)")
		}
	case target.SM100a:
		if w.Producer != 1 {
			return fieldErr("Schedule.Warps.Producer", w.Producer, "must be 1 on sm_100a: the engine's TMA producer is one warp")
		}
		if w.MMA != 1 {
			return fieldErr("Schedule.Warps.MMA", w.MMA, "sm_100a issues tcgen05.mma from exactly one warp")
		}
		if w.Epilogue == 0 || w.Epilogue%4 != 0 {
			return fieldErr("Schedule.Warps.Epilogue", w.Epilogue, "sm_100a needs a multiple of 4 epilogue warps (warp w reads TMEM lanes 32*(w%%4)..+31)")
		}
	}
	return nil
}

func (s Schedule) validateTile(l Layer, name string, t Tile, fc1 bool, eb int, mxOnly bool) error {
	if t.M <= 0 || t.N <= 0 || t.K <= 0 {
		return fieldErr(name, t, "M, N and K must be > 0")
	}
	if t.M > 1024 || t.N > 1024 || t.K > 1024 {
		return fieldErr(name, t, "M, N and K must be <= 1024")
	}
	if fc1 && t.N%16 != 0 {
		return fieldErr(name+".N", t.N, "FC1 tiles hold N/2 gate and N/2 up columns: N must be a multiple of 16")
	}
	mmaK := 16
	if eb == 1 {
		mmaK = 32
	}
	switch s.Target {
	case target.SM80:
		// mma.sync.m16n8k16 bf16 per warp.
		if t.M%16 != 0 {
			return fieldErr(name+".M", t.M, "must be a multiple of 16 (mma.sync m16n8k16)")
		}
		if t.N%8 != 0 {
			return fieldErr(name+".N", t.N, "must be a multiple of 8 (mma.sync m16n8k16)")
		}
		if t.K%16 != 0 {
			return fieldErr(name+".K", t.K, "must be a multiple of 16 (mma.sync m16n8k16)")
		}
		if t.N%16 != 0 {
			return fieldErr(name+".N", t.N, "must be a multiple of 16 on sm_80 (ldmatrix loads B in 16-row blocks)")
		}
		w := s.Warps.MMA
		grid := false
		for wm := 1; wm <= w; wm++ {
			grid = grid || (w%wm == 0 && (t.M/16)%wm == 0 && (t.N/16)%(w/wm) == 0)
		}
		if !grid {
			return fieldErr("Schedule.Warps.MMA", w, "%d warps do not split %s %v into a grid of m16 x n16 warp tiles", w, name, t)
		}
		if chunks, threads := t.K*eb/16, 32*w; (t.M*chunks)%threads != 0 || (t.N*chunks)%threads != 0 {
			return fieldErr(name, t, "the %d threads of %d MMA warps must divide the %d + %d 16-byte cp.async chunks of a stage (make M*K and N*K multiples of %d)",
				threads, w, t.M*chunks, t.N*chunks, 8*threads)
		}
	case target.SM90a:
		if t.M == 32 {
			if err := s.validateSwap(l, name, t, fc1, mxOnly); err != nil {
				return err
			}
		} else if wg := s.Warps.MMA / 4; t.M != 64*wg && !s.regFedWarpgroupOf128(l, t) && !s.regFedWideTokenRows(l, t, mxOnly) {
			if t.M%64 != 0 || t.M < 64 || t.M > 192 {
				rows := "64, 128 or 192"
				switch {
				case mxOnly && l.Precision == MXFP8:
					rows = "32 (the mxfp8 operand swap), 64, 128 or 192"
				case l.Precision == MXFP8 && s.MXGemm == MXGemmRegFed:
					rows = "64, 128 or 192 (or, for the register-fed mxfp8 forward, 192x128x128 or 256x128x128 with 8 MMA warps)"
				}
				return fieldErr(name+".M", t.M, "must be %s on sm_90a (64 rows per consumer warpgroup, at most 3 of them), with 4, 8 or 12 MMA warps to match", rows)
			}
			if s.regFedWideShape(l, t) {
				return fieldErr(name, t, "with 8 MMA warps is a register-fed tile of %d token rows, which needs %s: the register-fed mxfp8 forward's %s", t.M, strings.Join(regFedWideMissing(l, t, mxOnly), " and "), regFedWideTiles)
			}
			if s.regFedWarpgroupTile(l, t) {
				var why []string
				if s.Warps.Producer != 4 {
					why = append(why, fmt.Sprintf("a producer warpgroup (--producer-warps 4, the default; now %d)", s.Warps.Producer))
				}
				if l.SharedExperts > 0 {
					why = append(why, fmt.Sprintf("a layer without a shared expert (this one has %d, whose bf16 GEMMs would take the tile too)", l.SharedExperts))
				}
				return fieldErr(name, t, "with 4 MMA warps is one register-fed warpgroup of 128 token rows, which needs %s: else 64x128x128 with 4 MMA warps, or 128x256x128 with 8 (the default)", strings.Join(why, " and "))
			}
			return fieldErr(name+".M", t.M, "must be %d with %d MMA warps (64 rows per consumer warpgroup of 4 warps); for M = %d give %d MMA warps (M/16, the same for FC1 and FC2)", 64*wg, s.Warps.MMA, t.M, t.M/16)
		}
		if t.N%8 != 0 || t.N > 256 {
			return fieldErr(name+".N", t.N, "must be a multiple of 8 up to 256 (wgmma m64nNk%d)", mmaK)
		}
		if t.K%mmaK != 0 || (t.K*eb)%128 != 0 {
			return fieldErr(name+".K", t.K, "must span whole 128-byte swizzle rows (a multiple of %d elements)", 128/eb)
		}
		if s.MXGemm == MXGemmExpand && t.K != 128 {
			return fieldErr(name+".K", t.K, "must be 128 with the mxfp8 expansion (each stage widens 64 e4m3 columns into one 64-wide bf16 K block: half the tile's K)")
		}
		if s.MXGemm == MXGemmRegFed {
			if err := s.validateRegFed(name, t, fc1 && !l.GateUpInterleaved); err != nil {
				return err
			}
		}
		if l.Precision == MXFP8 && s.MXGemm == MXGemmPromote && t.M != 32 && t.N > 128 {
			return fieldErr(name+".N", t.N, "must be at most 128 with --mx-gemm promote on sm_90a (its consumers keep a partial sum beside each accumulator; docs/mxfp8.md): 256-row B tiles are --mx-gemm regfed's")
		}
	case target.SM100a:
		if t.M != 128 {
			return fieldErr(name+".M", t.M, "must be 128 (the sm_100a engine implements tcgen05.mma cta_group::1 with M = 128, one TMEM lane per row)")
		}
		step := 16
		if t.M == 64 {
			step = 8
		}
		if t.N%step != 0 || t.N < step || t.N > 256 {
			return fieldErr(name+".N", t.N, "must be a multiple of %d in %d..256 (tcgen05.mma M=%d)", step, step, t.M)
		}
		if s.Cluster == 2 && t.N%32 != 0 {
			return fieldErr(name+".N", t.N, "must be a multiple of 32 with Cluster = 2 (each CTA holds N/2 rows of B)")
		}
		if t.K%mmaK != 0 || (t.K*eb)%128 != 0 {
			return fieldErr(name+".K", t.K, "must span whole 128-byte swizzle rows (a multiple of %d elements)", 128/eb)
		}
		if l.Precision == MXFP8 && t.K%128 != 0 {
			return fieldErr(name+".K", t.K, "must be a multiple of 128 with mxfp8 (4 scale blocks per 512-byte scale-factor tile)")
		}
	}
	p, err := s.GemmSmem(l, t, fc1)
	if err != nil {
		return fieldErr(name, t, "has no shared-memory layout: %v", err)
	}
	if c := p.TMEMColumns; c > s.Target.TMEMColumns() {
		return fieldErr(name, t, "needs %d TMEM columns, more than the %d of a CTA", c, s.Target.TMEMColumns())
	}
	if p.Required > s.Target.SharedMemoryLimit() {
		return fieldErr(name, t, "the %s tile %v with %d stages needs %d bytes of shared memory, more than the %d of %v: fewer stages or a smaller tile", strings.TrimPrefix(name, "Schedule."), t, s.Stages, p.Required, s.Target.SharedMemoryLimit(), s.Target)
	}
	return nil
}

// validateRegFed checks an sm_90a tile of the register-fed MXFP8 GEMMs
// (MXGemmRegFed; codegen.GemmSpec.MXRegisterFed): K blocks of 128 and B
// tiles (N) of 64 or 128 rows with one consumer warpgroup (M = 64, or 128
// token rows: regFedWarpgroupOf128) or of 256 with two (M = 128), each
// warpgroup 128 rows of the B tile, or of 128 with two for 192 or 256
// token rows (regFedWideTokenRows), each warpgroup one 64-row slice;
// halves (an FC1 with gate/up halves: two 64-row slices at least) 128 or
// 256.
func (s Schedule) validateRegFed(name string, t Tile, halves bool) error {
	switch {
	case halves && t.N == 64:
		return fieldErr(name+".N", t.N, "must be 128 or 256 with the register-fed mxfp8 GEMM of an FC1 with gate/up halves (each half of the B tile is a 64-row wgmma slice at least): give 128x256x128 with 8 MMA warps (the default) or 64x128x128 with 4")
	case t.K != 128:
		return fieldErr(name+".K", t.K, "must be 128 with the register-fed mxfp8 GEMM (four 32-wide scale blocks per stage)")
	case t.N != 64 && t.N != 128 && t.N != 256:
		return fieldErr(name+".N", t.N, "must be 64, 128 or 256 with the register-fed mxfp8 GEMM (its B tile: 64-row slices, 128 rows per consumer warpgroup)")
	case (t.N == 256 || t.M > 128) != (s.Warps.MMA == 8):
		return fieldErr(name, t, "the register-fed mxfp8 GEMM runs one consumer warpgroup per 128 B-tile rows: with --mx-gemm regfed give M x N x K = 128x256x128 with 8 MMA warps (the default), 64x128x128 with 4 MMA warps (with 4, also 64x64x128 for FC2 or for an FC1 with interleaved gate/up rows, and, in a layer without a shared expert, 128x128x128, made for --blocks-per-sm 2), or %s (%d MMA warps now)", regFedWideTiles, s.Warps.MMA)
	}
	return nil
}

// regFedWarpgroupOf128 reports whether t is the register-fed tile of one
// consumer warpgroup and 128 token rows (128x128x128 with 4 MMA warps:
// wgmma m64n128 over the token rows, two 64-row slices of the B tile),
// made for two blocks per SM with a producer warpgroup (codegen's sm_90a
// atom then gives the consumers 200 registers; one per SM they keep the
// launch's 255). Only where no bf16 GEMM takes the tile: an mxfp8 layer
// without shared experts (the backward's bf16 GEMMs refuse it in codegen:
// one warpgroup per 64 rows).
func (s Schedule) regFedWarpgroupOf128(l Layer, t Tile) bool {
	return s.regFedWarpgroupTile(l, t) && s.Warps.Producer == 4 && l.SharedExperts == 0
}

// regFedWideTiles names the register-fed tiles of more than 128 token
// rows and what they need (regFedWideTokenRows), for error messages.
const regFedWideTiles = "192x128x128 (--stages 3) or 256x128x128 (--stages 2) with 8 MMA warps (two consumer warpgroups of one 64-row B slice each), on sm_90a in an mxfp8 layer without shared experts (whose bf16 GEMMs would take the tile too) and without biases on gate/up halves, for FC1 and FC2 alike"

// regFedWideTokenRows reports whether t is a register-fed tile of more
// token rows than a consumer warpgroup's 128: 192x128x128 or 256x128x128
// with 8 MMA warps (wgmma m64n192 or m64n256 over the token rows, each
// consumer warpgroup one 64-row slice of a 128-row B tile; an FC1 of
// gate/up halves loads them as (gate, up) pairs,
// codegen.GemmSpec.BHalvesInPairs), which widen 2/3 and 1/2 of the e4m3
// weights per FLOP of the default 128x256x128 (docs/mxfp8.md, "Next: 256
// token rows per tile"). Opt-in: 256 rows ran 3-45% slower than the
// default (docs/perf.md, mxfp8 v37: outcome); 192, whose three stages fit
// where 256's two did, ran 13% slower on qwen3-30b-a3b and 4% faster on
// olmoe-1b-7b at T = 4096 (mxfp8 v38: outcome). Only in an mxfp8 forward
// without shared experts on sm_90a (no bf16 GEMM takes these rows; the
// backward's refuse them in codegen), and not for gate/up halves with
// biases (the pairs' epilogue reads the bias in interleaved order):
// regFedWideMissing. mxOnly: t is the tile of the mxfp8 GEMMs alone (an
// MXOnly schedule, such as FC2Large's), so shared experts are no obstacle.
func (s Schedule) regFedWideTokenRows(l Layer, t Tile, mxOnly bool) bool {
	return s.regFedWideShape(l, t) && len(regFedWideMissing(l, t, mxOnly)) == 0
}

// regFedWideMissing lists what layer l and tile t lack for the register-fed
// tile of 192 or 256 token rows (regFedWideTokenRows; mxOnly as there), in
// the words of the refusal; none when they allow it.
func regFedWideMissing(l Layer, t Tile, mxOnly bool) []string {
	var why []string
	if t.N != 128 {
		why = append(why, fmt.Sprintf("N = 128 (now %d)", t.N))
	}
	if l.SharedExperts > 0 && !mxOnly {
		why = append(why, fmt.Sprintf("a layer without a shared expert (this one has %d)", l.SharedExperts))
	}
	if l.Biases && !l.GateUpInterleaved {
		why = append(why, "no biases on gate/up halves (this layer has them)")
	}
	return why
}

// regFedWideShape reports whether t asks for a register-fed tile of 192
// or 256 token rows (M, with 8 MMA warps, in an mxfp8 layer under regfed
// on sm_90a), whether or not the layer and N allow it
// (regFedWideTokenRows).
func (s Schedule) regFedWideShape(l Layer, t Tile) bool {
	return s.Target == target.SM90a && l.Precision == MXFP8 && s.MXGemm == MXGemmRegFed && s.Warps.MMA == 8 &&
		(t.M == 192 || t.M == 256)
}

// FC1HalvesInPairs reports whether FC1 tile t of layer l loads the gate/up
// halves of its weights as (gate, up) row pairs
// (layouts.GateUpHalvesInPairs, codegen.GemmSpec.BHalvesInPairs): the
// register-fed tile of 192 or 256 token rows of a layer whose FC1 stores halves,
// so that each consumer warpgroup's 64-row slice holds whole pairs.
func (s Schedule) FC1HalvesInPairs(l Layer, t Tile) bool {
	return !l.GateUpInterleaved && s.regFedWideTokenRows(l, t, false)
}

// regFedWarpgroupTile reports whether t has the shape of
// regFedWarpgroupOf128's tile in an sm_90a register-fed mxfp8 layer,
// whatever the producer and the shared experts.
func (s Schedule) regFedWarpgroupTile(l Layer, t Tile) bool {
	return s.Target == target.SM90a && l.Precision == MXFP8 && s.MXGemm == MXGemmRegFed && s.Warps.MMA == 4 && t.M == 128 && t.N == 128
}

// validateSwap checks a 32-row sm_90a tile: the operand swap of the
// promoted MXFP8 GEMMs (docs/mxfp8.md, "the operand swap"; the weights'
// tile is wgmma's A in 64-row slices, the 32 token rows its B), given in
// a TileVariant with MXOnly (the shared experts' and the backward's bf16
// GEMMs take FC1/FC2, and bf16 wgmma needs 64 rows), with one consumer
// warpgroup, grouped weights, and N a multiple of 64 (FC1 with gate/up
// halves: 128, each half whole slices). mxOnly: s is an MXOnly
// variant's schedule.
func (s Schedule) validateSwap(l Layer, name string, t Tile, fc1, mxOnly bool) error {
	half := t.N // rows of the B tile per 64-row run: the whole tile, or each gate/up half
	if fc1 && !l.GateUpInterleaved {
		half /= 2
	}
	switch {
	case l.Precision != MXFP8 || !mxOnly:
		return fieldErr(name+".M", t.M, "32-row tiles on sm_90a (the operand swap) run only the promoted mxfp8 GEMMs, in a TileVariant with MXOnly; FC1 and FC2 set the tiles of every GEMM, the shared experts' and the backward's bf16 ones included, which need 64, 128 or 192 rows. The default mxfp8 schedule's decode variant already runs 32-row tiles at <= 32 mean rows per expert (64 with at most 16 experts): keep FC1 and FC2 at their defaults to get them (--variant-fc1-tile and --variant-fc2-tile tune them)")
	case s.MXGemm != MXGemmPromote:
		return fieldErr(name+".M", t.M, "32-row tiles (the operand swap) run with --mx-gemm promote only: the expansion's bf16 wgmma needs 64 rows")
	case s.Warps.MMA != 4:
		return fieldErr("Schedule.Warps.MMA", s.Warps.MMA, "must be 4 with 32-row tiles (one consumer warpgroup)")
	case l.Storage != GroupedWeights:
		return fieldErr(name+".M", t.M, "32-row tiles (the operand swap) need grouped weights (TMA), not per-expert allocations")
	case half%64 != 0:
		return fieldErr(name+".N", t.N, "must be a multiple of %d with 32-row tiles (the weights are read in 64-row slices%s)", 64*t.N/half, map[bool]string{true: ", gate and up halves each", false: ""}[half != t.N])
	}
	return nil
}

// pickN chooses the tile width among candidates (largest first) that
// wastes the fewest padded columns of an output dimension of n columns,
// preferring the larger tile on ties.
func pickN(n int, candidates []int) int {
	best, bestWaste := candidates[0], -1
	for _, c := range candidates {
		waste := (n+c-1)/c*c - n
		if bestWaste < 0 || waste < bestWaste {
			best, bestWaste = c, waste
		}
	}
	return best
}

// DefaultSchedule returns the schedule mokc chooses for layer l on target:
//   - sm_80: 128x128x64 tiles, 3 stages, 4 MMA warps (64x64 warp tiles).
//   - sm_90a: 128xN x64 (bf16) / 128xN x128 (mxfp8) tiles, one producer
//     warpgroup and two consumer warpgroups, 4 stages (fewer if shared
//     memory does not allow); for bf16 layers with grouped weights, a
//     Variant of 192x192 tiles with three consumer warpgroups and 3 stages
//     for 100..200 mean rows per expert (midRowsVariant), for mxfp8 layers
//     with grouped weights a Variant of 32x128 tiles (the operand swap;
//     64x128 with 6 stages where the swap does not apply) with one consumer
//     warpgroup and 8 stages for at most 32 (64 with at most 16 experts; mxDecodeVariant), for bf16
//     layers with grouped weights also the Decode tiles, 64x128 with one consumer warpgroup and 6
//     stages for at most 4 mean rows per expert in the forward (decodeVariant); the backward's
//     weight gradients on wgmma (WGradWGMMA). The mxfp8 routed GEMMs
//     outside that variant run register-fed (MXGemmRegFed: B tiles of 256
//     rows, 3 stages; DefaultMXGemm), the variant's promoted.
//   - sm_100a: 128xN tiles with K block 64 (bf16) / 128 (mxfp8), 1 TMA warp,
//     1 MMA warp, 4 epilogue warps, up to 6 stages as shared memory allows.
//
// N is chosen per GEMM from {256, 192, 128} (sm_90a, sm_100a) to waste the
// fewest padded columns of the GEMM's output (2I for FC1, H for FC2; e.g.
// H = 2880 = 15 x 192). The sm_90a and sm_100a schedules are persistent
// with one CTA per SM; sm_80's launch one CTA per tile.
// The result is validated; an invalid layer or an impossible combination
// (mxfp8 on sm_80) is an error.
func DefaultSchedule(l Layer, tg target.Target) (Schedule, error) {
	return DefaultScheduleMX(l, tg, DefaultMXGemm(l, tg))
}

// DefaultMXGemm is the MXFP8 GEMM kind of DefaultSchedule: MXGemmRegFed for
// an mxfp8 layer with grouped weights on sm_90a (at T = 4096 1.4-1.6x
// promote's speed on the H200, at T = 1024 1.3x; docs/perf.md, mxfp8 v28),
// else MXGemmPromote (the only kind of other targets and layers). Not
// handled by the register-fed GEMMs yet (codegen.GemmSpec.MXRegisterFed):
// e4m3 NaN weight bytes and weight scale codes 135..254; such weights need
// MXGemmPromote.
func DefaultMXGemm(l Layer, tg target.Target) MXGemmKind {
	if l.Precision == MXFP8 && tg == target.SM90a && l.Storage == GroupedWeights {
		return MXGemmRegFed
	}
	return MXGemmPromote
}

// DefaultScheduleMX is DefaultSchedule with the mxfp8 routed GEMMs run by
// k: the tiles chosen for promote, then WithMXGemm(k) (expand drops the
// decode variant); regfed's sm_90a tiles are B tiles of 256 rows (its two
// consumer warpgroups take 128 each; docs/mxfp8.md) and at most 3 stages
// (the bf16 token tile and the e4m3 weights of a K block of 128 are
// 64 KB). Errors: as DefaultSchedule, and a k the layer or target cannot
// run (Validate).
func DefaultScheduleMX(l Layer, tg target.Target, k MXGemmKind) (Schedule, error) {
	if err := l.Validate(); err != nil {
		return Schedule{}, err
	}
	s := Schedule{Target: tg, Persistent: true, Cluster: 1}
	switch tg {
	case target.SM80:
		s.Persistent = false // the sm_80 engine launches one CTA per tile
		// K = 64: 32 KB per stage, 96 KB for 3 stages (A100: 163 KB). On
		// the H200, qwen3-30b-a3b's GEMMs ran at 258-263 (FC1) and 229-235
		// (FC2) TFLOP/s with K = 64 against 175-187 with K = 32
		// (docs/perf.md).
		s.FC1 = Tile{128, 128, 64}
		s.FC2 = Tile{128, 128, 64}
		s.Stages = 3
		s.Warps = WarpRoles{MMA: 4}
	case target.SM90a, target.SM100a:
		k := 64
		if l.Precision == MXFP8 {
			k = 128
		}
		cands := []int{256, 192, 128}
		if l.Precision == MXFP8 && tg == target.SM90a {
			// The MXFP8 consumers hold partial sums beside the
			// accumulators: B tiles of at most 128 rows (docs/mxfp8.md).
			cands = []int{128}
		}
		s.FC1 = Tile{128, pickN(2*l.Intermediate, cands), k}
		s.FC2 = Tile{128, pickN(l.Hidden, cands), k}
		maxStages := 6
		if tg == target.SM90a {
			s.Warps = WarpRoles{Producer: 4, MMA: 8}
			maxStages = 4
		} else {
			s.Warps = WarpRoles{Producer: 1, MMA: 1, Epilogue: 4}
		}
		// Narrow the tiles if even 2 stages do not fit (e.g. mxfp8 on
		// sm_100a: two 256-column accumulators and the scales exceed the
		// 512 TMEM columns), then take as many stages as fit.
		s.Stages = 2
		for _, t := range []*Tile{&s.FC1, &s.FC2} {
			for t.N > 128 && !s.fits(l) {
				t.N = 128
			}
		}
		s.Stages = maxStages
		for s.Stages > 2 && !s.fits(l) {
			s.Stages--
		}
		s.GroupM = DefaultGroupM
		switch {
		case tg != target.SM90a || l.Storage != GroupedWeights:
		case l.Precision == BF16:
			s.Variant = midRowsVariant(l, s)
			s.Decode = decodeVariant(l, s)
			s.StoreGatherRows = DefaultStoreGatherRows
		case l.Precision == MXFP8:
			s.Variant = mxDecodeVariant(l, s)
		}
	default:
		return Schedule{}, fieldErr("Schedule.Target", tg, "must be sm_80, sm_90a or sm_100a")
	}
	s.WGrad = DefaultWGrad(tg)
	if k != MXGemmPromote {
		s = s.WithMXGemm(k)
	}
	if k == MXGemmRegFed && tg == target.SM90a && l.Precision == MXFP8 {
		s.FC1.N, s.FC2.N, s.Stages = 256, 256, min(s.Stages, 3)
	}
	s.Items = ItemsQueue // see Schedule.Items: where it can run
	s = s.FixedItemsWhereNeeded(l)
	if k == MXGemmRegFed && tg == target.SM90a && l.Precision == MXFP8 {
		s.FC2Large = largeRowsFC2(l, s)
	}
	if err := s.Validate(l); err != nil {
		return Schedule{}, fmt.Errorf("default schedule for %v: %w", tg, err)
	}
	return s, nil
}

// largeRowsMinRows is the fewest mean rows per expert at which the default
// schedule's register-fed mxfp8 FC2 takes 192 token rows per tile. On an
// H100 moe_fc2_large gave the same bits and a forward 2.0-3.4% faster at
// 512 rows per expert (olmoe-1b-7b and gpt-oss-20b T = 4096, mixtral-8x7b
// T = 2048, qwen3-30b-a3b T = 8192) and on mixtral-8x7b at 1024, level on
// qwen3-30b-a3b at 1024 (docs/perf.md, "FC2 of 192 token rows by rows per
// expert: outcome", run 41), 0.6-1.9% faster at 384 (the same four
// presets at T = 3072, 3072, 1536, 6144: two 192-row tiles cover 384 rows
// as three 128-row ones do; docs/perf.md, "FC2Large with shared experts,
// and 384 rows per expert", run 42) and, on an H200, 2.5-4.2% at 320
// (olmoe-1b-7b and gpt-oss-20b T = 2560, qwen3-30b-a3b T = 5120: two
// tiles of 192 for most experts' rows against three of 128), 1.8% at 288
// (qwen3-30b-a3b), but 3.7% slower at 256 (qwen3-30b-a3b T = 4096, where
// most experts fit two 128-row tiles; docs/perf.md, "FC2Large from 384
// rows, and the clocks", run 42).
const largeRowsMinRows = 320

// largeRowsTile is the FC2 tile of FC2Large in the default schedule:
// 192x128x128, K as s.FC2.
func largeRowsTile(s Schedule) Tile { return Tile{192, 128, s.FC2.K} }

// largeRowsMidRows is the band of mean rows per expert below
// largeRowsMinRows in which the default schedule's register-fed mxfp8 FC2
// also takes 192 token rows per tile: there one 192-row tile holds most
// experts' rows where 128-row tiles need two. On an H100 (docs/perf.md,
// "FC2Large for 100..200 rows per expert" and "FC2Large in 120..200 rows
// per expert by default", run 43; means of two rounds) the forward ran
// 1.8-13.3% faster at 128 mean rows (qwen3-30b-a3b, olmoe-1b-7b, mixtral-8x7b, qwen2-57b-a14b,
// deepseek-v2-lite; deepseek-v3 and gpt-oss-120b at T = 4096), 4.0-10.1%
// at 160, 0.6-5.2% at 192 (qwen3-30b-a3b, olmoe-1b-7b, gpt-oss-120b;
// mixtral-8x7b 0.8% slower) and level at 120 (qwen3-30b-a3b), but 0.4-2.2%
// slower at 96 and 112 (one 128-row tile holds most experts' rows), 1.8%
// at 200 and 5.5% at 224 (qwen3-30b-a3b: two tiles of either).
var largeRowsMidRows = RowsBand{120, 192}

// largeRowsFC2 is the default FC2Large of the register-fed mxfp8 schedule
// s: FC2 tiles of 192 token rows (two consumer warpgroups of one 64-row
// weight slice each, K as s.FC2) in largeRowsMidRows and from
// largeRowsMinRows mean rows per expert on, where the layer allows them
// (Schedule.regFedWideTokenRows of an MXOnly schedule: a layer's shared
// experts keep FC2's tile in their bf16 GEMMs; the band where it lies
// above the GEMM variant's rows); zero elsewhere.
func largeRowsFC2(l Layer, s Schedule) LargeRowsTile {
	from := s.WithFC2LargeFrom(largeRowsMinRows)
	if from.validateFC2Large(l) != nil {
		return LargeRowsTile{}
	}
	if both := from.WithFC2LargeMid(largeRowsMidRows); both.validateFC2Large(l) == nil {
		return both.FC2Large
	}
	return from.FC2Large
}

// midRowsVariant is the sm_90a variant for 100..200 mean rows per expert:
// 192-row tiles (three consumer warpgroups) cover such an expert in one row
// tile, so its weights stream through L2 into shared memory once instead of
// twice. On the H200 (docs/perf.md, device run 6) it ran deepseek-v3 and
// gpt-oss-120b 10% faster at 128 rows per expert and 2% faster at 192,
// while 128-row tiles were faster at 64, 85 and 256. nil when the 192x192
// tiles do not fit the layer.
func midRowsVariant(l Layer, s Schedule) *TileVariant {
	return fitVariant(l, s, TileVariant{Name: "mid", FC1: Tile{192, 192, s.FC1.K}, FC2: Tile{192, 192, s.FC2.K},
		Stages: 3, MMAWarps: 12, MinRows: 100, MaxRows: 200})
}

// mxDecodeMaxRows is the most mean rows per expert (T·K/E) at which the
// sm_90a MXFP8 decode variant runs on a layer of few experts (at most
// mxDecodeFewExperts), mxDecodeMaxRowsMany on the others. On the H200
// (docs/perf.md, mxfp8 v22 and v24) its 32-row tiles beat the 128-row ones
// at 32 mean rows (olmoe-1b-7b T = 256: 0.197 vs 0.263 ms; qwen3-30b-a3b
// T = 512: 0.302 vs 0.378) and, with 8 experts, at 64 (mixtral-8x7b
// T = 256: 0.883 vs 0.957), but lost at 64 with 128 or 256 experts
// (qwen3-30b-a3b T = 1024: 0.481 vs 0.466; deepseek-v3 T = 2048: 7.45 vs
// 6.97).
const (
	mxDecodeMaxRows     = 64
	mxDecodeMaxRowsMany = 32
	mxDecodeFewExperts  = 16
)

// mxDecodeVariant is the sm_90a MXFP8 variant for at most mxDecodeMaxRows
// (or mxDecodeMaxRowsMany) mean rows per expert (decode), MXOnly (the promoted MXFP8 GEMMs; the backward's
// bf16 data-gradient GEMMs keep FC1/FC2). Where the layer allows the
// operand swap (validateSwap: grouped weights; every preset), 32x128x128
// tiles with 8 stages (fewer if shared memory does not allow): the weights
// are wgmma's A, the 32 token rows its N, so per 32-wide block a thread
// promotes 16 partial sums per 64 weight rows, 32 per 128-wide tile
// instead of 64 (docs/mxfp8.md, "the operand swap"; on the H200 the
// forward at T = 64 1.32-1.58x bf16's speed: docs/perf.md, mxfp8 v13 and,
// for interleaved gate/up rows, v15).
//
// Otherwise (per-expert weights) the fallback, for at most 16 mean rows
// (the range it was measured in): 64x128x128 tiles with one consumer
// warpgroup and 6 stages. At such T an expert's rows fill a
// fraction of one 64-row tile, so the second consumer warpgroup of the
// 128-row tiles would hold no rows; the smaller tiles give the ring two
// more stages (docs/perf.md, mxfp8 v9's outcome: 7-11% faster than the
// 128x128 tiles at T = 64). nil when neither fits the layer.
func mxDecodeVariant(l Layer, s Schedule) *TileVariant {
	maxRows := mxDecodeMaxRows
	if l.Experts > mxDecodeFewExperts {
		maxRows = mxDecodeMaxRowsMany
	}
	for st := 8; st >= 4; st-- {
		if v := fitVariant(l, s, TileVariant{Name: "decode", FC1: Tile{32, 128, s.FC1.K}, FC2: Tile{32, 128, s.FC2.K},
			Stages: st, MMAWarps: 4, MinRows: 0, MaxRows: maxRows, MXOnly: true}); v != nil {
			return v
		}
	}
	return fitVariant(l, s, TileVariant{Name: "decode", FC1: Tile{64, 128, s.FC1.K}, FC2: Tile{64, 128, s.FC2.K},
		Stages: 6, MMAWarps: 4, MinRows: 0, MaxRows: 16, MXOnly: true})
}

// decodeMaxRows is the most mean rows per expert (T·K/E) at which the
// default sm_90a bf16 schedule's routed GEMMs take the decode tiles
// (decodeVariant): measured up to 4 (docs/perf.md, "Decode tiles, a
// sweep": T = 1, 8, 64 of three presets; qwen3-30b-a3b at T = 64 has 4
// mean rows per expert).
const decodeMaxRows = 4

// decodeVariant is the sm_90a bf16 schedule's Decode: 64x128 tiles (K as
// FC1 and FC2) with one consumer warpgroup and 6 stages for at most
// decodeMaxRows mean rows per expert. At such T an expert's rows fill a
// fraction of one 64-row tile, and 128 columns make twice the work items
// of 256, so more SMs stream the few routed experts' weights: on an H100
// they were the fastest of five shapes at T = 1, 8, 64 on three presets
// (128x256, the base; 128x128 with 4 stages; 128x64 with 6; 64x128 with 6;
// 64x64 with 8: docs/perf.md, "Decode tiles, a sweep", run 48 call 2), and
// as the default the bf16 forward at T = 1 ran 23% faster on qwen3-30b-a3b
// (0.0535 -> 0.0409 ms) and mixtral-8x7b, 21% on olmoe-1b-7b, 10% on
// gpt-oss-120b and 4% on deepseek-v3, at T = 8 1.5-5% and at T = 64 0.7-4%
// (docs/perf.md, decode v1, run 48 call 3). nil when the tiles do not fit
// the layer or its variant starts at or below decodeMaxRows.
func decodeVariant(l Layer, s Schedule) *TileVariant {
	d := TileVariant{Name: "decode", FC1: Tile{64, 128, s.FC1.K}, FC2: Tile{64, 128, s.FC2.K},
		Stages: 6, MMAWarps: 4, MinRows: 0, MaxRows: decodeMaxRows}
	s.Decode = &d
	if s.validateDecode(l) != nil {
		return nil
	}
	return &d
}

// fitVariant returns v when s with v is a valid schedule of layer l, else
// nil.
func fitVariant(l Layer, s Schedule, v TileVariant) *TileVariant {
	s.Variant = &v
	if vs, _ := s.VariantSchedule(); vs.validate(l, v.MXOnly) != nil {
		return nil
	}
	return &v
}

// fits reports whether both GEMM tiles fit the target's shared memory and
// TMEM with the current stage count, the sm_90a staging tile included (the
// default schedules keep the staged epilogue rather than add a stage).
func (s Schedule) fits(l Layer) bool {
	lim := s.Target.SharedMemoryLimit()
	for _, c := range []struct {
		t   Tile
		fc1 bool
	}{{s.FC1, true}, {s.FC2, false}} {
		p, err := s.GemmSmem(l, c.t, c.fc1)
		if err != nil || p.Required > lim || (p.StagingCols > 0 && !p.Staged) || p.TMEMColumns > s.Target.TMEMColumns() {
			return false
		}
	}
	return true
}
