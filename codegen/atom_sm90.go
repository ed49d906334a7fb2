package codegen

import (
	"fmt"

	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"

	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/layouts"
	"github.com/mokc/mokc/target"
)

// The sm_90a (Hopper) atom of the grouped-GEMM task: TMA loads into a
// Tile.Stages deep shared-memory ring guarded by full/empty mbarriers, and
// wgmma.mma_async m64nNk16 bf16 → fp32 from 128-byte-swizzled K-major tiles.
// PTX ISA 8.0 sections: cp.async.bulk.tensor, mbarrier, wgmma (9.7.15),
// matrix descriptor format (9.7.15.5.1), setmaxnreg; what the H200 showed
// beyond the ISA text is in docs/hardware.md.
//
// Block: one producer warpgroup (warpgroup 0; its first thread issues every
// TMA load, the warpgroup gives registers back with setmaxnreg.dec) and
// BM/64 consumer warpgroups (warpgroup c owns rows 64(c-1).. of the tile,
// issues the wgmma and runs the epilogue of its rows). The grid is
// persistent: block x walks the work items x, x+gridDim.x, ... where item
// i = tile*nBlocks + column block, tile indexing the tile list (ATiled) or
// the BM-row blocks of A (ADense). Producer and consumers walk the same item
// sequence, so the ring's stage and phase simply continue from item to item.
//
// Two blocks per SM (Tile.BlocksPerSM = 2): .minnctapersm 2, at most half
// the SM's shared memory each (target.Target.SharedMemoryFor), no staged
// epilogue, a grid of two blocks per SM. Each block's epilogue then runs
// while the other block's wgmma use the tensor cores, which one block of
// two consumer warpgroups cannot do: both finish their K loops together.
// The producer loads by TMA only (grouped weights, dispatched rows, the
// fixed walk). Two forms (Tile.ProducerWarps):
//   - 4, a producer warpgroup as above: launched at .maxnreg sharedSMRegs
//     (128 for 256 threads), the producer drops to 40-56 and the
//     consumers rise to 200-216 with setmaxnreg (sharedSMBudget); ptxas
//     compiles no instruction needing more than .maxnreg, so each wgmma's
//     accumulators and the 32 registers beside them stay within it (bf16
//     B tiles of at most 192 rows in one wgmma per k16 step, of 16k rows
//     up to 256 in two of half the rows: WGMMAMainloop.OffBHi; the
//     register-fed GEMM's one warpgroup of up to 128 token rows).
//   - 1, one producer warp after the consumer warpgroups (160 threads with
//     one), no setmaxnreg, .maxnreg sharedSMRegs (168: the register file's
//     sub-partitions hold 3 of the two blocks' 10 warps); MXFP8's codes by
//     its lanes.
//
// Shared memory (layouts.PlanGemmSmem; dynamic, realigned to 1024 bytes): the
// ring of tmaRing, [MXFP8: the producer's code slots], [the staging tile],
// then Stages full and Stages empty mbarriers [and staging full, empty].
// full[s] expects one arrival (the producer's arrive.expect_tx; MXFP8: 32
// more per code warp, mxCodeWarps, each lane's after its scale stores) plus
// the transaction bytes of the stage;
// empty[s] expects one arrival per consumer warp (lane 0, after
// wgmma.wait_group shows the warp's reads of the stage are done).
//
// Operands through TMA (tensor maps are kernel parameters after the
// GemmParams, see tmaTensorMaps):
//   - A: 2D map over [rowsTotal, K] (rowsTotal = rowsPerT*T), box [BM, 64];
//     the row coordinate is the tile's first row (segment offset + tile row
//     from the tile list). Rows past the tensor are zero-filled by TMA; rows
//     past the expert's segment but inside the tensor are loaded and never
//     stored (the epilogue predicates on RowEnd).
//   - B (BGrouped): 3D map over [E, BRows, K], box [1, rows, 64], so rows
//     past an expert's BRows are zero-filled instead of reading the next
//     expert. The B tile follows layouts.GateUpRows: gated halves, two boxes
//     of BN rows (gate rows n0.., up rows N+n0..; accumulator columns
//     0..BN-1 gate, BN..2BN-1 up: one thread holds both halves of a column);
//     interleaved, one box of 2*BN rows from row 2*n0 (accumulator column
//     pair (2c, 2c+1) = (gate, up) of output column n0+c); plain, one box of
//     BN rows.
//   - B N-major (GemmSpec.BNMajor: B_e stored [K, N], the backward's data
//     gradients): 3D map over [E, K, N], NB/64 boxes [1, BK, 64] per stage,
//     each a 64-wide column of an MN-major tile (layouts.NewSmemTileMN);
//     wgmma reads it with imm-trans-b = 1 and a descriptor whose LBO is
//     the column stride. Rows past K and columns past N are zero-filled.
//   - K need not be a multiple of 64: the last K block reads past K and TMA
//     fills zeros, which add nothing.
//
// Each consumer's K loop over one work item is a single inline-PTX statement
// (WGMMAMainloop): the accumulators are outputs of that statement only, so
// no register copy can land between a wgmma and the wait_group covering it
// whatever the backend's register allocation (ptxas would otherwise inject
// warpgroup.wait and serialise the tensor-core pipeline). The loop keeps one
// wgmma group in flight (wait_group 1) and releases the previous stage. A
// consumer warpgroup whose 64 rows all lie past its expert's segment (the
// ragged last tile of an expert) runs WGMMADrain instead: it waits for and
// releases every stage but issues no wgmma.
//
// Staged epilogue (when a BM x BN bf16 staging tile fits next to the ring,
// C is bf16, B is not a pointer table, A is not gathered, and neither the expansion nor the
// operand swap runs): consumers compute the outputs with the
// shared Epilogue (Epilogue.Values: bias, activation), round them to bf16
// into the staging tile and arrive on staging-full, then go straight on to
// the next work item's K loop; warps 1-3 of the producer warpgroup store
// the staged tile to C with coalesced, predicated 16-byte stores (rows
// below RowEnd, columns below N) and arrive on staging-empty. The global
// stores thus overlap the next tile's wgmma. Otherwise the consumers store
// directly through Epilogue.Emit (the register-fed GEMMs' plain bf16 C
// through Epilogue.Values and their own transposed stores:
// sm90Layout.swapStoreBF16).
//
// BTable (one allocation per expert): a TMA tensor map names one global
// address, and swapping it per expert would need tensormap.replace on a
// global-memory copy of the map (a workspace the engine interface has no
// buffer for). Instead all 128 producer threads copy the B tile with
// cp.async (16-byte chunks, src-size 0 zero-fill out of range) into the same
// 128-byte swizzled layout TMA writes, and arrive on the stage's full
// barrier with cp.async.mbarrier.arrive.noinc (full then expects 1 + 128
// arrivals: thread 0's arrive.expect_tx for A's TMA bytes, and one per
// thread); consumers issue fence.proxy.async.shared::cta after the wait so
// the generic-proxy writes are visible to wgmma's async-proxy reads. A still
// comes through TMA.
//
// Gathered A (GemmSpec.GatherK: FC1 reading x itself, no gather pass; the
// lowering uses it at decode sizes only, codegen.lowerGatheredGEMM): TMA
// moves boxes of consecutive rows, and a dispatched tile's rows are
// scattered tokens of x, so every producer thread copies its own rows of
// the A tile with cp.async (row tid + 128i, all eight 16-byte chunks of
// each atom, through L1, into the same swizzled layout; rows past the
// expert's segment are not copied) from the tokens of a_rows (each row's
// slot over the top-k), while thread 0 issues B's TMA loads; full then
// expects 1 + 128 arrivals (B's transaction bytes and one
// cp.async.mbarrier.arrive.noinc per thread), the consumers fence the
// proxies as for BTable, and the epilogue stores directly (the staging
// tile's store warps copy rows instead). At T = 4096 these copies made FC1
// 1.4-1.5x slower than its TMA loads of the gathered rows, with one copying
// warp or four, through L1 or not; one TMA box per row was 4.7x slower
// (docs/perf.md, gather v1).
//
// Gathered MXFP8 A (the operand swap's 32 token rows, e4m3, GatherK with
// MX): the rows come from the token rows' MXFP8 form (x_q [T, K] and its
// scales, one quantization per token) by the same slots. The code warps
// copy them (gemmProducer.gatherChunkCopy: the A tile's 16-byte chunks
// round-robin over their lanes, each lane's chunks' rows loaded once per
// work item), and stage the A rows' scale codes from the tokens' scale
// rows (scaleRowA); full expects 1 + 64 per code warp (B's transaction
// bytes, each lane's cp.async arrival and its code arrival).

