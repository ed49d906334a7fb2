package layouts

import (
	"fmt"

	"github.com/mokc/mokc/target"
)

// GemmConfig is what the shared memory and tensor memory of one grouped-GEMM
// CTA depend on: the target, the operand type, the A and B tiles of one
// pipeline stage, the stage count and the optional parts.
type GemmConfig struct {
	Target target.Target // sm_80, sm_90a or sm_100a
	DType  DType         // operand element type (bf16; e4m3 for MXFP8)
	M      int           // A tile rows (token rows per CTA tile)
	BRows  int           // B tile rows this CTA holds: output columns, gate and up rows together for a gated FC1
	K      int           // reduction elements per stage (one K block)
	Stages int           // pipeline depth
	// Scales adds the MXFP8 scales of a stage, one per 32 K elements of
	// every A and B row (OCP Microscaling v1.0 block 32): the UE8M0 bytes
	// in scale-factor tiles (sm_100a, copied to TMEM; SM100ScaleBytes) or,
	// on sm_90a, their f32 values (4 bytes
	// each, [K/32][M] then [K/32][BRows]: the consumers read a column's
	// scale of each 32-wide block with one load; the register-fed GEMM
	// stores 4-byte bf16x2 factors of B's rows there instead).
	Scales bool
	// StagingCols asks for the sm_90a staged epilogue: a bf16 tile of M rows
	// x StagingCols output columns next to the ring, kept only when it fits
	// the target's shared memory and the plan is not SwapAB's (whose
	// producer warps stage the scale codes, not the epilogue). 0: no staging
	// (and always on other targets).
	StagingCols int
	// GateUp and N give the B tile's row map (GateUpRows over BN = the
	// output columns of the tile, N the GEMM's output columns); N = 0
	// leaves GemmSmem.BRowMap empty.
	GateUp GateUp
	N      int
	// BMajor is the B tile's majorness: KMajor, or MNMajor for a B_e
	// stored [K, N] row-major (sm_90a bf16: NewSmemTileMN, 128B swizzle,
	// BRows/64 columns of K x 128 bytes; sm_80: NewPaddedTileMN, K lines of
	// BRows elements padded by 16 bytes).
	BMajor Major
	// E4M3Staging adds to each sm_90a stage of a bf16 ring (K = 64) the
	// e4m3 tiles the MXFP8 expansion widens into it: A M x 64 bytes, then
	// B BRows x 64 bytes, rows of 64 bytes with the 64-byte swizzle (one
	// TMA box row each), after the bf16 tiles, then 8 bytes of UE8M0
	// codes per row (GemmSmem.E4M3CodeOffset), rounded up to 1024 bytes;
	// and a second full/empty mbarrier pair per stage for them.
	E4M3Staging bool
	// CodeSlots adds, with Scales on sm_90a and sm_100a, a ring of that
	// many slots after the stages where the producer's lanes stage the
	// UE8M0 codes of K blocks ahead by cp.async: per A row and per B row
	// (BRows rounded up to whole 32-row groups, to 128 on sm_100a where
	// the scale-factor tiles are 128 rows) the aligned 8 bytes holding the
	// row's K/32 codes of one K block (4 consecutive bytes at any offset
	// lie in one 8-byte window of two aligned words). 0: none.
	CodeSlots int
	// ItemSlots adds the ring through which a persistent CTA's producer
	// hands the work items it takes from a queue in global memory to the
	// CTA's other roles (ItemSlots gives the count): ItemSlots mbarriers
	// (one arrival each: the item number is stored) then ItemSlots u32
	// item numbers, after the code slots (GemmSmem.ItemOffset). sm_90a and
	// sm_100a (the plan refuses it on sm_80, and a negative count); codegen
	// builds it on sm_90a. 0: none (the CTA walks a fixed list of items).
	ItemSlots int
	// SwapAB plans the sm_90a operand swap of a GEMM with few rows per
	// expert (docs/mxfp8.md, "the operand swap"): the B tile (weights) is
	// wgmma's A operand, read in 64-row slices (BRows a multiple of 64),
	// and the A tile (token rows) its B operand, whose N may be any
	// multiple of 8 (M = 32: 16 accumulators per thread per slice). The
	// bytes, swizzle and descriptors of both tiles are those of the
	// unswapped plan; only the row rules change. sm_90a only.
	SwapAB bool
	// ABF16 (with SwapAB and DType e4m3) makes the A tile (token rows)
	// bf16 while B (weights) stays e4m3: the sm_90a register-fed MXFP8
	// GEMM, whose consumers load B into registers and widen it to bf16,
	// with the token rows as wgmma's B operand (K/64 atoms of M x 128
	// bytes; B K/128 atoms of BRows x 128 bytes). The scales keep A's
	// space (the plan's offsets are the same), which that GEMM leaves
	// unused: its A holds the MX values themselves.
	ABF16 bool
}

