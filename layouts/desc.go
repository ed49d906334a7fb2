package layouts

import (
	"fmt"
	"strings"
)

// SmemDescriptor holds the fields of a shared-memory matrix descriptor, the
// 64-bit operand through which wgmma (sm_90a) and tcgen05.mma (sm_100a) read
// a matrix from shared memory. All byte quantities are encoded as
// (x & 0x3FFFF) >> 4, so they must be multiples of 16 below 2^18 (256 KiB).
//
// For the K-major canonical layouts (PTX ISA 9.7.15.5.1.2 and 9.7.16.3):
// with a swizzle, SBO is the distance between groups of 8 rows (8 x the
// swizzle width, 1024 bytes for 128B) and LBO is unused ("assumed 1");
// without a swizzle, SBO is the distance between 8-row groups of core
// matrices and LBO the distance between core matrices along K.
type SmemDescriptor struct {
	Start       uint32      // shared::cta byte address of the matrix
	LBO         uint32      // leading dimension byte offset (bytes)
	SBO         uint32      // stride dimension byte offset (bytes)
	BaseOffset  uint8       // 0..7: (pattern start address >> 7) & 7 when the swizzle pattern does not start at a RepeatBytes boundary, else 0
	Swizzle     SwizzleMode // swizzling mode
	LBOAbsolute bool        // sm_100 bit 52: LBO is an absolute address (sm_103a); false for sm_90
}

// String prints the fields, e.g. "start=0x400 LBO=16 SBO=1024 base=0 swizzle=128B".
func (d SmemDescriptor) String() string {
	s := fmt.Sprintf("start=0x%x LBO=%d SBO=%d base=%d swizzle=%v", d.Start, d.LBO, d.SBO, d.BaseOffset, d.Swizzle)
	if d.LBOAbsolute {
		s += " lbo-mode=absolute"
	}
	return s
}

func descEncode(name string, x uint32) (uint64, error) {
	if x%16 != 0 || x >= 1<<18 {
		return 0, fmt.Errorf("layouts: descriptor %s %d (0x%x) is not a multiple of 16 below 2^18", name, x, x)
	}
	return uint64(x >> 4), nil
}

func (d SmemDescriptor) commonFields() (uint64, error) {
	start, err := descEncode("start address", d.Start)
	if err != nil {
		return 0, err
	}
	lbo, err := descEncode("LBO", d.LBO)
	if err != nil {
		return 0, err
	}
	sbo, err := descEncode("SBO", d.SBO)
	if err != nil {
		return 0, err
	}
	if d.BaseOffset > 7 {
		return 0, fmt.Errorf("layouts: descriptor base offset %d (0..7)", d.BaseOffset)
	}
	return start | lbo<<16 | sbo<<32 | uint64(d.BaseOffset)<<49, nil
}

// SM90SmemDescriptor encodes a wgmma matrix descriptor (PTX ISA
// 9.7.15.5.1.2.2, CUTLASS cute/arch/mma_sm90_desc.hpp GmmaDescriptor):
// bits [0,14) start>>4, [16,30) LBO>>4, [32,46) SBO>>4, [49,52) base
// offset, [62,64) swizzle (0 none, 1 128B, 2 64B, 3 32B); other bits 0.
// Errors: fields out of range, Swizzle128BAtom32B, LBOAbsolute.
func SM90SmemDescriptor(d SmemDescriptor) (uint64, error) {
	v, err := d.commonFields()
	if err != nil {
		return 0, err
	}
	if d.LBOAbsolute {
		return 0, fmt.Errorf("layouts: sm_90 descriptors have no absolute LBO mode")
	}
	sw, err := swizzleCode("sm_90", sm90SwizzleCodes, d.Swizzle)
	if err != nil {
		return 0, err
	}
	return v | sw<<62, nil
}

