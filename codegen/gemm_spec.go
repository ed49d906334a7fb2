package codegen

import (
	"fmt"

	"github.com/mokc/mokc/ir"
)

// AMode says where the rows of a grouped GEMM's A operand come from.
type AMode int

const (
	// ATiled: A is [rows, K] bf16 row-major, rows grouped by expert
	// (expert e owns rows offsets[e] .. offsets[e+1]-1); blocks take their
	// (expert, first row) from the tile list written by the scan kernel. Rows
	// past the expert's segment are never stored (and read as zero).
	ATiled AMode = iota
	// ADense: A is [M, K] bf16 row-major with M given as a kernel parameter;
	// one "expert" (index 0) owns every row; block x covers rows
	// x*BM .. x*BM+BM-1. Used for the shared expert.
	ADense
)

// BMode says how a grouped GEMM finds expert e's weight matrix B_e, which is
// always [NB, K] bf16 row-major (K-major, "NT" GEMM), NB = GemmSpec.BRows().
type BMode int

const (
	// BGrouped: one tensor [E, NB, K]; B_e starts at element e*NB*K.
	BGrouped BMode = iota
	// BTable: a device array of E u64 pointers, one allocation per expert.
	BTable
)

// EpilogueKind selects what a grouped GEMM does with its fp32 accumulator.
type EpilogueKind int

const (
	// EpiStore: C[row, n] = bf16(acc[row, n] (+ bias[e, n])), N columns.
	EpiStore EpilogueKind = iota
	// EpiGated: B holds 2N rows (gate and up, see GateLayout); C[row, n] =
	// bf16(act(gate[row, n] (+bias), up[row, n] (+bias))), N columns.
	EpiGated
)

// GateLayout says where the gate and up rows of a gated FC1 weight sit.
type GateLayout int

const (
	// GateHalves: rows 0..N-1 gate, N..2N-1 up (Mixtral, DeepSeek, Qwen).
	GateHalves GateLayout = iota
	// GateInterleaved: row 2n gate, row 2n+1 up (GPT-OSS).
	GateInterleaved
)

// ActKind is the activation of a gated epilogue (formulas and sources: the
// constants of schedule.Activation, which the kinds mirror).
type ActKind int

const (
	// ActSwiGLU: h = silu(g) * u.
	ActSwiGLU ActKind = iota
	// ActClampedSwiGLU: g' = min(g, L), u' = clamp(u, -L, L), h = silu(g') * u'.
	ActClampedSwiGLU
	// ActGPTOSS: g' = min(g, L), u' = clamp(u, -L, L),
	// h = g' * sigmoid(Alpha * g') * (u' + 1) (openai/gpt-oss model.py, L = 7,
	// Alpha = 1.702).
	ActGPTOSS
)

// Activation is an ActKind with its constants.
type Activation struct {
	Kind  ActKind `json:"kind"`            // activation function
	Limit float64 `json:"limit,omitempty"` // clamp limit L (clamped kinds)
	Alpha float64 `json:"alpha,omitempty"` // sigmoid slope (GPT-OSS)
}

// Tile is the block tile of a GEMM, taken from schedule.Schedule.
type Tile struct {
	BM     int `json:"bm"`     // rows of A (tokens) per block
	BN     int `json:"bn"`     // output columns per block (for EpiGated: columns of h; the B tile then has 2*BN rows)
	BK     int `json:"bk"`     // reduction elements per pipeline stage
	Stages int `json:"stages"` // pipeline depth
	Warps  int `json:"warps"`  // MMA (consumer) warps per block (schedule.WarpRoles.MMA)
	// ProducerWarps and EpilogueWarps are schedule.WarpRoles.Producer and
	// .Epilogue (0 on sm_80). KernelInfo.Block is authoritative. On sm_90a
	// with BlocksPerSM = 2, 1 builds the block's producer as one warp
	// without setmaxnreg; any other value as a warpgroup with it.
	ProducerWarps int `json:"producer_warps,omitempty"`
	EpilogueWarps int `json:"epilogue_warps,omitempty"` // schedule.WarpRoles.Epilogue
	Cluster       int `json:"cluster,omitempty"`        // CTAs per cluster (schedule.Schedule.Cluster; 0 or 1: none)
	// BlocksPerSM is the blocks of the kernel each SM holds at once: 0 or
	// 1 for one; 2 on sm_90a, each block then within half the SM's
	// registers and shared memory (target.Target.SharedMemoryFor), so that
	// one block's epilogue runs while the other's K loop keeps the tensor
	// cores busy. The persistent grid (Grid = 0) is then BlocksPerSM blocks
	// per SM (KernelInfo.BlocksPerSM). Not with Cluster > 1.
	BlocksPerSM int `json:"blocks_per_sm,omitempty"`
	// Grid is the persistent grid of the engines that loop over tiles
	// (sm_90a, sm_100a): schedule.Schedule.GridCTAs, 0 for one block per SM
	// of the target's reference part (target.Target.SMs).
	Grid int `json:"grid,omitempty"`
	// GroupM is schedule.Schedule.GroupM: the persistent engines walk their
	// work items in groups of GroupM row tiles, column block by column
	// block (0: column blocks fastest).
	GroupM int `json:"group_m,omitempty"`
}