// GemmSmem is the shared-memory plan of one grouped-GEMM CTA, the one
// computation both the schedule's validation and the engines of package
// codegen use. Offsets are bytes from the ring base, which on sm_90a and
// sm_100a is the dynamic shared memory base rounded up to 1024 bytes (the
// 128-byte swizzle repeats every 1024 bytes, PTX ISA 9.7.15.5.1.2), so
// those kernels request AlignSlack = 1024 extra bytes.
//
//	sm_80:   Stages x [A: PaddedTile M x K][B: PaddedTile BRows x K (MN-major: K lines of BRows)]
//	sm_90a:  slack, Stages x [A atoms][B atoms][scales][e4m3 A][e4m3 B][e4m3 codes], [CodeSlots x codes],
//	         [ItemSlots mbarriers, ItemSlots item numbers (rounded up to 128 bytes)],
//	         [staging M x (2*StagingCols+16)],
//	         full[Stages], empty[Stages] mbarriers (8 bytes each), [e4m3 full[Stages], empty[Stages]],
//	         [staging full, empty]
//	sm_100a: slack, Stages x [A atoms][B atoms][scales], [CodeSlots x codes], [item ring], full[Stages], empty[Stages],
//	         tmem_full[2], tmem_empty[2], TMEM address word (+12 bytes of padding)
type GemmSmem struct {
	GemmConfig
	// A and B are the operand tiles of one stage as the kernel addresses
	// them: *PaddedTile (sm_80, lines padded by 16 bytes) or *SmemTile (K
	// major, 128-byte swizzle: K/64 atoms of rows x 128 bytes along K, each
	// 1024-byte aligned; B with BMajor MNMajor: BRows/64 columns of K rows
	// x 128 bytes).
	A, B       OperandTile
	ScaleBytes int // MXFP8 scale bytes per stage, at ScaleOffset (0 for bf16)
	// ScaleOffset is where a stage's scales start: right after its A and B
	// tiles (A.Bytes() + B.Bytes(), the bytes TMA fills per stage); 0
	// without scales.
	ScaleOffset int
	StageBytes  int // the stride between stages: A + B (+ scales, rounded up to 1024 bytes; + the e4m3 staging tiles and codes)
	AlignSlack  int // bytes requested to realign the base to 1024 (0 on sm_80)
	// Staged says the staging tile fits (sm_90a with StagingCols > 0);
	// StagingOffset and StagingStride place it (row stride 2*StagingCols+16
	// bytes: the 8 rows of a fragment store hit distinct banks).
	Staged                       bool
	StagingOffset, StagingStride int
	BarrierOffset                int // first mbarrier (0 on sm_80: none)
	// E4M3Offset is where a stage's e4m3 A tile starts inside the stage
	// with E4M3Staging (its B tile follows at E4M3Offset + M*64); the
	// e4m3 tiles' mbarriers, full[Stages] then empty[Stages], follow the
	// ring's at BarrierOffset + 16*Stages.
	E4M3Offset int
	// E4M3CodeOffset is where, with E4M3Staging, a stage's UE8M0 codes of
	// its e4m3 rows start inside the stage: 8 bytes per row (A's rows,
	// then B's), the aligned window of the row's scales holding its two
	// codes of the K block of 64.
	E4M3CodeOffset int
	// CodeOffset and CodeSlotBytes place the code slots of
	// GemmConfig.CodeSlots: slot i at CodeOffset + i*CodeSlotBytes, row
	// group g (rows 32g..32g+31, A's groups first, then B's) at 256*g +
	// 8*(row%32) in it.
	CodeOffset, CodeSlotBytes int
	// ItemOffset places the item ring of GemmConfig.ItemSlots: its
	// mbarriers at ItemOffset + 8*i, its item numbers at ItemOffset +
	// 8*ItemSlots + 4*i (0 without).
	ItemOffset int
	// Required is the dynamic shared memory the kernel cannot do without
	// (everything but the staging tile); Bytes what it requests (Required,
	// plus the staging tile when Staged).
	Required, Bytes int
	// TMEMColumns is the tensor memory the sm_100a CTA allocates: two fp32
	// accumulator buffers of BRows columns (the epilogue of one tile
	// overlaps the MMAs of the next), plus, for MXFP8, the scale factors of
	// every stage in flight (4 columns for A's 128 rows and 4 per 128 B rows
	// per K block of 128), rounded up to a power of two >= 32 as
	// tcgen05.alloc requires (PTX ISA 9.7.16.7.1). 0 on other targets.
	TMEMColumns int
	// BRowMap and BRowOrigin: B-tile row r holds row BRowOrigin*n0 +
	// BRowMap(r) of B_e (GateUpRows), when GemmConfig.N > 0.
	BRowMap    Layout
	BRowOrigin int
}

