package runtime

import (
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
