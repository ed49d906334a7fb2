package layouts

import (
	"fmt"
	"math"
)

// BF16NaN is the canonical bf16 NaN (0x7FFF) that BF16FromF32 returns for
// every NaN input, as cvt.rn.bf16.f32 and CUDA's __float2bfloat16_rn do
// (cuda_bf16.hpp host path: NaN -> 0x7FFF, sign dropped).
const BF16NaN uint16 = 0x7FFF

// BF16FromF32 converts an f32 to bf16 (bit pattern, 1 sign, 8 exponent, 7
// mantissa bits) with round-to-nearest-even, as PTX cvt.rn.bf16.f32: values
// beyond the largest bf16 round to +-Inf, subnormals are kept (no flush),
// signed zeros keep their sign, every NaN gives BF16NaN.
func BF16FromF32(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7FFFFFFF > 0x7F800000 {
		return BF16NaN
	}
	// Add 0x7FFF plus the lowest kept bit: ties go to the even result.
	b += 0x7FFF + (b>>16)&1
	return uint16(b >> 16)
}

// F32FromBF16 widens a bf16 bit pattern to f32 exactly (every bf16 value,
// NaN payloads included, is an f32).
func F32FromBF16(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// BF16FromF32Slice converts src to bf16 element by element into dst (same
// length, else an error); see BF16FromF32.
func BF16FromF32Slice(dst []uint16, src []float32) error {
	return convertSlice("BF16FromF32Slice", dst, src, BF16FromF32)
}

// F32FromBF16Slice widens src into dst (same length, else an error).
func F32FromBF16Slice(dst []float32, src []uint16) error {
	return convertSlice("F32FromBF16Slice", dst, src, F32FromBF16)
}

// convertSlice sets dst[i] = f(src[i]); name is the caller, for the error
// when the lengths differ.
func convertSlice[D, S any](name string, dst []D, src []S, f func(S) D) error {
	if len(dst) != len(src) {
		return fmt.Errorf("layouts: %s: %d outputs for %d inputs", name, len(dst), len(src))
	}
	for i, x := range src {
		dst[i] = f(x)
	}
	return nil
}