// smemPad is the row padding of the sm_80 stages (see PaddedTile).
const smemPad = 16

// PlanGemmSmem lays out the shared memory of c. It returns an error when an
// operand tile cannot be formed (see NewPaddedTile, NewSmemTileSwizzle); it
// does not compare the total with the target's limit (Required and Bytes
// are for the caller to check against target.SharedMemoryLimit).
func PlanGemmSmem(c GemmConfig) (*GemmSmem, error) {
	if c.Stages <= 0 {
		return nil, fmt.Errorf("layouts: GEMM with %d pipeline stages", c.Stages)
	}
	p := &GemmSmem{GemmConfig: c}
	var err error
	if c.SwapAB {
		if c.Target != target.SM90a || c.BMajor != KMajor {
			return nil, fmt.Errorf("layouts: the operand swap (SwapAB) is a plan of K-major tiles on sm_90a (target %v, B MN-major %t)", c.Target, c.BMajor == MNMajor)
		}
		// The weights' tile is wgmma's operand A, the token rows' its B.
		if p.B, p.A, err = GemmOperandTiles(c.Target, c.DType, c.BRows, c.M, c.K); err != nil {
			return nil, err
		}
		if c.ABF16 {
			if p.A, err = newSmemTile(c.Target, OperandB, DTypeBF16, c.M, c.K, Swizzle128B, false); err != nil {
				return nil, err
			}
		}
	} else if c.ABF16 {
		return nil, fmt.Errorf("layouts: a bf16 A tile beside an e4m3 B (ABF16) is a plan of the operand swap (SwapAB)")
	} else if p.A, p.B, err = GemmOperandTiles(c.Target, c.DType, c.M, c.BRows, c.K); err != nil {
		return nil, err
	}
	if c.BMajor == MNMajor {
		if c.Target == target.SM80 {
			p.B, err = NewPaddedTileMN(c.Target, OperandB, c.DType, c.BRows, c.K, smemPad)
		} else {
			p.B, err = NewSmemTileMN(c.Target, OperandB, c.DType, c.BRows, c.K, Swizzle128B)
		}
		if err != nil {
			return nil, err
		}
	}
	p.StageBytes = p.A.Bytes() + p.B.Bytes()
	if c.N > 0 {
		bn := c.BRows
		if c.GateUp != GateUpNone {
			bn /= 2
		}
		if p.BRowMap, p.BRowOrigin, err = GateUpRows(c.Target, c.GateUp, bn, c.N); err != nil {
			return nil, err
		}
	}
	if c.ItemSlots < 0 || c.ItemSlots > 0 && c.Target == target.SM80 {
		return nil, fmt.Errorf("layouts: %d item slots on %v (an item ring is for the persistent CTAs of sm_90a and sm_100a)", c.ItemSlots, c.Target)
	}
	if c.Target == target.SM80 {
		p.Required = c.Stages * p.StageBytes
		p.Bytes = p.Required
		return p, nil
	}
	if c.Scales {
		p.ScaleBytes = (c.M + c.BRows) * ((c.K + MXBlockSize - 1) / MXBlockSize)
		switch c.Target {
		case target.SM90a:
			p.ScaleBytes *= 4 // decoded to f32 by the producer
		case target.SM100a:
			p.ScaleBytes = SM100ScaleBytes(c.M, c.BRows, c.K)
		}
		p.ScaleOffset = p.StageBytes
		p.StageBytes += p.ScaleBytes
		// Every stage's 128-byte swizzled tiles start 1024-byte aligned
		// (the swizzle repeats every 1024 bytes; PTX ISA 9.7.15.5.1.2):
		// sm_90a's f32 scales, 16*(M+BRows) bytes per K block of 128, fall
		// short of that whenever M+BRows is not a multiple of 64 (32-row
		// tiles of the operand swap, a 72-row B tile). The padding follows
		// the scales; TMA fills A and B only.
		p.StageBytes = ceilDiv(p.StageBytes, 1024) * 1024
	}
	p.AlignSlack = 1024
	bars := 16 * c.Stages // full and empty mbarrier per stage
	if c.E4M3Staging {
		if c.Target != target.SM90a || c.DType != DTypeBF16 || c.K != 64 || c.Scales || c.BMajor != KMajor || c.StagingCols != 0 {
			return nil, fmt.Errorf("layouts: e4m3 staging is for sm_90a K-major bf16 rings of K = 64 without scales or a staged epilogue (target %v, %v, K = %d, scales %v, B %v, staging columns %d)",
				c.Target, c.DType, c.K, c.Scales, c.BMajor, c.StagingCols)
		}
		p.E4M3Offset = p.StageBytes
		p.E4M3CodeOffset = p.E4M3Offset + (c.M+c.BRows)*64
		p.StageBytes = (p.E4M3CodeOffset + (c.M+c.BRows)*8 + 1023) &^ 1023
		bars *= 2
	}
	ring := c.Stages * p.StageBytes
	if c.CodeSlots > 0 {
		if !c.Scales {
			return nil, fmt.Errorf("layouts: %d scale code slots without MXFP8 scales", c.CodeSlots)
		}
		p.CodeOffset, p.CodeSlotBytes = ring, 8*CodeRows(c.Target, c.M, c.BRows)
		ring += c.CodeSlots * p.CodeSlotBytes
	}
	if c.ItemSlots > 0 {
		// Rounded up to 128 bytes: what follows (the staging tile, read
		// and written 16 bytes at a time) keeps the alignment it had.
		p.ItemOffset = ring
		ring += ceilDiv(12*c.ItemSlots, 128) * 128
	}
	p.BarrierOffset = ring
	if c.Target == target.SM100a {
		bars += 32 + 16 // tmem_full[2], tmem_empty[2]; the TMEM address word, padded
		p.TMEMColumns = gemmTMEMColumns(c)
	}
	p.Required = p.AlignSlack + ring + bars
	p.Bytes = p.Required
	if c.Target == target.SM90a && c.StagingCols > 0 && !c.SwapAB {
		stride := 2*c.StagingCols + 16
		if sb := p.Required + c.M*stride + 16; sb <= c.Target.SharedMemoryLimit() {
			p.Staged, p.StagingOffset, p.StagingStride = true, ring, stride
			p.BarrierOffset += c.M * stride
			p.Bytes = sb
		}
	}
	return p, nil
}

