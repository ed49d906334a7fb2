package driver

import "fmt"

// TensorMapDataType is a tensor map's element type, with the values of the
// driver's CUtensorMapDataType (cuda.h, CUDA 12.0+).
type TensorMapDataType int

// Element types of a tensor map. FP8 (E4M3, E5M2) and UE8M0 scale bytes
// travel as TensorMapU8: TMA only moves bytes.
const (
	TensorMapU8      TensorMapDataType = 0  // 1 byte
	TensorMapU16     TensorMapDataType = 1  // 2 bytes
	TensorMapU32     TensorMapDataType = 2  // 4 bytes
	TensorMapI32     TensorMapDataType = 3  // 4 bytes
	TensorMapU64     TensorMapDataType = 4  // 8 bytes
	TensorMapI64     TensorMapDataType = 5  // 8 bytes
	TensorMapF16     TensorMapDataType = 6  // 2 bytes
	TensorMapF32     TensorMapDataType = 7  // 4 bytes
	TensorMapF64     TensorMapDataType = 8  // 8 bytes
	TensorMapBF16    TensorMapDataType = 9  // 2 bytes
	TensorMapF32FTZ  TensorMapDataType = 10 // 4 bytes
	TensorMapTF32    TensorMapDataType = 11 // 4 bytes
	TensorMapTF32FTZ TensorMapDataType = 12 // 4 bytes

	TensorMapE4M3 = TensorMapU8 // OCP FP8 E4M3 data, moved as bytes
)

var tensorMapTypeInfo = [...]struct {
	name  string
	size  int
	float bool
}{
	{"u8", 1, false}, {"u16", 2, false}, {"u32", 4, false}, {"i32", 4, false},
	{"u64", 8, false}, {"i64", 8, false}, {"f16", 2, true}, {"f32", 4, true},
	{"f64", 8, true}, {"bf16", 2, true}, {"f32ftz", 4, true}, {"tf32", 4, true},
	{"tf32ftz", 4, true},
}

func (t TensorMapDataType) valid() bool { return t >= 0 && int(t) < len(tensorMapTypeInfo) }

// Size returns the element size in bytes (0 for an unknown type).
func (t TensorMapDataType) Size() int {
	if !t.valid() {
		return 0
	}
	return tensorMapTypeInfo[t].size
}

// String returns the short name ("bf16", "u8", ...).
func (t TensorMapDataType) String() string {
	if !t.valid() {
		return fmt.Sprintf("TensorMapDataType(%d)", int(t))
	}
	return tensorMapTypeInfo[t].name
}

// TensorMapInterleave is the driver's CUtensorMapInterleave.
type TensorMapInterleave int

// Interleave layouts (NC/8HWC8 uses 16B, NC/16HWC16 32B). GEMM tiles use
// InterleaveNone.
const (
	InterleaveNone TensorMapInterleave = 0
	Interleave16B  TensorMapInterleave = 1
	Interleave32B  TensorMapInterleave = 2
)

// TensorMapSwizzle is the driver's CUtensorMapSwizzle: the shared-memory
// swizzle TMA applies to 16-byte chunks within a 32-, 64- or 128-byte span.
// It must match the swizzle mode of the wgmma / tcgen05 shared-memory
// descriptor that reads the tile (CUDA Driver API, CUtensorMapSwizzle; PTX
// ISA, the swizzling modes of the wgmma "Matrix Descriptor Format" and of
// the tcgen05 "Shared Memory Descriptor"); the three number the modes
// differently (package layouts encodes the descriptors' codes).
type TensorMapSwizzle int

// Swizzle modes.
const (
	SwizzleNone TensorMapSwizzle = 0
	Swizzle32B  TensorMapSwizzle = 1
	Swizzle64B  TensorMapSwizzle = 2
	Swizzle128B TensorMapSwizzle = 3
)

// Bytes returns the swizzle span in bytes (0 for SwizzleNone).
func (s TensorMapSwizzle) Bytes() int {
	switch s {
	case Swizzle32B:
		return 32
	case Swizzle64B:
		return 64
	case Swizzle128B:
		return 128
	}
	return 0
}

// SwizzleOfBytes is the swizzle mode of a span of n bytes (0, 32, 64 or
// 128; the inverse of Bytes). Errors: any other n.
func SwizzleOfBytes(n int) (TensorMapSwizzle, error) {
	for _, s := range []TensorMapSwizzle{SwizzleNone, Swizzle32B, Swizzle64B, Swizzle128B} {
		if s.Bytes() == n {
			return s, nil
		}
	}
	return 0, fmt.Errorf("tensor map swizzle of %d bytes (want 0, 32, 64 or 128)", n)
}

// TensorMapL2Promotion is the driver's CUtensorMapL2promotion: the L2 fetch
// granularity of TMA loads.
type TensorMapL2Promotion int

// L2 promotion sizes.
const (
	L2PromotionNone TensorMapL2Promotion = 0
	L2Promotion64B  TensorMapL2Promotion = 1
	L2Promotion128B TensorMapL2Promotion = 2
	L2Promotion256B TensorMapL2Promotion = 3
)

// TensorMapOOBFill is the driver's CUtensorMapFloatOOBfill: what TMA loads
// for elements outside the tensor.
type TensorMapOOBFill int

// Out-of-bounds fill modes.
const (
	OOBFillZero              TensorMapOOBFill = 0 // CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE: zeros
	OOBFillNaNRequestZeroFMA TensorMapOOBFill = 1 // NaN; floating-point types only
)

