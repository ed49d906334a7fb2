package driver

import (
	"strings"
	"testing"
)

// tmapArgs are the arguments of CheckTensorMapTiled / EncodeTensorMapTiled.
type tmapArgs struct {
	dtype         TensorMapDataType
	rank          int
	addr          DevicePtr
	dims, strides []uint64
	box, elemStr  []uint32
	interleave    TensorMapInterleave
	swizzle       TensorMapSwizzle
	l2            TensorMapL2Promotion
	oob           TensorMapOOBFill
}

func (a tmapArgs) check() error {
	return CheckTensorMapTiled(a.dtype, a.rank, a.addr, a.dims, a.strides, a.box, a.elemStr, a.interleave, a.swizzle, a.l2, a.oob)
}

// bf16Tile is a valid map: a row-major [256, 512] bf16 matrix, 64x64 boxes,
// 128B swizzle (inner box 64*2 = 128 bytes).
func bf16Tile() tmapArgs {
	return tmapArgs{
		dtype: TensorMapBF16, rank: 2, addr: 0x7f0000000000,
		dims: []uint64{512, 256}, strides: []uint64{1024},
		box: []uint32{64, 64}, elemStr: []uint32{1, 1},
		swizzle: Swizzle128B, l2: L2Promotion128B,
	}
}

func TestCheckTensorMapTiledValid(t *testing.T) {
	valid := []func(*tmapArgs){
		func(a *tmapArgs) {},
		func(a *tmapArgs) { a.elemStr = nil },
		func(a *tmapArgs) { a.swizzle = SwizzleNone; a.box = []uint32{256, 256} },
		func(a *tmapArgs) { a.dtype = TensorMapE4M3; a.box = []uint32{128, 64} },
		func(a *tmapArgs) {
			a.rank, a.dims, a.strides, a.box, a.elemStr = 1, []uint64{4096}, nil, []uint32{64}, nil
		},
		func(a *tmapArgs) {
			a.rank, a.dims, a.strides, a.box, a.elemStr = 3, []uint64{512, 256, 8}, []uint64{1024, 1024 * 256}, []uint32{64, 64, 1}, nil
		},
		func(a *tmapArgs) { a.oob = OOBFillNaNRequestZeroFMA },
		func(a *tmapArgs) { a.swizzle, a.box = Swizzle32B, []uint32{16, 8} },
		func(a *tmapArgs) { a.dims = []uint64{1 << 32, 1} },
		func(a *tmapArgs) { a.strides = []uint64{1<<40 - 16} },
	}
	for i, mod := range valid {
		a := bf16Tile()
		mod(&a)
		if err := a.check(); err != nil {
			t.Errorf("valid case %d: %v", i, err)
		}
	}
}