// ItemSlots is the item ring's slots (GemmConfig.ItemSlots) of a
// persistent CTA with a ring of stages pipeline stages: stages + 4. The
// producer's lead hands out an item when it starts the item before, and
// every other role of the CTA is at most stages + 2 items behind it (the
// stage ring bounds the consumers, the staged epilogue's store warps
// follow them by up to two items), so a slot is read before it is
// rewritten and no reader waits on a phase two rounds back (codegen's
// itemRing).
func ItemSlots(stages int) int { return stages + 4 }

// MXCodeSlots is the number of code slots (GemmConfig.CodeSlots) of an
// MXFP8 GEMM whose K loop has kTiles K blocks: its producer copies the
// scale codes 4 K blocks ahead of the stage it fills (a global round trip
// under a saturated HBM is 1-2 us, one K block's weights stream in about
// 0.5 us), at most kTiles (the producer looks one work item ahead).
func MXCodeSlots(kTiles int) int { return max(1, min(4, kTiles)) }

// CodeRows is the number of scale rows of one K block whose codes a
// producer lane group stages (GemmConfig.CodeSlots): the m A rows and the
// bRows B rows, each rounded up to whole 32-row groups (one row per lane),
// B to whole 128-row scale-factor tiles on sm_100a.
func CodeRows(t target.Target, m, bRows int) int {
	r := 32
	if t == target.SM100a {
		r = SFTileRows
	}
	return ceilDiv(m, 32)*32 + ceilDiv(bRows, r)*r
}

