package codegen

import (
	"testing"

	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/schedule"
)

// This file exports the cases of the internal tests to the GPU tests, which
// are the external package codegen_test (build tag cuda): they launch their
// kernels through package driver and see codegen as its callers do.

// ForwardCase is a layer of the forward GPU test (forwardCases).
type ForwardCase struct {
	Name  string         // case name, also the name of its testdata/forward PTX
	Layer schedule.Layer // the layer
}

// ForwardCases returns the layers of the forward GPU test (forwardCases).
func ForwardCases(t testing.TB) []ForwardCase {
	var out []ForwardCase
	for _, c := range forwardCases(t) {
		out = append(out, ForwardCase{Name: c.name, Layer: c.layer})
	}
	return out
}

// BuildForwardCase builds the sm_80 program of c (buildCase).
func BuildForwardCase(t testing.TB, c ForwardCase) *Program {
	return buildCase(t, fwdCase{name: c.Name, layer: c.Layer})
}

// TimingSchedule is the sm_80 default schedule of l with "stages,warps,bk"
// applied (timingSchedule).
func TimingSchedule(l schedule.Layer, v string) (schedule.Schedule, error) {
	return timingSchedule(l, v)
}

// GemmCase is one grouped GEMM of the engine GPU tests (sm90GemmCase).
type GemmCase struct {
	Spec   GemmSpec // the GEMM
	Counts []int    // rows per expert (ATiled); one entry, the row count M, for ADense
}

func gemmCases(cs []sm90GemmCase) []GemmCase {
	out := make([]GemmCase, len(cs))
	for i, c := range cs {
		out[i] = GemmCase{Spec: c.spec, Counts: c.counts}
	}
	return out
}

// SM90GemmCases returns the sm_90a engine's test GEMMs (sm90GemmCases).
func SM90GemmCases(prefix string) []GemmCase { return gemmCases(sm90GemmCases(prefix)) }

// SM90NMajorCases returns the sm_90a engine's N-major-B GEMMs
// (sm90NMajorCases).
func SM90NMajorCases(prefix string) []GemmCase { return gemmCases(sm90NMajorCases(prefix)) }

// SM80NMajorCases returns the sm_80 engine's N-major-B GEMMs
// (sm80NMajorCases).
func SM80NMajorCases(prefix string) []GemmCase { return gemmCases(sm80NMajorCases(prefix)) }

// SM90MXCases returns the sm_90a engine's MXFP8 GEMMs (sm90MXCases).
func SM90MXCases() []GemmCase { return gemmCases(sm90MXCases()) }

// SM90MXExpandCases returns the same GEMMs run by expansion
// (sm90MXExpandCases).
func SM90MXExpandCases() []GemmCase { return gemmCases(sm90MXExpandCases()) }

// SM90PerfCases returns the sm_90a engine's timing GEMMs (sm90PerfCases).
func SM90PerfCases(prefix string) []GemmCase { return gemmCases(sm90PerfCases(prefix)) }

// SM100GemmCases returns the sm_100a engine's test GEMMs (sm100GemmCases).
func SM100GemmCases() []GemmCase { return gemmCases(sm100GemmCases()) }

// GemmModule builds every case with engine eng into one module and returns
// it with each kernel's launch information, in case order (sm90GemmModule).
func GemmModule(t testing.TB, eng Engine, cases []GemmCase) (*ir.Module, []KernelInfo) {
	cs := make([]sm90GemmCase, len(cases))
	for i, c := range cases {
		cs[i] = sm90GemmCase{spec: c.Spec, counts: c.Counts}
	}
	return sm90GemmModule(t, eng, cs)
}

// BackwardPerOps are the backward's ops with PerOp kernels of their own.
var BackwardPerOps = backwardPerOps
