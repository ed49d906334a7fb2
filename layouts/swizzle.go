package layouts

import (
	"fmt"
	"strings"
)

// Swizzle is CuTe's Swizzle<B,M,S>: an XOR of B bits of an offset, taken
// from bit M+S upward, into the B bits from bit M upward:
//
//	y = x ^ ((x >> S) & (((1<<B)-1) << M))
//
// It is a bijection on the non-negative integers and its own inverse when
// S >= B (the source and target bit ranges do not overlap). The unit of x
// is whatever the layout it is composed with produces (bytes for the
// hardware patterns of SwizzleMode.Pattern). Source: CUTLASS
// cute/swizzle.hpp; the hardware patterns are those of PTX ISA
// 9.7.15.5.1.2 ("Shared Memory Matrix Layout", swizzling modes) and of the
// TMA tensor swizzling modes.
type Swizzle struct {
	B int // number of bits XORed (0 = identity)
	M int // lowest target bit (log2 of the unit that moves as a whole)
	S int // distance between the source and the target bits
}

// Apply returns the swizzled offset of x (x >= 0).
func (s Swizzle) Apply(x int) int {
	if s.B == 0 {
		return x
	}
	mask := ((1 << s.B) - 1) << (s.M + s.S)
	return x ^ ((x & mask) >> s.S)
}

// IsIdentity reports whether the swizzle changes nothing.
func (s Swizzle) IsIdentity() bool { return s.B == 0 }

// String prints the swizzle as CuTe does: Sw<B,M,S>.
func (s Swizzle) String() string { return fmt.Sprintf("Sw<%d,%d,%d>", s.B, s.M, s.S) }

// InUnits returns the same swizzle for offsets counted in units of 2^log2Unit
// (e.g. a byte swizzle Sw<3,4,3> acting on bf16 element offsets, log2Unit 1,
// is Sw<3,3,3>). It returns an error if the unit is larger than the moved
// chunk (2^M bytes).
func (s Swizzle) InUnits(log2Unit int) (Swizzle, error) {
	if s.B == 0 {
		return s, nil
	}
	if log2Unit < 0 || log2Unit > s.M {
		return Swizzle{}, fmt.Errorf("layouts: %v cannot act on units of 2^%d bytes", s, log2Unit)
	}
	return Swizzle{B: s.B, M: s.M - log2Unit, S: s.S}, nil
}

// SwizzleMode names a hardware shared-memory swizzling mode (TMA tensor
// maps, wgmma and tcgen05 matrix descriptors).
type SwizzleMode int

// The swizzling modes. Swizzle128BAtom32B ("128-Byte with 32B atomic
// swizzling", tcgen05 only) exists in the sm_100 descriptor encoding; its
// byte pattern is not modelled here.
const (
	SwizzleNone SwizzleMode = iota
	Swizzle32B
	Swizzle64B
	Swizzle128B
	Swizzle128BAtom32B
)

// String returns "none", "32B", "64B", "128B" or "128B-atom32B".
func (m SwizzleMode) String() string {
	switch m {
	case SwizzleNone:
		return "none"
	case Swizzle32B:
		return "32B"
	case Swizzle64B:
		return "64B"
	case Swizzle128B:
		return "128B"
	case Swizzle128BAtom32B:
		return "128B-atom32B"
	}
	return fmt.Sprintf("SwizzleMode(%d)", int(m))
}

// ParseSwizzleMode accepts the names String returns (case-insensitive,
// "128" for "128B" and so on).
func ParseSwizzleMode(s string) (SwizzleMode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "none", "0", "no":
		return SwizzleNone, nil
	case "32b", "32":
		return Swizzle32B, nil
	case "64b", "64":
		return Swizzle64B, nil
	case "128b", "128":
		return Swizzle128B, nil
	case "128b-atom32b":
		return Swizzle128BAtom32B, nil
	}
	return 0, fmt.Errorf("layouts: unknown swizzle mode %q (none, 32B, 64B, 128B)", s)
}

// Bytes returns the swizzle width in bytes: the length of the contiguous
// row segment one pattern row covers (32, 64, 128); 16 for SwizzleNone (one
// 16-byte core-matrix row).
func (m SwizzleMode) Bytes() int {
	switch m {
	case Swizzle32B:
		return 32
	case Swizzle64B:
		return 64
	case Swizzle128B, Swizzle128BAtom32B:
		return 128
	}
	return 16
}

// RepeatBytes returns the period of the pattern in bytes (8 rows of
// Bytes()): 256, 512, 1024; a swizzled tile must start at a multiple of it
// for the descriptor base offset to be 0 (PTX ISA 9.7.15.5.1.2.2). 16 for
// SwizzleNone.
func (m SwizzleMode) RepeatBytes() int {
	if m == SwizzleNone {
		return 16
	}
	return 8 * m.Bytes()
}

// Pattern returns the byte-address swizzle of the mode: within each
// RepeatBytes-aligned block, the 16-byte chunk index (address bits 4..6) is
// XORed with the 128-byte row index (bits 7..9), restricted to 1, 2 or 3
// bits for 32B, 64B, 128B: Sw<1,4,3>, Sw<2,4,3>, Sw<3,4,3>; identity for
// SwizzleNone. Swizzle128BAtom32B returns an error (not modelled).
func (m SwizzleMode) Pattern() (Swizzle, error) {
	switch m {
	case SwizzleNone:
		return Swizzle{0, 4, 3}, nil
	case Swizzle32B:
		return Swizzle{1, 4, 3}, nil
	case Swizzle64B:
		return Swizzle{2, 4, 3}, nil
	case Swizzle128B:
		return Swizzle{3, 4, 3}, nil
	}
	return Swizzle{}, fmt.Errorf("layouts: the byte pattern of swizzle mode %v is not modelled", m)
}

// SwizzledLayout is CuTe's ComposedLayout Sw o L: offset(i) =
// Sw.Apply(L(i)), in the unit of L's strides.
type SwizzledLayout struct {
	Sw     Swizzle // swizzle applied to L's offsets
	Layout Layout  // the layout L
}

// String prints "Sw<B,M,S> o shape:stride".
func (s SwizzledLayout) String() string {
	if s.Sw.IsIdentity() {
		return s.Layout.String()
	}
	return s.Sw.String() + " o " + s.Layout.String()
}

// Size returns the number of coordinates.
func (s SwizzledLayout) Size() int { return s.Layout.Size() }

// Offset returns the swizzled offset of linear index i in [0, Size).
func (s SwizzledLayout) Offset(i int) (int, error) {
	o, err := s.Layout.Offset(i)
	if err != nil {
		return 0, err
	}
	return s.Sw.Apply(o), nil
}

// OffsetAt returns the swizzled offset of top-level coordinates.
func (s SwizzledLayout) OffsetAt(coords ...int) (int, error) {
	o, err := s.Layout.OffsetAt(coords...)
	if err != nil {
		return 0, err
	}
	return s.Sw.Apply(o), nil
}

// Offsets returns the swizzled offsets of all linear indices in order.
func (s SwizzledLayout) Offsets() []int {
	out := s.Layout.Offsets()
	for i, o := range out {
		out[i] = s.Sw.Apply(o)
	}
	return out
}
