package layouts

import (
	"math"
	"sync"
)

// E4M3 (OCP 8-bit floating point "FP8 E4M3", also float8_e4m3fn): 1 sign
// bit, 4 exponent bits with bias 7, 3 mantissa bits; no infinities; only
// S.1111.111 (0x7F, 0xFF) is NaN, so 0x7E = 1.75*2^8 = 448 is the largest
// finite value; subnormals are m/8 * 2^-6, the smallest 2^-9.
// Source: OCP Microscaling Formats (MX) v1.0 (element formats); PTX ISA
// "Alternate floating-point data formats".
const (
	E4M3Max    = 448.0 // largest finite E4M3 value
	E4M3MaxExp = 8     // exponent of E4M3Max (emax_elem of the OCP MX spec)
	E4M3NaN    = 0x7F  // the NaN code E4M3FromF32 returns
)

// E4M3FromF32 encodes f as E4M3 (code in the low 8 bits) with the semantics
// of PTX cvt.rn.satfinite.e4m3x2.f32 (PTX ISA, cvt): round to
// nearest, ties to even, directly from f32 (no intermediate rounding);
// |f| > 448 (Inf included) saturates to +-448 (0x7E/0xFE); |f| <= 2^-10
// (half the smallest subnormal) gives a signed zero (0x00/0x80); the sign of
// zero is kept. Every NaN gives 0x7F, the sign dropped: the ISA says only
// "NaN -> NaN"; 0x7F is what CUDA's host emulation of this instruction
// (cuda_fp8.hpp __nv_cvt_float_to_fp8: canonical NaN, then 0x7F) produces,
// and the GPU test compares it with the hardware.
func E4M3FromF32(f float32) uint8 {
	b := math.Float32bits(f)
	sign := uint8(b>>24) & 0x80
	a := b & 0x7FFFFFFF
	if a > 0x7F800000 {
		return E4M3NaN
	}
	if a >= 0x43E00000 { // >= 448: 448 itself, or saturate
		return sign | 0x7E
	}
	e := int(a>>23) - 127 // unbiased f32 exponent (f32 subnormals: < -126)
	if e < -10 {
		// |f| < 2^-10: at most half the smallest subnormal, rounds to 0.
		return sign
	}
	sig := a&0x7FFFFF | 0x800000 // 24-bit significand, value sig*2^(e-23)
	var code uint32
	if e >= -6 {
		// Normal result: keep 3 mantissa bits (shift 20).
		q := rneShift(sig, 20) // in [8, 16]
		code = uint32(e+7)<<3 + q - 8
		// q == 16 carries into the exponent: (e+7)<<3 + 8 = (e+8)<<3.
	} else {
		// Subnormal result: units of 2^-9, value sig*2^(e-23) / 2^-9.
		code = rneShift(sig, uint(14-e)) // in [0, 8]; 8 is the smallest normal
	}
	if code > 0x7E {
		code = 0x7E
	}
	return sign | uint8(code)
}

// rneShift returns x >> s rounded to nearest, ties to even (1 <= s < 32).
func rneShift(x uint32, s uint) uint32 {
	q := x >> s
	rem := x & (1<<s - 1)
	half := uint32(1) << (s - 1)
	if rem > half || (rem == half && q&1 == 1) {
		q++
	}
	return q
}

// F32FromE4M3 decodes an E4M3 code exactly (every E4M3 value is an f32);
// 0x7F and 0xFF give NaN.
func F32FromE4M3(c uint8) float32 { return e4m3Decode[c] }

var e4m3Decode = func() (t [256]float32) {
	for c := 0; c < 256; c++ {
		e, m := (c>>3)&0xF, c&7
		var v float64
		switch {
		case e == 0xF && m == 7:
			v = math.NaN()
		case e == 0:
			v = math.Ldexp(float64(m), -9)
		default:
			v = math.Ldexp(float64(8+m), e-10)
		}
		if c&0x80 != 0 {
			v = -v
		}
		t[c] = float32(v)
	}
	return
}()

// e4m3Table maps the upper 16 bits of an f32, with bit 0 ORed with "any of
// the lower 16 bits set", to its E4M3 code. That is exact: the rounding
// point of every E4M3 result lies at or above f32 mantissa bit 19, so the
// lower 16 bits only act as a sticky bit (and keep a NaN a NaN). Built on
// first use from E4M3FromF32.
var (
	e4m3TableOnce sync.Once
	e4m3Table     *[1 << 16]uint8
)

func e4m3Lookup() *[1 << 16]uint8 {
	e4m3TableOnce.Do(func() {
		t := new([1 << 16]uint8)
		for h := 0; h < 1<<16; h++ {
			f := math.Float32frombits(uint32(h) << 16)
			if h&1 == 1 && uint32(h)<<16&0x7FFFFFFF < 0x7F800000 {
				// The sticky bit: any value strictly between this pattern
				// and the next has the same code; use one just above.
				f = math.Float32frombits(uint32(h)<<16 | 0x8000)
			}
			t[h] = E4M3FromF32(f)
		}
		e4m3Table = t
	})
	return e4m3Table
}

