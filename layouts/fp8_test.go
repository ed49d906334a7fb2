package layouts

import (
	"math"
	"os"
	"testing"
)

// bf16Oracle rounds f to the nearest bf16 by comparing the two candidates
// in float64 (ties to the even pattern).
func bf16Oracle(f float32) uint16 {
	if f != f {
		return BF16NaN
	}
	b := math.Float32bits(f)
	lo := uint16(b >> 16)
	hi := lo + 1
	x := math.Abs(float64(f))
	dl := x - math.Abs(float64(F32FromBF16(lo)))
	vh := math.Abs(float64(F32FromBF16(hi)))
	if hi&0x7FFF == 0x7F80 { // rounding up overflows to Inf: compare with 2^128
		vh = math.Ldexp(1, 128)
	}
	dh := vh - x
	switch {
	case dl < dh:
		return lo
	case dh < dl:
		return hi
	case lo&1 == 0:
		return lo
	}
	return hi
}

func TestBF16(t *testing.T) {
	r := newRand(t)
	check := func(f float32) {
		t.Helper()
		if got, want := BF16FromF32(f), bf16Oracle(f); got != want {
			t.Fatalf("BF16FromF32(%g = 0x%08x) = 0x%04x, want 0x%04x", f, math.Float32bits(f), got, want)
		}
	}
	for i := 0; i < 200000; i++ {
		b := r.Uint32()
		if b&0x7FFFFFFF >= 0x7F800000 {
			continue
		}
		check(math.Float32frombits(b))
		// Exact ties: the low 16 bits 0x8000.
		check(math.Float32frombits(b&0xFFFF0000 | 0x8000))
	}
	for _, c := range []struct {
		in   uint32
		want uint16
	}{
		{0x3F808000, 0x3F80}, // tie, even below
		{0x3F818000, 0x3F82}, // tie, odd below: up
		{0x3F808001, 0x3F81},
		{0x7F7FFFFF, 0x7F80}, // max f32 rounds to Inf
		{0x7F800000, 0x7F80},
		{0xFF800000, 0xFF80},
		{0x00000001, 0x0000}, // smallest subnormal
		{0x00008000, 0x0000}, // tie at zero
		{0x00018000, 0x0002},
		{0x80000000, 0x8000},
		{0x7FC00000, BF16NaN},
		{0xFFC00001, BF16NaN},
		{0x7F800001, BF16NaN}, // NaN with a payload only in the low bits stays NaN
	} {
		if got := BF16FromF32(math.Float32frombits(c.in)); got != c.want {
			t.Errorf("BF16FromF32(0x%08x) = 0x%04x, want 0x%04x", c.in, got, c.want)
		}
	}
	for h := 0; h < 1<<16; h++ {
		f := F32FromBF16(uint16(h))
		if math.Float32bits(f) != uint32(h)<<16 {
			t.Fatalf("F32FromBF16(0x%04x) is not exact", h)
		}
		if f == f && BF16FromF32(f) != uint16(h) {
			t.Fatalf("round trip of 0x%04x", h)
		}
	}
	src := []float32{1, -2.5, float32(math.NaN()), 3.14159}
	dst := make([]uint16, 4)
	if err := BF16FromF32Slice(dst, src); err != nil || dst[0] != 0x3F80 || dst[1] != 0xC020 || dst[2] != BF16NaN || dst[3] != 0x4049 {
		t.Fatalf("BF16FromF32Slice = %x, %v", dst, err)
	}
	back := make([]float32, 4)
	if err := F32FromBF16Slice(back, dst); err != nil || back[1] != -2.5 {
		t.Fatalf("F32FromBF16Slice = %v, %v", back, err)
	}
	if BF16FromF32Slice(dst[:3], src) == nil || F32FromBF16Slice(back[:1], dst) == nil {
		t.Fatal("length mismatch accepted")
	}
}

