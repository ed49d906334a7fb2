package layouts

import (
	"fmt"
	"math/bits"
	"strings"

	"github.com/mokc/mokc/target"
)

// Operand says which MMA operand a tile holds: A (M x K) or B (N x K). Both
// are stored K-major (K contiguous), the layout every target supports for
// every type (PTX ISA, wgmma.mma_async: only the .f16 and .bf16 forms take
// the imm-trans-a / imm-trans-b operands, so e4m3/e5m2 operands are K-major).
type Operand int

// The operands.
const (
	OperandA Operand = iota
	OperandB
)

// String returns "A" or "B".
func (o Operand) String() string {
	if o == OperandB {
		return "B"
	}
	return "A"
}

// DType is the element type of an operand tile.
type DType int

// The operand element types.
const (
	DTypeBF16 DType = iota // bf16, 2 bytes
	DTypeE4M3              // E4M3, 1 byte (MXFP8 data)
)

// Bytes returns the element size in bytes.
func (d DType) Bytes() int {
	if d == DTypeE4M3 {
		return 1
	}
	return 2
}

// String returns "bf16" or "e4m3".
func (d DType) String() string {
	if d == DTypeE4M3 {
		return "e4m3"
	}
	return "bf16"
}

// ParseDType accepts "bf16" and "e4m3" (also "fp8", "mxfp8").
func ParseDType(s string) (DType, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "bf16":
		return DTypeBF16, nil
	case "e4m3", "fp8", "mxfp8":
		return DTypeE4M3, nil
	}
	return 0, fmt.Errorf("layouts: unknown dtype %q (bf16, e4m3)", s)
}

// MMAK returns the K extent in elements of one MMA instruction: 16 for bf16
// (mma.sync m16n8k16, wgmma m64nNk16, tcgen05 kind::f16 K=16) and 32 for
// e4m3 (wgmma m64nNk32, tcgen05 kind::f8f6f4 / mxf8f6f4 K=32); both are 32
// bytes of K. sm_80 has no e4m3 MMA (error).
func MMAK(t target.Target, d DType) (int, error) {
	if d == DTypeE4M3 {
		if t == target.SM80 {
			return 0, fmt.Errorf("layouts: sm_80 has no e4m3 MMA")
		}
		return 32, nil
	}
	return 16, nil
}

// Major says which dimension of an operand tile is contiguous in shared
// memory (PTX ISA 9.7.15.5.1.2: imm-trans-a / imm-trans-b select MN-major
// for the .f16/.bf16 forms of wgmma only).
type Major int

// The majorness of a tile.
const (
	// KMajor: K contiguous (A [M,K] and B [N,K] row-major); every target
	// and type.
	KMajor Major = iota
	// MNMajor: M (A) or N (B) contiguous, e.g. a weight [K, N] stored
	// row-major read as the B of a data gradient; sm_90a bf16 with a
	// swizzle only (NewSmemTileMN).
	MNMajor
)

// String returns "K-major" or "MN-major".
func (m Major) String() string {
	if m == MNMajor {
		return "MN-major"
	}
	return "K-major"
}

