package driver

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Args holds a kernel's parameters with their exact sizes, in declaration
// order, for Function.Launch and Function.LaunchEx.
//
// cuLaunchKernel takes one host pointer per parameter and copies as many
// bytes from it as the kernel's PTX declares for that parameter (.u32: 4,
// .u64: 8, .b8 name[128]: 128); it never sees the Go type. So each argument
// must be appended with the method of the PTX parameter's size: U32 for a
// .u32/.s32/.b32, U64/Ptr for a .u64/.b64, F32 for a .f32, Bytes for a
// by-value array such as a 128-byte CUtensorMap. Launch checks the sizes
// against the kernel's own parameter list when the driver can report it
// (cuFuncGetParamInfo, CUDA 12.4+). Values are stored little-endian, as on
// every CUDA host.
//
// The zero value is an empty argument list ready to use; the methods return
// the receiver so that calls chain:
//
//	args := driver.NewArgs().Ptr(x).Ptr(y).U32(n).F32(alpha)
type Args struct {
	buf   []byte // packed values, each at a 16-byte aligned offset
	offs  []uint64
	sizes []int
	err   error
}

// NewArgs returns an empty argument list.
func NewArgs() *Args { return &Args{} }

func (a *Args) add(b []byte) *Args {
	if len(b) == 0 {
		if a.err == nil {
			a.err = fmt.Errorf("mokc driver: kernel argument %d: empty Bytes", len(a.sizes))
		}
		return a
	}
	off := (len(a.buf) + 15) &^ 15
	for len(a.buf) < off {
		a.buf = append(a.buf, 0)
	}
	a.offs = append(a.offs, uint64(off))
	a.sizes = append(a.sizes, len(b))
	a.buf = append(a.buf, b...)
	return a
}

// U8 appends a 1-byte parameter (.u8/.s8/.b8).
func (a *Args) U8(v uint8) *Args { return a.add([]byte{v}) }

// U16 appends a 2-byte parameter (.u16/.s16/.b16, or one bf16/f16 value as
// its bits).
func (a *Args) U16(v uint16) *Args { return a.add(binary.LittleEndian.AppendUint16(nil, v)) }

// U32 appends a 4-byte parameter (.u32/.b32).
func (a *Args) U32(v uint32) *Args { return a.add(binary.LittleEndian.AppendUint32(nil, v)) }

// I32 appends a 4-byte parameter (.s32).
func (a *Args) I32(v int32) *Args { return a.U32(uint32(v)) }

// U64 appends an 8-byte parameter (.u64/.b64).
func (a *Args) U64(v uint64) *Args { return a.add(binary.LittleEndian.AppendUint64(nil, v)) }

// I64 appends an 8-byte parameter (.s64).
func (a *Args) I64(v int64) *Args { return a.U64(uint64(v)) }

// F32 appends a 4-byte parameter (.f32), as its IEEE-754 bits.
func (a *Args) F32(v float32) *Args { return a.U32(math.Float32bits(v)) }

// F64 appends an 8-byte parameter (.f64), as its IEEE-754 bits.
func (a *Args) F64(v float64) *Args { return a.U64(math.Float64bits(v)) }

// Ptr appends a device pointer (an 8-byte .u64 parameter).
func (a *Args) Ptr(p DevicePtr) *Args { return a.U64(uint64(p)) }

// Bytes appends a by-value parameter of len(b) bytes, such as a
// `.param .align 64 .b8 tmap[128]` tensor map from Context.EncodeTensorMapTiled. The
// bytes are copied. An empty b is an error reported by Err and by Launch.
func (a *Args) Bytes(b []byte) *Args { return a.add(b) }

// Len returns the number of parameters.
func (a *Args) Len() int {
	if a == nil {
		return 0
	}
	return len(a.sizes)
}

// Sizes returns the size in bytes of each parameter, in order.
func (a *Args) Sizes() []int {
	if a == nil {
		return nil
	}
	return append([]int(nil), a.sizes...)
}

// Value returns a copy of the bytes of parameter i (little-endian).
func (a *Args) Value(i int) []byte {
	if a == nil || i < 0 || i >= len(a.sizes) {
		return nil
	}
	off := int(a.offs[i])
	return append([]byte(nil), a.buf[off:off+a.sizes[i]]...)
}

// Err returns the first error made while building the list (an empty Bytes).
func (a *Args) Err() error {
	if a == nil {
		return nil
	}
	return a.err
}

// checkParamSizes compares the argument sizes with the kernel's parameter
// sizes (from cuFuncGetParamInfo) and names the first mismatch, or the
// count when Args has more or fewer arguments than the kernel parameters.
func checkParamSizes(kernel string, want []int, args *Args) error {
	got := args.Sizes()
	for i := 0; i < len(got) && i < len(want); i++ {
		if got[i] != want[i] {
			return fmt.Errorf("mokc driver: launch %s: parameter %d is %d bytes in the kernel but %d bytes in Args", kernel, i, want[i], got[i])
		}
	}
	if len(got) != len(want) {
		return fmt.Errorf("mokc driver: launch %s: kernel has %d parameters, Args has %d", kernel, len(want), len(got))
	}
	return nil
}