func TestE4M3DecodeAll256(t *testing.T) {
	known := map[uint8]float64{
		0x00: 0, 0x01: 1.0 / 512, 0x07: 7.0 / 512, 0x08: 1.0 / 64, 0x0F: 1.875 / 64,
		0x38: 1, 0x3F: 1.875, 0x40: 2, 0x77: 240, 0x78: 256, 0x7E: 448,
		0xB8: -1, 0xFE: -448, 0x81: -1.0 / 512,
	}
	for c, v := range known {
		if got := F32FromE4M3(c); float64(got) != v {
			t.Errorf("F32FromE4M3(0x%02x) = %g, want %g", c, got, v)
		}
	}
	if z := F32FromE4M3(0x80); z != 0 || !math.Signbit(float64(z)) {
		t.Error("0x80 is not -0")
	}
	for _, c := range []uint8{0x7F, 0xFF} {
		if v := F32FromE4M3(c); v == v {
			t.Errorf("F32FromE4M3(0x%02x) = %g, want NaN", c, v)
		}
	}
	// Codes 0x00..0x7E are strictly increasing and the negative half mirrors
	// them; every finite code survives a round trip.
	for c := 0; c < 0x7F; c++ {
		if c > 0 && !(F32FromE4M3(uint8(c)) > F32FromE4M3(uint8(c-1))) {
			t.Fatalf("0x%02x is not above 0x%02x", c, c-1)
		}
		if F32FromE4M3(uint8(c|0x80)) != -F32FromE4M3(uint8(c)) {
			t.Fatalf("0x%02x does not mirror 0x%02x", c|0x80, c)
		}
		for _, s := range []int{0, 0x80} {
			if got := E4M3FromF32(F32FromE4M3(uint8(c | s))); got != uint8(c|s) {
				t.Fatalf("round trip of 0x%02x gives 0x%02x", c|s, got)
			}
		}
	}
}

// e4m3Oracle encodes by searching the nearest of the 127 finite magnitudes
// (ties to the even code), saturating above 448 and sending NaN to 0x7F.
func e4m3Oracle(f float32) uint8 {
	if f != f {
		return 0x7F
	}
	sign := uint8(0)
	if math.Signbit(float64(f)) {
		sign = 0x80
	}
	x := math.Abs(float64(f))
	if x > 448 {
		return sign | 0x7E
	}
	best, bestD := 0, math.Inf(1)
	for c := 0; c <= 0x7E; c++ {
		d := math.Abs(float64(F32FromE4M3(uint8(c))) - x)
		if d < bestD || (d == bestD && c&1 == 0) {
			best, bestD = c, d
		}
	}
	return sign | uint8(best)
}

func TestE4M3Encode(t *testing.T) {
	r := newRand(t)
	tab := e4m3Lookup()
	check := func(f float32) {
		t.Helper()
		want := e4m3Oracle(f)
		if got := E4M3FromF32(f); got != want {
			t.Fatalf("E4M3FromF32(%g = 0x%08x) = 0x%02x, want 0x%02x", f, math.Float32bits(f), got, want)
		}
		if got := e4m3Fast(tab, math.Float32bits(f)); got != want {
			t.Fatalf("table encode of %g (0x%08x) = 0x%02x, want 0x%02x", f, math.Float32bits(f), got, want)
		}
	}
	// Every midpoint between neighbouring magnitudes (an exact tie), and the
	// floats just below and above it.
	for c := 0; c < 0x7E; c++ {
		lo, hi := float64(F32FromE4M3(uint8(c))), float64(F32FromE4M3(uint8(c+1)))
		mid := float32((lo + hi) / 2)
		for _, f := range []float32{mid, math.Nextafter32(mid, 0), math.Nextafter32(mid, 1000), F32FromE4M3(uint8(c))} {
			check(f)
			check(-f)
		}
	}
	for _, c := range []struct {
		in   float32
		want uint8
	}{
		{448, 0x7E}, {-448, 0xFE}, {449, 0x7E}, {464, 0x7E}, {480, 0x7E}, {1e30, 0x7E},
		{float32(math.Inf(1)), 0x7E}, {float32(math.Inf(-1)), 0xFE},
		{float32(math.NaN()), 0x7F}, {math.Float32frombits(0xFFC00000), 0x7F}, {math.Float32frombits(0x7F800001), 0x7F},
		{float32(math.Ldexp(1, -10)), 0x00}, {math.Nextafter32(float32(math.Ldexp(1, -10)), 1), 0x01},
		{-float32(math.Ldexp(1, -10)), 0x80}, {float32(math.Ldexp(3, -11)), 0x01}, // 0.75 of the smallest subnormal
		{math.Float32frombits(1), 0x00}, {math.Float32frombits(0x80000001), 0x80}, {0, 0}, {float32(math.Copysign(0, -1)), 0x80},
		{1, 0x38}, {1.0625, 0x38}, {1.0625 + 1.0/1024, 0x39}, {1.1875, 0x3A}, // ties to even at 1.0625 (down) and 1.1875 (up)
	} {
		if got := E4M3FromF32(c.in); got != c.want {
			t.Errorf("E4M3FromF32(%g) = 0x%02x, want 0x%02x", c.in, got, c.want)
		}
		check(c.in)
	}
	// Random magnitudes across and beyond the E4M3 range, random bit patterns.
	for i := 0; i < 100000; i++ {
		f := float32(math.Ldexp(r.Float64()+0.5, r.Intn(40)-25))
		if r.Intn(2) == 0 {
			f = -f
		}
		check(f)
		check(math.Float32frombits(r.Uint32()))
	}
}

