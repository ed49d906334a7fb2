package ptx

import (
	"fmt"

	"github.com/mokc/mokc/launch"
	"github.com/mokc/mokc/target"

	llir "github.com/llir/llvm/ir"
)

// Result is a compiled module: the PTX text and what a launcher needs to know
// about each kernel.
type Result struct {
	Text    string        // the PTX module
	Target  target.Target // its .target
	Version string        // its .version, e.g. "8.0"
	Kernels []KernelInfo  // one per .entry, in module order
}

// KernelInfo describes one kernel (.entry) of a compiled module.
type KernelInfo struct {
	// Name is the .entry symbol (the LLVM function name; names that are not
	// PTX identifiers are an error for kernels).
	Name string
	// Params are the kernel parameters in order, as laid out in the parameter
	// buffer of cuLaunchKernel.
	Params []Param
	// ParamBytes is the size of the parameter buffer: the end of the last
	// parameter (0 without parameters).
	ParamBytes int
	// StaticSharedBytes is the static shared memory the kernel references
	// (directly or through the functions it calls), in bytes: the sizes of its
	// .shared variables in module order, each aligned to its alignment. ptxas
	// may lay them out differently; cuFuncGetAttribute(SHARED_SIZE_BYTES) is
	// the authority at run time.
	StaticSharedBytes int
	// DynamicShared reports that the kernel references an `.extern .shared`
	// array (dynamic shared memory sized at launch).
	DynamicShared bool
	// MaxNTID is the .maxntid bound from the maxntidx/y/z annotations (zero
	// when absent); MaxThreads is its product (threads per block).
	MaxNTID    [3]int
	MaxThreads int // product of the nonzero MaxNTID extents; 0 when absent
	// MinBlocksPerSM is .minnctapersm from the minctasm annotation (0: none).
	MinBlocksPerSM int
	// MaxRegs is .maxnreg from the maxnreg annotation (0: none).
	MaxRegs int
	// ClusterDim is .reqnctapercluster from the cluster_dim_x/y/z annotations
	// (zero when absent; sm_90a and newer).
	ClusterDim [3]int
}

// Param is one kernel parameter as laid out in the parameter buffer of
// cuLaunchKernel: the launch manifest's type, so the compiler hands the
// backend's layout to launchers unchanged.
type Param = launch.PTXParam

// Error is a refusal to compile: the construct is outside the supported IR
// subset (or the IR is malformed). Func and Inst name the LLVM function and
// the instruction text; either may be empty for module-level problems.
type Error struct {
	Func string // LLVM function name, without '@'
	Inst string // LLVM text of the offending instruction, global or parameter
	Msg  string // what is unsupported or malformed
}

// Error formats the refusal as "ptx: in function @F: message: instruction".
func (e *Error) Error() string {
	s := "ptx: "
	if e.Func != "" {
		s += "in function @" + e.Func + ": "
	}
	s += e.Msg
	if e.Inst != "" {
		s += ": " + e.Inst
	}
	return s
}

// Compile lowers the LLVM IR module m to PTX text for target. It is
// CompileModule without the metadata.
func Compile(m *llir.Module, tg target.Target) (string, error) {
	r, err := CompileModule(m, tg)
	if err != nil {
		return "", err
	}
	return r.Text, nil
}

// CompileModule lowers the LLVM IR module m (the subset documented in the
// package doc) to PTX for target. Constructs outside the subset are an *Error naming the function and
// the instruction; the module is not modified.
func CompileModule(m *llir.Module, tg target.Target) (*Result, error) {
	if !tg.Valid() {
		return nil, fmt.Errorf("ptx: invalid target %v (want %s)", tg, target.Names())
	}
	version := tg.PTXVersion()
	if m == nil {
		return nil, fmt.Errorf("ptx: nil module")
	}
	c := &compilation{mod: m, target: tg, version: version}
	if err := runPasses(c, passes); err != nil {
		return nil, err
	}
	return &Result{Text: c.text, Target: tg, Version: version, Kernels: c.kernels}, nil
}