// e4m3Fast encodes like E4M3FromF32 through the table. (b&0xFFFF)+0xFFFF
// reaches bit 16 exactly when a low bit is set, and stays below bit 17, so
// ORing it into b sets the sticky bit and leaves the upper 16 bits alone.
func e4m3Fast(t *[1 << 16]uint8, b uint32) uint8 {
	return t[uint16((b|(b&0xFFFF+0xFFFF))>>16)]
}

// UE8M0 (OCP MX "E8M0" shared scale): 8 exponent bits, bias 127, no sign,
// no mantissa: code e means 2^(e-127) for e in 0..254 (code 0 is 2^-127, an
// f32 subnormal, not 0); 0xFF is NaN. Source: OCP Microscaling Formats (MX)
// v1.0 (scale format E8M0).
const UE8M0NaN = 0xFF

// F32FromUE8M0 decodes a UE8M0 scale: 2^(c-127) exactly (code 0 gives
// 2^-127 = 0x00400000 as f32 bits), NaN for 0xFF.
func F32FromUE8M0(c uint8) float32 {
	if c == UE8M0NaN {
		return float32(math.NaN())
	}
	if c == 0 {
		return math.Float32frombits(0x00400000)
	}
	return math.Float32frombits(uint32(c) << 23)
}

// ue8m0Reciprocal returns 1/2^(c-127) = 2^(127-c) exactly as f32 (code 254
// gives 2^-127, an f32 subnormal), NaN for 0xFF.
func ue8m0Reciprocal(c uint8) float32 {
	switch c {
	case UE8M0NaN:
		return float32(math.NaN())
	case 254:
		return math.Float32frombits(0x00400000)
	}
	return math.Float32frombits(uint32(254-c) << 23)
}

// UE8M0RoundUp encodes x >= 0 as the smallest power of two 2^k >= x, k
// clamped to [-127, 127] (saturating, never NaN for a number): the
// semantics of PTX cvt.rp.satfinite.ue8m0x2.f32 (sm_100a) and, bit for bit,
// of Transformer Engine's integer fallback for older GPUs, which this
// function is: NaN -> 0xFF, Inf -> 0xFE, 0 -> 0x00; otherwise e = the f32
// biased exponent field, m = the mantissa field, and e is incremented when
// m > 0, e != 0xFE and not (e == 0 and m <= 0x400000). The sign bit of x is
// ignored (as the fallback's 8-bit truncation ignores it). Sources: PTX ISA,
// cvt (the .ue8m0x2 destination format with .rp.satfinite); Transformer
// Engine common/util/ptx.cuh float_to_e8m0.
func UE8M0RoundUp(x float32) uint8 {
	b := math.Float32bits(x) & 0x7FFFFFFF
	switch {
	case b > 0x7F800000:
		return 0xFF
	case b == 0x7F800000:
		return 0xFE
	case b == 0:
		return 0
	}
	e := b >> 23
	m := b & 0x7FFFFF
	if m > 0 && e != 0xFE && !(e == 0 && m <= 0x400000) {
		e++
	}
	return uint8(e)
}

// UE8M0RoundDown encodes x >= 0 as the largest power of two 2^k <= x, k
// clamped to [-127, 127]: floor(log2 x) as a UE8M0 code (0 and anything
// below 2^-127 give 0x00, Inf and anything >= 2^127 give 0xFE, NaN 0xFF);
// the sign is ignored. It is the floor the OCP MX reference scale rule
// takes.
func UE8M0RoundDown(x float32) uint8 {
	k, ok := floorLog2(x)
	if !ok {
		return 0xFF
	}
	return clampScaleExp(k)
}

// floorLog2 returns floor(log2 |x|) for finite non-zero x, math.MinInt32
// for 0 and math.MaxInt32 for Inf; ok is false for NaN.
func floorLog2(x float32) (int, bool) {
	b := math.Float32bits(x) & 0x7FFFFFFF
	switch {
	case b > 0x7F800000:
		return 0, false
	case b == 0x7F800000:
		return math.MaxInt32, true
	case b == 0:
		return math.MinInt32, true
	}
	e := int(b >> 23)
	if e == 0 { // subnormal: value m * 2^-149
		m := b & 0x7FFFFF
		k := -149
		for m > 1 {
			m >>= 1
			k++
		}
		return k, true
	}
	return e - 127, true
}

// clampScaleExp returns the UE8M0 code of 2^k with k clamped to [-127, 127].
func clampScaleExp(k int) uint8 {
	if k < -127 {
		k = -127
	}
	if k > 127 {
		k = 127
	}
	return uint8(k + 127)
}
