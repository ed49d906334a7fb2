package codegen

import "fmt"

// Expr is a non-negative integer as a function of the token count T:
//
//	value(T) = max(Min, ceil((A*T + B) / D))
//
// (D = 0 is read as 1). Grid sizes and buffer sizes of a Program are Exprs so
// the host can size everything from T alone, without reading anything back
// from the device.
type Expr struct {
	A   int64 `json:"a"`
	B   int64 `json:"b"`
	D   int64 `json:"d"`
	Min int64 `json:"min"`
}

// Const is the Expr that is c for every T.
func Const(c int64) Expr { return Expr{B: c, D: 1, Min: c} }

// PerT is the Expr a*T + b.
func PerT(a, b int64) Expr { return Expr{A: a, B: b, D: 1} }

// Eval returns the value of e at T tokens.
func (e Expr) Eval(T int64) int64 {
	d := e.D
	if d <= 0 {
		d = 1
	}
	n := e.A*T + e.B
	v := (n + d - 1) / d
	if n < 0 {
		v = n / d
	}
	if v < e.Min {
		v = e.Min
	}
	return v
}

// String writes e in a readable form, e.g. "max(1, ceil((8*T+8192)/128))".
func (e Expr) String() string {
	d := e.D
	if d <= 0 {
		d = 1
	}
	s := fmt.Sprintf("%d*T+%d", e.A, e.B)
	if e.A == 0 {
		s = fmt.Sprint(e.B)
	}
	if d != 1 {
		s = fmt.Sprintf("ceil((%s)/%d)", s, d)
	}
	if e.Min > 0 && !(e.A == 0 && (e.B+d-1)/d >= e.Min) {
		s = fmt.Sprintf("max(%d, %s)", e.Min, s)
	}
	return s
}

// ParamType is the PTX-level type of a kernel parameter.
type ParamType string

// Kernel parameter types.
const (
	ParamPtr  ParamType = "ptr"  // 64-bit device address (.u64)
	ParamI32  ParamType = "i32"  // .u32 / .s32
	ParamI64  ParamType = "i64"  // .u64
	ParamF32  ParamType = "f32"  // .f32
	ParamTmap ParamType = "tmap" // 128-byte CUtensorMap passed by value (.param .align 64 .b8 [128])
)

// Param is one kernel parameter, in order. Size is in bytes (exact: the
// runtime packs parameters at these sizes and alignments).
type Param struct {
	Name  string    `json:"name"`
	Type  ParamType `json:"type"`
	Size  int       `json:"size"`
	Align int       `json:"align,omitempty"` // 0: Size
	Role  string    `json:"role,omitempty"`  // GEMM operand role (engine.go), "" for other kernels
	// Buffer names the Program buffer whose device address is passed (ParamPtr),
	// or, for ParamTmap, the buffer the tensor map describes.
	Buffer string `json:"buffer,omitempty"`
	// Value is the argument of a scalar parameter as a function of T.
	Value *Expr `json:"value,omitempty"`
	// TensorMap describes the tensor map to encode (ParamTmap only).
	TensorMap *TensorMap `json:"tensor_map,omitempty"`
}

// TensorMap describes a tiled CUtensorMap (cuTensorMapEncodeTiled) the host
// encodes for a kernel parameter. Dims and Box are innermost first; strides
// are in bytes for dimensions 1.. (dimension 0 is contiguous).
type TensorMap struct {
	Operand     string `json:"operand"`      // GEMM role (RoleA, RoleB, RoleC) before Build binds Buffer
	DType       string `json:"dtype"`        // "bf16", "f32", "u8"
	Dims        []Expr `json:"dims"`         // elements per dimension
	StrideBytes []Expr `json:"stride_bytes"` // len(Dims)-1 strides
	Box         []int  `json:"box"`          // box size per dimension
	Swizzle     int    `json:"swizzle"`      // 0, 32, 64 or 128 (bytes)
}

// Kernel is one launch of a Program.
type Kernel struct {
	Name        string  `json:"name"`
	Params      []Param `json:"params"`
	Block       int     `json:"block"`        // threads per block (x only)
	Grid        [3]Expr `json:"grid"`         // blocks per dimension, functions of T (upper bounds; surplus blocks exit)
	SharedBytes int     `json:"shared_bytes"` // dynamic shared memory (the runtime raises the >48 KB limit)
	// SkipIfZeroT: the launch is omitted when T = 0 (only kernels whose
	// outputs are empty at T = 0 carry it; the init kernel always runs).
	SkipIfZeroT bool `json:"skip_if_zero_t,omitempty"`
}

// BufferKind says who provides a Program buffer.
type BufferKind string

// Buffer kinds.
const (
	BufInput   BufferKind = "input"   // caller-provided input (activations, routing, weights)
	BufOutput  BufferKind = "output"  // caller-provided output
	BufScratch BufferKind = "scratch" // workspace the runtime allocates; contents need no initialisation
)

// Buffer is a device allocation a Program reads or writes. Bytes is its size
// as a function of T (at least 1 byte is allocated when it evaluates to 0).
type Buffer struct {
	Name  string     `json:"name"`
	Kind  BufferKind `json:"kind"`
	DType string     `json:"dtype"` // "bf16", "f32", "i32", "u8", "u64"
	Shape []Expr     `json:"shape"` // logical shape, outermost first
	Bytes Expr       `json:"bytes"`
	Doc   string     `json:"doc"`
}

// Error codes a Program ORs into its error word (buffer "err", u32[1]); 0 means no error.
const (
	ErrBadExpertID  = 1 // an id >= E or < -1 (the slot is treated as -1)
	ErrTooManyRoute = 2 // a dense routing-map row with more than K routes (the first K in expert order are kept)
)