func init() {
	registerAtom(target.SM90a, sm90Plan, atomCaps{nMajorB: sm90NMajorB, quantizeC: GemmSpec.swapAB, gatherA: sm90GatherA, storeGather: sm90StoreGather, splitK: sm90SplitK,
		queue: func(s GemmSpec) bool { return !s.MXExpand && s.Tile.BlocksPerSM <= 1 }, cluster: func(s GemmSpec) bool { return checkSM90Cluster(s) == nil },
		sharesSM: sm90SharesSM})
}

// sm90GatherA: the sm_90a atom reads the dispatched rows of a bf16 GEMM
// with grouped weights, or of the promoted MXFP8 operand swap (32-row
// tiles: the decode FC1), from the token rows (GemmSpec.GatherK): the
// producer warpgroup copies them by cp.async while its thread 0 issues B's
// TMA loads (see the top of this file); not in a block of two per SM,
// whose producer is one warp.
func sm90GatherA(s GemmSpec) bool {
	return s.B == BGrouped && !s.BNMajor && (!s.MX || s.swapAB() && !s.MXRegisterFed) && s.Tile.BlocksPerSM <= 1
}

// sm90SharesSM: the sm_90a atom runs two blocks per SM (one consumer
// warpgroup, or two of small tiles, and a producer warpgroup or warp each;
// see the top of this file) for bf16 and register-fed MXFP8 GEMMs (not
// promoted, not expanded) whose producer loads everything by TMA; sm90Plan
// refuses the others with this predicate and checks the rest (registers,
// shared memory).
func sm90SharesSM(s GemmSpec) bool {
	return (!s.MX || s.MXRegisterFed) && s.B == BGrouped && s.GatherK == 0 && !s.QueueItems && s.splits() == 1
}

// sm90SplitK: the sm_90a atom splits the reduction of a dense bf16 GEMM
// (GemmSpec.SplitK, which Validate bounds) without the operand swap: the
// producer's TMA loads start at the item's first K block and the
// epilogue stores the item's part of C.
func sm90SplitK(s GemmSpec) bool { return !s.swapAB() }

// sm90NMajorB: the sm_90a atom reads a plain, grouped (not per-expert)
// B stored [K, N] directly (wgmma imm-trans-b = 1 over an MN-major tile,
// TMA boxes of 64 columns by BK rows), when the B tile is whole 64-wide
// columns and a box of BK rows is within TMA's 256.
func sm90NMajorB(s GemmSpec) bool {
	return s.B == BGrouped && s.Tile.BN%64 == 0 && s.Tile.BK <= 256
}

// checkSM90Cluster refuses a 2-CTA cluster (Tile.Cluster = 2) the sm_90a
// engine does not build: the pair walks the work items together, its
// CTAs on the column blocks 2c and 2c+1 of one row tile, each loading
// half of the tile's A rows by TMA multicast into both CTAs' rings
// (newPairWork, gemmProducer.tma) and releasing every stage in both
// (WGMMAMainloop.Peer). So: bf16 A rows (a bf16 GEMM, or the register-fed
// MXFP8 one, whose A is the rows' bf16 MXFP8 values) with grouped weights
// (K-major, or N-major as the backward's data gradients read them) by TMA,
// dispatched rows by TMA (no gathered rows, no split reduction), the
// fixed walk (a chained kernel's too: both GEMMs paired), an even number
// of column blocks and half-tiles of whole 8-row swizzle groups.
func checkSM90Cluster(s GemmSpec) error {
	nBlocks := (s.N + s.Tile.BN - 1) / s.Tile.BN
	switch {
	case s.Tile.Cluster != 2:
		return fmt.Errorf("codegen: %s: sm_90a clusters have 2 CTAs (Cluster = %d)", s.Name, s.Tile.Cluster)
	case s.MX && !s.MXRegisterFed || s.MXExpand || s.B != BGrouped || s.A != ATiled || s.GatherK > 0 || s.splits() > 1:
		return fmt.Errorf("codegen: %s: sm_90a 2-CTA clusters share the bf16 A rows (of a bf16 or register-fed MXFP8 GEMM) over dispatched rows with grouped weights, all by TMA, in one part of the reduction", s.Name)
	case s.QueueItems:
		return fmt.Errorf("codegen: %s: sm_90a 2-CTA clusters walk the fixed order of work items (not a queue's)", s.Name)
	case nBlocks%2 != 0:
		return fmt.Errorf("codegen: %s: sm_90a 2-CTA clusters take column blocks in pairs: N = %d makes %d blocks of %d", s.Name, s.N, nBlocks, s.Tile.BN)
	case s.Tile.BM%16 != 0:
		return fmt.Errorf("codegen: %s: sm_90a 2-CTA clusters load half of the A tile each, whole 8-row swizzle groups: BM = %d", s.Name, s.Tile.BM)
	}
	return nil
}