// SmemTile is the shared-memory layout of one operand tile of Rows x K
// elements; K-major (the default, described here) or MN-major (see
// NewSmemTileMN) (Rows = M for A, N for B) on a target: CuTe's canonical
// K-major layout, a column of swizzle atoms of 8 rows x Swizzle.Bytes()
// bytes stacked along the rows, then repeated along K:
//
//	Layout = ((8, Rows/8), (W, K/W)) : ((W, 8W), (1, Rows*W))   [elements]
//
// with W = Swizzle.Bytes()/element size (16 bytes of elements for
// SwizzleNone, whose atoms are the 8x16-byte core matrices), and the byte
// offset of (row, k) = Pattern(Layout(row, k) * element size), the pattern
// anchored at the tile's base, which must be aligned to
// Swizzle.RepeatBytes(). This is the GMMA/UMMA K-major SW128/SW64/SW32/
// INTERLEAVE layout (CUTLASS cute/atom/mma_traits_sm90_gmma.hpp,
// mma_traits_sm100.hpp; PTX ISA 9.7.15.5.1.2 and 9.7.16.3) and, on sm_80,
// the XOR-swizzled layout that makes every ldmatrix phase (8 rows x 16
// bytes) hit 8 different 16-byte bank groups.
type SmemTile struct {
	Target      target.Target // the architecture the tile is laid out for
	Operand     Operand       // A (M x K) or B (N x K)
	DType       DType         // element type
	Rows        int           // M (A) or N (B)
	K           int           // elements along K
	Swizzle     SwizzleMode   // the byte pattern (Pattern of the mode)
	Major       Major         // which dimension is contiguous (KMajor unless made by NewSmemTileMN)
	Layout      Layout        // (row, k) -> element offset before the swizzle
	ElemSwizzle Swizzle       // the swizzle acting on element offsets
}

// NewSmemTile returns the tile with the widest swizzle whose width divides
// the row (K * element size bytes): 128B when K*size is a multiple of 128,
// else 64B, 32B, none. See NewSmemTileSwizzle for the checks.
func NewSmemTile(t target.Target, op Operand, d DType, rows, k int) (*SmemTile, error) {
	rowBytes := k * d.Bytes()
	sw := SwizzleNone
	switch {
	case rowBytes > 0 && rowBytes%128 == 0:
		sw = Swizzle128B
	case rowBytes > 0 && rowBytes%64 == 0:
		sw = Swizzle64B
	case rowBytes > 0 && rowBytes%32 == 0:
		sw = Swizzle32B
	}
	return NewSmemTileSwizzle(t, op, d, rows, k, sw)
}

// NewSmemTileSwizzle returns the tile with an explicit swizzle. Errors: an
// unknown target; e4m3 on sm_80; Rows not a multiple of 16 for sm_80 A (m16)
// or 64 for sm_90a/sm_100a A (a warpgroup's / tcgen05's M), or of 8 for B;
// K not a multiple of MMAK or of the atom width; a tile above
// the target's shared memory per CTA; Swizzle128BAtom32B (not modelled).
func NewSmemTileSwizzle(t target.Target, op Operand, d DType, rows, k int, sw SwizzleMode) (*SmemTile, error) {
	return newSmemTile(t, op, d, rows, k, sw, true)
}

// newSmemTile is NewSmemTileSwizzle; limit compares the tile alone with the
// target's shared memory (GemmOperandTiles leaves that to the whole plan).
func newSmemTile(t target.Target, op Operand, d DType, rows, k int, sw SwizzleMode, limit bool) (*SmemTile, error) {
	if !t.Valid() {
		return nil, fmt.Errorf("layouts: unknown target %v (want %s)", t, target.Names())
	}
	mk, err := MMAK(t, d)
	if err != nil {
		return nil, err
	}
	if op != OperandA && op != OperandB {
		return nil, fmt.Errorf("layouts: unknown operand %d", op)
	}
	rowMul := 8
	if op == OperandA {
		rowMul = 64
		if t == target.SM80 {
			rowMul = 16
		}
	}
	if rows < rowMul || rows%rowMul != 0 {
		return nil, fmt.Errorf("layouts: %s operand %v tile with %d rows (a positive multiple of %d)", t, op, rows, rowMul)
	}
	if k < mk || k%mk != 0 {
		return nil, fmt.Errorf("layouts: %s %v tile with K = %d (a positive multiple of the MMA K %d)", t, d, k, mk)
	}
	pat, err := sw.Pattern()
	if err != nil {
		return nil, err
	}
	w := sw.Bytes() / d.Bytes()
	if k%w != 0 {
		return nil, fmt.Errorf("layouts: K = %d %v elements is not a multiple of the %v swizzle atom (%d elements)", k, d, sw, w)
	}
	if n, lim := rows*k*d.Bytes(), t.SharedMemoryLimit(); limit && n > lim {
		return nil, fmt.Errorf("layouts: %dx%d %v tile is %d bytes, above the %d of shared memory of one CTA on %v", rows, k, d, n, lim, t)
	}
	l, err := MakeLayout(Tuple(Ints(8, rows/8), Ints(w, k/w)), Tuple(Ints(w, 8*w), Ints(1, rows*w)))
	if err != nil {
		return nil, err
	}
	es, err := pat.InUnits(bits.TrailingZeros(uint(d.Bytes())))
	if err != nil {
		return nil, err
	}
	return &SmemTile{Target: t, Operand: op, DType: d, Rows: rows, K: k, Swizzle: sw, Layout: l, ElemSwizzle: es}, nil
}

