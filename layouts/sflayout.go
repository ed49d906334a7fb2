package layouts

import "fmt"

// The sm_100 scale-factor tile (tcgen05 block-scaled MMA, cuBLAS / CUTLASS
// "SfAtom"): the UE8M0 scales S[rows][nSF] of one operand (nSF =
// ceil(K/32)) are cut into tiles of 128 rows x 4 scale columns, 512 bytes
// each, stored tile after tile with the K-tile index fastest; inside a tile
// row r, column c sits at (r%32)*16 + ((r%128)/32)*4 + c%4. One tile is the
// source of one tcgen05.cp.cta_group::1.32x128b.warpx4. Sources: the cuBLAS
// documentation, "1D Block Scaling Factors Layout" (the layout
// CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0 expects); CUTLASS
// cutlass/detail/sm100_blockscaled_layout.hpp, Sm1xxBlockScaledBasicChunk
// (SfKMajorAtom: shape ((32,4),(32,4)), stride ((16,4),(0,1)) in bytes).
const (
	SFTileRows  = 128 // rows of one scale-factor tile
	SFTileCols  = 4   // scale columns (of 32 K-elements each) of one tile
	SFTileBytes = 512 // bytes of one tile
	// SFPadByte is written into every padding byte of a packed scale
	// buffer: UE8M0 127 = 1.0. Padding scale columns meet zero-filled data
	// (TMA fills outside K with zeros) and 0*1.0 = 0; a NaN scale (0xFF) in
	// that place would make 0*NaN = NaN, so padding is never 0xFF.
	SFPadByte = 0x7F
)

// SFOffset returns the byte offset of scale (r, c) (r a row, c a scale
// column < nSF) in one operand's tiled buffer:
//
//	((r/128)*ceil(nSF/4) + c/4)*512 + (r%32)*16 + ((r%128)/32)*4 + c%4
//
// (the layout described above; no range check).
func SFOffset(r, c, nSF int) int {
	return ((r/SFTileRows)*ceilDiv(nSF, SFTileCols)+c/SFTileCols)*SFTileBytes +
		(r%32)*16 + ((r%SFTileRows)/32)*4 + c%SFTileCols
}

// SFAtomLayout returns one 512-byte tile as a CuTe layout from (row, scale
// column) to byte offset: ((32,4),4):((16,4),1).
func SFAtomLayout() Layout {
	return Layout{Shape: Tuple(Ints(32, 4), Int(4)), Stride: Tuple(Ints(16, 4), Int(1))}
}

// SFOperandLayout returns the whole tiled buffer of one operand with
// rowTiles*128 rows and kTiles*4 scale columns as a CuTe layout from (row,
// scale column) to byte offset:
// ((32,4,rowTiles),(4,kTiles)):((16,4,kTiles*512),(1,512)).
func SFOperandLayout(rowTiles, kTiles int) (Layout, error) {
	return MakeLayout(Tuple(Ints(32, 4, rowTiles), Ints(4, kTiles)),
		Tuple(Ints(16, 4, kTiles*SFTileBytes), Ints(1, SFTileBytes)))
}

// SFLayout is the packed scale-factor buffer of a grouped operand (its
// fields are read-only; make a new one for other sizes): expert e
// has Rows[e] rows (tokens routed to it, or N of its weight), each with NSF
// = ceil(K/32) scales; each expert is padded to whole 128x4 tiles and the
// experts' tile regions follow each other. The unpacked source is the
// experts' scales stacked row-major: [sum_e Rows[e], NSF] (expert e's rows
// start at RowStart[e]), as MXFP8 with AlongCols stores them.
type SFLayout struct {
	Rows     []int // rows per expert (>= 0)
	K        int   // reduction length in elements (>= 1)
	NSF      int   // scale columns: ceil(K/32)
	KTiles   int   // ceil(NSF/4)
	RowTiles []int // ceil(Rows[e]/128) per expert
	Base     []int // byte offset of expert e's first tile
	RowStart []int // first row of expert e in the stacked source
	Size     int   // total bytes: 512 * KTiles * sum_e RowTiles[e]
}