// sm90Layout is the derived geometry of one sm_90a GEMM kernel.
type sm90Layout struct {
	tmaRing
	// cluster is the CTAs per cluster: 1, or 2 (checkSM90Cluster).
	cluster int
	// perSM is the blocks each SM holds at once (Tile.BlocksPerSM): 1, or
	// 2 with half the registers and shared memory each.
	perSM             int
	WG                int // consumer warpgroups (BM/64; the operand swap one, the register-fed GEMM regFedWGs)
	threads           int
	prodRegs, mmaRegs int    // setmaxnreg targets (0: do not rebalance)
	launchRegs        int    // registers per thread at launch (.maxnreg) when rebalancing or sharing the SM (0: none)
	descHi            uint64 // wgmma smem descriptor bits of the K-major 128B-swizzled atoms
	descHiB           uint64 // B's (descHi, or those of the MN-major columns for an N-major B)
	// expand: an MXExpand GEMM. The layout is then the bf16 GEMM's (K block
	// BK/2, no staged epilogue) with the e4m3 tiles in every stage, and bf
	// its spec, which the consumers and the epilogue run; the producer
	// warpgroup loads the e4m3 tiles and widens them (mx_expand.go).
	expand bool
	bf     GemmSpec
	// mmaWG0 is the first consumer warpgroup: 1, or 2 when an MXExpand
	// kernel has a second warpgroup of converters (nConv), or 0 in a block
	// of two per SM whose producer is one warp after the consumers
	// (Tile.ProducerWarps = 1).
	mmaWG0 int
	// swap: the operand swap of a promoted MXFP8 GEMM of 32-row tiles
	// (swapAB): one consumer warpgroup, the B tile wgmma's A in 64-row
	// slices, the token rows its B (WGMMAMainloopMX.Swap, swapRuns); and
	// the register-fed MXFP8 GEMM, whose one or two warpgroups take the
	// same roles (WGMMAMainloopRegFed).
	swap bool
	// quantAt is, with GemmSpec.QuantizeC, the shared offset (from the
	// base) of the f32 tile of the work item's outputs the epilogue
	// quantizes (quantStride floats per token row; after the barriers), or
	// with MXRegisterFed of the code bytes its warps trade.
	quantAt int
	// offBHi, when not nil, splits the bf16 K loop's k16 steps into two
	// wgmma of NB/2 B-tile rows (WGMMAMainloop.OffBHi: the descriptor
	// offsets of rows NB/2 on), so that no instruction needs more
	// accumulators than a block of two per SM launches with
	// (sharedSMRegs); set by the plan where one of NB would, with one
	// consumer warpgroup.
	offBHi []int
}

// quantCols is the output columns of a work item whose epilogue the
// fused quantization reads: the gated B tile's NB/2 (gate, up) pairs, else
// NB; quantStride pads a tile row by 4 floats (16 bytes, so a 16-byte
// load of any 32-column block stays aligned and the rows of a quarter
// warp's loads start in different banks).
func (l sm90Layout) quantCols(s GemmSpec) int {
	if s.Epilogue == EpiGated {
		return l.NB / 2
	}
	return l.NB
}

func (l sm90Layout) quantStride(s GemmSpec) int { return l.quantCols(s) + 4 }

// swapAB reports whether the sm_90a engine runs s with the operand swap
// (docs/mxfp8.md, "the operand swap"): a promoted MXFP8 GEMM of 32-row
// tiles, for experts with few rows, where wgmma m64 over the token rows
// would compute mostly padding and promote 64 accumulators per thread per
// 32-wide block.
//
// The register-fed MXFP8 GEMM (GemmSpec.MXRegisterFed) always takes the
// swap's roles: the weights are wgmma's A (from registers), the token
// rows its B.
func (s GemmSpec) swapAB() bool {
	return s.MX && !s.MXExpand && (s.Tile.BM == 32 || s.MXRegisterFed)
}

// checkSwap refuses a GEMM the operand swap does not implement: the
// weights grouped and K-major (TMA), the B tile whole 64-row slices (for
// gate/up halves, each half), one consumer warpgroup.
func checkSwap(s GemmSpec) error {
	if s.MXRegisterFed {
		return checkRegFed(s)
	}
	switch nb := s.bTileRows(); {
	case s.B != BGrouped || s.BNMajor:
		return fmt.Errorf("codegen: %s: the sm_90a MXFP8 operand swap (BM = 32) loads grouped K-major weights with TMA", s.Name)
	case nb%64 != 0 || (s.bTile() == layouts.GateUpHalves && s.Tile.BN%64 != 0):
		return fmt.Errorf("codegen: %s: the sm_90a MXFP8 operand swap (BM = 32) reads the B tile in 64-row slices (gate and up halves each): BN = %d, %d B rows", s.Name, s.Tile.BN, nb)
	case s.Tile.Warps != 0 && s.Tile.Warps != 4:
		return fmt.Errorf("codegen: %s: the sm_90a MXFP8 operand swap (BM = 32) runs one consumer warpgroup (4 warps), schedule has %d", s.Name, s.Tile.Warps)
	}
	return nil
}

// checkRegFed refuses a register-fed MXFP8 GEMM (GemmSpec.MXRegisterFed)
// the sm_90a engine does not implement: grouped K-major weights (TMA), a
// B tile of 64, 128 or 256 rows (64-row slices; gate/up halves at least
// one slice each), BM a multiple of 8 up to 128 (wgmma's N; BM/2
// accumulators per slice), or 192 or 256 with a 128-row B tile of plain,
// interleaved or paired rows (one slice per warpgroup), and one consumer
// warpgroup per 128 B-tile rows or two for more than 128 token rows
// (regFedWGs).
func checkRegFed(s GemmSpec) error {
	switch nb, bm := s.bTileRows(), s.Tile.BM; {
	case s.B != BGrouped || s.BNMajor:
		return fmt.Errorf("codegen: %s: the sm_90a register-fed MXFP8 GEMM loads grouped K-major weights with TMA", s.Name)
	case (nb != 64 && nb != 128 && nb != 256) || (s.bTile() == layouts.GateUpHalves && nb == 64):
		return fmt.Errorf("codegen: %s: the sm_90a register-fed MXFP8 GEMM reads B tiles of 64, 128 or 256 rows (gate/up halves: 64 or 128 rows each), BN = %d gives %d", s.Name, s.Tile.BN, nb)
	case bm%8 != 0 || (bm > 128 && ((bm != 192 && bm != 256) || nb != 128 || s.bTile() == layouts.GateUpHalves)):
		return fmt.Errorf("codegen: %s: the sm_90a register-fed MXFP8 GEMM's tile rows are wgmma's N: a multiple of 8 up to 128, or 192 or 256 with a B tile of 128 plain, interleaved or paired rows; BM = %d", s.Name, bm)
	case s.Tile.Warps != 0 && s.Tile.Warps != 4*regFedWGs(nb, bm):
		return fmt.Errorf("codegen: %s: the sm_90a register-fed MXFP8 GEMM runs one consumer warpgroup per 128 B-tile rows, two for more than 128 token rows (%d warps), schedule has %d", s.Name, 4*regFedWGs(nb, bm), s.Tile.Warps)
	}
	return nil
}

// regFedWGs is the consumer warpgroups of a register-fed MXFP8 GEMM
// of nb B-tile rows and bm token rows: two for 256 B-tile rows or more
// than 128 token rows (each its half of the B tile: gate/up halves, its
// 64 gate rows and their 64 up rows; else nb/2 consecutive rows), else
// one.
func regFedWGs(nb, bm int) int {
	if nb == 256 || bm > 128 {
		return 2
	}
	return 1
}

// regFedSets is the A-register sets of a register-fed GEMM's K loop
// (WGMMAMainloopRegFed.Sets) with wg consumer warpgroups in each of
// blocks blocks per SM: two where another warpgroup shares the tensor
// cores (and the registers), else four.
func regFedSets(wg, blocks int) int {
	if wg > 1 || blocks > 1 {
		return 2 // four gained 1% on the H200 (docs/perf.md, mxfp8 v26) and cost ptxas's registers for the ragged tiles' loops
	}
	return 4
}

