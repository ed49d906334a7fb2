package runtime

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/mokc/mokc/driver"
	"github.com/mokc/mokc/layouts"
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
	if t.DType != BF16 && t.DType != F32 {
		return nil, fmt.Errorf("mokc runtime: ReadFloats: dtype %s is not bf16 or f32", t.DType)
	}
	raw, err := ReadBytes(ctx, t, nil)
	if err != nil {
		return nil, err
	}
	return DecodeFloats(t.DType, raw)
}

// ReadBytes copies the bytes of t's shape (t.Len() elements of t.DType) to
// the host, into buf when it has the capacity (else a new slice), and
// returns them, waiting for the copy: for comparing runs bit for bit
// without widening. Errors are the driver's.
func ReadBytes(ctx *driver.Context, t Tensor, buf []byte) ([]byte, error) {
	n := t.Len() * int(t.DType.Size())
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if n == 0 {
		return buf, nil
	}
	if err := ctx.CopyFromDevice(buf, t.Ptr); err != nil {
		return nil, err
	}
	return buf, nil
}

// DecodeFloats widens the little-endian bf16 or f32 elements in raw (as
// ReadBytes returns them) to float64; bf16 and f32 convert exactly. A
// dtype other than bf16 or f32, or a length that is not a whole number of
// elements, is an error.
func DecodeFloats(dtype DType, raw []byte) ([]float64, error) {
	size := int(dtype.Size())
	if (dtype != BF16 && dtype != F32) || len(raw)%size != 0 {
		return nil, fmt.Errorf("mokc runtime: DecodeFloats: %d bytes of %s (want bf16 or f32 elements)", len(raw), dtype)
	}
	out := make([]float64, len(raw)/size)
	for i := range out {
		if dtype == BF16 {
			out[i] = float64(layouts.F32FromBF16(binary.LittleEndian.Uint16(raw[2*i:])))
		} else {
			out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])))
		}
	}
	return out, nil
}