// NewSFLayout returns the layout for the given rows per expert and K.
// Errors: no experts, a negative row count, K < 1.
func NewSFLayout(rows []int, k int) (*SFLayout, error) {
	if len(rows) == 0 {
		return nil, fmt.Errorf("layouts: scale-factor layout with no experts")
	}
	if k < 1 {
		return nil, fmt.Errorf("layouts: scale-factor layout with K = %d", k)
	}
	l := &SFLayout{Rows: append([]int(nil), rows...), K: k, NSF: ceilDiv(k, MXBlockSize)}
	l.KTiles = ceilDiv(l.NSF, SFTileCols)
	off, start := 0, 0
	for e, r := range rows {
		if r < 0 {
			return nil, fmt.Errorf("layouts: expert %d has %d rows", e, r)
		}
		rt := ceilDiv(r, SFTileRows)
		l.RowTiles = append(l.RowTiles, rt)
		l.Base = append(l.Base, off)
		l.RowStart = append(l.RowStart, start)
		off += rt * l.KTiles * SFTileBytes
		start += r
	}
	l.Size = off
	return l, nil
}

// TotalRows returns sum_e Rows[e], the rows of the stacked source.
func (l *SFLayout) TotalRows() int {
	n := 0
	for _, r := range l.Rows {
		n += r
	}
	return n
}

// Offset returns the byte offset of scale (r, c) of expert e (r <
// Rows[e], c < NSF), or an error out of range.
func (l *SFLayout) Offset(e, r, c int) (int, error) {
	if e < 0 || e >= len(l.Rows) || r < 0 || r >= l.Rows[e] || c < 0 || c >= l.NSF {
		return 0, fmt.Errorf("layouts: scale (%d, %d) of expert %d out of range", r, c, e)
	}
	return l.Base[e] + SFOffset(r, c, l.NSF), nil
}

// ExpertLayout returns expert e's region as a CuTe layout from (row, scale
// column) to byte offset within the region (see SFOperandLayout); add
// Base[e] for the buffer offset. Its domain includes the padding rows and
// columns. An expert with no rows has no region (error).
func (l *SFLayout) ExpertLayout(e int) (Layout, error) {
	if e < 0 || e >= len(l.Rows) {
		return Layout{}, fmt.Errorf("layouts: expert %d out of range [0, %d)", e, len(l.Rows))
	}
	if l.RowTiles[e] == 0 {
		return Layout{}, fmt.Errorf("layouts: expert %d has no rows, so no scale-factor tiles", e)
	}
	return SFOperandLayout(l.RowTiles[e], l.KTiles)
}

// IsPadding reports whether byte off of the buffer holds no real scale.
func (l *SFLayout) IsPadding(off int) bool {
	e, r, c, ok := l.locate(off)
	return !ok || r >= l.Rows[e] || c >= l.NSF
}

// locate inverts the layout: byte off -> expert, row, scale column
// (including padding positions).
func (l *SFLayout) locate(off int) (e, r, c int, ok bool) {
	if off < 0 || off >= l.Size {
		return 0, 0, 0, false
	}
	for e = len(l.Rows) - 1; l.Base[e] > off; e-- {
	}
	o := off - l.Base[e]
	tile, b := o/SFTileBytes, o%SFTileBytes
	rt, kt := tile/l.KTiles, tile%l.KTiles
	r = rt*SFTileRows + ((b%16)/4)*32 + b/16
	c = kt*SFTileCols + b%4
	return e, r, c, true
}

// Pack returns a new packed buffer (Size bytes) from src, the stacked
// scales [TotalRows, NSF]; padding bytes hold SFPadByte.
func (l *SFLayout) Pack(src []uint8) ([]uint8, error) {
	dst := make([]uint8, l.Size)
	return dst, l.Refresh(dst, src)
}

// Refresh rewrites the caller-owned packed buffer dst (exactly Size bytes)
// in place from src (the stacked scales [TotalRows, NSF]): every byte of dst
// is written exactly once with its final value and dst is never
// reallocated, so a device buffer bound at this address (a captured CUDA
// graph, a TMA descriptor) stays valid after the host copy. Padding bytes
// get SFPadByte. Errors: wrong lengths.
func (l *SFLayout) Refresh(dst, src []uint8) error {
	if len(dst) != l.Size {
		return fmt.Errorf("layouts: scale-factor buffer of %d bytes, want %d", len(dst), l.Size)
	}
	if len(src) != l.TotalRows()*l.NSF {
		return fmt.Errorf("layouts: %d scales for %d rows x %d columns", len(src), l.TotalRows(), l.NSF)
	}
	for e := range l.Rows {
		l.refreshExpert(dst, e, src[l.RowStart[e]*l.NSF:][:l.Rows[e]*l.NSF])
	}
	return nil
}