// regFedHalf is, for consumer warpgroup c of a register-fed GEMM, its
// first B-tile row (the thread's rows and scales start there) and its
// first output column: with two warpgroups, gate/up halves 64c (its gate
// rows; its up rows 128 on), else c*NB/2 rows and columns (half the
// columns for interleaved gate/up rows, two rows per column).
func (l sm90Layout) regFedHalf(b *Builder, c value.Value) (row, col value.Value) {
	if l.WG < 2 {
		return ir.Int32(0), ir.Int32(0)
	}
	half := int64(l.NB / 2)
	switch l.gate {
	case layouts.GateUpHalves:
		return b.MulI(c, 64), b.MulI(c, 64)
	case layouts.GateUpInterleaved:
		return b.MulI(c, half), b.MulI(c, half/2)
	}
	return b.MulI(c, half), b.MulI(c, half)
}

// instrAccs is the accumulators per thread of one of the K loop's wgmma
// (m64nNk16: N/2): the register-fed and swapped loops' N is the token
// rows, the others' the B tile's rows.
func (l sm90Layout) instrAccs() int {
	switch {
	case l.swap:
		return l.BM / 2
	case l.offBHi != nil:
		return l.NB / 4
	}
	return l.NB / 2
}

// accs is the number of accumulators of a consumer thread.
func (l sm90Layout) accs() int {
	if l.swap {
		return l.NB / 64 / l.WG * l.BM / 2
	}
	return l.NB / 2
}

// nConv is an MXExpand kernel's converter threads: the producer's warps
// 1-3, and the whole of every further non-consumer warpgroup.
func (l sm90Layout) nConv() int { return expandConverters + 128*(l.mmaWG0-1) }

