package launch

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
	Name  string    `json:"name"`            // parameter name in the kernel's signature
	Type  ParamType `json:"type"`            // what the runtime passes: pointer, scalar or tensor map
	Size  int       `json:"size"`            // bytes
	Align int       `json:"align,omitempty"` // 0: Size
	Role  string    `json:"role,omitempty"`  // GEMM operand role (codegen's gemm_spec.go), "" for other kernels
	// Buffer names the buffer whose device address is passed (ParamPtr),
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
	Operand     string `json:"operand"`      // GEMM role (codegen.RoleA, RoleB, RoleC) before codegen.Build binds Buffer
	DType       string `json:"dtype"`        // "bf16", "f32", "u8"
	Dims        []Expr `json:"dims"`         // elements per dimension
	StrideBytes []Expr `json:"stride_bytes"` // len(Dims)-1 strides
	Box         []int  `json:"box"`          // box size per dimension
	Swizzle     int    `json:"swizzle"`      // 0, 32, 64 or 128 (bytes)
}

// Kernel is one launch of a launch plan.
type Kernel struct {
	Name   string  `json:"name"`   // .entry symbol in the PTX module
	Params []Param `json:"params"` // parameters in declaration order
	Block  int     `json:"block"`  // threads per block (x only)
	// Grid is the blocks per dimension as functions of T. The data-parallel
	// kernels size it to their work (surplus blocks exit); the persistent
	// GEMMs loop over their tiles with a stride of gridDim.x, so any grid of
	// at least one block is correct and one block per SM is the intent.
	Grid        [3]Expr `json:"grid"`
	SharedBytes int     `json:"shared_bytes"` // dynamic shared memory (the runtime raises the >48 KB limit)
	// GridPerSM: Grid[0] is one block per SM of the target's reference part
	// (the default grid of a persistent GEMM; BlocksPerSM per SM where it
	// is set); launch as many per SM of the device instead. The kernel strides over its work by gridDim.x, so
	// either is correct; the device's count fills it exactly once.
	GridPerSM bool `json:"grid_per_sm,omitempty"`
	// CoResident: the kernel's blocks wait for one another's work (a
	// chained kernel's second GEMM waits for the first's rows, codegen
	// Engine.ChainedGEMM; the persistent kernel's phases end in grid-wide
	// barriers, codegen.Persistent), so every block of the grid must be resident at
	// once: launch at most one block per SM of the device (GridPerSM's
	// grid) where no other work holds an SM until it ends. Where its
	// blocks are not all resident, a wait gives up after the kernel's
	// wait limit (ParamWaitLimit) and the error word reports
	// ErrWaitTimeout: the run's outputs are then not valid.
	CoResident bool `json:"co_resident,omitempty"`
	// Cluster is the thread-block cluster size along x (0: none), which
	// the kernel's PTX declares (.reqnctapercluster): a launch needs no
	// cluster attribute, but Grid[0] must be a multiple of it (the
	// runtime rounds GridPerSM's grid down to one). The sm_90a routed
	// GEMMs of schedule.Schedule.Cluster = 2 walk their work items in
	// CTA pairs sharing A by TMA multicast.
	Cluster int `json:"cluster,omitempty"`
	// BlocksPerSM is the blocks per SM a kernel is built to hold at once
	// (0: one; .maxnreg and shared memory within that share): with
	// GridPerSM its grid is that many per SM of the device (the Go runtime
	// asks for the largest shared-memory carveout and refuses a device
	// where fewer fit; the walk over the work items is correct with any
	// grid). The sm_90a GEMMs of codegen.Tile.BlocksPerSM = 2 run two
	// blocks per SM, so one's epilogue overlaps the other's K loop.
	BlocksPerSM int `json:"blocks_per_sm,omitempty"`
	// Phases names the kernel's inner phases (a chained kernel's: its
	// GEMMs' work items, "<kernel>/<gemm>"), each with records of its own
	// in BufPhaseTimes of an instrumented program.
	Phases []string `json:"phases,omitempty"`
	// SkipIfZeroT: the launch is omitted when T = 0 (only kernels whose
	// outputs are empty at T = 0 carry it; the kernel that clears the
	// error word, moe_dispatch_small or moe_init, runs at every T).
	SkipIfZeroT bool `json:"skip_if_zero_t,omitempty"`
	// Tokens, when not empty, limits the launch to token counts T inside
	// one of these inclusive ranges. A program can hold kernels that
	// replace one another by T, each for the T where it is fastest: the
	// variants of a GEMM with different tiles (schedule.TileVariant),
	// whose ranges partition T >= 1; moe_dispatch_small for few tokens and
	// the four routing kernels it replaces, whose ranges partition T >= 0;
	// moe_quantize_h where the FC1 variant does not quantize h itself. So
	// exactly one kernel of each such group runs at each T.
	Tokens []TokenRange `json:"tokens,omitempty"`
	// Programmatic: the kernel begins with griddepcontrol.wait (followed by
	// griddepcontrol.launch_dependents, except in the kernels that let the
	// next one launch only when they exit: the persistent GEMMs and the
	// row-wise kernels launched at large T), so a launcher may launch it with
	// programmatic stream serialization
	// (CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, sm_90+): the
	// launch may begin while the previous kernel in the stream still runs,
	// and waits at its first instruction until that kernel has finished
	// and its memory is visible. Launched plainly it runs as any kernel
	// (the wait returns at once). CUDA Programming Guide, "Programmatic
	// Dependent Launch and Synchronization"; PTX ISA "griddepcontrol".
	Programmatic bool `json:"programmatic,omitempty"`
}

