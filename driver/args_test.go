package driver

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestArgsExactSizes(t *testing.T) {
	r := rand.New(rand.NewPCG(rand.Uint64(), 1))
	u8, u16, u32 := uint8(r.Uint32()|1), uint16(r.Uint32()|1), r.Uint32()|1
	i32, u64, i64 := -int32(r.Uint32()>>1)-1, r.Uint64()|1, -int64(r.Uint64()>>1)-1
	f32, f64 := r.Float32()+0.5, r.Float64()+0.5
	ptr := DevicePtr(r.Uint64() &^ 255)
	blob := make([]byte, 128)
	for i := range blob {
		blob[i] = byte(r.Uint32())
	}
	a := NewArgs().U8(u8).U16(u16).U32(u32).I32(i32).U64(u64).I64(i64).F32(f32).F64(f64).Ptr(ptr).Bytes(blob)
	if err := a.Err(); err != nil {
		t.Fatal(err)
	}
	wantSizes := []int{1, 2, 4, 4, 8, 8, 4, 8, 8, 128}
	if got := a.Sizes(); !slices.Equal(got, wantSizes) {
		t.Fatalf("sizes %v, want %v", got, wantSizes)
	}
	if a.Len() != len(wantSizes) {
		t.Fatalf("Len %d", a.Len())
	}
	le := binary.LittleEndian
	checks := [][]byte{
		{u8},
		le.AppendUint16(nil, u16),
		le.AppendUint32(nil, u32),
		le.AppendUint32(nil, uint32(i32)),
		le.AppendUint64(nil, u64),
		le.AppendUint64(nil, uint64(i64)),
		le.AppendUint32(nil, math.Float32bits(f32)),
		le.AppendUint64(nil, math.Float64bits(f64)),
		le.AppendUint64(nil, uint64(ptr)),
		blob,
	}
	for i, want := range checks {
		if got := a.Value(i); !bytes.Equal(got, want) {
			t.Errorf("arg %d = %x, want %x", i, got, want)
		}
	}
	for i, off := range a.offs {
		if off%16 != 0 {
			t.Errorf("arg %d at offset %d, not 16-byte aligned", i, off)
		}
	}
	// Bytes copies: changing the caller's slice must not change the argument.
	blob[0] ^= 0xFF
	if got := a.Value(9); got[0] == blob[0] {
		t.Error("Bytes did not copy its input")
	}
}

func TestArgsEmptyBytes(t *testing.T) {
	a := NewArgs().U32(7).Bytes(nil).U32(9)
	if a.Err() == nil || !strings.Contains(a.Err().Error(), "argument 1") {
		t.Fatalf("want an error naming argument 1, got %v", a.Err())
	}
	var zero Args
	if zero.Len() != 0 || zero.Err() != nil || (*Args)(nil).Len() != 0 {
		t.Fatal("zero and nil Args must be empty")
	}
}

func TestCheckParamSizes(t *testing.T) {
	a := NewArgs().U32(1).Ptr(2).Bytes(make([]byte, 128))
	if err := checkParamSizes("k", []int{4, 8, 128}, a); err != nil {
		t.Fatal(err)
	}
	err := checkParamSizes("k", []int{8, 8, 128}, a)
	if err == nil || !strings.Contains(err.Error(), "parameter 0 is 8 bytes in the kernel but 4 bytes") {
		t.Fatalf("size mismatch: %v", err)
	}
	err = checkParamSizes("k", []int{4, 8}, a)
	if err == nil || !strings.Contains(err.Error(), "kernel has 2 parameters, Args has 3") {
		t.Fatalf("count mismatch: %v", err)
	}
	err = checkParamSizes("k", []int{4, 8, 128, 4}, a)
	if err == nil || !strings.Contains(err.Error(), "kernel has 4 parameters, Args has 3") {
		t.Fatalf("missing argument: %v", err)
	}
}

func TestCheckLaunch(t *testing.T) {
	ok := []struct{ grid, block, cluster Dim3 }{
		{Dim3{X: 132}, Dim3{X: 256}, Dim3{}},
		{Dim3{X: 4, Y: 2, Z: 3}, Dim3{X: 32, Y: 32}, Dim3{X: 2, Y: 2, Z: 1}},
		{Dim3{X: 1<<31 - 1}, Dim3{X: 1, Y: 1, Z: 64}, Dim3{}},
	}
	for _, c := range ok {
		if err := checkLaunch(c.grid, c.block, 1024, c.cluster); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
	bad := []struct {
		grid, block Dim3
		shared      int
		cluster     Dim3
		want        string
	}{
		{Dim3{}, Dim3{X: 32}, 0, Dim3{}, "grid"},
		{Dim3{X: 1, Y: -1}, Dim3{X: 32}, 0, Dim3{}, "grid"},
		{Dim3{X: 1, Y: 65536}, Dim3{X: 32}, 0, Dim3{}, "exceeds"},
		{Dim3{X: 1}, Dim3{X: 0}, 0, Dim3{}, "block"},
		{Dim3{X: 1}, Dim3{X: 1025}, 0, Dim3{}, "exceeds"},
		{Dim3{X: 1}, Dim3{X: 1, Z: 65}, 0, Dim3{}, "exceeds"},
		{Dim3{X: 1}, Dim3{X: 64, Y: 32}, 0, Dim3{}, "2048 threads"},
		{Dim3{X: 1}, Dim3{X: 32}, -1, Dim3{}, "shared"},
		{Dim3{X: 6}, Dim3{X: 32}, 0, Dim3{X: 4}, "not a multiple of cluster"},
		{Dim3{X: 6}, Dim3{X: 32}, 0, Dim3{Y: 2}, "cluster"},
	}
	for _, c := range bad {
		err := checkLaunch(c.grid, c.block, c.shared, c.cluster)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want an error containing %q", c, err, c.want)
		}
	}
	if n := (Dim3{X: 3, Z: 5}).Count(); n != 15 {
		t.Errorf("Count = %d, want 15", n)
	}
}

func TestDevicePtr(t *testing.T) {
	p := DevicePtr(0x7f0000001000)
	if p.Offset(256) != 0x7f0000001100 || p.Offset(-0x1000) != 0x7f0000000000 {
		t.Fatal("Offset")
	}
	if p.String() != "0x7f0000001000" {
		t.Fatalf("String = %s", p)
	}
}

func TestDriverErrorText(t *testing.T) {
	e := &DriverError{Call: "cuModuleLoadDataEx", Code: 218, Name: "CUDA_ERROR_INVALID_PTX",
		Message: "a PTX JIT compilation failed", Log: "ptxas application ptx input, line 9; error"}
	s := e.Error()
	for _, want := range []string{"cuModuleLoadDataEx", "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed", "line 9"} {
		if !strings.Contains(s, want) {
			t.Errorf("%q lacks %q", s, want)
		}
	}
}