// NewSmemTileMN returns the MN-major tile of rows (M or N, contiguous) x k
// elements with a swizzle: CuTe's canonical MN-major layout, columns of
// W = Swizzle.Bytes()/element size rows (one swizzle row) by all K, each
// column k rows of Swizzle.Bytes() bytes, the columns stacked along the rows:
//
//	Layout = ((W, Rows/W), K) : ((1, K*W), W)   [elements]
//
// then the swizzle pattern as for the K-major tiles. An MMA reads it
// through a descriptor whose LBO is the column stride (K*W elements) and
// SBO the 8-row stride along K (8*W elements): PTX ISA 9.7.15.5.1.2.1
// (canonical MN-major layout ((T,8,m),(8,k)) : ((1,T,LBO),(8T,SBO)) for
// 128B). A TMA box of W elements along the contiguous dimension and K rows
// with the same swizzle writes one column (CU_TENSOR_MAP_SWIZZLE_128B).
// Errors: a target other than sm_90a, a type other than bf16 (wgmma
// transposes .f16/.bf16 operands only), SwizzleNone or Swizzle128BAtom32B,
// rows not a multiple of W (and of 64 for A), K not a multiple of 8 and of
// the MMA K.
func NewSmemTileMN(t target.Target, op Operand, d DType, rows, k int, sw SwizzleMode) (*SmemTile, error) {
	if t != target.SM90a || d != DTypeBF16 {
		return nil, fmt.Errorf("layouts: MN-major %v tiles are modelled for sm_90a bf16 only (wgmma imm-trans), not %v %v", op, t, d)
	}
	if sw == SwizzleNone || sw == Swizzle128BAtom32B {
		return nil, fmt.Errorf("layouts: MN-major tile with %v swizzle (not modelled)", sw)
	}
	pat, err := sw.Pattern()
	if err != nil {
		return nil, err
	}
	mk, _ := MMAK(t, d)
	w := sw.Bytes() / d.Bytes()
	if rows < w || rows%w != 0 || (op == OperandA && rows%64 != 0) {
		return nil, fmt.Errorf("layouts: MN-major %v tile with %d rows (a positive multiple of the %d-element swizzle row%s)", op, rows, w,
			map[bool]string{true: " and of 64", false: ""}[op == OperandA])
	}
	if k < mk || k%mk != 0 {
		return nil, fmt.Errorf("layouts: %s %v tile with K = %d (a positive multiple of the MMA K %d)", t, d, k, mk)
	}
	l, err := MakeLayout(Tuple(Ints(w, rows/w), Int(k)), Tuple(Ints(1, k*w), Int(w)))
	if err != nil {
		return nil, err
	}
	es, err := pat.InUnits(bits.TrailingZeros(uint(d.Bytes())))
	if err != nil {
		return nil, err
	}
	return &SmemTile{Target: t, Operand: op, DType: d, Rows: rows, K: k, Swizzle: sw, Major: MNMajor, Layout: l, ElemSwizzle: es}, nil
}