func TestUE8M0Codec(t *testing.T) {
	if b := math.Float32bits(F32FromUE8M0(0)); b != 0x00400000 {
		t.Fatalf("code 0 decodes to bits 0x%08x, want 2^-127 = 0x00400000", b)
	}
	if v := F32FromUE8M0(0xFF); v == v {
		t.Fatal("0xFF is not NaN")
	}
	for c := 0; c < 255; c++ {
		v := F32FromUE8M0(uint8(c))
		if float64(v) != math.Ldexp(1, c-127) {
			t.Fatalf("F32FromUE8M0(%d) = %g", c, v)
		}
		if r := ue8m0Reciprocal(uint8(c)); float64(r) != math.Ldexp(1, 127-c) {
			t.Fatalf("reciprocal of %d = %g", c, r)
		}
		if UE8M0RoundUp(v) != uint8(c) || UE8M0RoundDown(v) != uint8(c) {
			t.Fatalf("round trip of UE8M0 %d: up %d down %d", c, UE8M0RoundUp(v), UE8M0RoundDown(v))
		}
	}
}

// specialCode is the UE8M0 code of NaN (0xFF), infinities (0xFE) and 0
// (0) under both rules; ok is false for finite non-zero x.
func specialCode(x float32) (code uint8, ok bool) {
	switch {
	case x != x:
		return 0xFF, true
	case math.IsInf(float64(x), 0):
		return 0xFE, true
	case x == 0:
		return 0, true
	}
	return 0, false
}

// ceilLog2Code is the definition of the round-up rule with a different
// method: the smallest k in [-127, 127] with 2^k >= x, from math.Frexp.
func ceilLog2Code(x float32) uint8 {
	if c, ok := specialCode(x); ok {
		return c
	}
	fr, e := math.Frexp(math.Abs(float64(x))) // x = fr * 2^e, fr in [0.5, 1)
	k := e
	if fr == 0.5 {
		k = e - 1
	}
	return clampScaleExp(k)
}

// floorLog2Code is the round-down rule: the largest k with 2^k <= x.
func floorLog2Code(x float32) uint8 {
	if c, ok := specialCode(x); ok {
		return c
	}
	_, e := math.Frexp(math.Abs(float64(x)))
	return clampScaleExp(e - 1)
}

// TestUE8M0RoundUpMatchesCeil checks that Transformer Engine's integer
// fallback (UE8M0RoundUp) is the ceil-log2 rule of cvt.rp.satfinite.ue8m0x2
// on random and edge floats.
func TestUE8M0RoundUpMatchesCeil(t *testing.T) {
	r := newRand(t)
	var edge []float32
	for k := -149; k <= 127; k++ {
		p := float32(math.Ldexp(1, k))
		edge = append(edge, p, math.Nextafter32(p, 0), math.Nextafter32(p, float32(math.Inf(1))))
	}
	edge = append(edge, 0, math.Float32frombits(1), math.Float32frombits(0x00400000), math.Float32frombits(0x00400001),
		math.Float32frombits(0x003FFFFF), math.Float32frombits(0x007FFFFF), math.MaxFloat32,
		float32(math.Inf(1)), float32(math.NaN()), math.Float32frombits(0x7F800001))
	for _, x := range edge {
		if got, want := UE8M0RoundUp(x), ceilLog2Code(x); got != want {
			t.Fatalf("UE8M0RoundUp(%g = 0x%08x) = %d, ceil rule %d", x, math.Float32bits(x), got, want)
		}
		if got, want := UE8M0RoundDown(x), floorLog2Code(x); got != want {
			t.Fatalf("UE8M0RoundDown(%g = 0x%08x) = %d, floor rule %d", x, math.Float32bits(x), got, want)
		}
	}
	for i := 0; i < 1000000; i++ {
		x := math.Float32frombits(r.Uint32() & 0x7FFFFFFF)
		if got, want := UE8M0RoundUp(x), ceilLog2Code(x); got != want {
			t.Fatalf("UE8M0RoundUp(%g = 0x%08x) = %d, ceil rule %d", x, math.Float32bits(x), got, want)
		}
		if got, want := UE8M0RoundDown(x), floorLog2Code(x); got != want {
			t.Fatalf("UE8M0RoundDown(%g = 0x%08x) = %d, floor rule %d", x, math.Float32bits(x), got, want)
		}
	}
	// Worked values: code 0 is 2^-127; 0x00400001 is above it.
	for _, c := range []struct {
		bits uint32
		want uint8
	}{{0x00400000, 0}, {0x00400001, 1}, {0x00800000, 1}, {0x00800001, 2}, {0x3F800000, 127}, {0x3F800001, 128}, {0x7F000000, 254}, {0x7F000001, 254}} {
		if got := UE8M0RoundUp(math.Float32frombits(c.bits)); got != c.want {
			t.Errorf("UE8M0RoundUp(0x%08x) = %d, want %d", c.bits, got, c.want)
		}
	}
}

