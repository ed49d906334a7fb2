package moe

import "github.com/mokc/mokc/launch"

// DType is the element type of a buffer.
type DType string

// Element types of the programs.
const (
	BF16 DType = "bf16" // bfloat16 (1 sign, 8 exponent, 7 mantissa bits)
	F32  DType = "f32"  // IEEE-754 binary32
	I32  DType = "i32"  // signed 32-bit integer
	U8   DType = "u8"   // unsigned byte (routing-map flags)
	U32  DType = "u32"  // unsigned 32-bit integer (the error word)
	U64  DType = "u64"  // unsigned 64-bit integer (device pointers)
	// E4M3 and UE8M0 are MXFP8's element and block scale (OCP
	// Microscaling Formats v1.0): FP8 with 4 exponent and 3 mantissa bits
	// (bias 7, max 448, no infinity), and the 8-bit exponent 2^(code-127)
	// (code 255: NaN) shared by 32 consecutive elements along K.
	E4M3  DType = "e4m3"
	UE8M0 DType = "ue8m0"
)

// Size is the size of one element in bytes (0 for an unknown type).
func (d DType) Size() int64 {
	switch d {
	case U8, E4M3, UE8M0:
		return 1
	case BF16:
		return 2
	case F32, I32, U32:
		return 4
	case U64:
		return 8
	}
	return 0
}

// Kind says who provides a buffer: the caller (inputs and outputs) or the
// runtime (scratch, which needs no initialisation).
type Kind = launch.BufferKind

// Buffer kinds.
const (
	Input   = launch.BufInput
	Output  = launch.BufOutput
	Scratch = launch.BufScratch
	InOut   = launch.BufInOut
)

// Buffer is a dense row-major tensor of the program. At most one dimension
// of Shape depends on T (launch.Expr of the token count).
type Buffer struct {
	Name  string        // name kernels' parameters bind and callers bind by, e.g. BufX, BufFC1, BufY
	Kind  Kind          // who provides it
	DType DType         // element type
	Shape []launch.Expr // logical shape, outermost first
	Doc   string        // one-line description of the contents
}

// Bytes is the size of b in bytes as a function of T: the element size
// times the product of the shape, rounded up where the T-dependent
// dimension is a ceiling division (c*ceil((a*T+b)/d) <= ceil((c*a*T + c*b +
// c*d)/d)).
func (b *Buffer) Bytes() launch.Expr {
	bytes := launch.Expr{D: 1}
	c := b.DType.Size()
	var tdim *launch.Expr
	for i := range b.Shape {
		if b.Shape[i].A != 0 {
			tdim = &b.Shape[i]
		} else {
			c *= b.Shape[i].Eval(0)
		}
	}
	if tdim == nil {
		bytes.B = c
		return bytes
	}
	bytes.A, bytes.B, bytes.D = tdim.A*c, tdim.B*c, tdim.D
	if tdim.D > 1 {
		bytes.B += c * tdim.D
	}
	return bytes
}

// Len is the number of elements of b's shape at T tokens.
func (b *Buffer) Len(T int64) int64 {
	n := int64(1)
	for _, d := range b.Shape {
		n *= d.Eval(T)
	}
	return n
}

// Plan is b as a buffer of the launch plan (launch.Buffer).
func (b *Buffer) Plan() launch.Buffer {
	return launch.Buffer{Name: b.Name, Kind: b.Kind, DType: string(b.DType), Shape: b.Shape, Bytes: b.Bytes(), Doc: b.Doc}
}

// String is "name dtype[d0,d1,...]", e.g. "xs bf16[8*T,7168]".
func (b *Buffer) String() string {
	s := b.Name + " " + string(b.DType) + "["
	for i, d := range b.Shape {
		if i > 0 {
			s += ","
		}
		s += d.String()
	}
	return s + "]"
}

// Access is how an op uses an operand.
type Access int

// Accesses.
const (
	Read      Access = iota // reads only
	Write                   // writes (elements it does not write keep their value)
	ReadWrite               // accumulates into it (atomic adds, ORs): needs prior contents
)

// Operand is a buffer an op reads or writes, under the role the op gives it
// (under the PerOp lowering, the kernel parameter's name).
type Operand struct {
	Role   string  // e.g. "ids", "a", "c"
	Buffer *Buffer // the buffer
	Access Access  // how the op uses it
}

// Reads reports whether the op reads the operand's prior contents.
func (o Operand) Reads() bool { return o.Access != Write }

// Writes reports whether the op writes the operand.
func (o Operand) Writes() bool { return o.Access != Read }

// String is "role:buffer", with "=" for written and "+=" for accumulated
// operands, e.g. "ids:ids", "c=h", "err+=err".
func (o Operand) String() string {
	sep := [...]string{Read: ":", Write: "=", ReadWrite: "+="}[o.Access]
	return o.Role + sep + o.Buffer.Name
}