// sm90Plan derives the geometry of spec's sm_90a kernel (ring, staging,
// setmaxnreg budget), or says why the atom refuses it.
func sm90Plan(s GemmSpec) (sm90Layout, error) {
	var l sm90Layout
	if s.MXExpand { // plan the bf16 GEMM the consumers run
		if s.B == BTable {
			return l, fmt.Errorf("codegen: %s: MXExpand loads B with TMA: weights in one allocation per expert are not supported", s.Name)
		}
		s.MX, s.MXExpand, s.Tile.BK = false, false, s.Tile.BK/2
		l.expand, l.bf = true, s
	}
	bm, nb := s.Tile.BM, s.bTileRows()
	if err := checkTMATile(s, target.SM90a); err != nil {
		return l, err
	}
	l.swap = s.swapAB()
	if l.swap {
		if err := checkSwap(s); err != nil {
			return l, err
		}
	}
	switch {
	case !l.swap && (bm%64 != 0 || bm < 64 || bm > 192):
		return l, fmt.Errorf("codegen: %s: sm_90a tile BM = %d must be 64, 128 or 192 (one consumer warpgroup per 64 rows, wgmma m64), or 32 for a promoted MXFP8 GEMM (the operand swap)", s.Name, bm)
	case s.Tile.BN%8 != 0 || nb > 256:
		return l, fmt.Errorf("codegen: %s: sm_90a B tile of %d rows (BN = %d) must be a multiple of 8 up to 256 (wgmma m64nNk16; TMA box <= 256 rows)", s.Name, nb, s.Tile.BN)
	case s.Tile.Cluster > 1:
		if err := checkSM90Cluster(s); err != nil {
			return l, err
		}
	}
	l.cluster = max(1, s.Tile.Cluster)
	l.perSM = blocksPerSM(s.Tile)
	if l.perSM > 1 && (l.expand || !sm90SharesSM(s)) { // s is the bf16 spec of an expansion here
		return l, fmt.Errorf("codegen: %s: sm_90a blocks of which two share an SM have a producer that loads grouped weights and dispatched rows by TMA, bf16 or register-fed MXFP8 (no pointer table, gathered rows, promoted MXFP8, expansion, queue or split reduction)", s.Name)
	}
	if w := s.Tile.Warps; w != 0 && w != 4*(bm/64) && !l.swap {
		return l, fmt.Errorf("codegen: %s: sm_90a tile BM = %d needs %d consumer warps (one warpgroup per 64 rows), schedule has %d (one warpgroup of 128 token rows, --fc1-tile 128x128x128 --mma-warps 4, and two of 192 or 256 token rows, 192x128x128 or 256x128x128 with 8, are the register-fed mxfp8 forward's only: for the backward give 64x128x128 with --stages 3, or the default tiles)", s.Name, bm, 4*(bm/64), w)
	}
	// Staged epilogue when the staging tile fits (not with BTable or
	// GatherK, whose producer warps are busy copying B or A; layouts.PlanGemmSmem plans none
	// for the operand swap, whose producer warps stage the scale codes:
	// mxCodeWarps). Never with SplitK, whose f32 parts the staging tile's
	// store warps (storeWarps) would write to C without the part's offset.
	staging := 0
	if s.B != BTable && s.GatherK == 0 && !s.COutF32 && s.splits() == 1 && !l.expand && !s.noStaging && l.perSM == 1 { // the staging tile is bf16; its store warps are the producer warpgroup's
		staging = max(s.Tile.BN, s.minStaging)
	}
	var err error
	if l.tmaRing, err = newTMARing(s, target.SM90a, staging, l.expand); err != nil {
		return l, err
	}
	if s.QuantizeC && s.MXRegisterFed {
		// The register-fed epilogue quantizes in registers; after the
		// ring, the code slots and the barriers, one UE8M0 code byte per
		// (consumer warp, token row) for the pairs of warps that share a
		// 32-column block (epilogueQuantizeRF). Only two blocks per SM:
		// with one, its epilogue held the tensor cores (docs/mxfp8.md, v31).
		wg := regFedWGs(l.NB, l.BM)
		if s.Epilogue != EpiGated || l.gate != layouts.GateUpHalves || l.NB != 128 || wg != 1 || l.BM > 64 || !s.QuantizeCValues || l.perSM < 2 {
			return l, fmt.Errorf("codegen: %s: the register-fed epilogue quantizes C to its MXFP8 values (QuantizeCValues) with gate/up halves, one consumer warpgroup of 128 B-tile rows and at most 64 token rows, two blocks per SM (B tile %d rows, %d token rows, gate/up %v, %d blocks per SM)", s.Name, l.NB, l.BM, l.gate, l.perSM)
		}
		l.quantAt = (l.smem.Required - l.smem.AlignSlack + 15) &^ 15
		l.smem.Bytes = max(l.smem.Bytes, l.smem.AlignSlack+l.quantAt+4*wg*l.BM)
	} else if s.QuantizeC {
		// The quantization's tile after the ring, the code slots and the
		// barriers.
		if !l.swap {
			return l, fmt.Errorf("codegen: %s: sm_90a quantizes C in the epilogue of the MXFP8 operand swap (32-row tiles) only", s.Name)
		}
		if blocks := l.BM * l.quantCols(s) / 32; blocks > 128 {
			return l, fmt.Errorf("codegen: %s: the epilogue quantizes a tile's %d (row, 32-column block) pairs with its 128 consumer threads, one each: at most 128 (a B tile of at most 256 gated or 128 plain rows)", s.Name, blocks)
		}
		l.quantAt = (l.smem.Required - l.smem.AlignSlack + 15) &^ 15
		l.smem.Bytes = max(l.smem.Bytes, l.smem.AlignSlack+l.quantAt+4*l.BM*l.quantStride(s))
	}
	if err := l.checkSmem(s, target.SM90a); err != nil {
		return l, err
	}
	l.WG = max(1, l.BM/64)
	if l.swap {
		l.WG = 1
		if s.MXRegisterFed {
			l.WG = regFedWGs(l.NB, l.BM)
		}
	}
	l.mmaWG0 = 1
	if l.expand {
		// A second warpgroup of converters when the block's registers
		// allow it without setmaxnreg: at most 512 threads, and the
		// consumers' loop needs NB/2 accumulators and about 30 more.
		if t := 128 * (l.WG + 2); t <= 512 && l.NB/2+32 <= (65536/t)&^7 {
			l.mmaWG0 = 2
		}
	}
	l.threads = 128 * (l.WG + l.mmaWG0)
	if l.perSM > 1 && s.Tile.ProducerWarps != 1 {
		// A producer warpgroup with setmaxnreg (registers, sharedSMBudget):
		// the block launches within sharedSMRegs (128 for 256 threads) and the
		// consumers take what the producer gives back. ptxas allocates a
		// region past setmaxnreg.inc up to its count, but compiles no
		// single instruction needing more than .maxnreg (docs/perf.md, two
		// blocks per SM v1): each wgmma's accumulators must fit it, with
		// the 32 more it needs beside them (ptxas 12.5 refused B tiles of
		// 208 rows at 128: a register target of 130).
		lim := sharedSMRegs(l.threads, l.perSM)
		if l.instrAccs()+32 > lim && !s.MX && l.WG == 1 {
			l.offBHi = splitOffsets(l.b, l.NB/2) // nil where B's rows do not split there
		}
		if a := l.instrAccs(); a+32 > lim {
			return l, fmt.Errorf("codegen: %s: sm_90a tile %dx%d issues wgmma of %d accumulators per thread, which with the registers beside them exceed the %d with which one of %d blocks per SM (%d threads each) launches: a B tile of at most %d rows or of a multiple of 16 up to 256 (a bf16 K loop of two wgmma per step; a register-fed tile of at most 128 token rows), or one producer warp (Tile.ProducerWarps = 1)", s.Name, l.BM, l.NB, a, lim, l.perSM, l.threads, 2*(lim-32))
		}
	}
	if l.perSM > 1 && s.Tile.ProducerWarps == 1 {
		// One producer warp after the consumer warpgroups (a warpgroup's
		// warps are 4 consecutive ones from a multiple of 4), and no
		// setmaxnreg: every thread within sharedSMRegs.
		l.mmaWG0, l.threads = 0, 128*l.WG+32
		l.launchRegs = sharedSMRegs(l.threads, l.perSM)
		// What ptxas needed beside the accumulators (without spills, within
		// 168): the bf16 K loop and a gated epilogue 26 (64x256 tiles:
		// 154 registers), a plain one more (64x256: 168 and 88 bytes of
		// spills), the register-fed loop 67 (64 token rows: 131).
		need := l.accs() + 40
		if s.Epilogue != EpiGated {
			need = l.accs() + 48
		}
		if s.MXRegisterFed {
			need = l.accs() + 8*regFedSets(l.WG, l.perSM) + 48 // and the A registers, bytes and factors
		}
		if need > l.launchRegs {
			return l, fmt.Errorf("codegen: %s: sm_90a tile %dx%d keeps %d accumulators per consumer thread, about %d registers, beyond the %d of one of %d blocks per SM (%d threads each, one producer warp): a smaller tile, or a producer warpgroup (Tile.ProducerWarps = 4)", s.Name, l.BM, l.NB, l.accs(), need, l.launchRegs, l.perSM, l.threads)
		}
	}
	if s.signalPerItem > 0 && (!s.signalTiles || s.signalPerItem%(l.signalThreads()/32) != 0) {
		return l, fmt.Errorf("codegen: %s: an item's %d signals are not shared evenly by its %d signalling warps", s.Name, s.signalPerItem, l.signalThreads()/32)
	}
	// The address-independent bits of the tiles' wgmma descriptors (start
	// address 0; equal to SM90DescK128B).
	if l.descHi, err = l.a.Descriptor(0, 0, 0); err != nil {
		return l, fmt.Errorf("codegen: %s: %w", s.Name, err)
	}
	if l.descHiB, err = l.b.Descriptor(0, 0, 0); err != nil {
		return l, fmt.Errorf("codegen: %s: %w", s.Name, err)
	}
	if l.mmaWG0 != 1 {
		return l, nil // no setmaxnreg: every thread keeps the registers of the launch
	}
	l.registers(s)
	if l.perSM > 1 && l.mmaRegs < l.launchRegs {
		return l, fmt.Errorf("codegen: %s: sm_90a blocks of %d consumer warpgroups two per SM: the producer's %d registers leave the consumers %d, fewer than the %d of the launch (setmaxnreg.inc cannot lower them): fewer consumer warpgroups", s.Name, l.WG, l.prodRegs, l.mmaRegs, l.launchRegs)
	}
	if acc := l.NB / 2; l.WG >= 2 && !l.swap && acc+40 > l.mmaRegs {
		return l, fmt.Errorf("codegen: %s: sm_90a tile BM = %d with %d accumulators per thread exceeds the %d registers of a consumer thread", s.Name, l.BM, acc, l.mmaRegs)
	}
	if acc, a := l.accs(), 8*regFedSets(l.WG, l.perSM); s.MXRegisterFed && l.mmaRegs > 0 && acc+a+48 > l.mmaRegs {
		return l, fmt.Errorf("codegen: %s: sm_90a register-fed B tile of %d rows keeps %d accumulators and %d A registers per consumer thread, beyond its %d registers", s.Name, l.NB, acc, a, l.mmaRegs)
	}
	if acc := l.NB / 2; s.MX && !s.MXRegisterFed && l.mmaRegs > 0 && 2*acc+48 > l.mmaRegs {
		return l, fmt.Errorf("codegen: %s: sm_90a MXFP8 B tile of %d rows keeps %d accumulators and %d partial sums per consumer thread, beyond its %d registers (at most 128 rows)", s.Name, l.NB, acc, acc, l.mmaRegs)
	}
	return l, nil
}

