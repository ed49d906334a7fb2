package layouts

import "testing"

// Values worked out by hand from the bit tables of PTX ISA 9.7.15.5.1.2.2
// (wgmma matrix descriptor) and 9.7.16.4.1 (tcgen05 shared memory
// descriptor); the sm_100 128B value also comes out of CUTLASS's
// UMMA::SmemDescriptor bit-field union (cute/arch/mma_sm100_desc.hpp) with
// the same fields set.
func TestSmemDescriptorsByHand(t *testing.T) {
	for _, c := range []struct {
		name string
		d    SmemDescriptor
		sm90 uint64 // 0 = not encodable on sm_90
		sm10 uint64
	}{
		// start 0x400>>4 = 0x40; SBO 1024>>4 = 0x40 at bit 32; 128B: sm_90
		// code 1 at bit 62, sm_100 code 2 at bit 61 (the same bit) plus the
		// fixed 0b001 at bit 46.
		{"128B LBO 0", SmemDescriptor{Start: 0x400, SBO: 1024, Swizzle: Swizzle128B}, 0x4000004000000040, 0x4000404000000040},
		// LBO 16 -> field 1 at bit 16.
		{"128B LBO 16", SmemDescriptor{Start: 0x400, LBO: 16, SBO: 1024, Swizzle: Swizzle128B}, 0x4000004000010040, 0x4000404000010040},
		// No swizzle: start 0x1230 -> 0x123; LBO 2048 -> 0x80<<16; SBO 128 -> 8<<32.
		{"none", SmemDescriptor{Start: 0x1230, LBO: 2048, SBO: 128}, 0x0000000800800123, 0x0000400800800123},
		// 64B: sm_90 code 2 at bit 62 = sm_100 code 4 at bit 61.
		{"64B", SmemDescriptor{Start: 0x800, LBO: 16, SBO: 512, Swizzle: Swizzle64B}, 0x8000002000010080, 0x8000402000010080},
		// 32B: sm_90 code 3 at bit 62 = sm_100 code 6 at bit 61.
		{"32B", SmemDescriptor{Start: 0x100, SBO: 256, Swizzle: Swizzle32B}, 0xC000001000000010, 0xC000401000000010},
		// Every field at its maximum: 0x3FFF in each 14-bit field, base 7 at bit 49.
		{"max", SmemDescriptor{Start: 0x3FFF0, LBO: 0x3FFF0, SBO: 0x3FFF0, BaseOffset: 7, Swizzle: Swizzle32B}, 0xC00E3FFF3FFF3FFF, 0xC00E7FFF3FFF3FFF},
		// Base offset 5 -> 0xA<<48.
		{"base 5", SmemDescriptor{Start: 0x480, SBO: 1024, BaseOffset: 5, Swizzle: Swizzle128B}, 0x400A004000000048, 0x400A404000000048},
		// sm_100 only: 128B with 32B atomicity (code 1 at bit 61), absolute LBO (bit 52).
		{"atom32B", SmemDescriptor{Start: 0x400, SBO: 1024, Swizzle: Swizzle128BAtom32B}, 0, 0x2000404000000040},
		{"abs LBO", SmemDescriptor{Start: 0x400, LBO: 0x9000, SBO: 1024, Swizzle: Swizzle128B, LBOAbsolute: true}, 0, 0x4010404009000040},
	} {
		v, err := SM90SmemDescriptor(c.d)
		if c.sm90 == 0 {
			if err == nil {
				t.Errorf("%s: sm_90 accepted %v", c.name, c.d)
			}
		} else if err != nil || v != c.sm90 {
			t.Errorf("%s: SM90SmemDescriptor = 0x%016x, %v; want 0x%016x", c.name, v, err, c.sm90)
		} else if d, err := DecodeSM90SmemDescriptor(v); err != nil || d != c.d {
			t.Errorf("%s: sm_90 decode = %v, %v", c.name, d, err)
		}
		v, err = SM100SmemDescriptor(c.d)
		if err != nil || v != c.sm10 {
			t.Errorf("%s: SM100SmemDescriptor = 0x%016x, %v; want 0x%016x", c.name, v, err, c.sm10)
		} else if d, err := DecodeSM100SmemDescriptor(v); err != nil || d != c.d {
			t.Errorf("%s: sm_100 decode = %v, %v", c.name, d, err)
		}
	}
	for _, bad := range []SmemDescriptor{
		{Start: 0x408}, {Start: 1 << 18}, {LBO: 8}, {SBO: 1 << 18}, {BaseOffset: 8}, {Swizzle: SwizzleMode(9)},
	} {
		if _, err := SM90SmemDescriptor(bad); err == nil {
			t.Errorf("sm_90 accepted %v", bad)
		}
		if _, err := SM100SmemDescriptor(bad); err == nil {
			t.Errorf("sm_100 accepted %v", bad)
		}
	}
	for _, v := range []uint64{1 << 14, 1 << 31, 1 << 46, 1 << 52, 1 << 60} {
		if _, err := DecodeSM90SmemDescriptor(v); err == nil {
			t.Errorf("sm_90 decode accepted reserved bits 0x%016x", v)
		}
	}
	for _, v := range []uint64{0, 1 << 47, 1<<46 | 1<<53, 1<<46 | 3<<61, 1<<46 | 5<<61, 1<<46 | 7<<61, 1<<46 | 1<<15} {
		if _, err := DecodeSM100SmemDescriptor(v); err == nil {
			t.Errorf("sm_100 decode accepted 0x%016x", v)
		}
	}
	if v, err := SM100ScaleTileDescriptor(0x2000); err != nil || v != 0x0000400800000200 {
		t.Errorf("scale tile descriptor = 0x%016x, %v", v, err)
	}
}

