package ptx

import (
	"fmt"

	"github.com/mokc/mokc/launch"

	llir "github.com/llir/llvm/ir"
)

// Target is a PTX compilation target: the `.target` directive of the output,
// which also fixes its `.version` (see Target.Version).
type Target string

// The targets mokc compiles for.
const (
	SM80   Target = "sm_80"   // Ampere (A100): PTX ISA 8.0
	SM90a  Target = "sm_90a"  // Hopper (H100/H200) with wgmma/setmaxnreg: PTX ISA 8.0
	SM100a Target = "sm_100a" // Blackwell (B200) with tcgen05: PTX ISA 8.8
)

// Targets lists every supported target.
var Targets = []Target{SM80, SM90a, SM100a}

// Version is the PTX ISA version emitted for t: "8.0" for sm_80 and sm_90a
// (the lowest that has sm_90a and everything the backend emits, e.g.
// cvta.param from PTX 7.7; accepted by every ptxas 12.x), "8.8" for sm_100a
// (tcgen05 block-scaled MMA spellings need it; PTX ISA "Release notes").
func (t Target) Version() (string, error) {
	switch t {
	case SM80, SM90a:
		return "8.0", nil
	case SM100a:
		return "8.8", nil
	}
	return "", fmt.Errorf("ptx: unknown target %q (want sm_80, sm_90a or sm_100a)", string(t))
}

// SM is the compute capability of t times ten (80, 90, 100).
func (t Target) SM() int {
	switch t {
	case SM80:
		return 80
	case SM90a:
		return 90
	case SM100a:
		return 100
	}
	return 0
}

// Result is a compiled module: the PTX text and what a launcher needs to know
// about each kernel.
type Result struct {
	Text    string       // the PTX module
	Target  Target       // its .target
	Version string       // its .version, e.g. "8.0"
	Kernels []KernelInfo // one per .entry, in module order
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
func Compile(m *llir.Module, target Target) (string, error) {
	r, err := CompileModule(m, target)
	if err != nil {
		return "", err
	}
	return r.Text, nil
}

// CompileModule lowers the LLVM IR module m (the subset documented in the
// package doc) to PTX for target. Constructs outside the subset are an *Error naming the function and
// the instruction; the module is not modified.
func CompileModule(m *llir.Module, target Target) (*Result, error) {
	version, err := target.Version()
	if err != nil {
		return nil, err
	}
	if m == nil {
		return nil, fmt.Errorf("ptx: nil module")
	}
	c := &compilation{mod: m, target: target, version: version}
	if err := runPasses(c, passes); err != nil {
		return nil, err
	}
	return &Result{Text: c.text, Target: target, Version: version, Kernels: c.kernels}, nil
}