// GemmSpec describes one grouped GEMM of the MoE forward (and the
// backward's data gradients):
//
//	C[row, n] = epilogue( sum_k A[row, k] * B_e[n', k] ),  e = expert of row
//
// A: bf16 [rows, K] row-major; B_e: bf16 [BRows(), K] row-major (K-major;
// [K, BRows()] with BNMajor); with MX both e4m3 with UE8M0 scales (see MX);
// C: bf16 [rows, N] row-major (f32 with COutF32); fp32 accumulation. N and K must be multiples
// of 8 (16-byte rows); they need not be tile multiples: out-of-range loads are
// zero-filled and out-of-range stores skipped, never touching memory outside
// the tensors.
type GemmSpec struct {
	Name     string       // kernel symbol
	N        int          // output columns
	K        int          // reduction length
	Experts  int          // E (1 for ADense)
	A        AMode        // row source
	B        BMode        // weight addressing
	Epilogue EpilogueKind // store or gated activation
	Gate     GateLayout   // EpiGated only
	Act      Activation   // EpiGated only
	Bias     bool         // add a per-expert fp32 bias [E, BRows()] (in B row order) before the epilogue
	Tile     Tile         // block tile, pipeline depth and warps from the schedule
	// COutF32 stores C as f32 [rows, N] instead of bf16 (EpiStore only):
	// the backward's FC1 recompute, whose clamped activation's derivative
	// is discontinuous, and its data gradients keep fp32 precision.
	COutF32 bool
	// CRoundOdd stores C as bf16 [rows, N] rounded to odd (the f32 output
	// truncated to bf16, its last bit set when any dropped bit was: Boldo
	// and Melquiond, "Emulation of FMA and correctly-rounded sums: proved
	// algorithms using rounding to odd", IEEE TC 57(4), 2008) instead of
	// the f32 C an MXFP8 GEMM's next quantization reads (the forward's h):
	// rounding to odd with 8 significant bits keeps every later rounding
	// to e4m3's 4 (and every comparison with a bf16 number, such as the
	// round-up scale's thresholds 448*2^k) as from the f32 value, so the
	// quantization of the stored C gives the bytes it gives from the f32
	// C, except in blocks whose amax is below 2^-113 (docs/mxfp8.md, "h
	// stored as bf16 rounded to odd"), at half the bytes. The sm_90a
	// register-fed GEMM (sm90Layout.swapStoreBF16 and
	// swapStoreBF16Interleaved), not with COutF32 or QuantizeC.
	CRoundOdd bool
	// BNMajor: B_e is [K, BRows()] row-major (N contiguous), as a weight
	// [out, in] is for the data gradient that reduces over its rows (the
	// backward's dh = dy·FC2 and dxs = dgu·FC1). Only engines whose
	// ReadsNMajorB accepts the spec read it directly (EpiStore, no bias;
	// sm_80 grouped or through a pointer table, sm_90a grouped); the
	// lowering gives the others a K-major copy.
	BNMajor bool
	// BHalvesInPairs: with Gate GateInterleaved, B_e holds gate/up halves
	// (rows 0..N-1 gate, N..2N-1 up, as GateHalves) and TMA loads each
	// B tile as (gate, up) row pairs through a 4-D tensor map (K, 2, N,
	// E) with the halves' stride on its second dimension, one box per
	// atom (CUDA driver API, cuTensorMapEncodeTiled): shared row 2c holds
	// gate row n0+c and 2c+1 its up row, the order of interleaved weights,
	// so the tile, the accumulators and the epilogue are
	// GateInterleaved's while the scale rows are read where the halves
	// keep them (b_scales [E, 2N, K/32] in halves order). For the sm_90a
	// register-fed GEMM of 192 or 256 token rows, whose two consumer
	// warpgroups each take one 64-row slice of a 128-row B tile: with
	// halves each slice would be all gate or all up (docs/mxfp8.md, "Next:
	// 256 token rows per tile"). Grouped K-major weights, no bias.
	BHalvesInPairs bool
	// MX makes the GEMM MXFP8 (docs/mxfp8.md): A and B are e4m3 (one
	// byte), with the UE8M0 scales a_scales [rows, K/32] and b_scales [E,
	// BRows(), K/32] (one per 32 along K), and every 32-wide block of K
	// counts as its e4m3 products times the two scales. sm_90a and
	// sm_100a; BK 128, B grouped and K-major.
	MX bool
	// MXExpand (with MX) computes the same values another way on sm_90a:
	// TMA loads each stage's e4m3 tiles, converter warps widen the elements
	// times their scales to bf16 in shared memory (exact for every scale of
	// at least 2^-124, layouts.TestMXValuesInBF16; codegen/mx_expand.go)
	// and the consumers run the bf16 wgmma loop over K blocks of BK/2 =
	// 64, with no per-block promotion (docs/mxfp8.md). Opt-in
	// (schedule.MXGemmExpand): correct on the H200, not yet faster than
	// promote (docs/perf.md, mxfp8 v5).
	MXExpand bool
	// MXRegisterFed (with MX) computes the same products a third way on
	// sm_90a, for tiles of many token rows: A is bf16 [rows, K], the
	// exact values of the activations' MX quantization (no a_scales),
	// each row's 32-wide blocks in layouts.RegisterFedOrder; B stays
	// e4m3 with b_scales; the consumer warpgroup loads B's elements
	// from the TMA-filled stage into registers in wgmma's A-fragment
	// layout, widens them there times their scale to bf16 (exact for
	// scales of at least 2^-124, as MXExpand), and issues bf16 wgmma with
	// the weights as A from registers and the token rows as B from shared
	// memory (the operand swap's roles; codegen/wgmma_regfed.go,
	// docs/mxfp8.md "the register-fed expansion"). B tiles of 64, 128 or
	// 256 rows with BM a multiple of 8 up to 128 (one consumer warpgroup
	// per 128 B-tile rows), or a 128-row B tile of plain, interleaved or
	// paired (BHalvesInPairs) gate/up rows with BM = 192 or 256 (two
	// warpgroups of one slice each). Not
	// handled (the caller's guarantee): an e4m3 NaN byte in B and scale
	// codes above 134, which the widening reads as finite values (promote
	// and MXExpand give the NaN; testing each row's bytes in the K loop
	// cost 3-5% at T = 4096: docs/mxfp8.md).
	MXRegisterFed bool
	// QuantizeC (an MXFP8 GEMM with an f32 C whose N is a multiple of 32):
	// the epilogue also writes C's MXFP8 form, the bytes moe.Quantize would
	// write from the stored C: e4m3 c_q [rows, N] and ue8m0 c_scales [rows,
	// N/32], one scale per 32 columns. The quantization of the next GEMM's
	// A (the routed activations h) inside this one's epilogue, one launch
	// fewer. The sm_90a operand swap implements it (its C tile's 32-column
	// blocks are whole in one work item).
	QuantizeC bool
	// QuantizeCValues (with QuantizeC) writes C's MXFP8 values instead of
	// its e4m3 bytes and codes: bf16 c_v [rows, N], each 32-column block in
	// layouts.RegisterFedOrder, the bytes moe.Quantize with V writes from
	// the stored C (the A operand of the next register-fed GEMM). The
	// register-fed GEMMs implement it with gate/up halves, one consumer
	// warpgroup of 128 B-tile rows and at most 64 token rows, and two
	// blocks per SM (Tile.BlocksPerSM),
	// where the epilogue runs beside the other block's K loop
	// (sm90Layout.epilogueQuantizeRF; with both consumer warpgroups of one
	// block it held the tensor cores: docs/mxfp8.md, v31).
	QuantizeCValues bool
	// QuantizeCOnly (with QuantizeC) leaves C itself unstored: the
	// epilogue writes only C's MXFP8 form. The lowering sets it when C is
	// scratch that no op but the fused Quantize reads (the forward's h).
	// The parameter c stays (bound, never written).
	QuantizeCOnly bool
	// GatherK (ATiled, grouped weights, engines whose GathersA holds)
	// makes the kernel read the dispatched rows from the token rows
	// themselves: A is x, bf16 [T, K] (K the reduction length, the hidden
	// size), and dispatched row r is row a_rows[r] / GatherK
	// of it (a_rows: i32 [rows], the slot t*topk+k of each row,
	// moe.Permute's SrcSlot; GatherK the top-k), so no gather pass writes
	// and no GEMM reads a [T*topk, K] copy. For an MXFP8 GEMM with e4m3 A
	// (MX, not MXRegisterFed) A is the token rows' MXFP8 form, e4m3 [T, K]
	// with a_scales ue8m0 [T, K/32], and row r reads both at that token
	// row: a quantization of x per token (T rows) replaces the quantizing
	// gather of T*topk rows, with the same bytes in every dispatched row.
	// The same products in the same order as over the gathered copy.
	// Faster at decode sizes only (docs/perf.md, gather v1 and v2). 0: A
	// holds the dispatched rows.
	GatherK int
	// SplitK = S >= 2 splits the reduction into S equal parts of
	// ceil(K/BK)/S K blocks (which must divide evenly) for a dense A
	// (ADense) with the plain store of an f32 C, no bias, bf16 grouped
	// K-major weights: work item (tile, column block, split s) sums K
	// blocks s*ceil(K/BK)/S.. and stores its f32 partial sums at C + s *
	// rows * N (C is f32 [S, rows, N]); a reduce kernel adds the S parts
	// in order s = 0, 1, ... and applies the GEMM's epilogue (the
	// lowering's, codegen/lower_splitk.go: the engine's kernel writes only
	// the parts). S times the work items for GEMMs of few column blocks
	// over a long K (the shared experts at decode sizes, docs/perf.md
	// split-K v1). 0 or 1: none. Errors: Validate refuses another form of
	// GEMM or an S that does not divide ceil(K/BK); GroupedGEMM refuses it
	// on engines whose SplitsK is false (sm_80, sm_100a, the sm_90a
	// operand swap).
	SplitK int
	// QueueItems (ATiled, engines whose QueuesItems holds: sm_90a) makes
	// the persistent walk's tail dynamic: each block runs the fixed walk's
	// first R items (R = its rounds but the last, at least two:
	// fixedRounds), and every later item number is R*gridDim.x plus what
	// the block's producer takes from a queue word with an atomic add (one
	// item ahead of the one it loads),
	// handing it to the block's other roles through a ring in shared
	// memory (layouts.GemmConfig.ItemSlots). A block whose SM runs fast
	// takes more items, so the kernel ends with the mean SM rather than
	// the slowest (docs/megakernel.md, "GEMM items from the queue"). Each
	// output is computed by one item in the same K order as in the fixed
	// walk: the same bits. The queue is the two u32 words QueueWord and
	// QueueWord+1 of the kernel's "queue" parameter (launch.BufWorkQueue:
	// the next number, and the blocks that are done, the last of which
	// zeroes both), zero before the launch.
	QueueItems bool
	QueueWord  int
	// signalTiles and waitTiles are set by Engine.ChainedGEMM on the two
	// GEMMs of a chained kernel (gemm_chain.go), and by the persistent
	// lowering on the forward's FC1 and FC2 phases (lower_phase_signals.go):
	// the first's epilogue threads add to their item's row tile's word of
	// tile_done once its C is stored, the second's producer waits before
	// each item's loads until the word reaches waitTiles.
	signalTiles bool
	waitTiles   int
	// signalPerItem, with signalTiles outside a chained kernel (the
	// persistent forward's FC1 phases, lower_phase_signals.go), is the sum
	// of an item's signals, whichever warps send them (each adds its share;
	// 0: each signalling thread adds one); the waiting GEMM's waitTiles is
	// then the signalling GEMM's column blocks times it.
	signalPerItem int
	// minStaging is the least columns of the staged epilogue's staging
	// tile (sm_90a; 0: the tile's BN), noStaging plans none, and
	// minProdRegs is the least registers of the producer warpgroup
	// (setmaxnreg): a chained kernel sets them so that its GEMMs' plans
	// place the barriers and split the registers alike.
	minStaging int
	noStaging  bool
	// phase builds the kernel as a phase of a persistent kernel
	// (schedule.LoweringPersistent, fusePersistent): each role gives its
	// setmaxnreg registers back at its end, once every thread of the block
	// has reached its own (giveBack), and thread 0 invalidates the block's
	// mbarriers once every role is done, so that the next phase starts
	// from the launch's registers and initialises its own barriers in the
	// same shared memory.
	phase       bool
	minProdRegs int
	// storeGatherK, in a GEMM phase of the persistent forward (FC1 over
	// dispatched rows with the staged epilogue; store_gather.go), is the
	// top-k of the gather its store warps run beside the items: they copy
	// A's rows from the token rows x (gather_x, bf16 [T, K]) by their slots
	// (gather_slots) into A (parameter a), storeChunkRows rows a chunk,
	// and signal each chunk to its row tile's word of gather_done; the
	// producer waits before an item's loads until the word holds
	// storeChunks (0: no gather, the rows come from a gather phase).
	storeGatherK int
}

