package layouts

import (
	"fmt"
	"math"
	"runtime"
	"sync"
)

// MXBlockSize is the number of consecutive elements along the reduction (K)
// dimension that share one UE8M0 scale in MXFP8 (OCP Microscaling Formats
// v1.0: block size 32).
const MXBlockSize = 32

// ScaleRule chooses the shared scale X = 2^k of a block from its amax (the
// largest |x| of the block).
type ScaleRule int

const (
	// ScaleRoundUp (the default; MoK, Transformer Engine, cuBLAS): X is the
	// smallest power of two with amax/X <= 448, k = ceil(log2(amax/448))
	// clamped to [-127, 127]: UE8M0RoundUp(amax/448), amax/448 an f32
	// division rounded to nearest (this gives the same code as Transformer
	// Engine's amax * float(1/448) for every finite f32 amax; checked
	// exhaustively by TestRoundUpRuleDivisionEqualsTEMultiply with
	// MOKC_LONG=1). No element saturates.
	ScaleRoundUp ScaleRule = iota
	// ScaleOCPFloor (the OCP MX v1.0 reference conversion): k =
	// floor(log2(amax)) - 8 (8 = emax of E4M3), clamped to [-127, 127].
	// Elements with |x|/X > 448 saturate to +-448 (a block with amax 960
	// stores 957 as 896).
	ScaleOCPFloor
)

// String returns "round-up" or "ocp-floor".
func (r ScaleRule) String() string {
	if r == ScaleOCPFloor {
		return "ocp-floor"
	}
	return "round-up"
}

// ScaleFromAmax returns the UE8M0 scale code of a block whose largest
// magnitude is amax (>= 0; the sign is ignored) under rule. Special values:
// amax NaN gives 0xFF (NaN; the whole block dequantizes to NaN), amax Inf
// gives 0xFE (2^127), amax 0 gives 0x00 (2^-127, so every element encodes
// as a finite 0), and no amax makes 1/X overflow: X >= 2^-127 and
// 1/X <= 2^127.
func ScaleFromAmax(amax float32, rule ScaleRule) uint8 {
	if rule == ScaleOCPFloor {
		k, ok := floorLog2(amax)
		switch {
		case !ok:
			return UE8M0NaN
		case k == math.MinInt32:
			return 0
		case k == math.MaxInt32:
			return 0xFE
		}
		return clampScaleExp(k - E4M3MaxExp)
	}
	return UE8M0RoundUp(float32(math.Abs(float64(amax))) / float32(E4M3Max))
}

// BlockAxis says along which axis of a [E, rows, cols] tensor the blocks of
// 32 run (the reduction dimension K of the GEMM that consumes it).
type BlockAxis int

const (
	// AlongCols: blocks of 32 consecutive columns of one row (K = cols; a
	// weight [E, N, K] or an activation [T, K] used as K-major operand).
	AlongCols BlockAxis = iota
	// AlongRows: blocks of 32 consecutive rows of one column (K = rows; an
	// activation [T, H] that wgrad reduces over tokens).
	AlongRows
)

// String returns "cols" or "rows".
func (a BlockAxis) String() string {
	if a == AlongRows {
		return "rows"
	}
	return "cols"
}

// QuantizeOptions configure Quantize. The zero value is the usual case:
// blocks along cols, round-up scales, no transpose, one goroutine per core.
type QuantizeOptions struct {
	Axis BlockAxis // the axis the 32-element blocks run along
	Rule ScaleRule // how a block's scale follows from its amax
	// Transpose stores data and scales with rows and cols swapped:
	// data [E, cols, rows], scales [E, cols, ceil(rows/32)] for AlongRows.
	// With AlongRows this is the K-major copy a weight gradient needs.
	Transpose bool
	Workers   int // goroutines per expert; 0 means runtime.GOMAXPROCS(0)
}

