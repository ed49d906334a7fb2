package codegen

import "github.com/mokc/mokc/launch"

// The launch plan of a Program is made of package launch's types, the ones
// the manifest and the runtime share; codegen names them without the
// package prefix, as nearly every kernel builder writes a plan entry.
type (
	// Expr is launch.Expr: max(Min, ceil((A*T + B) / D)) at T tokens.
	Expr = launch.Expr
	// Param is launch.Param: one kernel parameter of the plan.
	Param = launch.Param
	// TensorMap is launch.TensorMap: a tiled CUtensorMap the host encodes.
	TensorMap = launch.TensorMap
	// Kernel is launch.Kernel: one launch of a Program.
	Kernel = launch.Kernel
	// BufferKind is launch.BufferKind: who provides a buffer.
	BufferKind = launch.BufferKind
	// Buffer is launch.Buffer: a device allocation of a Program.
	Buffer = launch.Buffer
)

// Kernel parameter types (launch.ParamType) codegen's kernels take.
const (
	ParamPtr  = launch.ParamPtr  // 64-bit device address
	ParamI32  = launch.ParamI32  // .u32 / .s32
	ParamI64  = launch.ParamI64  // .u64
	ParamTmap = launch.ParamTmap // 128-byte CUtensorMap passed by value
)

// Buffer kinds (launch.BufferKind).
const (
	BufInput   = launch.BufInput   // caller-provided input
	BufOutput  = launch.BufOutput  // caller-provided output
	BufScratch = launch.BufScratch // workspace the runtime allocates
)

// Error codes a Program ORs into its error word (buffer "err", u32[2], word 0; launch.ErrBuffer); 0
// means no error (launch.ErrBadExpertID, launch.ErrTooManyRoute,
// launch.ErrWaitTimeout).
const (
	ErrBadExpertID  = launch.ErrBadExpertID  // an id >= E or < -1 (the slot is treated as -1)
	ErrTooManyRoute = launch.ErrTooManyRoute // a dense routing-map row with more than K routes
	ErrWaitTimeout  = launch.ErrWaitTimeout  // a co-resident kernel's wait gave up (its outputs are not valid)
)

// Const is launch.Const: the Expr that is c for every T.
func Const(c int64) Expr { return launch.Const(c) }

// PerT is launch.PerT: the Expr a*T + b.
func PerT(a, b int64) Expr { return launch.PerT(a, b) }