// splits is the number of parts of the reduction: SplitK, at least 1.
func (s GemmSpec) splits() int { return max(s.SplitK, 1) }

// ElemBytes is the size of a B element (and of an A element, but with
// MXRegisterFed): 1 (MX, e4m3) or 2 (bf16).
func (s GemmSpec) ElemBytes() int {
	if s.MX {
		return 1
	}
	return 2
}

// AElemBytes is the size of an A element: 2 (bf16), 1 for an MX GEMM
// whose A is e4m3 (not MXRegisterFed).
func (s GemmSpec) AElemBytes() int {
	if s.MX && !s.MXRegisterFed {
		return 1
	}
	return 2
}

// BRows is the number of rows of each expert's B matrix: 2N for EpiGated, else N.
func (s GemmSpec) BRows() int {
	if s.Epilogue == EpiGated {
		return 2 * s.N
	}
	return s.N
}

// Validate checks the spec independently of any engine.
func (s GemmSpec) Validate() error {
	switch {
	case s.Name == "":
		return fmt.Errorf("codegen: GemmSpec.Name is empty")
	case s.Tile.BlocksPerSM < 0 || s.Tile.BlocksPerSM > 2 || s.Tile.BlocksPerSM > 1 && s.Tile.Cluster > 1:
		return fmt.Errorf("codegen: %s: BlocksPerSM = %d must be 0, 1 or 2, and 2 only without clusters (Cluster = %d)", s.Name, s.Tile.BlocksPerSM, s.Tile.Cluster)
	case s.N <= 0 || s.N%8 != 0:
		return fmt.Errorf("codegen: %s: N = %d must be a positive multiple of 8", s.Name, s.N)
	case s.K <= 0 || s.K%8 != 0:
		return fmt.Errorf("codegen: %s: K = %d must be a positive multiple of 8", s.Name, s.K)
	case s.Experts <= 0:
		return fmt.Errorf("codegen: %s: Experts = %d must be positive", s.Name, s.Experts)
	case s.A == ADense && s.Experts != 1:
		return fmt.Errorf("codegen: %s: ADense needs Experts = 1, got %d", s.Name, s.Experts)
	case s.Tile.BM <= 0 || s.Tile.BN <= 0 || s.Tile.BK <= 0 || s.Tile.Stages <= 0 || s.Tile.Warps <= 0:
		return fmt.Errorf("codegen: %s: tile %+v has a non-positive field", s.Name, s.Tile)
	case s.COutF32 && s.Epilogue != EpiStore && !s.MX:
		return fmt.Errorf("codegen: %s: an f32 C needs the plain store epilogue (or an MXFP8 GEMM, whose f32 h is quantized next)", s.Name)
	case s.BNMajor && (s.Epilogue != EpiStore || s.Bias):
		return fmt.Errorf("codegen: %s: an N-major B needs the plain store epilogue and no bias", s.Name)
	case s.MX && (s.B != BGrouped || s.BNMajor || s.K%32 != 0 || s.Tile.BK != 128):
		return fmt.Errorf("codegen: %s: an MXFP8 GEMM needs grouped K-major weights, K a multiple of 32 (K = %d) and a K block of 128 (%d)", s.Name, s.K, s.Tile.BK)
	case s.MXExpand && !s.MX:
		return fmt.Errorf("codegen: %s: MXExpand is a way to run an MXFP8 GEMM (MX)", s.Name)
	case s.MXRegisterFed && (!s.MX || s.MXExpand || s.QuantizeC && !s.QuantizeCValues):
		return fmt.Errorf("codegen: %s: MXRegisterFed is a way to run an MXFP8 GEMM (MX), not with MXExpand, and quantizing C to its values only (QuantizeCValues)", s.Name)
	case s.QuantizeCValues && (!s.QuantizeC || !s.MXRegisterFed):
		return fmt.Errorf("codegen: %s: QuantizeCValues is a form of QuantizeC of a register-fed GEMM (MXRegisterFed)", s.Name)
	case s.CRoundOdd && (s.COutF32 || !s.MXRegisterFed):
		return fmt.Errorf("codegen: %s: CRoundOdd stores a register-fed MXFP8 GEMM's C as bf16 rounded to odd, not with COutF32", s.Name)
	case s.QuantizeCOnly && !s.QuantizeC:
		return fmt.Errorf("codegen: %s: QuantizeCOnly is a form of QuantizeC", s.Name)
	case s.QuantizeC && (!s.MX || !s.COutF32 || s.N%32 != 0):
		return fmt.Errorf("codegen: %s: QuantizeC writes the MXFP8 form of an MXFP8 GEMM's f32 C with N a multiple of 32 (N = %d)", s.Name, s.N)
	case s.SplitK < 0 || s.SplitK > 1 && (s.A != ADense || s.Epilogue != EpiStore || !s.COutF32 || s.Bias || s.MX || s.BNMajor || s.B != BGrouped || s.QuantizeC || s.GatherK != 0):
		return fmt.Errorf("codegen: %s: SplitK = %d: a split reduction is for a dense A with the plain store of an f32 C, no bias, bf16 grouped K-major weights", s.Name, s.SplitK)
	case s.SplitK > 1 && ((s.K+s.Tile.BK-1)/s.Tile.BK)%s.SplitK != 0:
		return fmt.Errorf("codegen: %s: SplitK = %d does not divide the %d K blocks of %d", s.Name, s.SplitK, (s.K+s.Tile.BK-1)/s.Tile.BK, s.Tile.BK)
	case s.QueueItems && (s.A != ATiled || s.QueueWord < 0):
		return fmt.Errorf("codegen: %s: QueueItems takes the work items of a GEMM over dispatched rows (ATiled) from a queue at a word index >= 0 (%d)", s.Name, s.QueueWord)
	case s.BHalvesInPairs && (s.Epilogue != EpiGated || s.Gate != GateInterleaved || !s.MXRegisterFed || s.B != BGrouped || s.BNMajor || s.Bias):
		return fmt.Errorf("codegen: %s: BHalvesInPairs loads the gate/up halves of a register-fed MXFP8 FC1 (MXRegisterFed, EpiGated) as the pairs of GateInterleaved, from grouped K-major weights without a bias", s.Name)
	case s.storeGatherK < 0 || s.storeGatherK > 0 && (s.A != ATiled || s.MX || s.B != BGrouped || s.GatherK > 0):
		return fmt.Errorf("codegen: %s: storeGatherK = %d: the store warps gather the bf16 rows of dispatched A (ATiled) beside grouped weights, not gathered by the producer (GatherK)", s.Name, s.storeGatherK)
	case s.GatherK < 0 || s.GatherK > 0 && (s.A != ATiled || s.MXRegisterFed || s.MXExpand || s.B == BTable):
		return fmt.Errorf("codegen: %s: GatherK = %d: a GEMM gathers the bf16 (or, MXFP8, e4m3) rows of dispatched A (ATiled) beside grouped weights, neither register-fed nor expanded, GatherK the top-k", s.Name, s.GatherK)
	}
	return nil
}