// MXFP8 is a quantized [E, Rows, Cols] tensor: E4M3 data with one UE8M0
// scale per 32 elements along Axis (OCP MX v1.0). The logical element
// (e, r, c) is F32FromE4M3(data) * F32FromUE8M0(scale) (see At).
//
// Storage, all row-major:
//
//	Transposed  Axis       Data               Scales
//	false       AlongCols  [E][Rows][Cols]    [E][Rows][ceil(Cols/32)]
//	false       AlongRows  [E][Rows][Cols]    [E][ceil(Rows/32)][Cols]
//	true        AlongCols  [E][Cols][Rows]    [E][ceil(Cols/32)][Rows]
//	true        AlongRows  [E][Cols][Rows]    [E][Cols][ceil(Rows/32)]
//
// A block that does not fill 32 elements (Cols or Rows not a multiple of
// 32) is quantized over the elements present.
type MXFP8 struct {
	E, Rows, Cols int       // logical shape of the source tensor
	Axis          BlockAxis // the axis the 32-element blocks run along
	Rule          ScaleRule // how each block's scale was chosen
	Transposed    bool      // data and scales stored with Rows and Cols swapped
	Data          []uint8   // E4M3 codes, see the table above
	Scales        []uint8   // UE8M0 codes, see the table above
	workers       int
}

// NewMXFP8 allocates an empty quantized tensor of logical shape
// [e, rows, cols] (all >= 1 except e, rows or cols may be 0 for an empty
// tensor) to be filled by QuantizeExpert / QuantizeExpertBF16.
func NewMXFP8(e, rows, cols int, opt QuantizeOptions) (*MXFP8, error) {
	if e < 0 || rows < 0 || cols < 0 {
		return nil, fmt.Errorf("layouts: MXFP8 shape [%d, %d, %d] has a negative extent", e, rows, cols)
	}
	if opt.Axis != AlongCols && opt.Axis != AlongRows {
		return nil, fmt.Errorf("layouts: unknown block axis %d", opt.Axis)
	}
	if opt.Rule != ScaleRoundUp && opt.Rule != ScaleOCPFloor {
		return nil, fmt.Errorf("layouts: unknown scale rule %d", opt.Rule)
	}
	if opt.Workers < 0 {
		return nil, fmt.Errorf("layouts: %d workers", opt.Workers)
	}
	if n := int64(e) * int64(rows) * int64(cols); n > 1<<40 {
		return nil, fmt.Errorf("layouts: MXFP8 shape [%d, %d, %d] too large", e, rows, cols)
	}
	q := &MXFP8{E: e, Rows: rows, Cols: cols, Axis: opt.Axis, Rule: opt.Rule, Transposed: opt.Transpose, workers: opt.Workers}
	sr, sc := q.scaleGrid()
	q.Data = make([]uint8, e*rows*cols)
	q.Scales = make([]uint8, e*sr*sc)
	return q, nil
}

// scaleGrid returns the logical (untransposed) scale grid per expert.
func (q *MXFP8) scaleGrid() (sr, sc int) {
	if q.Axis == AlongRows {
		return ceilDiv(q.Rows, MXBlockSize), q.Cols
	}
	return q.Rows, ceilDiv(q.Cols, MXBlockSize)
}

// DataShape returns the shape Data is stored in: [E, Rows, Cols], or
// [E, Cols, Rows] when Transposed.
func (q *MXFP8) DataShape() [3]int {
	if q.Transposed {
		return [3]int{q.E, q.Cols, q.Rows}
	}
	return [3]int{q.E, q.Rows, q.Cols}
}

// ScaleShape returns the shape Scales is stored in (see the MXFP8 table).
func (q *MXFP8) ScaleShape() [3]int {
	sr, sc := q.scaleGrid()
	if q.Transposed {
		return [3]int{q.E, sc, sr}
	}
	return [3]int{q.E, sr, sc}
}

// DataIndex returns the index in Data of logical element (e, r, c)
// (unchecked).
func (q *MXFP8) DataIndex(e, r, c int) int {
	if q.Transposed {
		return (e*q.Cols+c)*q.Rows + r
	}
	return (e*q.Rows+r)*q.Cols + c
}

// ScaleIndex returns the index in Scales of the scale of logical element
// (e, r, c) (unchecked).
func (q *MXFP8) ScaleIndex(e, r, c int) int {
	sr, sc := q.scaleGrid()
	if q.Axis == AlongRows {
		r /= MXBlockSize
	} else {
		c /= MXBlockSize
	}
	if q.Transposed {
		return (e*sc+c)*sr + r
	}
	return (e*sr+r)*sc + c
}

