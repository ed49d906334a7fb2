//go:build cuda

package codegen_test

import (
	_ "embed"
	"math/rand/v2"
	"testing"

	"github.com/mokc/mokc/codegen"
	mptx "github.com/mokc/mokc/ptx"
	"github.com/mokc/mokc/target"
)

//go:embed testdata/sm100/gemm.llc.ptx
var sm100GemmLLC string

// TestSM100GemmGPU runs the sm_100a engine's test kernels on a Blackwell
// device (compute capability 10.0; it skips elsewhere, e.g. on the H200):
// llc-19's PTX (retargeted, testdata) and mokc's, on fresh random data,
// against the float64 reference, C poisoned with canary rows after the
// last row, and both PTX versions bit-identical. It is the first check of
// the tcgen05 path on hardware (descriptors, TMEM layout, commit/ld
// ordering); see atom_sm100.go.
func TestSM100GemmGPU(t *testing.T) {
	ctx, eng := engineOnGPU(t, target.SM100a, 100)
	cases := codegen.SM100GemmCases()
	m, infos := codegen.GemmModule(t, eng, cases)
	ours, err := mptx.Compile(m.IR, target.SM100a)
	if err != nil {
		t.Fatalf("ptx backend: %v", err)
	}
	runGemmCases(t, ctx, rand.New(rand.NewPCG(rand.Uint64(), 100)), cases, infos, sm100GemmLLC, ours)
}
