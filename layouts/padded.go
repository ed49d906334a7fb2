package layouts

import (
	"fmt"
	"strings"

	"github.com/mokc/mokc/target"
)

// PaddedTile is an operand tile of Rows x K elements stored as padded
// lines, each followed by Pad bytes. K-major (Major KMajor), a line is a
// row:
//
//	byte offset of (row, k) = row*RowBytes() + k*element size
//	Layout = (Rows, K) : (RowBytes()/element size, 1)   [elements]
//
// MN-major (Major MNMajor, NewPaddedTileMN: a B_e stored [K, N], N
// contiguous), a line is one k of all Rows:
//
//	byte offset of (row, k) = k*RowBytes() + row*element size
//	Layout = (Rows, K) : (1, RowBytes()/element size)   [elements]
//
// The sm_80 engine keeps its cp.async stages in this form with Pad = 16: a
// line stride of 16 bytes past a multiple of 128 moves each of the 8 line
// addresses of one ldmatrix phase (8 lines x 16 bytes) to a different group
// of four 32-bit banks, so ldmatrix.x4 (with .trans for an MN-major tile)
// reads without bank conflicts while every 16-byte cp.async chunk stays
// 16-byte aligned (PTX ISA 9.7.9.25.3 cp.async, 9.7.14.5.15 ldmatrix).
type PaddedTile struct {
	Target  target.Target // the architecture the tile is laid out for
	Operand Operand       // A (M x K) or B (N x K)
	DType   DType         // element type
	Rows    int           // M (A) or N (B) rows
	K       int           // elements along K
	Pad     int           // bytes after each line (a multiple of 16)
	Major   Major         // KMajor: lines are rows; MNMajor: lines are k
}

// NewPaddedTile returns the K-major padded tile; rows and K must be
// positive, K a multiple of 8 bf16 (16 bytes) and pad a non-negative
// multiple of 16.
func NewPaddedTile(t target.Target, op Operand, d DType, rows, k, pad int) (*PaddedTile, error) {
	switch {
	case !t.Valid():
		return nil, fmt.Errorf("layouts: unknown target %v (want %s)", t, target.Names())
	case rows <= 0 || k <= 0 || (k*d.Bytes())%16 != 0:
		return nil, fmt.Errorf("layouts: padded %v tile %dx%d: rows and K must be positive, K a whole number of 16-byte chunks", d, rows, k)
	case pad < 0 || pad%16 != 0:
		return nil, fmt.Errorf("layouts: row padding of %d bytes (a non-negative multiple of 16)", pad)
	}
	return &PaddedTile{Target: t, Operand: op, DType: d, Rows: rows, K: k, Pad: pad}, nil
}

// NewPaddedTileMN returns the MN-major padded tile: K lines of rows
// elements, each followed by pad bytes; rows and K must be positive, rows
// a multiple of 8 bf16 (16 bytes) and pad a non-negative multiple of 16.
func NewPaddedTileMN(t target.Target, op Operand, d DType, rows, k, pad int) (*PaddedTile, error) {
	p, err := NewPaddedTile(t, op, d, k, rows, pad) // the same checks with the line extents swapped
	if err != nil {
		return nil, fmt.Errorf("layouts: MN-major tile: %w", err)
	}
	p.Rows, p.K, p.Major = rows, k, MNMajor
	return p, nil
}

// lines is the number of padded lines and elems the elements in each.
func (t *PaddedTile) lines() (lines, elems int) {
	if t.Major == MNMajor {
		return t.K, t.Rows
	}
	return t.Rows, t.K
}

// RowBytes is the line stride in bytes: the elements of a line (K, or Rows
// when MN-major) times the element size, plus Pad.
func (t *PaddedTile) RowBytes() int {
	_, n := t.lines()
	return n*t.DType.Bytes() + t.Pad
}

// Bytes returns the tile size in bytes, padding included (lines *
// RowBytes).
func (t *PaddedTile) Bytes() int {
	n, _ := t.lines()
	return n * t.RowBytes()
}

// Layout returns (row, k) -> element offset: (Rows, K):(RowBytes/size, 1),
// or (Rows, K):(1, RowBytes/size) when MN-major.
func (t *PaddedTile) Layout() Layout {
	line := t.RowBytes() / t.DType.Bytes()
	if t.Major == MNMajor {
		l, _ := MakeLayout(Ints(t.Rows, t.K), Ints(1, line))
		return l
	}
	l, _ := MakeLayout(Ints(t.Rows, t.K), Ints(line, 1))
	return l
}

// ByteOffset returns the byte offset of element (row, k) from the tile
// base. Out-of-range coordinates give an error.
func (t *PaddedTile) ByteOffset(row, k int) (int, error) {
	if row < 0 || row >= t.Rows || k < 0 || k >= t.K {
		return 0, fmt.Errorf("layouts: element (%d, %d) outside the %dx%d tile", row, k, t.Rows, t.K)
	}
	if t.Major == MNMajor {
		return k*t.RowBytes() + row*t.DType.Bytes(), nil
	}
	return row*t.RowBytes() + k*t.DType.Bytes(), nil
}

// String prints e.g. "sm_80 A bf16 128x64: (128,64):(72,1) (elements; rows
// padded by 16 bytes; 18432 bytes)" (", MN-major" after the shape when
// so).
func (t *PaddedTile) String() string {
	mn, lines := "", "rows"
	if t.Major == MNMajor {
		mn, lines = ", MN-major", "k lines"
	}
	return fmt.Sprintf("%s %v %v %dx%d%s: %v (elements; %s padded by %d bytes; %d bytes)", t.Target, t.Operand, t.DType,
		t.Rows, t.K, mn, t.Layout(), lines, t.Pad, t.Bytes())
}