// registers sets the setmaxnreg budget. Registers: 65536 per SM, one block
// per SM (two per SM: sharedSMBudget). The kernel starts with launchRegs = 65536/threads per thread
// (pinned with .maxnreg, as setmaxnreg requires); the producer warpgroup
// drops to prodRegs (40; 48 with the staged epilogue's store warps; 72 when
// it copies B itself: with 64, ptxas spilled in the GPT-OSS 128x128
// pointer-table case; 80 for the MXFP8 scale codes, chosen when they were
// loaded into registers one K block ahead (with 72 ptxas spilled 4 bytes in
// qwen3-30b-a3b's FC1) and kept since the lanes copy them by cp.async
// (gpt-oss-120b's FC1 still spills 4 bytes); expandProdRegs when it widens MXFP8
// operands itself) and the consumers take what it frees: setmaxnreg.inc
// blocks until the registers are in the pool, so the consumers' target
// must not exceed launchRegs + freed/(128*WG).
func (l *sm90Layout) registers(s GemmSpec) {
	if l.WG < 2 && l.perSM == 1 {
		return // one consumer warpgroup keeps what the launch gives it
	}
	l.prodRegs = 40
	switch {
	case l.expand:
		l.prodRegs = expandProdRegs
	case s.MXRegisterFed:
		l.prodRegs = 56 // the bf16x2 factors (regFedFactor) take fewer than the promotion's codes
	case s.MX:
		l.prodRegs = 80 // the MXFP8 scale-code windows and their decoding (see above)
	case s.B == BTable:
		l.prodRegs = 72 // address arithmetic of the cp.async copies of B
	case s.GatherK > 0:
		l.prodRegs = 56 // the row addresses of the gathered A rows (gatherCopy)
	case l.smem.Staged && s.storeGatherK > 0:
		l.prodRegs = 72 // and the gather's copies (store_gather.go: four 16-byte loads in flight per lane), the consumers 216
	case l.smem.Staged:
		l.prodRegs = 48 // the store warps' copy loop
	}
	l.prodRegs = max(l.prodRegs, s.minProdRegs)
	if l.perSM > 1 {
		l.launchRegs, l.mmaRegs = sharedSMBudget(l.threads, l.WG, l.perSM, l.prodRegs)
		return
	}
	l.launchRegs, l.mmaRegs = regBudget(l.threads, l.WG, l.prodRegs)
}

// sharedSMBudget is the setmaxnreg split of a block of threads (a producer
// warpgroup and wg consumer warpgroups) of which n share an SM: the
// launch's sharedSMRegs, and the consumers' target, within both what the
// producer frees in the block and the sub-partition that holds, of each
// block, one producer warp and wg consumer warps (warp w runs on
// sub-partition w mod 4; 16384 registers each): two blocks of 256 threads
// launch at 128, producer 56, consumers 200.
func sharedSMBudget(threads, wg, n, prodRegs int) (launch, mma int) {
	launch = sharedSMRegs(threads, n)
	pool := (launch*threads - 128*prodRegs) / (128 * wg)
	part := (16384/(32*n) - prodRegs) / wg
	return launch, min(240, pool, part) &^ 7
}

// sharedSMRegs is the registers per thread (a multiple of 8) with which n
// blocks of threads each fit one SM at once: an SM's 65536 registers lie
// in 4 sub-partitions of 16384, each warp's all in the one it runs on,
// allocated in units of 256 per warp, and the n blocks' warps spread over
// the sub-partitions, so the fullest holds ceil(n*warps/4) of them (CUDA
// C Programming Guide, "Hardware Multithreading" and the compute
// capability tables: 64K registers per SM, 4 warp schedulers). Two
// blocks of 160 threads: 168.
func sharedSMRegs(threads, n int) int {
	warps := n * ((threads + 31) / 32)
	perWarp := (16384 / ((warps + 3) / 4)) &^ 255
	return min(255, perWarp/32) &^ 7
}

// regBudget is the setmaxnreg split of a block of threads (one per SM; a
// producer warpgroup and wg consumer warpgroups): the registers per thread
// at launch (65536/threads, a multiple of 8, pinned with .maxnreg) and the
// consumers' target once the producer has dropped to prodRegs (what it
// frees, shared among the consumers; a multiple of 8, at most 240).
func regBudget(threads, wg, prodRegs int) (launch, mma int) {
	launch = launchRegs(threads)
	mma = min(240, ((launch*threads-128*prodRegs)/(128*wg))&^7)
	return launch, mma
}

// launchRegs is the registers per thread of a block of threads, one per
// SM: 65536/threads, a multiple of 8.
func launchRegs(threads int) int { return (65536 / threads) &^ 7 }

// build adds the sm_90a kernel of spec to m.
func (l sm90Layout) build(m *ir.Module, spec GemmSpec, rowsPerT int64) (KernelInfo, error) {
	k := tmaKernel{threads: l.threads, launchRegs: l.launchRegs, tg: target.SM90a}
	return k.build(m, spec, rowsPerT, l.tmaRing, func(b *Builder) error { return l.emit(b, spec) })
}

// sm90Block is the state every role of an sm_90a block shares.
type sm90Block struct {
	tmaBlock
	tid      value.Value // thread index
	tmA, tmB value.Value // tensor maps (tmB nil for BTable)
}

// emit is the sm_90a kernel: barriers, then the producer warpgroup and the
// consumer warpgroups over the same work items.
func (l sm90Layout) emit(b *Builder, spec GemmSpec) error {
	mxSpec := spec
	if l.expand {
		spec = l.bf // the consumers' and the epilogue's GEMM
	}
	k := sm90Block{tmaBlock: tmaBlock{spec: spec}, tid: b.ThreadIdx(ir.X)}
	wg := b.WarpUniform(b.LShr(k.tid, ir.Int32(7)))
	k.base = b.SharedBase1024()
	k.ring = mbarRing{bars: b.AddI(k.base, int64(l.smem.BarrierOffset)), S: l.S}
	var fullCount int
	k.tmA, k.tmB, fullCount = tmaMaps(b, spec, 128, l.mxCodeWarps(spec)) // BTable: one cp.async arrival per producer thread
	if l.expand {
		fullCount = l.nConv() // every converter thread, after its stores
	}
	q := l.itemRing(b, spec, k.base)
	k.ring.init(b, k.tid, fullCount, 4*l.WG*l.cluster, func() { // a cluster's stages: released by both CTAs' consumer warps
		q.initBars(b)
		if l.smem.Staged {
			b.MbarInit(b.AddI(k.ring.bars, int64(16*l.S)), 128*l.WG) // staging full: every consumer thread
			b.MbarInit(b.AddI(k.ring.bars, int64(16*l.S+8)), 96)     // staging empty: every store thread
		}
		if l.expand {
			l.e4m3Ring(b, &k).initBars(b, 1+32, l.nConv()) // the TMA thread's arrive.expect_tx and warp 0's code copies; every converter thread
		}
	}, k.tmA, k.tmB)
	b.SyncThreads()
	if l.cluster > 1 {
		// The peer's multicast loads and arrivals use this CTA's barriers:
		// both initialised first. At the end, neither CTA exits while the
		// other may still arrive on its barriers.
		b.ClusterSync()
	}
	k.work = l.workList(b, spec, q)
	var err error
	var producerWG value.Value
	switch l.mmaWG0 {
	case 0: // the producer warp after the consumer warpgroups
		producerWG = b.ICmp(enum.IPredEQ, wg, ir.Int32(int64(l.WG)))
	case 1:
		producerWG = b.ICmp(enum.IPredEQ, wg, ir.Int32(0))
	default:
		producerWG = b.ICmp(enum.IPredULT, wg, ir.Int32(int64(l.mmaWG0)))
	}
	b.IfElse(producerWG, func() {
		if l.expand {
			err = l.expandProducer(b, &k, mxSpec)
			return
		}
		pk := k
		if l.mmaWG0 == 0 {
			pk.tid = b.AddI(k.tid, -128*int64(l.WG)) // the producer warp's own thread index
		}
		err = l.producer(b, &pk, nil)
	}, func() {
		err = l.consumers(b, &k, wg, nil)
	})
	if l.cluster > 1 {
		b.ClusterSync()
	}
	if spec.phase {
		l.invalBars(b, &k, q)
	}
	b.Ret(nil)
	return err
}