// Bytes returns the tile size in bytes.
func (t *SmemTile) Bytes() int { return t.Rows * t.K * t.DType.Bytes() }

// Swizzled returns the tile as a CuTe composed layout in element units
// (ElemSwizzle o Layout).
func (t *SmemTile) Swizzled() SwizzledLayout {
	return SwizzledLayout{Sw: t.ElemSwizzle, Layout: t.Layout}
}

// String prints e.g. "sm_90a A bf16 64x64: Sw<3,3,3> o
// ((8,8),(64,1)):((64,512),(1,4096)) (elements; 128B swizzle; 8192 bytes)".
func (t *SmemTile) String() string {
	mn := ""
	if t.Major == MNMajor {
		mn = " MN-major"
	}
	return fmt.Sprintf("%s %v%s %v %dx%d: %v (elements; %v swizzle; %d bytes)", t.Target, t.Operand, mn, t.DType, t.Rows, t.K,
		t.Swizzled(), t.Swizzle, t.Bytes())
}

// ElemOffset returns the swizzled element offset of (row, k): ElemSwizzle
// of Layout(row, k), computed directly.
func (t *SmemTile) ElemOffset(row, k int) (int, error) {
	if row < 0 || row >= t.Rows || k < 0 || k >= t.K {
		return 0, fmt.Errorf("layouts: element (%d, %d) outside the %dx%d tile", row, k, t.Rows, t.K)
	}
	w := t.Swizzle.Bytes() / t.DType.Bytes()
	if t.Major == MNMajor {
		return t.ElemSwizzle.Apply(row%w + k*w + (row/w)*t.K*w), nil
	}
	return t.ElemSwizzle.Apply(row*w + k%w + (k/w)*t.Rows*w), nil
}

// ByteOffset returns the byte offset of element (row, k) from the tile
// base. Out-of-range coordinates give an error.
func (t *SmemTile) ByteOffset(row, k int) (int, error) {
	o, err := t.ElemOffset(row, k)
	return o * t.DType.Bytes(), err
}

// DescriptorFields returns the shared-memory descriptor fields of the
// operand an MMA reads from this tile at shared address base: rows row0 ..
// (row0 a multiple of 8; the MMA's M or N extent follows from the
// instruction) and the kStep-th MMAK-wide slice of K. The start address
// advances inside a swizzle atom by 32 bytes per k-step (one MMA's K
// extent: k16 of bf16 or k32 of e4m3; seen on the H200 with bf16, assumed
// for sm_100a: docs/hardware.md), and by one atom column (Rows x atom
// bytes) past it. Swizzled: SBO = 8 x swizzle width, LBO = 16 (unused,
// "assumed 1"; 0 on sm_100a, as the kernels encode it). No swizzle: SBO =
// 128 (8-row group of core matrices), LBO = Rows x 16 (next core matrix
// along K). Errors: sm_80 (no descriptors), base not aligned to
// Swizzle.RepeatBytes(), row0 or kStep out of range.
func (t *SmemTile) DescriptorFields(base uint32, row0, kStep int) (SmemDescriptor, error) {
	if t.Target == target.SM80 {
		return SmemDescriptor{}, fmt.Errorf("layouts: sm_80 reads shared memory with ldmatrix, not descriptors")
	}
	if int(base)%t.Swizzle.RepeatBytes() != 0 {
		return SmemDescriptor{}, fmt.Errorf("layouts: tile base 0x%x is not aligned to %d bytes (%v swizzle)", base, t.Swizzle.RepeatBytes(), t.Swizzle)
	}
	mk, _ := MMAK(t.Target, t.DType)
	if row0 < 0 || row0 >= t.Rows || row0%8 != 0 {
		return SmemDescriptor{}, fmt.Errorf("layouts: descriptor row %d (a multiple of 8 below %d)", row0, t.Rows)
	}
	if kStep < 0 || kStep >= t.K/mk {
		return SmemDescriptor{}, fmt.Errorf("layouts: k-step %d out of range [0, %d)", kStep, t.K/mk)
	}
	b := t.DType.Bytes()
	w := t.Swizzle.Bytes() / b // atom width in elements
	k0 := kStep * mk
	if t.Major == MNMajor {
		// Columns of w rows are LBO = K rows of swizzle width apart; 8
		// rows along K are SBO apart; the k-step starts k0 rows down.
		if row0%w != 0 {
			return SmemDescriptor{}, fmt.Errorf("layouts: MN-major descriptor row %d (a multiple of %d)", row0, w)
		}
		sb := t.Swizzle.Bytes()
		return SmemDescriptor{Swizzle: t.Swizzle, LBO: uint32(t.K * sb), SBO: uint32(8 * sb),
			Start: uint32(int(base) + (row0/w)*t.K*sb + k0*sb)}, nil
	}
	start := int(base) + (k0/w)*t.Rows*w*b + (k0%w)*b
	d := SmemDescriptor{Swizzle: t.Swizzle}
	if t.Swizzle == SwizzleNone {
		d.SBO, d.LBO = 128, uint32(t.Rows*16)
		start += (row0 / 8) * 128
	} else {
		d.SBO, d.LBO = uint32(8*t.Swizzle.Bytes()), 16
		if t.Target == target.SM100a {
			d.LBO = 0 // unused by swizzled K-major layouts; sm_100a kernels encode 0 (SM100DescK128B)
		}
		start += (row0 / 8) * 8 * t.Swizzle.Bytes()
	}
	d.Start = uint32(start)
	return d, nil
}