// TensorMapBytes is the size of an encoded tensor map (CUtensorMap), passed
// to a kernel by value as `.param .align 64 .b8 name[128]`.
const TensorMapBytes = 128

// CheckTensorMapTiled validates the arguments of Context.EncodeTensorMapTiled against
// the requirements documented for cuTensorMapEncodeTiled (CUDA Driver API,
// "Tensor Map Object Management"), without a GPU. The error names the
// violated rule. Dimension 0 is the innermost (contiguous) one: a row-major
// [rows, cols] matrix has globalDims {cols, rows}.
//
//   - rank in 1..5 (3..5 with interleave); len(globalDims) = len(boxDims) = rank,
//     len(globalStrides) = rank-1, elementStrides nil (all 1) or of length rank
//   - globalAddr non-null and 16-byte aligned (32 with Interleave32B)
//   - globalDims[i] in 1..2^32
//   - globalStrides[i] (bytes, of dimensions 1..rank-1) a multiple of 16
//     (32 with Interleave32B) and < 2^40
//   - boxDims[i] in 1..256; without interleave boxDims[0]*elementSize a
//     multiple of 16 bytes
//   - elementStrides[i] in 1..8
//   - without interleave and with a swizzle, boxDims[0]*elementSize <= the
//     swizzle span (32, 64 or 128 bytes)
//   - Interleave32B requires Swizzle32B
//   - OOBFillNaNRequestZeroFMA requires a floating-point dtype
func CheckTensorMapTiled(dtype TensorMapDataType, rank int, globalAddr DevicePtr, globalDims, globalStrides []uint64,
	boxDims, elementStrides []uint32, interleave TensorMapInterleave, swizzle TensorMapSwizzle,
	l2Promotion TensorMapL2Promotion, oobFill TensorMapOOBFill) error {
	fail := func(format string, a ...any) error {
		return fmt.Errorf("mokc driver: tensor map: "+format, a...)
	}
	if !dtype.valid() {
		return fail("unknown data type %d", int(dtype))
	}
	if interleave < InterleaveNone || interleave > Interleave32B {
		return fail("unknown interleave %d", int(interleave))
	}
	if swizzle < SwizzleNone || swizzle > Swizzle128B {
		return fail("unknown swizzle %d", int(swizzle))
	}
	if l2Promotion < L2PromotionNone || l2Promotion > L2Promotion256B {
		return fail("unknown L2 promotion %d", int(l2Promotion))
	}
	if oobFill != OOBFillZero && oobFill != OOBFillNaNRequestZeroFMA {
		return fail("unknown OOB fill %d", int(oobFill))
	}
	if rank < 1 || rank > 5 {
		return fail("rank %d: must be in 1..5", rank)
	}
	if interleave != InterleaveNone && rank < 3 {
		return fail("rank %d: with interleave the rank must be >= 3", rank)
	}
	if len(globalDims) != rank {
		return fail("globalDims has %d entries; want rank = %d", len(globalDims), rank)
	}
	if len(globalStrides) != rank-1 {
		return fail("globalStrides has %d entries; want rank-1 = %d (byte strides of dimensions 1..rank-1; dimension 0 is contiguous)", len(globalStrides), rank-1)
	}
	if len(boxDims) != rank {
		return fail("boxDims has %d entries; want rank = %d", len(boxDims), rank)
	}
	if elementStrides != nil && len(elementStrides) != rank {
		return fail("elementStrides has %d entries; want rank = %d (or nil for all 1)", len(elementStrides), rank)
	}
	align := uint64(16)
	if interleave == Interleave32B {
		align = 32
	}
	if globalAddr == 0 {
		return fail("globalAddr is null")
	}
	if uint64(globalAddr)%align != 0 {
		return fail("globalAddr %v is not %d-byte aligned", globalAddr, align)
	}
	for i, d := range globalDims {
		if d == 0 || d > 1<<32 {
			return fail("globalDims[%d] = %d: must be in 1..2^32", i, d)
		}
	}
	for i, s := range globalStrides {
		if s%align != 0 {
			return fail("globalStrides[%d] = %d bytes: must be a multiple of %d", i, s, align)
		}
		if s >= 1<<40 {
			return fail("globalStrides[%d] = %d bytes: must be < 2^40", i, s)
		}
	}
	for i, b := range boxDims {
		if b == 0 || b > 256 {
			return fail("boxDims[%d] = %d: must be in 1..256", i, b)
		}
	}
	inner := int(boxDims[0]) * dtype.Size()
	if interleave == InterleaveNone && inner%16 != 0 {
		return fail("inner box boxDims[0]*%d = %d bytes: must be a multiple of 16 bytes", dtype.Size(), inner)
	}
	for i, e := range elementStrides {
		if e == 0 || e > 8 {
			return fail("elementStrides[%d] = %d: must be in 1..8", i, e)
		}
	}
	if interleave == InterleaveNone && swizzle != SwizzleNone && inner > swizzle.Bytes() {
		return fail("inner box boxDims[0]*%d = %d bytes exceeds the %d-byte swizzle span", dtype.Size(), inner, swizzle.Bytes())
	}
	if interleave == Interleave32B && swizzle != Swizzle32B {
		return fail("Interleave32B requires Swizzle32B")
	}
	if oobFill == OOBFillNaNRequestZeroFMA && !tensorMapTypeInfo[dtype].float {
		return fail("OOBFillNaNRequestZeroFMA requires a floating-point type, not %v", dtype)
	}
	return nil
}