func TestSmemDescriptorRoundTrip(t *testing.T) {
	r := newRand(t)
	modes90 := []SwizzleMode{SwizzleNone, Swizzle32B, Swizzle64B, Swizzle128B}
	modes100 := append(modes90, Swizzle128BAtom32B)
	for i := 0; i < 2000; i++ {
		d := SmemDescriptor{Start: uint32(r.Intn(1<<14)) << 4, LBO: uint32(r.Intn(1<<14)) << 4, SBO: uint32(r.Intn(1<<14)) << 4,
			BaseOffset: uint8(r.Intn(8)), Swizzle: modes90[r.Intn(4)]}
		v, err := SM90SmemDescriptor(d)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := DecodeSM90SmemDescriptor(v); err != nil || got != d {
			t.Fatalf("sm_90 round trip of %v: %v, %v", d, got, err)
		}
		d.Swizzle = modes100[r.Intn(5)]
		d.LBOAbsolute = r.Intn(2) == 1
		v, err = SM100SmemDescriptor(d)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := DecodeSM100SmemDescriptor(v); err != nil || got != d {
			t.Fatalf("sm_100 round trip of %v: %v, %v", d, got, err)
		}
	}
}

func TestTCGen05InstrDesc(t *testing.T) {
	for _, c := range []struct {
		d    TCGen05InstrF16
		want uint32
	}{
		// Known-good values: CUTLASS's UMMA::InstrDescriptor bit-field union
		// (cute/arch/mma_sm100_desc.hpp) with the same fields set.
		{TCGen05InstrF16{M: 128, N: 256, AType: TCGen05BF16, BType: TCGen05BF16, F32Accum: true}, 0x08400490},
		{TCGen05InstrF16{M: 128, N: 128, AType: TCGen05BF16, BType: TCGen05BF16, F32Accum: true}, 0x08200490},
		// By hand: f16 x f16 -> f16, M64 (4<<24) N8 (1<<17).
		{TCGen05InstrF16{M: 64, N: 8}, 0x04020000},
		// bf16 M128 N256 with negate A (bit 13) and B MN-major (bit 16).
		{TCGen05InstrF16{M: 128, N: 256, AType: TCGen05BF16, BType: TCGen05BF16, F32Accum: true, NegateA: true, TransposeB: true}, 0x08412490},
		// cta_group::2 M256 (16<<24) N256.
		{TCGen05InstrF16{M: 256, N: 256, CTAGroup: 2, AType: TCGen05BF16, BType: TCGen05BF16, F32Accum: true}, 0x10400490},
	} {
		d := c.d
		d.CTAGroup = 0 // decoding gives 0 (the group is not in the descriptor)
		checkInstrDesc(t, "TCGen05InstrDescF16", c.d, d, c.want, TCGen05InstrDescF16, DecodeTCGen05InstrDescF16)
	}
	for _, c := range []struct {
		d    TCGen05InstrMXF8F6F4
		want uint32
	}{
		{TCGen05InstrMXF8F6F4{M: 128, N: 256}, 0x08C00000},
		{TCGen05InstrMXF8F6F4{M: 128, N: 256, SFIDA: 3, SFIDB: 3}, 0x68C00030},
		// By hand: A e5m2 (1<<7), B e2m1 (5<<10), N8 (1<<17), UE8M0 (1<<23),
		// M128 (1<<27), sf ids A 1 (1<<29), B 2 (2<<4).
		{TCGen05InstrMXF8F6F4{M: 128, N: 8, AType: TCGen05E5M2, BType: TCGen05E2M1, SFIDA: 1, SFIDB: 2}, 0x288214A0},
		// cta_group::2 M256 (2<<27) N256.
		{TCGen05InstrMXF8F6F4{M: 256, N: 256, CTAGroup: 2}, 0x10C00000},
	} {
		d := c.d
		d.CTAGroup = 0
		checkInstrDesc(t, "TCGen05InstrDescMXF8F6F4", c.d, d, c.want, TCGen05InstrDescMXF8F6F4, DecodeTCGen05InstrDescMXF8F6F4)
	}
	for _, bad := range []TCGen05InstrF16{
		{M: 32, N: 64}, {M: 128, N: 0}, {M: 128, N: 264}, {M: 128, N: 12}, {M: 256, N: 256}, {M: 128, N: 24, CTAGroup: 2},
		{M: 128, N: 64, CTAGroup: 3}, {M: 128, N: 64, AType: 2},
	} {
		if _, err := TCGen05InstrDescF16(bad); err == nil {
			t.Errorf("kind::f16 accepted %+v", bad)
		}
	}
	for _, bad := range []TCGen05InstrMXF8F6F4{
		{M: 64, N: 64}, {M: 128, N: 0}, {M: 128, N: 64, SFIDA: 4}, {M: 128, N: 64, SFIDB: -1}, {M: 128, N: 64, AType: 2},
		{M: 128, N: 64, BType: TCGen05E2M1, TransposeB: true},
	} {
		if _, err := TCGen05InstrDescMXF8F6F4(bad); err == nil {
			t.Errorf("kind::mxf8f6f4 accepted %+v", bad)
		}
	}
	for _, v := range []uint32{0x08400490 | 1<<23, 0x08400490 | 1<<3, 0x08400490 | 2<<4} {
		if _, err := DecodeTCGen05InstrDescF16(v); err == nil {
			t.Errorf("kind::f16 decode accepted 0x%08x", v)
		}
	}
	for _, v := range []uint32{0x08400000, 0x08C00000 | 1<<31, 0x08C00000 | 1<<24} {
		if _, err := DecodeTCGen05InstrDescMXF8F6F4(v); err == nil {
			t.Errorf("kind::mxf8f6f4 decode accepted 0x%08x", v)
		}
	}
}

// checkInstrDesc checks that enc(d) is want and that decoding it gives
// back (d as the decoder sees it).
func checkInstrDesc[D comparable](t *testing.T, name string, d, back D, want uint32, enc func(D) (uint32, error), dec func(uint32) (D, error)) {
	t.Helper()
	v, err := enc(d)
	if err != nil || v != want {
		t.Errorf("%s(%v) = 0x%08x, %v; want 0x%08x", name, d, v, err, want)
		return
	}
	if got, err := dec(v); err != nil || got != back {
		t.Errorf("decode 0x%08x = %v, %v", v, got, err)
	}
}