// Parameter roles of a grouped GEMM kernel. An engine's kernel takes exactly
// these parameters, in this order, each present only under the stated
// condition; KernelInfo.Params lists them with Role set, and Build binds each
// role to a buffer or a value. Engines that need tensor maps add parameters
// with Role RoleTensorMap after these (Param.TensorMap names the operand).
const (
	RoleA          = "a"             // ptr: A, bf16 [rows, K] (e4m3 with MX, but bf16 with MXRegisterFed)
	RoleB          = "b"             // ptr: B, bf16 [E, BRows, K] ([E, K, BRows] with BNMajor; e4m3 with MX) (BGrouped) or u64 [E] pointer table (BTable)
	RoleBias       = "bias"          // ptr: fp32 [E, BRows] (only if Bias)
	RoleC          = "c"             // ptr: C, bf16 [rows, N] (f32 with COutF32; rounded to odd with CRoundOdd; never written with QuantizeCOnly)
	RoleTiles      = "tiles"         // ptr: i32 [2*maxTiles] pairs (expert, first row) (ATiled only)
	RoleOffsets    = "offsets"       // ptr: i32 [E+1] exclusive prefix of rows per expert (ATiled only)
	RoleNumTiles   = "ntiles"        // ptr: i32 [1] number of valid tiles (ATiled only)
	RoleRows       = "rows"          // i32: number of rows M (ADense only)
	RoleTensorMap  = "tmap"          // .param .align 64 .b8 [128]: CUtensorMap (engines that use TMA)
	RoleAScales    = "a_scales"      // ptr: ue8m0 [rows, K/32] (MX only, not MXRegisterFed; [T, K/32] with GatherK)
	RoleBScales    = "b_scales"      // ptr: ue8m0 [E, BRows, K/32] (MX only)
	RoleCQ         = "c_q"           // ptr: e4m3 [rows, N], C quantized (QuantizeC only)
	RoleCScales    = "c_scales"      // ptr: ue8m0 [rows, N/32], its scales (QuantizeC only)
	RoleCV         = "c_v"           // ptr: bf16 [rows, N], C's MXFP8 values in the register-fed order (QuantizeCValues only)
	RoleARows      = "a_rows"        // ptr: i32 [rows], the slot of each dispatched row; A is then x [T, K] (and a_scales [T, K/32]) (GatherK only)
	RoleQueue      = "queue"         // ptr: u32 words, the work queue at QueueWord (launch.BufWorkQueue) (QueueItems only)
	RoleTileDone   = "tile_done"     // ptr: u32 [maxTiles], per row tile the first GEMM's signals, zero before the launch (Engine.ChainedGEMM's kernels; the persistent forward's FC1 and FC2)
	RoleGatherX    = "gather_x"      // ptr: bf16 [T, K], the token rows the store warps gather (storeGatherK only)
	RoleGatherSlot = "gather_slots"  // ptr: i32 [rows], the slot of each dispatched row over the top-k (storeGatherK only)
	RoleGatherDone = "gather_done"   // ptr: u32 [maxTiles], per row tile the gathered chunks, zero before the launch (storeGatherK only)
	RoleErr        = "err"           // ptr: u32 [2], the program's error words (launch.ErrBuffer), ErrWaitTimeout ORed into both when a wait gives up (waitTiles or storeGatherK only)
	RoleWaitLimit  = "wait_limit_ns" // i64: nanoseconds a wait may last, 0 without limit (launch.ParamWaitLimit; waitTiles or storeGatherK only)
)