// DecodeSM90SmemDescriptor is the inverse of SM90SmemDescriptor. Reserved
// bits that are set give an error.
func DecodeSM90SmemDescriptor(v uint64) (SmemDescriptor, error) {
	const reserved = 3<<14 | 3<<30 | 7<<46 | 0x3FF<<52
	if v&reserved != 0 {
		return SmemDescriptor{}, fmt.Errorf("layouts: sm_90 descriptor 0x%016x has reserved bits 0x%016x set", v, v&reserved)
	}
	d := decodeCommon(v)
	d.Swizzle = [4]SwizzleMode{SwizzleNone, Swizzle128B, Swizzle64B, Swizzle32B}[v>>62]
	return d, nil
}

// The swizzle field codes of the descriptors: sm_90 bits [62,64) (PTX ISA
// 9.7.15.5.1.2.2), sm_100 bits [61,64) (PTX ISA 9.7.16.4.1).
var (
	sm90SwizzleCodes  = map[SwizzleMode]uint64{SwizzleNone: 0, Swizzle128B: 1, Swizzle64B: 2, Swizzle32B: 3}
	sm100SwizzleCodes = map[SwizzleMode]uint64{SwizzleNone: 0, Swizzle128BAtom32B: 1, Swizzle128B: 2, Swizzle64B: 4, Swizzle32B: 6}
)

// swizzleCode is the descriptor code of m in codes, or an error naming arch.
func swizzleCode(arch string, codes map[SwizzleMode]uint64, m SwizzleMode) (uint64, error) {
	c, ok := codes[m]
	if !ok {
		return 0, fmt.Errorf("layouts: %s descriptors have no swizzle mode %v", arch, m)
	}
	return c, nil
}

func decodeCommon(v uint64) SmemDescriptor {
	return SmemDescriptor{
		Start:      uint32(v&0x3FFF) << 4,
		LBO:        uint32(v>>16&0x3FFF) << 4,
		SBO:        uint32(v>>32&0x3FFF) << 4,
		BaseOffset: uint8(v >> 49 & 7),
	}
}

// SM100SmemDescriptor encodes a tcgen05 shared-memory descriptor (PTX ISA
// 9.7.16.4.1, CUTLASS cute/arch/mma_sm100_desc.hpp SmemDescriptor):
// bits [0,14) start>>4, [16,30) LBO>>4, [32,46) SBO>>4, [46,49) the fixed
// value 0b001, [49,52) base offset, 52 LBO mode (1 = absolute), [53,61) 0,
// [61,64) swizzle (0 none, 1 128B with 32B atomicity, 2 128B, 4 64B, 6
// 32B). Known-good value (CUTLASS's SmemDescriptor with the same fields):
// start 0x400, SBO 1024, 128B -> 0x4000404000000040. Errors: fields out of
// range.
func SM100SmemDescriptor(d SmemDescriptor) (uint64, error) {
	v, err := d.commonFields()
	if err != nil {
		return 0, err
	}
	sw, err := swizzleCode("sm_100", sm100SwizzleCodes, d.Swizzle)
	if err != nil {
		return 0, err
	}
	v |= 1 << 46
	if d.LBOAbsolute {
		v |= 1 << 52
	}
	return v | sw<<61, nil
}

// DecodeSM100SmemDescriptor is the inverse of SM100SmemDescriptor. Set
// reserved bits, a version field other than 0b001, or the invalid swizzle
// codes 3, 5, 7 give an error.
func DecodeSM100SmemDescriptor(v uint64) (SmemDescriptor, error) {
	const reserved = 3<<14 | 3<<30 | 0xFF<<53
	if v&reserved != 0 {
		return SmemDescriptor{}, fmt.Errorf("layouts: sm_100 descriptor 0x%016x has reserved bits 0x%016x set", v, v&reserved)
	}
	if v>>46&7 != 1 {
		return SmemDescriptor{}, fmt.Errorf("layouts: sm_100 descriptor 0x%016x has bits 46-48 = %d, want 0b001", v, v>>46&7)
	}
	d := decodeCommon(v)
	d.LBOAbsolute = v>>52&1 == 1
	switch v >> 61 {
	case 0:
		d.Swizzle = SwizzleNone
	case 1:
		d.Swizzle = Swizzle128BAtom32B
	case 2:
		d.Swizzle = Swizzle128B
	case 4:
		d.Swizzle = Swizzle64B
	case 6:
		d.Swizzle = Swizzle32B
	default:
		return SmemDescriptor{}, fmt.Errorf("layouts: sm_100 descriptor 0x%016x has the invalid swizzle code %d", v, v>>61)
	}
	return d, nil
}