// RefreshExpert rewrites only expert e's region of dst (Size bytes) from
// src, expert e's scales [Rows[e], NSF]; see Refresh.
func (l *SFLayout) RefreshExpert(dst []uint8, e int, src []uint8) error {
	if len(dst) != l.Size {
		return fmt.Errorf("layouts: scale-factor buffer of %d bytes, want %d", len(dst), l.Size)
	}
	if e < 0 || e >= len(l.Rows) {
		return fmt.Errorf("layouts: expert %d out of range [0, %d)", e, len(l.Rows))
	}
	if len(src) != l.Rows[e]*l.NSF {
		return fmt.Errorf("layouts: %d scales for expert %d of %d rows x %d columns", len(src), e, l.Rows[e], l.NSF)
	}
	l.refreshExpert(dst, e, src)
	return nil
}

func (l *SFLayout) refreshExpert(dst []uint8, e int, src []uint8) {
	rows, nsf := l.Rows[e], l.NSF
	region := dst[l.Base[e]:][:l.RowTiles[e]*l.KTiles*SFTileBytes]
	for tile := 0; tile < l.RowTiles[e]*l.KTiles; tile++ {
		rt, kt := tile/l.KTiles, tile%l.KTiles
		out := region[tile*SFTileBytes:][:SFTileBytes]
		for b := range out {
			r := rt*SFTileRows + ((b%16)/4)*32 + b/16
			c := kt*SFTileCols + b%4
			if r < rows && c < nsf {
				out[b] = src[r*nsf+c]
			} else {
				out[b] = SFPadByte
			}
		}
	}
}

// Unpack is the inverse of Pack: the stacked scales [TotalRows, NSF] read
// from a packed buffer of Size bytes (padding ignored).
func (l *SFLayout) Unpack(packed []uint8) ([]uint8, error) {
	if len(packed) != l.Size {
		return nil, fmt.Errorf("layouts: scale-factor buffer of %d bytes, want %d", len(packed), l.Size)
	}
	out := make([]uint8, l.TotalRows()*l.NSF)
	for e, rows := range l.Rows {
		for r := 0; r < rows; r++ {
			for c := 0; c < l.NSF; c++ {
				out[(l.RowStart[e]+r)*l.NSF+c] = packed[l.Base[e]+SFOffset(r, c, l.NSF)]
			}
		}
	}
	return out, nil
}

// DequantizeSF dequantizes stacked E4M3 data [TotalRows, K] (row-major,
// K-major rows) with its scales read from a packed buffer through l: the
// value of (row, k) is F32FromE4M3(data) * F32FromUE8M0(scale(row, k/32)).
// Only real scale positions are read, so padding bytes cannot change any
// value. Errors: wrong lengths.
func DequantizeSF(data, packed []uint8, l *SFLayout) ([]float32, error) {
	if len(packed) != l.Size {
		return nil, fmt.Errorf("layouts: scale-factor buffer of %d bytes, want %d", len(packed), l.Size)
	}
	if len(data) != l.TotalRows()*l.K {
		return nil, fmt.Errorf("layouts: %d data bytes for %d rows x K %d", len(data), l.TotalRows(), l.K)
	}
	out := make([]float32, len(data))
	for e, rows := range l.Rows {
		for r := 0; r < rows; r++ {
			row := (l.RowStart[e] + r) * l.K
			for c := 0; c < l.NSF; c++ {
				x := F32FromUE8M0(packed[l.Base[e]+SFOffset(r, c, l.NSF)])
				for k := c * MXBlockSize; k < min((c+1)*MXBlockSize, l.K); k++ {
					out[row+k] = F32FromE4M3(data[row+k]) * x
				}
			}
		}
	}
	return out, nil
}

// SM100ScaleTileDescriptor returns the sm_100 shared-memory descriptor of a
// 512-byte scale-factor tile at shared address addr, the source operand of
// tcgen05.cp.cta_group::1.32x128b.warpx4: no swizzle, SBO 128 bytes, LBO 0.
// The tile is 32 rows of 16 bytes (PTX ISA, tcgen05.cp shape .32x128b), so
// in the non-swizzled canonical layout of the tcgen05 "Shared Memory
// Descriptor" it is four 8-row core matrices stacked 128 bytes apart, with
// nothing along the leading dimension. addr must be a multiple of 16 below
// 2^18.
func SM100ScaleTileDescriptor(addr uint32) (uint64, error) {
	return SM100SmemDescriptor(SmemDescriptor{Start: addr, SBO: 128, Swizzle: SwizzleNone})
}