// invalBars ends a GEMM emitted as a phase of a persistent kernel
// (GemmSpec.phase): once every role is done (bar.sync), thread 0
// invalidates each mbarrier the block initialised (the ring's full and
// empty barriers, the staging tile's two, the item ring's slots), so that
// the next phase may initialise barriers of its own in the same shared
// memory (PTX ISA, "mbarrier.inval").
func (l sm90Layout) invalBars(b *Builder, k *sm90Block, q *itemRing) {
	k.ring.inval(b, k.tid, func() {
		if l.smem.Staged {
			b.MbarInval(b.AddI(k.ring.bars, int64(16*l.S)))
			b.MbarInval(b.AddI(k.ring.bars, int64(16*l.S+8)))
		}
		if q != nil {
			for i := range q.slots {
				b.MbarInval(b.AddI(q.at, int64(8*i)))
			}
		}
	})
}

// phaseEndBarrier is the named barrier on which every thread of a GEMM
// phase of a persistent kernel waits before its role gives its registers
// back (giveBack); the GEMM kernels' own named barriers are 1 to 6.
const phaseEndBarrier = 15

// giveBack, in a GEMM emitted as a phase of a persistent kernel
// (GemmSpec.phase), returns the calling role's warpgroup to the launch's
// registers from regs, the setmaxnreg target it took at its start, once
// every thread of the block has reached the end of its role (named
// barrier phaseEndBarrier, which every role passes): a producer warp
// without work must not take its registers back before the consumers
// have taken theirs at their start, or the consumers' setmaxnreg.inc
// waits for registers that are never freed (the warps of a warpgroup
// synchronise between two setmaxnreg; PTX ISA, "setmaxnreg").
func (l sm90Layout) giveBack(b *Builder, spec GemmSpec, regs int) {
	if spec.phase {
		b.phaseGiveBack(l.threads, regs, l.launchRegs)
	}
}

// phaseGiveBack emits the end of a role of a persistent phase of blocks
// of threads that launch with launchRegs registers: the named barrier
// phaseEndBarrier of every thread, then setmaxnreg from regs, the target
// the role took at its start (0: none), back to launchRegs (giveBack).
func (b *Builder) phaseGiveBack(threads, regs, launchRegs int) {
	b.BarrierSync(ir.Int32(phaseEndBarrier), ir.Int32(int64(threads)))
	switch {
	case regs == 0 || regs == launchRegs:
	case regs < launchRegs:
		b.SetMaxNReg(true, launchRegs)
	default:
		b.SetMaxNReg(false, launchRegs)
	}
}

// producer is warpgroup 0 (in a block of two per SM with one producer
// warp, Tile.ProducerWarps = 1, that warp after the consumers, k.tid its
// own lane index): thread 0 loads the ring (all 128
// threads for BTable); an MX GEMM's scale codes are staged by mxCodeWarps
// warps; with the staged epilogue, warps 1-3 store the staging tile. With
// next (a chained kernel's second GEMM) each role goes on to its items.
func (l sm90Layout) producer(b *Builder, k *sm90Block, next *sm90Chained) error {
	if l.prodRegs > 0 {
		b.SetMaxNReg(false, l.prodRegs)
	}
	pr := l.producerOf(k)
	var then *chainedProducer
	if next != nil {
		then = &chainedProducer{p: next.l.producerOf(&next.k), wl: next.k.work}
		then.p.extraArrivals = next.extraArrivals
	}
	if !l.smem.Staged {
		err := pr.emit(b, k.tid, k.work, then)
		l.giveBack(b, k.spec, l.prodRegs)
		return err
	}
	var err error
	b.IfElse(b.ICmp(enum.IPredULT, k.tid, ir.Int32(32)), func() {
		err = pr.emit(b, k.tid, k.work, then)
	}, func() {
		t := b.AddI(k.tid, -32)
		v := l.storeWarps(b, k, t, nil)
		if next != nil {
			b.phaseMark(0, true)
			b.withParams(chainPrefix, chainShared, func() { next.l.storeWarps(b, &next.k, t, v) })
			b.phaseMark(1, true)
		}
	})
	l.giveBack(b, k.spec, l.prodRegs)
	return err
}

// producerOf is the load side of block k's ring for l's GEMM: its
// producer warpgroup's 128 threads (a block of two per SM with one
// producer warp: its 32), the MX code warps of mxCodeWarps.
func (l sm90Layout) producerOf(k *sm90Block) gemmProducer {
	threads := 128
	if l.mmaWG0 == 0 {
		threads = 32
	}
	pr := newProducer(l.tmaRing, k.spec, threads, k.base, k.ring, k.tmA, k.tmB)
	pr.codeWarps = l.mxCodeWarps(k.spec)
	pr.rank = k.work.rank
	return pr
}

// mxCodeWarps is the number of the producer warpgroup's warps that stage
// an MXFP8 GEMM's scale codes (gemmProducer.codeWarps): all four, at most
// one per 32-row group of the stage's scale rows (gemmProducer.mxGroups),
// unless warps 1-3 store the staged epilogue; 1 for bf16, for the
// expansion (whose producer warp 0 copies the codes for its converters,
// expandCodeCopy) and in a block of two per SM with one producer warp.
func (l sm90Layout) mxCodeWarps(s GemmSpec) int {
	if !s.MX || l.expand || l.smem.Staged || l.mmaWG0 == 0 {
		return 1
	}
	return min(4, gemmProducer{tmaRing: l.tmaRing, spec: s}.mxGroups())
}

// consumers is warpgroups mmaWG0..mmaWG0+WG-1: per work item, the K loop (or the drain
// of a warpgroup without rows), then the epilogue of its 64 rows (with
// the operand swap, all the tile's token rows: of the whole B tile, or of
// the warpgroup's half with two register-fed warpgroups). With next (a
// chained kernel's second GEMM) they go on to its items, the ring's and
// the staging tile's phases continuing.
func (l sm90Layout) consumers(b *Builder, k *sm90Block, wg value.Value, next *sm90Chained) error {
	if l.mmaRegs > 0 {
		b.SetMaxNReg(true, l.mmaRegs)
	}
	if next != nil {
		b.phaseMark(0, false)
	}
	v, err := l.consumerLoop(b, k, wg, nil)
	if next != nil {
		b.phaseMark(0, true)
		b.phaseMark(1, false)
		b.withParams(chainPrefix, chainShared, func() {
			_, e := next.l.consumerLoop(b, &next.k, wg, v)
			err = joinErr(err, e)
		})
		b.phaseMark(1, true)
	}
	l.giveBack(b, k.spec, l.mmaRegs)
	return err
}

