package runtime

import (
	"fmt"

	"github.com/mokc/mokc/driver"
)

// This file holds the output check shared by `mokc run` and the GPU tests:
// fill an output with a poison before a forward, then count the elements
// the forward left unwritten.

// PoisonBF16 is what every bf16 element of a Tensor reads after Poison:
// 0xFFFF, a NaN the forward never writes (the NaN its kernels round to is
// the canonical 0x7FFF, layouts.BF16NaN), so an element that still holds it
// after a forward was not written.
const PoisonBF16 uint16 = 0xFFFF

// Len returns the number of elements of t's shape (1 for an empty shape).
func (t Tensor) Len() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Poison queues on stream (nil: the legacy default stream) a fill of the
// bytes of t's shape (t.Len() elements of t.DType) with 0xFF, so that every
// bf16 element reads PoisonBF16 and every f32 one a NaN until the forward
// writes it; PoisonCounts then counts what it did not write. A tensor
// without elements is left alone. Errors are the driver's
// (*driver.DriverError; driver.ErrNoCUDA without the cuda build tag).
func Poison(ctx *driver.Context, stream *driver.Stream, t Tensor) error {
	n := t.Len() * int(t.DType.Size())
	if n <= 0 {
		return nil
	}
	return ctx.MemsetAsync(t.Ptr, 0xFF, n, stream)
}

// PoisonCounts counts, in y (the bf16 bits of an output that Poison filled
// before the forward), the elements still holding PoisonBF16 (unwritten)
// and the other NaN or Inf values (nonFinite: exponent bits all ones).
func PoisonCounts(y []uint16) (unwritten, nonFinite int) {
	for _, b := range y {
		if b == PoisonBF16 {
			unwritten++
		} else if b&0x7F80 == 0x7F80 {
			nonFinite++
		}
	}
	return unwritten, nonFinite
}

// ReadFloats copies the t.Len() elements of a bf16 or f32 tensor to the
// host, widened to float64 (bf16 exactly), waiting for the copy; the check
// side of Poison for outputs other than y (gradients, main grads). Another
// dtype is an error, as are the driver's.
func ReadFloats(ctx *driver.Context, t Tensor) ([]float64, error) {
	n := t.Len()
	out := make([]float64, n)
	if n == 0 {
		return out, nil
	}
	switch t.DType {
	case BF16:
		h := make([]uint16, n)
		if err := ctx.CopyFromDevice(h, t.Ptr); err != nil {
			return nil, err
		}
		for i, v := range FromBF16(h) {
			out[i] = float64(v)
		}
	case F32:
		h := make([]float32, n)
		if err := ctx.CopyFromDevice(h, t.Ptr); err != nil {
			return nil, err
		}
		for i, v := range h {
			out[i] = float64(v)
		}
	default:
		return nil, fmt.Errorf("mokc runtime: ReadFloats: dtype %s is not bf16 or f32", t.DType)
	}
	return out, nil
}