// TokenRange is an inclusive range of token counts T.
type TokenRange struct {
	Min int64 `json:"min"` // smallest T, inclusive
	Max int64 `json:"max"` // largest T, inclusive (MaxTokens when open-ended)
}

// MaxTokens is the largest token count a launch plan serves (T*K and T*E
// are held in 32-bit integers by the kernels): the upper end of an
// open-ended TokenRange.
const MaxTokens = 1<<31 - 1

// RunsAt reports whether the kernel is launched for T tokens: not when T
// = 0 and SkipIfZeroT, not when T is outside every range of Tokens, and
// not when a grid dimension evaluates to 0 or less.
func (k Kernel) RunsAt(T int64) bool {
	if T == 0 && k.SkipIfZeroT {
		return false
	}
	if len(k.Tokens) > 0 {
		in := false
		for _, r := range k.Tokens {
			in = in || (r.Min <= T && T <= r.Max)
		}
		if !in {
			return false
		}
	}
	for _, g := range k.Grid {
		if g.Eval(T) <= 0 {
			return false
		}
	}
	return true
}

// BufferKind says who provides a buffer of a launch plan.
type BufferKind string

// Buffer kinds.
const (
	BufInput   BufferKind = "input"   // caller-provided input (activations, routing, weights)
	BufOutput  BufferKind = "output"  // caller-provided output
	BufScratch BufferKind = "scratch" // workspace the runtime allocates; contents need no initialisation, but BufWorkQueue's (zero at allocation)
	// BufInOut is caller-owned and accumulated into: read, then written
	// (the backward's main-grad buffers, main += dW).
	BufInOut BufferKind = "inout"
)

// Buffer is a device allocation the kernels read or write. Bytes is its
// size as a function of T (at least 1 byte is allocated when it evaluates
// to 0).
type Buffer struct {
	Name  string     `json:"name"`  // name Param.Buffer and callers bind by (the moe program's, e.g. moe.BufX)
	Kind  BufferKind `json:"kind"`  // who provides it
	DType string     `json:"dtype"` // "bf16", "f32", "i32", "u8", "u64"
	Shape []Expr     `json:"shape"` // logical shape, outermost first
	Bytes Expr       `json:"bytes"` // size in bytes as a function of T
	Doc   string     `json:"doc"`   // one-line description of the contents
}