// TCGen05F16Type is the A/B element type of tcgen05.mma kind::f16.
type TCGen05F16Type int

// Element types of kind::f16 (PTX ISA Table 42 "atype"/"btype").
const (
	TCGen05F16  TCGen05F16Type = 0
	TCGen05BF16 TCGen05F16Type = 1
)

// TCGen05InstrF16 holds the fields of a tcgen05.mma kind::f16 instruction
// descriptor.
type TCGen05InstrF16 struct {
	M, N                   int            // MMA shape: M 64 or 128 (cta_group::1), 128 or 256 (cta_group::2); N a multiple of 8 (16 for cta_group::2) in [8, 256]
	CTAGroup               int            // 1 or 2 (0 means 1); only used to check M and N
	AType, BType           TCGen05F16Type // element types of A and B
	F32Accum               bool           // D type F32 (true) or F16 (false)
	NegateA, NegateB       bool           // negate A / B
	TransposeA, TransposeB bool           // MN-major A / B (false = K-major)
}

// TCGen05InstrDescF16 encodes a kind::f16 instruction descriptor, the plain
// 32-bit operand of tcgen05.mma (PTX ISA 9.7.16.4.2 Table 42; CUTLASS
// UMMA::InstrDescriptor, which stores it shifted left by 32): [4,6) D type
// (F16 0, F32 1), [7,10) A type, [10,13) B type, 13/14 negate A/B, 15/16
// transpose A/B, [17,23) N>>3, [24,29) M>>4, other bits 0 (dense, no
// saturate, no .ws shift). Known-good (CUTLASS's InstrDescriptor with the
// same fields, unshifted): bf16 x bf16 -> f32, K-major, M128 N256 =
// 0x08400490; N128 = 0x08200490. Errors: shapes outside PTX ISA Table 39,
// unknown types.
func TCGen05InstrDescF16(d TCGen05InstrF16) (uint32, error) {
	if err := checkMMAShape("kind::f16", d.M, d.N, d.CTAGroup, false); err != nil {
		return 0, err
	}
	if d.AType != TCGen05F16 && d.AType != TCGen05BF16 || d.BType != TCGen05F16 && d.BType != TCGen05BF16 {
		return 0, fmt.Errorf("layouts: kind::f16 types %d, %d (0 f16, 1 bf16)", d.AType, d.BType)
	}
	v := uint32(d.AType)<<7 | uint32(d.BType)<<10 | uint32(d.N>>3)<<17 | uint32(d.M>>4)<<24
	if d.F32Accum {
		v |= 1 << 4
	}
	v |= b2u(d.NegateA)<<13 | b2u(d.NegateB)<<14 | b2u(d.TransposeA)<<15 | b2u(d.TransposeB)<<16
	return v, nil
}

// DecodeTCGen05InstrDescF16 is the inverse of TCGen05InstrDescF16 (CTAGroup
// is left 0). Set bits outside the encoded fields give an error.
func DecodeTCGen05InstrDescF16(v uint32) (TCGen05InstrF16, error) {
	const used = 3<<4 | 7<<7 | 7<<10 | 0xF<<13 | 0x3F<<17 | 0x1F<<24
	if v&^used != 0 || v>>4&3 > 1 || v>>7&7 > 1 || v>>10&7 > 1 {
		return TCGen05InstrF16{}, fmt.Errorf("layouts: 0x%08x is not a dense kind::f16 descriptor", v)
	}
	return TCGen05InstrF16{
		M: int(v>>24&0x1F) << 4, N: int(v>>17&0x3F) << 3,
		AType: TCGen05F16Type(v >> 7 & 7), BType: TCGen05F16Type(v >> 10 & 7),
		F32Accum: v>>4&3 == 1,
		NegateA:  v>>13&1 == 1, NegateB: v>>14&1 == 1, TransposeA: v>>15&1 == 1, TransposeB: v>>16&1 == 1,
	}, nil
}