// consumerLoop is consumers' loop over the work items of k from the
// ring's stage and phase and the staging tile's parity in init (nil: the
// first), returning them after the last item. With signalTiles the
// consumer threads signal each item's row tile once their part of C is
// stored (signalItem; the staged epilogue's store warps do it instead).
func (l sm90Layout) consumerLoop(b *Builder, k *sm90Block, wg value.Value, init []value.Value) ([]value.Value, error) {
	c := b.AddI(wg, -int64(l.mmaWG0))
	lane, warp := b.LaneWarp()
	isLane0 := b.ICmp(enum.IPredEQ, lane, ir.Int32(0))
	laneZero := b.ZExt(isLane0, ir.I32)
	aOff := b.MulI(c, 64*128) // this warpgroup's 64 rows inside an A atom
	offA, offB := l.offA, l.offB
	ml := WGMMAMainloop{N: l.NB, Stages: l.S, StageBytes: l.stageBytes, BOffset: l.atoms * l.aAtom,
		OffA: offA, OffB: offB, DescHi: l.descHi, DescHiB: l.descHiB, TransB: k.spec.BNMajor, ProxyFence: k.spec.B == BTable || l.expand || k.spec.GatherK > 0,
		Peer: l.cluster > 1, OffBHi: l.offBHi}
	mx := WGMMAMainloopMX{WGMMAMainloop: ml, ABlock: 4 * l.BM, BBlock: 4 * l.NB}
	var aSc, bSc value.Value
	var rf WGMMAMainloopRegFed
	var wRow, wX value.Value // the register-fed thread's B-tile bytes (WGMMAMainloopRegFed)
	if k.spec.MX {
		// The thread's first accumulator row and column among the stage's
		// f32 scales ([K/32][BM] of A, then [K/32][NB] of B; the
		// register-fed GEMM's are bf16x2 factors of B's rows); with the
		// swap the rows are B-tile rows and the columns token rows.
		so := int64(l.smem.ScaleOffset)
		bo := so + int64(l.BK/32*l.BM*4)
		first := b.MulI(c, 64)
		if k.spec.MXRegisterFed {
			first, _ = l.regFedHalf(b, c)
		}
		row := b.Add(first, b.Add(b.MulI(b.And(warp, ir.Int32(3)), 16), b.LShr(lane, ir.Int32(2))))
		if k.spec.MXRegisterFed {
			q := b.And(lane, ir.Int32(3))
			wRow = b.Add(b.MulI(row, 128), b.MulI(b.And(q, ir.Int32(1)), 8))
			wX = b.Shl(b.Xor(b.And(row, ir.Int32(7)), b.LShr(q, ir.Int32(1))), ir.Int32(4))
			rf = WGMMAMainloopRegFed{BM: l.BM, Slices: l.NB / 64 / l.WG, SliceRows: 64, Stages: l.S, StageBytes: l.stageBytes,
				BOffset: l.atoms * l.aAtom, OffTok: offA, DescHi: l.descHi, ScaleBlock: 4 * l.NB, Sets: regFedSets(l.WG, l.perSM), Peer: l.cluster > 1,
				OneWidth: l.perSM > 1 && l.accs() > 64}
			if l.WG > 1 && l.gate == layouts.GateUpHalves {
				rf.SliceRows = l.NB / 2 // the warpgroup's gate rows, then its up rows
			}
		}
		ro, co := so, bo
		if l.swap {
			mx.Swap, mx.BM, mx.ABlock, mx.BBlock = true, l.BM, 4*l.NB, 4*l.BM
			ro, co = bo, so
		}
		aSc = b.AddI(b.MulI(row, 4), ro)
		bSc = b.AddI(b.MulI(b.And(lane, ir.Int32(3)), 8), co)
	}
	var err error
	if init == nil {
		init = []value.Value{ir.Int32(0), ir.Int32(0), ir.Int32(0)}
	}
	wl := k.work
	wl.lane0 = isLane0 // lane 0 releases the stages (see itemRing)
	out := wl.each(b, init, func(w gemmWork, v []value.Value) []value.Value {
		// A warpgroup whose 64 rows all lie past the expert's segment
		// (the ragged last tile of an expert) drains the ring instead of
		// issuing wgmma; its accumulators are zero and none of its rows
		// is stored.
		active := b.ICmp(enum.IPredSLT, b.Add(w.row0, b.MulI(c, 64)), w.rowEnd)
		if k.spec.MXRegisterFed { // every consumer warpgroup covers all the item's token rows
			active = ir.Bool(true)
		}
		kt := ir.Int32(int64(l.kTiles))
		res := b.IfElseVals(active, func() []value.Value {
			mainloop := func() ([]value.Value, value.Value, value.Value, error) {
				if k.spec.MXRegisterFed {
					return b.WGMMAMainloopRegFed(rf, v[0], v[1], kt, k.ring.bars, k.base, wRow, wX, laneZero, aSc, b.Sub(w.rowEnd, w.row0))
				}
				if k.spec.MX {
					// The work item's rows from the warp's first row on;
					// with the swap, the work item's token rows (wgmma's
					// N: asmSwap's loop width).
					var live value.Value
					if l.swap {
						live = b.Sub(w.rowEnd, w.row0)
					} else {
						live = b.Sub(w.rowEnd, b.Add(b.Add(w.row0, b.MulI(c, 64)), b.MulI(b.And(warp, ir.Int32(3)), 16)))
					}
					return b.WGMMAMainloopMX(mx, v[0], v[1], kt, k.ring.bars, k.base, aOff, laneZero, aSc, bSc, live)
				}
				return b.WGMMAMainloop(ml, v[0], v[1], kt, k.ring.bars, k.base, aOff, laneZero)
			}
			acc, stage, phase, e := mainloop()
			if e != nil {
				err = e
				return append(zerosF32(l.accs()), v[0], v[1])
			}
			return append(acc, stage, phase)
		}, func() []value.Value {
			stage, phase := b.WGMMADrain(ml, v[0], v[1], kt, k.ring.bars, laneZero)
			return append(zerosF32(l.accs()), stage, phase)
		})
		na := l.accs()
		acc, stage, phase := res[:na], res[na], res[na+1]
		if err != nil {
			return v
		}
		sph := v[2]
		if l.smem.Staged {
			err = joinErr(err, l.stageOut(b, k, w, c, lane, warp, acc, sph))
			sph = b.Xor(sph, ir.Int32(1))
		} else if k.spec.QuantizeC && k.spec.MXRegisterFed {
			err = joinErr(err, l.epilogueQuantizeRF(b, k, w, c, lane, warp, acc))
		} else if k.spec.QuantizeC {
			err = joinErr(err, l.epilogueQuantize(b, k, w, c, lane, warp, acc))
		} else if e := l.epilogue(b, gemmEpilogue(b, k.spec, w), w, c, lane, warp, acc, nil); e != nil {
			err = e
		}
		if k.spec.signalTiles && !l.smem.Staged {
			l.signalItem(b, k.spec, w)
		}
		return []value.Value{stage, phase, sph}
	})
	return out, err
}