// At returns the dequantized logical element (e, r, c): the f32 product
// F32FromE4M3(code) * F32FromUE8M0(scale). The product is exact (E4M3 has 4
// significant bits and the result never falls below 2^-136) except that it
// overflows to +-Inf above the f32 range (448 * 2^127); a NaN code or scale
// gives NaN. Out-of-range indices return an error.
func (q *MXFP8) At(e, r, c int) (float32, error) {
	if e < 0 || e >= q.E || r < 0 || r >= q.Rows || c < 0 || c >= q.Cols {
		return 0, fmt.Errorf("layouts: element (%d, %d, %d) out of range [%d, %d, %d]", e, r, c, q.E, q.Rows, q.Cols)
	}
	return F32FromE4M3(q.Data[q.DataIndex(e, r, c)]) * F32FromUE8M0(q.Scales[q.ScaleIndex(e, r, c)]), nil
}

// Dequantize returns the logical tensor [E, Rows, Cols] in f32 (see At).
func (q *MXFP8) Dequantize() []float32 {
	out := make([]float32, q.E*q.Rows*q.Cols)
	for e := 0; e < q.E; e++ {
		for r := 0; r < q.Rows; r++ {
			for c := 0; c < q.Cols; c++ {
				out[(e*q.Rows+r)*q.Cols+c] = F32FromE4M3(q.Data[q.DataIndex(e, r, c)]) * F32FromUE8M0(q.Scales[q.ScaleIndex(e, r, c)])
			}
		}
	}
	return out
}

// Quantize quantizes src, an f32 tensor [e, rows, cols] (row-major), to
// MXFP8 with the given options. Each block of 32 gets the scale
// ScaleFromAmax(amax, opt.Rule), X = F32FromUE8M0 of it, and each element x
// becomes E4M3FromF32(x * (1/X)) (1/X is an exact power of two, so this is
// x/X rounded once). A NaN in a block makes its scale NaN (0xFF) and every
// code of the block 0x7F; an Inf makes the scale 2^127 and stores the Inf as
// +-448 (it dequantizes to +-Inf, 448*2^127 overflowing f32) and the finite
// elements as their (mostly zero) quotients. Huge finite inputs keep E4M3
// precision, except that values within 2^-5 (relative) of the largest f32
// round up to 256*2^120 = 2^128 and dequantize to +-Inf in f32. Errors: a
// src length that is not e*rows*cols, or bad options.
func Quantize(src []float32, e, rows, cols int, opt QuantizeOptions) (*MXFP8, error) {
	q, err := NewMXFP8(e, rows, cols, opt)
	if err != nil {
		return nil, err
	}
	if len(src) != e*rows*cols {
		return nil, fmt.Errorf("layouts: Quantize: %d elements for shape [%d, %d, %d]", len(src), e, rows, cols)
	}
	n := rows * cols
	for x := 0; x < e; x++ {
		if err := q.QuantizeExpert(x, src[x*n:(x+1)*n]); err != nil {
			return nil, err
		}
	}
	return q, nil
}

// QuantizeBF16 is Quantize for a bf16 source (bit patterns, [e, rows, cols]
// row-major); each element is widened to f32 exactly first.
func QuantizeBF16(src []uint16, e, rows, cols int, opt QuantizeOptions) (*MXFP8, error) {
	q, err := NewMXFP8(e, rows, cols, opt)
	if err != nil {
		return nil, err
	}
	if len(src) != e*rows*cols {
		return nil, fmt.Errorf("layouts: QuantizeBF16: %d elements for shape [%d, %d, %d]", len(src), e, rows, cols)
	}
	n := rows * cols
	for x := 0; x < e; x++ {
		if err := q.QuantizeExpertBF16(x, src[x*n:(x+1)*n]); err != nil {
			return nil, err
		}
	}
	return q, nil
}

// QuantizeExpert quantizes expert e's [Rows, Cols] f32 matrix (row-major)
// into q's storage for expert e, leaving the other experts as they are (for
// streaming one expert at a time; same semantics as Quantize).
func (q *MXFP8) QuantizeExpert(e int, src []float32) error {
	if err := q.checkExpert(e, len(src)); err != nil {
		return err
	}
	q.run(e, func(lo, hi int) { q.quantRange(e, lo, hi, srcF32(src)) })
	return nil
}