// TCGen05F8F6F4Type is the A/B element type of tcgen05.mma
// kind::mxf8f6f4 (PTX ISA 9.7.16.4.2, the block-scaled instruction
// descriptor table, "atype"/"btype").
type TCGen05F8F6F4Type int

// Element types of kind::mxf8f6f4.
const (
	TCGen05E4M3 TCGen05F8F6F4Type = 0
	TCGen05E5M2 TCGen05F8F6F4Type = 1
	TCGen05E2M3 TCGen05F8F6F4Type = 3
	TCGen05E3M2 TCGen05F8F6F4Type = 4
	TCGen05E2M1 TCGen05F8F6F4Type = 5
)

// TCGen05InstrMXF8F6F4 holds the fields of a tcgen05.mma
// kind::mxf8f6f4.block_scale instruction descriptor (scale type UE8M0).
type TCGen05InstrMXF8F6F4 struct {
	M, N                   int               // M 128 (cta_group::1) or 128/256 (cta_group::2); N as for kind::f16
	CTAGroup               int               // 1 or 2 (0 means 1); only used to check M and N
	AType, BType           TCGen05F8F6F4Type // element types
	SFIDA, SFIDB           int               // scale-factor ids 0..3: which byte of the TMEM scale column this MMA uses (the k-th 32-wide MMA of a 128-wide K block uses id k)
	NegateA, NegateB       bool              // negate A / B
	TransposeA, TransposeB bool              // MN-major A / B (only for 8-bit types)
}

// TCGen05InstrDescMXF8F6F4 encodes a kind::mxf8f6f4 instruction descriptor
// (PTX ISA 9.7.16.4.2, block-scaled kinds; CUTLASS
// UMMA::InstrDescriptorBlockScaled):
// [4,6) B scale-factor id, [7,10) A type, [10,13) B type, 13/14 negate
// A/B, 15/16 transpose A/B, [17,23) N>>3, 23 scale type (UE8M0 = 1),
// [27,29) M>>7, [29,31) A scale-factor id; no D-type field; bits 3, 6,
// 24-26, 31 zero. Known-good (CUTLASS's InstrDescriptorBlockScaled with the
// same fields, unshifted): e4m3 x e4m3, UE8M0, M128 N256, ids 0 =
// 0x08C00000; ids 3 = 0x68C00030. Errors: bad shapes, types, ids, or a
// transpose with a 4/6-bit type.
func TCGen05InstrDescMXF8F6F4(d TCGen05InstrMXF8F6F4) (uint32, error) {
	if err := checkMMAShape("kind::mxf8f6f4", d.M, d.N, d.CTAGroup, true); err != nil {
		return 0, err
	}
	for _, t := range []TCGen05F8F6F4Type{d.AType, d.BType} {
		switch t {
		case TCGen05E4M3, TCGen05E5M2, TCGen05E2M3, TCGen05E3M2, TCGen05E2M1:
		default:
			return 0, fmt.Errorf("layouts: kind::mxf8f6f4 type %d", t)
		}
	}
	if d.TransposeA && d.AType > TCGen05E5M2 || d.TransposeB && d.BType > TCGen05E5M2 {
		return 0, fmt.Errorf("layouts: MN-major operands need an 8-bit type")
	}
	if d.SFIDA < 0 || d.SFIDA > 3 || d.SFIDB < 0 || d.SFIDB > 3 {
		return 0, fmt.Errorf("layouts: scale-factor ids %d, %d (0..3)", d.SFIDA, d.SFIDB)
	}
	v := uint32(d.SFIDB)<<4 | uint32(d.AType)<<7 | uint32(d.BType)<<10 | uint32(d.N>>3)<<17 | 1<<23 |
		uint32(d.M>>7)<<27 | uint32(d.SFIDA)<<29
	v |= b2u(d.NegateA)<<13 | b2u(d.NegateB)<<14 | b2u(d.TransposeA)<<15 | b2u(d.TransposeB)<<16
	return v, nil
}

