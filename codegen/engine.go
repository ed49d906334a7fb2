package codegen

import (
	"fmt"
	"sort"
	"sync"

	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/target"
)

// Engine emits the grouped GEMM kernels of one target into an LLVM module.
//
// GroupedGEMM adds one kernel (a function annotated as a kernel, plus any
// helpers) named spec.Name to m, taking GemmParams(spec) (then any tensor-map
// parameters), and returns its launch shape. m is the program's one
// ir.Module (the kernels share its intrinsic declarations and dynamic shared
// memory); builder errors surface from m.Finish. rowsPerT is how many A rows there
// are per token (K for routed GEMMs, 1 for the shared expert), for the grid.
// Every engine computes the epilogue with type Epilogue (epilogue.go) so the
// numerics are identical across targets.
type Engine interface {
	Target() target.Target
	GroupedGEMM(m *ir.Module, spec GemmSpec, rowsPerT int64) (KernelInfo, error)
}

// atom is one target's part of the grouped-GEMM task, planned from a spec
// (operand tiles and shared memory from layouts.PlanGemmSmem, the target's
// limits): it builds the kernel. The neutral parts (work list, ring, gate/up
// layouts, epilogue) are in gemm_task.go.
type atom interface {
	build(m *ir.Module, spec GemmSpec, rowsPerT int64) (KernelInfo, error)
}

// atomEngine is the Engine of a target: validate the spec, plan the atom,
// build the kernel.
type atomEngine struct {
	target target.Target
	plan   func(GemmSpec) (atom, error)
}

// Target is the engine's target.
func (e atomEngine) Target() target.Target { return e.target }

// GroupedGEMM adds the kernel of spec to m (see Engine).
func (e atomEngine) GroupedGEMM(m *ir.Module, spec GemmSpec, rowsPerT int64) (KernelInfo, error) {
	if err := spec.Validate(); err != nil {
		return KernelInfo{}, err
	}
	a, err := e.plan(spec)
	if err != nil {
		return KernelInfo{}, err
	}
	return a.build(m, spec, rowsPerT)
}

// registerAtom registers the engine of t whose atom plan derives.
func registerAtom[A atom](t target.Target, plan func(GemmSpec) (A, error)) {
	RegisterEngine(t, func() Engine {
		return atomEngine{target: t, plan: func(s GemmSpec) (atom, error) { return plan(s) }}
	})
}

var (
	enginesMu sync.Mutex
	engines   = map[target.Target]func() Engine{}
)

// RegisterEngine makes an engine constructor available to EngineFor. Engines
// register themselves from an init function in their own file.
func RegisterEngine(t target.Target, mk func() Engine) {
	enginesMu.Lock()
	defer enginesMu.Unlock()
	engines[t] = mk
}

// EngineFor returns the GEMM engine of t, or an error naming the targets
// that have one.
func EngineFor(t target.Target) (Engine, error) {
	enginesMu.Lock()
	defer enginesMu.Unlock()
	if mk, ok := engines[t]; ok {
		return mk(), nil
	}
	var have []string
	for t := range engines {
		have = append(have, t.String())
	}
	sort.Strings(have)
	return nil, fmt.Errorf("codegen: no GEMM engine for target %v (have %v)", t, have)
}