// TestRoundUpRuleDivisionEqualsTEMultiply checks, for every finite f32 amax
// (about 11 s), that the scale code from amax/448 equals the one from
// Transformer Engine's amax * float(1/448). Run with MOKC_LONG=1.
func TestRoundUpRuleDivisionEqualsTEMultiply(t *testing.T) {
	if os.Getenv("MOKC_LONG") != "1" {
		t.Skip("exhaustive over 2^31 floats; set MOKC_LONG=1")
	}
	rcp := float32(1.0 / 448.0)
	for b := uint32(0); b < 0x7F800000; b++ {
		a := math.Float32frombits(b)
		if UE8M0RoundUp(a/448) != UE8M0RoundUp(a*rcp) {
			t.Fatalf("amax 0x%08x: division gives %d, multiply %d", b, UE8M0RoundUp(a/448), UE8M0RoundUp(a*rcp))
		}
	}
}

// TestScaleCodeFastPath checks the quantizer's integer scale computation
// against ScaleFromAmax, the definition, for both rules: every exponent
// with edge mantissas, and random amax values; with MOKC_LONG=1 every f32.
func TestScaleCodeFastPath(t *testing.T) {
	r := newRand(t)
	check := func(a uint32) {
		for _, rule := range []ScaleRule{ScaleRoundUp, ScaleOCPFloor} {
			if got, want := scaleCode(a, rule), ScaleFromAmax(math.Float32frombits(a), rule); got != want {
				t.Fatalf("%v amax 0x%08x: fast %d, ScaleFromAmax %d", rule, a, got, want)
			}
		}
	}
	for e := uint32(0); e < 256; e++ {
		for _, m := range []uint32{0, 1, 0x400000, 0x5FFFFF, 0x600000, 0x600001, 0x7FFFFE, 0x7FFFFF} {
			check(e<<23 | m)
		}
	}
	for i := 0; i < 1000000; i++ {
		check(r.Uint32() & 0x7FFFFFFF)
	}
	if os.Getenv("MOKC_LONG") == "1" {
		for a := uint32(0); a <= 0x7FFFFFFF; a++ {
			check(a)
		}
	}
}

// TestMXValuesInBF16: every MXFP8 value, an E4M3 code times a UE8M0 scale
// held in f32 (as the reference holds it), is exactly a bf16 value when the
// scale is at least 2^-124 (code 3): E4M3's 4 significant bits fit bf16's
// 8, and bf16 has f32's exponent range. Below that only 96 of the products
// land among f32 subnormals that bf16 cannot hold; a block scale that
// small needs a block amax under 448 * 2^-125. This is what lets a Hopper
// kernel expand MXFP8 operands to bf16 exactly (docs/mxfp8.md).
func TestMXValuesInBF16(t *testing.T) {
	inexact, minCode := 0, 255
	for s := 0; s < 255; s++ {
		for c := 0; c < 256; c++ {
			q := float64(F32FromE4M3(uint8(c)))
			if math.IsNaN(q) || q == 0 {
				continue
			}
			v := float32(q * math.Ldexp(1, s-127))
			if v != float32(float64(F32FromE4M3(uint8(c)))*float64(F32FromUE8M0(uint8(s)))) {
				t.Fatalf("code %#x scale %d: the product is not the f32 product", c, s)
			}
			if F32FromBF16(BF16FromF32(v)) != v {
				inexact++
				minCode = min(minCode, s)
				if s >= 3 {
					t.Errorf("E4M3 %#x x 2^%d = %g is not a bf16 value", c, s-127, v)
				}
			}
		}
	}
	if inexact != 96 || minCode != 0 {
		t.Errorf("%d products are not bf16 values (the smallest scale code among them %d), want 96 (all at codes 0..2)", inexact, minCode)
	}
}