// DecodeTCGen05InstrDescMXF8F6F4 is the inverse of
// TCGen05InstrDescMXF8F6F4 (CTAGroup left 0). Set reserved bits or a scale
// type other than UE8M0 give an error.
func DecodeTCGen05InstrDescMXF8F6F4(v uint32) (TCGen05InstrMXF8F6F4, error) {
	const used = 3<<4 | 7<<7 | 7<<10 | 0xF<<13 | 0x3F<<17 | 1<<23 | 3<<27 | 3<<29
	if v&^used != 0 || v>>23&1 != 1 {
		return TCGen05InstrMXF8F6F4{}, fmt.Errorf("layouts: 0x%08x is not a dense UE8M0 kind::mxf8f6f4 descriptor", v)
	}
	return TCGen05InstrMXF8F6F4{
		M: int(v>>27&3) << 7, N: int(v>>17&0x3F) << 3,
		AType: TCGen05F8F6F4Type(v >> 7 & 7), BType: TCGen05F8F6F4Type(v >> 10 & 7),
		SFIDA: int(v >> 29 & 3), SFIDB: int(v >> 4 & 3),
		NegateA: v>>13&1 == 1, NegateB: v>>14&1 == 1, TransposeA: v>>15&1 == 1, TransposeB: v>>16&1 == 1,
	}, nil
}

// checkMMAShape applies PTX ISA Table 39 (tcgen05.mma shapes without .ws):
// cta_group::1: M 64 or 128, N 8..256 step 8; cta_group::2: M 128 or 256,
// N 16..256 step 16. Block-scaled kinds need M 128 with cta_group::1.
func checkMMAShape(kind string, m, n, group int, blockScaled bool) error {
	if group == 0 {
		group = 1
	}
	var okM bool
	step := 8
	switch group {
	case 1:
		okM = m == 128 || (m == 64 && !blockScaled)
	case 2:
		okM = m == 128 || m == 256
		step = 16
	default:
		return fmt.Errorf("layouts: %s cta_group %d (1 or 2)", kind, group)
	}
	if !okM {
		return fmt.Errorf("layouts: %s cta_group::%d has no M = %d", kind, group, m)
	}
	if n < step || n > 256 || n%step != 0 {
		return fmt.Errorf("layouts: %s cta_group::%d has no N = %d (%d..256 step %d)", kind, group, n, step, step)
	}
	return nil
}

func b2u(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// String prints the fields of a kind::f16 descriptor.
func (d TCGen05InstrF16) String() string {
	ty := func(t TCGen05F16Type) string {
		if t == TCGen05BF16 {
			return "bf16"
		}
		return "f16"
	}
	acc := "f16"
	if d.F32Accum {
		acc = "f32"
	}
	return fmt.Sprintf("kind::f16 M=%d N=%d A=%s B=%s D=%s%s", d.M, d.N, ty(d.AType), ty(d.BType), acc, flags(d.NegateA, d.NegateB, d.TransposeA, d.TransposeB))
}

// String prints the fields of a kind::mxf8f6f4 descriptor.
func (d TCGen05InstrMXF8F6F4) String() string {
	ty := func(t TCGen05F8F6F4Type) string {
		switch t {
		case TCGen05E4M3:
			return "e4m3"
		case TCGen05E5M2:
			return "e5m2"
		case TCGen05E2M3:
			return "e2m3"
		case TCGen05E3M2:
			return "e3m2"
		case TCGen05E2M1:
			return "e2m1"
		}
		return fmt.Sprintf("type%d", int(t))
	}
	return fmt.Sprintf("kind::mxf8f6f4 M=%d N=%d A=%s B=%s scale=ue8m0 sf_id_a=%d sf_id_b=%d%s", d.M, d.N, ty(d.AType), ty(d.BType),
		d.SFIDA, d.SFIDB, flags(d.NegateA, d.NegateB, d.TransposeA, d.TransposeB))
}

func flags(na, nb, ta, tb bool) string {
	var f []string
	switch {
	case !ta && !tb:
		f = append(f, "K-major")
	case ta && tb:
		f = append(f, "A,B MN-major")
	case ta:
		f = append(f, "A MN-major")
	default:
		f = append(f, "B MN-major")
	}
	if na {
		f = append(f, "negate-A")
	}
	if nb {
		f = append(f, "negate-B")
	}
	return " " + strings.Join(f, " ")
}