// GemmParams returns the parameter list every engine's grouped GEMM kernel
// starts with, for spec (see the Role constants).
func GemmParams(s GemmSpec) []Param {
	ps := []Param{
		{Name: "a", Type: ParamPtr, Size: 8, Role: RoleA},
		{Name: "b", Type: ParamPtr, Size: 8, Role: RoleB},
	}
	if s.Bias {
		ps = append(ps, Param{Name: "bias", Type: ParamPtr, Size: 8, Role: RoleBias})
	}
	ps = append(ps, Param{Name: "c", Type: ParamPtr, Size: 8, Role: RoleC})
	if s.MX && !s.MXRegisterFed {
		ps = append(ps, Param{Name: "a_scales", Type: ParamPtr, Size: 8, Role: RoleAScales})
	}
	if s.MX {
		ps = append(ps, Param{Name: "b_scales", Type: ParamPtr, Size: 8, Role: RoleBScales})
	}
	if s.QuantizeC && s.QuantizeCValues {
		ps = append(ps, Param{Name: "c_v", Type: ParamPtr, Size: 8, Role: RoleCV})
	} else if s.QuantizeC {
		ps = append(ps,
			Param{Name: "c_q", Type: ParamPtr, Size: 8, Role: RoleCQ},
			Param{Name: "c_scales", Type: ParamPtr, Size: 8, Role: RoleCScales})
	}
	if s.A == ATiled {
		ps = append(ps,
			Param{Name: "tiles", Type: ParamPtr, Size: 8, Role: RoleTiles},
			Param{Name: "offsets", Type: ParamPtr, Size: 8, Role: RoleOffsets},
			Param{Name: "ntiles", Type: ParamPtr, Size: 8, Role: RoleNumTiles})
	} else {
		ps = append(ps, Param{Name: "rows", Type: ParamI32, Size: 4, Role: RoleRows})
	}
	if s.GatherK > 0 {
		ps = append(ps, Param{Name: "a_rows", Type: ParamPtr, Size: 8, Role: RoleARows})
	}
	if s.QueueItems {
		ps = append(ps, Param{Name: "queue", Type: ParamPtr, Size: 8, Role: RoleQueue})
	}
	if s.signalTiles || s.waitTiles > 0 {
		ps = append(ps, Param{Name: "tile_done", Type: ParamPtr, Size: 8, Role: RoleTileDone})
	}
	if s.storeGatherK > 0 {
		ps = append(ps,
			Param{Name: RoleGatherX, Type: ParamPtr, Size: 8, Role: RoleGatherX},
			Param{Name: RoleGatherSlot, Type: ParamPtr, Size: 8, Role: RoleGatherSlot},
			Param{Name: RoleGatherDone, Type: ParamPtr, Size: 8, Role: RoleGatherDone})
	}
	if s.waitTiles > 0 || s.storeGatherK > 0 {
		ps = append(ps,
			Param{Name: "err", Type: ParamPtr, Size: 8, Role: RoleErr},
			Param{Name: RoleWaitLimit, Type: ParamI64, Size: 8, Role: RoleWaitLimit})
	}
	return ps
}

