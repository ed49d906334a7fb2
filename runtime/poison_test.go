package runtime

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestReadFloatsDType: a tensor that is neither bf16 nor f32 is refused
// before any copy; an empty one reads as no values.
func TestReadFloatsDType(t *testing.T) {
	if _, err := ReadFloats(nil, NewTensor(0x1000, 16, I32, 4)); err == nil || !strings.Contains(err.Error(), "not bf16 or f32") {
		t.Errorf("i32 tensor: %v", err)
	}
	if v, err := ReadFloats(nil, NewTensor(0, 0, F32, 0, 8)); err != nil || len(v) != 0 {
		t.Errorf("empty tensor: %v, %d values", err, len(v))
	}
}

// TestDecodeFloats: little-endian bf16 and f32 bytes widen exactly (random
// values, a NaN and an Inf); other dtypes and partial elements are errors.
func TestDecodeFloats(t *testing.T) {
	r := rand.New(rand.NewPCG(rand.Uint64(), 5))
	v := make([]float32, 257)
	for i := range v {
		v[i] = float32(r.NormFloat64() * math.Ldexp(1, r.IntN(40)-20))
	}
	v[3], v[7] = float32(math.NaN()), float32(math.Inf(-1))
	f32 := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(f32[4*i:], math.Float32bits(x))
	}
	h := ToBF16(v)
	bf := make([]byte, 2*len(h))
	for i, x := range h {
		binary.LittleEndian.PutUint16(bf[2*i:], x)
	}
	for _, c := range []struct {
		dt   DType
		raw  []byte
		want []float32
	}{{F32, f32, v}, {BF16, bf, FromBF16(h)}} {
		got, err := DecodeFloats(c.dt, c.raw)
		if err != nil || len(got) != len(v) {
			t.Fatalf("%s: %d values, %v", c.dt, len(got), err)
		}
		for i, w := range c.want {
			if g := got[i]; !(g == float64(w) || math.IsNaN(g) && math.IsNaN(float64(w))) {
				t.Fatalf("%s [%d] = %v, want %v", c.dt, i, g, w)
			}
		}
	}
	if _, err := DecodeFloats(F32, f32[:5]); err == nil {
		t.Error("5 bytes of f32 decoded")
	}
	if _, err := DecodeFloats(I32, f32); err == nil {
		t.Error("i32 decoded as floats")
	}
}
