package codegen

import (
	"flag"
	"path/filepath"
	"testing"

	"github.com/mokc/mokc/internal/goldenfile"
	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/schedule"
	"github.com/mokc/mokc/target"
)

var update = flag.Bool("update", false, "rewrite the llc-19 reference PTX under codegen/testdata (forward, sm90, sm100)")

// fwdCase is a layer of the forward GPU test.
type fwdCase struct {
	name  string
	layer schedule.Layer
}

// forwardCases are the layers the forward GPU test runs on sm_80: two real
// models (H = 2880 for gpt-oss: neither a tile nor a K-block multiple) and
// two small odd-shaped layers covering the dense routing map, per-expert
// weight tables, several shared experts with the sigmoid gate, clamped
// SwiGLU, and the routing weight on the input.
func forwardCases(t testing.TB) []fwdCase {
	t.Helper()
	var cs []fwdCase
	for _, n := range []string{"qwen3-30b-a3b", "gpt-oss-20b"} {
		l, err := schedule.Preset(n)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, fwdCase{n, l})
	}
	cs = append(cs,
		fwdCase{"small-odd", schedule.Layer{Name: "small-odd", Hidden: 192, Intermediate: 96, Experts: 8, TopK: 2,
			SharedExperts: 2, SharedIntermediate: 40, SharedGate: true,
			Activation: schedule.ClampedSwiGLU, SwiGLULimit: 3,
			Routing: schedule.RoutingMap, Storage: schedule.PerExpertWeights,
			Router: schedule.Router{Score: schedule.ScoreSoftmax, Normalize: true}}},
		fwdCase{"small-input-weight", schedule.Layer{Name: "small-input-weight", Hidden: 136, Intermediate: 72, Experts: 6, TopK: 3,
			SharedExperts: 1, SharedIntermediate: 64, RouterWeightOnInput: true,
			Router: schedule.Router{Score: schedule.ScoreSigmoid}}},
	)
	return cs
}

// buildCase builds the sm_80 program of a case.
func buildCase(t testing.TB, c fwdCase) *Program {
	t.Helper()
	s, err := schedule.DefaultSchedule(c.layer, target.SM80)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Build(c.layer, s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestForwardLLCPTX keeps testdata/forward/<case>.llc.ptx (llc-19's PTX of
// each forward test program, which the GPU test carries and runs next to
// ours) in step with the generator: it fails when a file is stale, and
// -update rewrites them.
func TestForwardLLCPTX(t *testing.T) {
	for _, c := range forwardCases(t) {
		t.Run(c.name, func(t *testing.T) {
			p := buildCase(t, c)
			text, err := ir.LLVM19Text(p.Module)
			if err != nil {
				t.Fatal(err)
			}
			got := llcPTX(t, text, "sm_80")
			goldenfile.Check(t, filepath.Join("testdata", "forward", c.name+".llc.ptx"), got, *update,
				"go test ./codegen -run TestForwardLLCPTX -update")
		})
	}
}