// QuantizeExpertBF16 is QuantizeExpert for a bf16 source.
func (q *MXFP8) QuantizeExpertBF16(e int, src []uint16) error {
	if err := q.checkExpert(e, len(src)); err != nil {
		return err
	}
	q.run(e, func(lo, hi int) { q.quantRange(e, lo, hi, srcBF16(src)) })
	return nil
}

func (q *MXFP8) checkExpert(e, n int) error {
	if e < 0 || e >= q.E {
		return fmt.Errorf("layouts: expert %d out of range [0, %d)", e, q.E)
	}
	if n != q.Rows*q.Cols {
		return fmt.Errorf("layouts: %d elements for an expert of shape [%d, %d]", n, q.Rows, q.Cols)
	}
	return nil
}

// units returns the number of independent work units of one expert: rows
// for AlongCols, 32-row groups for AlongRows.
func (q *MXFP8) units() int {
	if q.Axis == AlongRows {
		return ceilDiv(q.Rows, MXBlockSize)
	}
	return q.Rows
}

// run splits the units of one expert into contiguous ranges, one per
// goroutine.
func (q *MXFP8) run(e int, f func(lo, hi int)) {
	parallelRanges(q.units(), q.workers, f)
}

// parallelRanges splits [0, n) into w contiguous ranges (w = 0:
// GOMAXPROCS; at most n) and runs f on each in its own goroutine.
func parallelRanges(n, w int, f func(lo, hi int)) {
	if w == 0 {
		w = runtime.GOMAXPROCS(0)
	}
	if w > n {
		w = n
	}
	if w <= 1 {
		if n > 0 {
			f(0, n)
		}
		return
	}
	var wg sync.WaitGroup
	for i := 0; i < w; i++ {
		lo, hi := i*n/w, (i+1)*n/w
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(lo, hi)
		}()
	}
	wg.Wait()
}

// source is a row-major [Rows, Cols] expert matrix of f32 or bf16.
type source interface{ bits(i int) uint32 }

type srcF32 []float32

func (s srcF32) bits(i int) uint32 { return math.Float32bits(s[i]) }

type srcBF16 []uint16

func (s srcBF16) bits(i int) uint32 { return uint32(s[i]) << 16 }

func (q *MXFP8) quantRange(e, lo, hi int, src source) {
	t := e4m3Lookup()
	if q.Axis == AlongCols && !q.Transposed {
		nsf := ceilDiv(q.Cols, MXBlockSize)
		for r := lo; r < hi; r++ {
			dst := q.Data[(e*q.Rows+r)*q.Cols:][:q.Cols]
			sc := q.Scales[(e*q.Rows+r)*nsf:][:nsf]
			switch s := src.(type) {
			case srcF32:
				quantRowF32(dst, sc, s[r*q.Cols:][:q.Cols], q.Rule, t)
			case srcBF16:
				quantRowBF16(dst, sc, s[r*q.Cols:][:q.Cols], q.Rule, t)
			}
		}
		return
	}
	if q.Axis == AlongCols {
		q.quantColsTransposed(e, lo, hi, src, t)
		return
	}
	q.quantRows(e, lo, hi, src, t)
}

// quantRowF32 quantizes one row along its length (the hot loop of weight
// packing): full blocks through fixed-size arrays (no bounds checks, four
// independent amax chains), then the partial block.
func quantRowF32(dst, sc []uint8, src []float32, rule ScaleRule, t *[1 << 16]uint8) {
	nb := len(src) / MXBlockSize
	for b := 0; b < nb; b++ {
		blk := (*[MXBlockSize]float32)(src[b*MXBlockSize:])
		out := (*[MXBlockSize]uint8)(dst[b*MXBlockSize:])
		var m0, m1, m2, m3 uint32
		for i := 0; i < MXBlockSize; i += 4 {
			m0 = max(m0, math.Float32bits(blk[i])&0x7FFFFFFF)
			m1 = max(m1, math.Float32bits(blk[i+1])&0x7FFFFFFF)
			m2 = max(m2, math.Float32bits(blk[i+2])&0x7FFFFFFF)
			m3 = max(m3, math.Float32bits(blk[i+3])&0x7FFFFFFF)
		}
		code := scaleCode(max(max(m0, m1), max(m2, m3)), rule)
		sc[b] = code
		inv := ue8m0Reciprocal(code)
		for i := 0; i < MXBlockSize; i++ {
			out[i] = e4m3Fast(t, math.Float32bits(blk[i]*inv))
		}
	}
	if b := nb * MXBlockSize; b < len(src) {
		blk, out := src[b:], dst[b:len(src)]
		var amax uint32
		for _, v := range blk {
			amax = max(amax, math.Float32bits(v)&0x7FFFFFFF)
		}
		code := scaleCode(amax, rule)
		sc[nb] = code
		inv := ue8m0Reciprocal(code)
		for i, v := range blk {
			out[i] = e4m3Fast(t, math.Float32bits(v*inv))
		}
	}
}