// SM100ScaleColumns is the TMEM columns of one sm_100a pipeline stage's
// MXFP8 scale factors for an A tile of m rows and a B tile of bRows rows
// over k reduction elements: per K block of 128, 4 columns per 128 rows of
// A and of B (one tcgen05.cp 32x128b.warpx4 per scale-factor tile: lane l,
// column c holds the scales of tile row 32c + l%32).
func SM100ScaleColumns(m, bRows, k int) int {
	return ceilDiv(k, 128) * 4 * (ceilDiv(m, SFTileRows) + ceilDiv(bRows, SFTileRows))
}

// sm100ScaleColumns is SM100ScaleColumns of c, 0 without Scales.
func sm100ScaleColumns(c GemmConfig) int {
	if !c.Scales {
		return 0
	}
	return SM100ScaleColumns(c.M, c.BRows, c.K)
}

// SM100ScaleBytes is the shared memory of one sm_100a pipeline stage's
// MXFP8 scales for an A tile of m rows and a B tile of bRows rows over k
// reduction elements: per K block of 128, one 512-byte scale-factor tile
// (SFOffset's layout, the source of one tcgen05.cp 32x128b.warpx4) per 128
// rows of A and of B, rounded up to 1024 bytes so that the next stage's
// 128-byte swizzled tiles stay 1024-byte aligned. A and B's tiles are
// whole, so rows past bRows are padding the producer fills with scale 1.0.
func SM100ScaleBytes(m, bRows, k int) int {
	kb := ceilDiv(k, 128)
	n := kb * (ceilDiv(m, SFTileRows) + ceilDiv(bRows, SFTileRows)) * SFTileBytes
	return ceilDiv(n, 1024) * 1024
}

// gemmTMEMColumns is GemmSmem.TMEMColumns of c (sm_100a).
func gemmTMEMColumns(c GemmConfig) int {
	cols := 2*c.BRows + c.Stages*sm100ScaleColumns(c)
	p := 32
	for p < cols {
		p *= 2
	}
	return p
}

// GemmOperandTiles returns the A (m x k) and B (bRows x k) tiles of one
// pipeline stage exactly as the grouped-GEMM engine of target addresses
// them: on sm_80 PaddedTiles with 16 bytes after each row (what cp.async
// writes and ldmatrix reads), on sm_90a and sm_100a SmemTiles in the K-major
// 128-byte swizzle that TMA writes (CU_TENSOR_MAP_SWIZZLE_128B) and wgmma /
// tcgen05.mma read through descriptors.
func GemmOperandTiles(t target.Target, d DType, m, bRows, k int) (a, b OperandTile, err error) {
	if t == target.SM80 {
		pa, err := NewPaddedTile(t, OperandA, d, m, k, smemPad)
		if err != nil {
			return nil, nil, err
		}
		pb, err := NewPaddedTile(t, OperandB, d, bRows, k, smemPad)
		if err != nil {
			return nil, nil, err
		}
		return pa, pb, nil
	}
	sa, err := newSmemTile(t, OperandA, d, m, k, Swizzle128B, false)
	if err != nil {
		return nil, nil, err
	}
	sb, err := newSmemTile(t, OperandB, d, bRows, k, Swizzle128B, false)
	if err != nil {
		return nil, nil, err
	}
	return sa, sb, nil
}