// BufPhaseTimes is the scratch buffer of an instrumented program
// (schedule.Schedule.PhaseTimes): u64 [(len(Kernels) + inner phases) * 2 *
// PhaseSlots], and every kernel's last parameter. For kernel i (its index in the plan's
// Kernels) the PhaseSlots words from 2*PhaseSlots*i hold the earliest start
// of its blocks and the next PhaseSlots words the latest end of its warps,
// in %globaltimer nanoseconds (PTX ISA "Special Registers: %globaltimer");
// block b's records go to slot b mod PhaseSlots, so that no one address
// takes every block's reduction. A launcher sets the start words to all
// ones and the end words to zero before a run; the kernel started at its
// least start word and ended at its greatest end word, and one that did
// not run leaves them as set. The kernels' inner phases (Kernel.Phases)
// follow as records of their own: record len(Kernels)+j is the j-th inner
// phase in the order of Kernels (the first kernel's phases first), its
// start the earliest start of a warp's lane 0 in the phase and its end the
// latest end.
const BufPhaseTimes = "phase_times"

// BufWorkQueue is the scratch buffer of the work queues and dependency
// counters of kernels whose blocks take numbered work items (u32 words:
// codegen's moe_dispatch 4, a GEMM with GemmSpec.QueueItems 2). A launcher zeroes
// it when it allocates the workspace; every kernel leaves its words zero
// when it ends (its last block resets them), so runs, and the replays of a
// captured graph, need no host work. Unlike the other scratch buffers it
// must not be poisoned or reused for anything else between runs; after a
// run that faulted (its words as the fault left them) zero it again.
const BufWorkQueue = "work_queue"

// PhaseSlots is the number of words per kernel and record in BufPhaseTimes.
const PhaseSlots = 32

// ErrBuffer is the name of the error words buffer (u32[2]) of every forward
// program. Word 0 is the run's: its first kernel clears it, the kernels OR
// the error codes below into it, and 0 means no error. Word 1 keeps
// ErrWaitTimeout across runs (no kernel clears it): a launcher that reads
// word 0 only after some runs still learns that an earlier one timed out;
// it clears word 1 when it has read it.
const ErrBuffer = "err"

// Error codes of the error word (buffer ErrBuffer).
const (
	ErrBadExpertID  = 1 // an id >= E or < -1 (the slot is treated as -1)
	ErrTooManyRoute = 2 // a dense routing-map row with more than K routes (the first K in expert order are kept)
	// ErrWaitTimeout: a block of a CoResident kernel waited longer than
	// its wait limit (ParamWaitLimit) for another block's work and went
	// on without it, so the run's outputs are not valid. The blocks were
	// not all resident at once (other persistent work on the device, an
	// MPS or green-context share of its SMs, a grid above one block per
	// SM) or a block stopped early; once one wait has given up, every
	// later wait of the run that finds its work not yet done gives up at
	// once, so the kernel ends. Set in both words of ErrBuffer.
	ErrWaitTimeout = 4
)

// ParamWaitLimit is the name of the i64 parameter of a CoResident
// kernel whose blocks wait for one another: how long, in nanoseconds of
// %globaltimer (PTX ISA "Special Registers: %globaltimer"), one wait may
// last before it gives up and sets ErrWaitTimeout; 0 waits without limit.
// Its Param.Value is DefaultWaitLimitNs; a launcher may pass another
// value (more under a sanitizer that slows the kernel by more than the
// limit allows, 0 to never give up).
const ParamWaitLimit = "wait_limit_ns"

// DefaultWaitLimitNs is the wait limit (ParamWaitLimit) a program's
// manifest gives, in nanoseconds: 10 s, hundreds of times the longest
// wait of a run whose blocks are all resident (at most the first GEMM's
// time: tens of milliseconds for the largest presets at T = 16384).
const DefaultWaitLimitNs = 10_000_000_000