// gemmIRParams turns a GEMM parameter list into kernel parameters: pointers
// are global byte pointers (GPtr), i32 and i64 scalars i32 and i64, tensor maps
// ir.TensorMapParam (byval [128 x i8], listed under "grid_constant").
func gemmIRParams(params []Param) []ir.Param {
	ps := make([]ir.Param, len(params))
	for i, q := range params {
		switch q.Type {
		case ParamI32:
			ps[i] = ir.P(q.Name, ir.I32)
		case ParamI64:
			ps[i] = ir.P(q.Name, ir.I64)
		case ParamTmap:
			ps[i] = ir.TensorMapParam(q.Name)
		default:
			ps[i] = ir.P(q.Name, GPtr)
		}
	}
	return ps
}

// GemmGrid is the default grid of a grouped GEMM: x = row tiles (an upper
// bound for ATiled: ceil(rowsMax/BM) + E, where rowsMax = RowsPerT*T; surplus
// blocks exit when x >= *ntiles), y = ceil(N/BN) column blocks.
func GemmGrid(s GemmSpec, rowsPerT int64) [3]Expr {
	bm := int64(s.Tile.BM)
	x := Expr{A: rowsPerT, B: 0, D: bm, Min: 1}
	if s.A == ATiled {
		x.B = int64(s.Experts) * bm
	}
	y := Const(int64((s.N + s.Tile.BN - 1) / s.Tile.BN))
	return [3]Expr{x, y, Const(1)}
}

