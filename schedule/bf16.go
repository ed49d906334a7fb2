package schedule

import (
	"math"

	"github.com/mokc/mokc/layouts"
)

// RoundBF16 rounds a float32 to the nearest bfloat16 value (round to nearest
// even; NaN stays NaN, overflow goes to ±Inf) and returns it as a float32:
// layouts.BF16FromF32 widened back. bfloat16 is the upper half of an IEEE
// binary32: 1 sign, 8 exponent and 7 fraction bits.
func RoundBF16(v float32) float32 {
	return layouts.F32FromBF16(layouts.BF16FromF32(v))
}

// IsBF16 reports whether v is exactly representable as a bfloat16.
func IsBF16(v float32) bool {
	return math.Float32bits(v)&0xFFFF == 0 || v != v
}

// roundBF16From64 rounds a float64 to the nearest bfloat16 value directly
// (one rounding, round to nearest even), returned as a float32.
func roundBF16From64(v float64) float32 {
	if math.IsNaN(v) || math.IsInf(v, 0) || v == 0 {
		return float32(v)
	}
	a := math.Abs(v)
	// Quantum of bfloat16 at a: 2^(e-7) for normal values (e = exponent of
	// a), 2^-133 in the subnormal range below 2^-126.
	_, e := math.Frexp(a) // a = f * 2^e, f in [0.5, 1)
	q := e - 1 - 7
	if q < -133 {
		q = -133
	}
	r := math.Ldexp(math.RoundToEven(math.Ldexp(v, -q)), q)
	if math.Abs(r) >= 0x1p128 {
		return float32(math.Copysign(math.Inf(1), v))
	}
	return float32(r)
}