func TestCheckTensorMapTiledRules(t *testing.T) {
	bad := []struct {
		mod  func(*tmapArgs)
		want string
	}{
		{func(a *tmapArgs) { a.dtype = 13 }, "unknown data type"},
		{func(a *tmapArgs) { a.interleave = 3 }, "unknown interleave"},
		{func(a *tmapArgs) { a.swizzle = 4 }, "unknown swizzle"},
		{func(a *tmapArgs) { a.l2 = 4 }, "unknown L2 promotion"},
		{func(a *tmapArgs) { a.oob = 2 }, "unknown OOB fill"},
		{func(a *tmapArgs) { a.rank = 0 }, "must be in 1..5"},
		{func(a *tmapArgs) { a.rank = 6 }, "must be in 1..5"},
		{func(a *tmapArgs) { a.interleave = Interleave16B }, "with interleave the rank must be >= 3"},
		{func(a *tmapArgs) { a.dims = []uint64{512} }, "globalDims has 1 entries; want rank = 2"},
		{func(a *tmapArgs) { a.strides = []uint64{2, 1024} }, "want rank-1 = 1"},
		{func(a *tmapArgs) { a.box = []uint32{64} }, "boxDims has 1 entries"},
		{func(a *tmapArgs) { a.elemStr = []uint32{1} }, "elementStrides has 1 entries"},
		{func(a *tmapArgs) { a.addr = 0 }, "null"},
		{func(a *tmapArgs) { a.addr = 0x7f0000000008 }, "not 16-byte aligned"},
		{func(a *tmapArgs) { a.dims = []uint64{0, 256} }, "globalDims[0] = 0"},
		{func(a *tmapArgs) { a.dims = []uint64{512, 1<<32 + 1} }, "globalDims[1]"},
		{func(a *tmapArgs) { a.strides = []uint64{1000} }, "must be a multiple of 16"},
		{func(a *tmapArgs) { a.strides = []uint64{1 << 40} }, "must be < 2^40"},
		{func(a *tmapArgs) { a.box = []uint32{64, 0} }, "boxDims[1] = 0"},
		{func(a *tmapArgs) { a.box = []uint32{64, 257}; a.swizzle = SwizzleNone }, "boxDims[1] = 257"},
		{func(a *tmapArgs) { a.box = []uint32{4, 64} }, "8 bytes: must be a multiple of 16"},
		{func(a *tmapArgs) { a.elemStr = []uint32{1, 9} }, "elementStrides[1] = 9"},
		{func(a *tmapArgs) { a.elemStr = []uint32{0, 1} }, "elementStrides[0] = 0"},
		{func(a *tmapArgs) { a.box = []uint32{128, 64} }, "256 bytes exceeds the 128-byte swizzle span"},
		{func(a *tmapArgs) { a.swizzle, a.box = Swizzle64B, []uint32{64, 64} }, "exceeds the 64-byte swizzle span"},
		{func(a *tmapArgs) { a.swizzle, a.box = Swizzle32B, []uint32{24, 64} }, "exceeds the 32-byte swizzle span"},
		{func(a *tmapArgs) {
			a.rank, a.dims, a.strides, a.box, a.elemStr = 3, []uint64{512, 256, 8}, []uint64{1024, 1024 * 256}, []uint32{64, 64, 1}, nil
			a.interleave, a.swizzle = Interleave32B, Swizzle128B
		}, "Interleave32B requires Swizzle32B"},
		{func(a *tmapArgs) {
			a.rank, a.dims, a.strides, a.box, a.elemStr = 3, []uint64{512, 256, 8}, []uint64{1040, 1040 * 256}, []uint32{64, 64, 1}, nil
			a.interleave, a.swizzle = Interleave32B, Swizzle32B
		}, "must be a multiple of 32"},
		{func(a *tmapArgs) {
			a.rank, a.dims, a.strides, a.box, a.elemStr = 3, []uint64{512, 256, 8}, []uint64{1024, 1024 * 256}, []uint32{64, 64, 1}, nil
			a.interleave, a.swizzle, a.addr = Interleave32B, Swizzle32B, 0x7f0000000010
		}, "not 32-byte aligned"},
		{func(a *tmapArgs) { a.dtype, a.box, a.oob = TensorMapU8, []uint32{128, 64}, OOBFillNaNRequestZeroFMA }, "requires a floating-point type"},
	}
	for i, c := range bad {
		a := bf16Tile()
		c.mod(&a)
		err := a.check()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("case %d: got %v, want an error containing %q", i, err, c.want)
		}
	}
}

func TestTensorMapEnums(t *testing.T) {
	sizes := map[TensorMapDataType]int{TensorMapE4M3: 1, TensorMapBF16: 2, TensorMapF16: 2,
		TensorMapF32: 4, TensorMapTF32: 4, TensorMapI64: 8, TensorMapF64: 8, 99: 0, -1: 0}
	for d, s := range sizes {
		if d.Size() != s {
			t.Errorf("%v.Size() = %d, want %d", d, d.Size(), s)
		}
	}
	if TensorMapBF16.String() != "bf16" || TensorMapDataType(42).String() != "TensorMapDataType(42)" {
		t.Error("String")
	}
	for s, b := range map[TensorMapSwizzle]int{SwizzleNone: 0, Swizzle32B: 32, Swizzle64B: 64, Swizzle128B: 128} {
		if s.Bytes() != b {
			t.Errorf("swizzle %d: %d bytes, want %d", s, s.Bytes(), b)
		}
		if got, err := SwizzleOfBytes(b); got != s || err != nil {
			t.Errorf("SwizzleOfBytes(%d) = %d, %v; want %d", b, got, err, s)
		}
	}
	if _, err := SwizzleOfBytes(16); err == nil {
		t.Error("SwizzleOfBytes(16): no error")
	}
}
