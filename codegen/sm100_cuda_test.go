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
	ctx := openGPU(t)
	if cc := ctx.Device().ComputeCapability(); cc != 100 {
		t.Skipf("the sm_100a engine needs compute capability 10.0, device has %d", cc)
	}
	eng, err := codegen.EngineFor(target.SM100a)
	if err != nil {
		t.Fatal(err)
	}
	cases := codegen.SM100GemmCases()
	m, infos := codegen.GemmModule(t, eng, cases)
	ours, err := mptx.Compile(m.IR, target.SM100a)
	if err != nil {
		t.Fatalf("ptx backend: %v", err)
	}
	r := rand.New(rand.NewPCG(rand.Uint64(), 100))
	for i, c := range cases {
		t.Run(c.Spec.Name, func(t *testing.T) {
			d := sm90MakeData(r, c)
			ref := sm90Reference(c, d)
			got := sm90RunGemm(t, ctx, sm100GemmLLC, c, infos[i], d, 3)
			sm90Check(t, "llc-19", c, d, got, ref)
			got2 := sm90RunGemm(t, ctx, ours, c, infos[i], d, 3)
			sm90Check(t, "mokc ptx", c, d, got2, ref)
			for j := range got {
				if got[j] != got2[j] {
					t.Fatalf("element %d: 0x%04x (llc-19) vs 0x%04x (mokc ptx)", j, got[j], got2[j])
				}
			}
		})
	}
}