// KernelInfo is what an engine reports about a kernel it added to a module.
type KernelInfo struct {
	Name        string  `json:"name"`         // kernel symbol (GemmSpec.Name)
	Params      []Param `json:"params"`       // GemmParams(spec), then any tensor-map parameters
	Block       int     `json:"block"`        // threads per block (1-D)
	SharedBytes int     `json:"shared_bytes"` // dynamic shared memory per block
	Grid        [3]Expr `json:"grid"`         // as functions of T (upper bounds)
	// GridPerSM: Grid[0] is one block per SM of the target's reference part
	// (the default persistent grid); launchers may use the device's count.
	GridPerSM bool `json:"grid_per_sm,omitempty"`
	// CoResident: the blocks wait for one another (launch.Kernel.CoResident).
	CoResident bool `json:"co_resident,omitempty"`
	// Cluster is the blocks per thread-block cluster along x, 0 for none
	// (launch.Kernel.Cluster).
	Cluster int `json:"cluster,omitempty"`
	// BlocksPerSM is the blocks per SM the kernel is built to hold at once
	// (Tile.BlocksPerSM; 0 for one): a GridPerSM grid is that many per SM
	// (launch.Kernel.BlocksPerSM).
	BlocksPerSM int `json:"blocks_per_sm,omitempty"`
	// Phases names the kernel's inner phases, which it marks
	// (launch.Kernel.Phases, phaseMark).
	Phases []string `json:"phases,omitempty"`
}
