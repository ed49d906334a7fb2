package schedule

import (
	"fmt"

	"github.com/mokc/mokc/layouts"
)

// MXActivations is the value an mxfp8 layer's routed GEMM computes with
// for its activation operand A [n, k] (row-major, k a multiple of 32): each
// row's blocks of 32 consecutive elements along k (the reduction
// dimension) quantized to MXFP8 and dequantized, as the kernels quantize
// the rows entering FC1 (the dispatched bf16 rows, along H) and FC2 (the
// activation h, along I) before the FP8 MMA.
//
// Each element is first rounded to float32 (the kernels hold x as bf16 and
// h as f32, both exact in f32; the register-fed forward stores h as bf16
// rounded to odd, which quantizes to the same bytes: docs/mxfp8.md); the blocks are then quantized exactly as
// the routed weights are (layouts.Quantize along the columns with
// layouts.ScaleRoundUp, Transformer Engine's rule; OCP Microscaling
// Formats v1.0 MXFP8: E4M3 elements, one UE8M0 scale per 32): the scale X
// is the smallest power of two with amax/X <= 448, so no element
// saturates, and each element is E4M3(v/X) (round to nearest even) times X.
// Special blocks (layouts.Quantize): amax = 0 gives X = 2^-127 and zeros; a
// tiny amax keeps X = 2^-127 and flushes what falls below E4M3's smallest
// subnormal times X; a NaN makes the whole block NaN; an Inf (without NaN)
// gives X = 2^127, keeps the Inf and flushes the block's finite elements
// to zero or the subnormals they round to. The result is a new slice.
func MXActivations(a []float64, n, k int) []float64 {
	src := make([]float32, n*k)
	for i, v := range a[:n*k] {
		src[i] = float32(v)
	}
	mxInPlace(src, n, k)
	out := make([]float64, n*k)
	for i, v := range src {
		out[i] = float64(v)
	}
	return out
}

// MXWeights returns w with the routed experts' FC1 and FC2 replaced by
// their MXFP8 values for an mxfp8 layer l: each row quantized along K (H
// for FC1, I for FC2) as layouts.Quantize does with the round-up scale,
// then dequantized (E4M3 times scale). These are the weights Forward
// computes with for l; the shared experts, biases and gate are w's. A
// bf16 layer gets w unchanged. Errors: l invalid, or weights of the wrong
// size.
func MXWeights(l Layer, w Weights) (Weights, error) {
	if err := l.Validate(); err != nil {
		return Weights{}, err
	}
	if l.Precision != MXFP8 {
		return w, nil
	}
	out := w
	out.FC1, out.FC2 = make([][]float32, len(w.FC1)), make([][]float32, len(w.FC2))
	H, I := l.Hidden, l.Intermediate
	for e := range w.FC1 {
		var err error
		if out.FC1[e], err = mxRoundTrip(w.FC1[e], 2*I, H); err != nil {
			return Weights{}, fmt.Errorf("FC1 of expert %d: %w", e, err)
		}
		if out.FC2[e], err = mxRoundTrip(w.FC2[e], H, I); err != nil {
			return Weights{}, fmt.Errorf("FC2 of expert %d: %w", e, err)
		}
	}
	return out, nil
}

// mxInPlace replaces m [rows, k] with its MXFP8 values (mxRoundTrip).
func mxInPlace(m []float32, rows, k int) {
	v, err := mxRoundTrip(m, rows, k)
	if err != nil {
		panic(err) // the generator's own shapes: a bug
	}
	copy(m, v)
}

// mxRoundTrip is the MXFP8 value of m [rows, k] quantized along k with
// layouts.Quantize's default options (blocks along the rows' columns, the
// round-up scale); nil stays nil (an expert without weights).
func mxRoundTrip(m []float32, rows, k int) ([]float32, error) {
	if m == nil {
		return nil, nil
	}
	q, err := layouts.Quantize(m, 1, rows, k, layouts.QuantizeOptions{})
	if err != nil {
		return nil, err
	}
	return q.Dequantize(), nil
}