// Descriptor returns the encoded 64-bit descriptor of DescriptorFields for
// the tile's target: SM90SmemDescriptor on sm_90a, SM100SmemDescriptor on
// sm_100a.
func (t *SmemTile) Descriptor(base uint32, row0, kStep int) (uint64, error) {
	d, err := t.DescriptorFields(base, row0, kStep)
	if err != nil {
		return 0, err
	}
	if t.Target == target.SM100a {
		return SM100SmemDescriptor(d)
	}
	return SM90SmemDescriptor(d)
}

// LdmatrixX4Offsets returns, for each of the 32 lanes, the byte offset (from
// the tile base) of the 16-byte row that lane supplies to
// ldmatrix.sync.aligned.m8n8.x4.shared.b16 loading the 16x16 bf16 block at
// (row0, k0) (multiples of 8, in range), in the fragment order of
// mma.sync.m16n8k16 (PTX ISA, warp-level MMA fragments): for operand A the four 8x8
// matrices are (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15),
// (rows 8-15, k 8-15) of the block; for operand B (N x K) they are
// (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15), the
// two K halves of each n8 fragment. Lane l supplies row l%8 of matrix l/8.
// Errors: not a bf16 tile, coordinates out of range.
func (t *SmemTile) LdmatrixX4Offsets(row0, k0 int) ([32]int, error) {
	if t.Major != KMajor {
		return [32]int{}, fmt.Errorf("layouts: ldmatrix offsets of an %v tile", t.Major)
	}
	return ldmatrixX4(t.Operand, t.DType, t.Rows, t.K, row0, k0, t.ByteOffset)
}

// AtomBytes is the size of one column of swizzle atoms: K-major, Rows rows
// x Swizzle.Bytes() bytes (with 128B swizzle, the Rows x 64 bf16 box one
// TMA load writes), consecutive columns along K AtomBytes apart; MN-major,
// K rows x Swizzle.Bytes() bytes (the K x 64 bf16 box of one TMA load),
// consecutive columns along the rows AtomBytes apart.
func (t *SmemTile) AtomBytes() int {
	if t.Major == MNMajor {
		return t.K * t.Swizzle.Bytes()
	}
	return t.Rows * t.Swizzle.Bytes()
}