// quantRowBF16 is quantRowF32 for bf16 input. The product of a bf16 value
// and a power of two has no bits below bit 16 unless it is an f32
// subnormal, which encodes as zero either way, so the sticky bit is not
// needed.
func quantRowBF16(dst, sc []uint8, src []uint16, rule ScaleRule, t *[1 << 16]uint8) {
	nb := len(src) / MXBlockSize
	for b := 0; b < nb; b++ {
		blk := (*[MXBlockSize]uint16)(src[b*MXBlockSize:])
		out := (*[MXBlockSize]uint8)(dst[b*MXBlockSize:])
		var m0, m1, m2, m3 uint16
		for i := 0; i < MXBlockSize; i += 4 {
			m0 = max(m0, blk[i]&0x7FFF)
			m1 = max(m1, blk[i+1]&0x7FFF)
			m2 = max(m2, blk[i+2]&0x7FFF)
			m3 = max(m3, blk[i+3]&0x7FFF)
		}
		code := scaleCode(uint32(max(max(m0, m1), max(m2, m3)))<<16, rule)
		sc[b] = code
		inv := ue8m0Reciprocal(code)
		for i := 0; i < MXBlockSize; i++ {
			out[i] = t[uint16(math.Float32bits(math.Float32frombits(uint32(blk[i])<<16)*inv)>>16)]
		}
	}
	if b := nb * MXBlockSize; b < len(src) {
		blk, out := src[b:], dst[b:len(src)]
		var amax uint16
		for _, v := range blk {
			amax = max(amax, v&0x7FFF)
		}
		code := scaleCode(uint32(amax)<<16, rule)
		sc[nb] = code
		inv := ue8m0Reciprocal(code)
		for i, v := range blk {
			out[i] = t[uint16(math.Float32bits(math.Float32frombits(uint32(v)<<16)*inv)>>16)]
		}
	}
}

// scaleCode is ScaleFromAmax of the f32 with bits a (sign clear), with an
// integer fast path for the common range. Comparing sign-cleared bit
// patterns as integers orders every NaN above Inf above the finite values,
// so a NaN anywhere in a block is its amax. Fast path, for amax a normal
// f32 with biased exponent e in [16, 254] (amax/448 is then a normal f32):
// amax = 1.m * 2^(e-127) and amax/448 = (1.m/1.75) * 2^(e-135), so the
// round-up code is e-8, plus 1 when 1.m > 1.75 (mantissa field >
// 0x600000); the OCP floor code is e-8. TestScaleCodeFastPath checks it
// against ScaleFromAmax.
func scaleCode(a uint32, rule ScaleRule) uint8 {
	e := a >> 23
	if e >= 16 && e < 255 {
		c := e - 8
		if rule == ScaleRoundUp && a&0x7FFFFF > 0x600000 {
			c++
		}
		return uint8(c)
	}
	return ScaleFromAmax(math.Float32frombits(a), rule)
}