// LdmatrixX4Offsets returns, for each of the 32 lanes, the byte offset of
// the 16-byte row that lane supplies to ldmatrix.sync.aligned.m8n8.x4 for
// the 16x16 bf16 block at (row0, k0), in the fragment order of
// mma.sync.m16n8k16 (as SmemTile.LdmatrixX4Offsets).
//
// An MN-major tile (B only) is read with ldmatrix .trans: matrix m = l/8
// of lane l is the k8 x n8 block at (rows row0 + 8*(m/2).., k k0 +
// 8*(m%2)..), and the lane gives the address of its line k0 + 8*(m%2) +
// l%8 at row row0 + 8*(m/2); .trans hands each thread the two k of one n
// that the mma.m16n8k16 B fragment holds, so the registers come in the
// K-major tile's order.
func (t *PaddedTile) LdmatrixX4Offsets(row0, k0 int) ([32]int, error) {
	if t.Major != MNMajor {
		return ldmatrixX4(t.Operand, t.DType, t.Rows, t.K, row0, k0, t.ByteOffset)
	}
	var out [32]int
	switch {
	case t.Operand != OperandB || t.DType != DTypeBF16:
		return out, fmt.Errorf("layouts: ldmatrix .trans of an MN-major %v %v tile (B bf16 only)", t.Operand, t.DType)
	case row0%8 != 0 || k0%8 != 0 || row0 < 0 || k0 < 0 || row0+16 > t.Rows || k0+16 > t.K:
		return out, fmt.Errorf("layouts: ldmatrix block (%d, %d) of a %dx%d tile", row0, k0, t.Rows, t.K)
	}
	for l := 0; l < 32; l++ {
		m := l / 8
		o, err := t.ByteOffset(row0+8*(m/2), k0+8*(m%2)+l%8)
		if err != nil {
			return out, err
		}
		out[l] = o
	}
	return out, nil
}

// Describe returns the account `mokc inspect layout` prints: the layout,
// the padding, and the ldmatrix.x4 row addresses of the first 16x16 block.
// base and n are ignored (the tile has no descriptors).
func (t *PaddedTile) Describe(base uint32, n int) (string, error) {
	var b strings.Builder
	major, line := "K-major", "row"
	if t.Major == MNMajor {
		major, line = "MN-major (ldmatrix .trans)", "k line"
	}
	fmt.Fprintf(&b, "%s operand %v: %s x K = %d x %d %v, %s\n", t.Target, t.Operand, rowRole(t.Operand), t.Rows, t.K, t.DType, major)
	fmt.Fprintf(&b, "layout   %v\n", t.Layout())
	fmt.Fprintf(&b, "         (row, k) -> element offset; bytes = %d x element offset\n", t.DType.Bytes())
	fmt.Fprintf(&b, "padding  %d bytes after each %s: %s stride %d bytes, no swizzle\n", t.Pad, line, line, t.RowBytes())
	fmt.Fprintf(&b, "size     %d bytes\n", t.Bytes())
	writeLdmatrix(&b, t.LdmatrixX4Offsets)
	return b.String(), nil
}

// OperandTile is the shared-memory form of one MMA operand tile a kernel
// addresses: *SmemTile (swizzled, sm_90a / sm_100a) or *PaddedTile
// (sm_80).
type OperandTile interface {
	// Bytes is the tile size in bytes.
	Bytes() int
	// ByteOffset is the byte offset of element (row, k) from the tile base.
	ByteOffset(row, k int) (int, error)
	// String is a one-line summary.
	String() string
	// Describe is the multi-line account of `mokc inspect layout`.
	Describe(base uint32, n int) (string, error)
}

// rowRole names the row extent of an operand: M for A, N for B.
func rowRole(op Operand) string {
	if op == OperandB {
		return "N"
	}
	return "M"
}

// ldmatrixX4 is the lane-to-row-address map of ldmatrix.x4 over any tile
// addressed by off (see SmemTile.LdmatrixX4Offsets).
func ldmatrixX4(op Operand, d DType, rows, k, row0, k0 int, off func(row, k int) (int, error)) ([32]int, error) {
	var out [32]int
	if d != DTypeBF16 {
		return out, fmt.Errorf("layouts: ldmatrix .b16 needs a bf16 tile")
	}
	if row0%8 != 0 || k0%8 != 0 || row0 < 0 || k0 < 0 || row0+16 > rows || k0+16 > k {
		return out, fmt.Errorf("layouts: ldmatrix block (%d, %d) of a %dx%d tile", row0, k0, rows, k)
	}
	for l := 0; l < 32; l++ {
		m := l / 8
		var r, c int
		if op == OperandA {
			r, c = row0+l%8+8*(m%2), k0+8*(m/2)
		} else {
			r, c = row0+l%8+8*(m/2), k0+8*(m%2)
		}
		o, err := off(r, c)
		if err != nil {
			return out, err
		}
		out[l] = o
	}
	return out, nil
}

// writeLdmatrix prints the ldmatrix.x4 lane addresses of block (0, 0).
func writeLdmatrix(b *strings.Builder, offsets func(row0, k0 int) ([32]int, error)) {
	offs, err := offsets(0, 0)
	if err != nil {
		return
	}
	fmt.Fprintf(b, "ldmatrix.x4 of the 16x16 block (0,0): lane -> byte offset of its 16-byte row\n")
	for m := 0; m < 4; m++ {
		fmt.Fprintf(b, "         lanes %2d-%2d:", 8*m, 8*m+7)
		for l := 8 * m; l < 8*m+8; l++ {
			fmt.Fprintf(b, " %5d", offs[l])
		}
		b.WriteByte('\n')
	}
}