// quantColsTransposed: blocks along cols, stored [E][Cols][Rows] with
// scales [E][ceil(Cols/32)][Rows]. Units are rows, taken 64 at a time so
// that the transposed writes of one column are contiguous.
func (q *MXFP8) quantColsTransposed(e, lo, hi int, src source, t *[1 << 16]uint8) {
	const chunk = 64
	var inv [chunk]float32
	nsf := ceilDiv(q.Cols, MXBlockSize)
	for r0 := lo; r0 < hi; r0 += chunk {
		r1 := min(r0+chunk, hi)
		for b := 0; b < nsf; b++ {
			c0, c1 := b*MXBlockSize, min((b+1)*MXBlockSize, q.Cols)
			for r := r0; r < r1; r++ {
				var amax uint32
				for c := c0; c < c1; c++ {
					amax = max(amax, src.bits(r*q.Cols+c)&0x7FFFFFFF)
				}
				code := scaleCode(amax, q.Rule)
				q.Scales[(e*nsf+b)*q.Rows+r] = code
				inv[r-r0] = ue8m0Reciprocal(code)
			}
			for c := c0; c < c1; c++ {
				out := q.Data[(e*q.Cols+c)*q.Rows:]
				for r := r0; r < r1; r++ {
					v := math.Float32frombits(src.bits(r*q.Cols+c)) * inv[r-r0]
					out[r] = e4m3Fast(t, math.Float32bits(v))
				}
			}
		}
	}
}

// quantRows: blocks along rows. Units are 32-row groups; columns are
// processed in strips so the per-column amax and reciprocal stay local, and
// the writes run along the stored rows (along c untransposed, along r
// transposed).
func (q *MXFP8) quantRows(e, lo, hi int, src source, t *[1 << 16]uint8) {
	const strip = 64
	var amax [strip]uint32
	var inv [strip]float32
	ng := ceilDiv(q.Rows, MXBlockSize)
	for g := lo; g < hi; g++ {
		r0, r1 := g*MXBlockSize, min((g+1)*MXBlockSize, q.Rows)
		for c0 := 0; c0 < q.Cols; c0 += strip {
			c1 := min(c0+strip, q.Cols)
			for c := c0; c < c1; c++ {
				amax[c-c0] = 0
			}
			for r := r0; r < r1; r++ {
				for c := c0; c < c1; c++ {
					amax[c-c0] = max(amax[c-c0], src.bits(r*q.Cols+c)&0x7FFFFFFF)
				}
			}
			for c := c0; c < c1; c++ {
				code := scaleCode(amax[c-c0], q.Rule)
				inv[c-c0] = ue8m0Reciprocal(code)
				if q.Transposed {
					q.Scales[(e*q.Cols+c)*ng+g] = code
				} else {
					q.Scales[(e*ng+g)*q.Cols+c] = code
				}
			}
			if q.Transposed {
				for c := c0; c < c1; c++ {
					out := q.Data[(e*q.Cols+c)*q.Rows:]
					for r := r0; r < r1; r++ {
						v := math.Float32frombits(src.bits(r*q.Cols+c)) * inv[c-c0]
						out[r] = e4m3Fast(t, math.Float32bits(v))
					}
				}
				continue
			}
			for r := r0; r < r1; r++ {
				out := q.Data[(e*q.Rows+r)*q.Cols:]
				for c := c0; c < c1; c++ {
					v := math.Float32frombits(src.bits(r*q.Cols+c)) * inv[c-c0]
					out[c] = e4m3Fast(t, math.Float32bits(v))
				}
			}
		}
	}
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// RegisterFedOrder is the order of the K elements inside each 32-element
// block of the bf16 activations that sm_90a's register-fed MXFP8 GEMM
// reads (codegen.GemmSpec.MXRegisterFed): position p (0..31) of a block
// holds the block's element RegisterFedOrder(p). The GEMM's consumer
// thread q (lane%4) loads the 8 consecutive e4m3 weights 8q..8q+7 of a
// block with one 8-byte load and splits each 4-byte word into its even
// and odd bytes (two bf16 pairs each); wgmma's A fragment places those
// at K positions 2q, 2q+1 (+8, +16, +24) of the block (PTX ISA
// 9.7.15.5.1.1, the A fragment of m64nNk16 .bf16), so the activations,
// wgmma's B, take the same order: position p = 8h + 2q + j (h 0..3, j 0..1)
// holds element 8q + 4(h/2) + h%2 + 2j. A permutation within the block,
// so the block's scale and its products' sum are unchanged.
func RegisterFedOrder(p int) int {
	q, h, j := (p%8)/2, (p/8)%4, p%2
	return 32*(p/32) + 8*q + 4*(h/2) + h%2 + 2*j
}
