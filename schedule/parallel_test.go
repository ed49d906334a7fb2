package schedule

import (
	"runtime"
	"slices"
	"testing"
)

// TestBackwardSampleAcrossCores checks that BackwardSample (and through it
// Backward) and Forward give bit-identical results on one goroutine
// (GOMAXPROCS 1: every loop serial) and on four, on layers large enough
// that every parallel loop splits its work: biases with the gpt-oss
// activation and bf16 main grads, shared experts with the sigmoid gate and
// a routing map, and the routing weight on the input; the experts' weight
// gradients at every intermediate index and at a few (a sub-expert).
func TestBackwardSampleAcrossCores(t *testing.T) {
	base := Layer{Name: "p", Hidden: 512, Intermediate: 256, Experts: 4, TopK: 2, Router: Router{Score: ScoreSoftmax}}
	oss := base
	oss.Activation, oss.SwiGLULimit, oss.GPTOSSAlpha, oss.GateUpInterleaved, oss.Biases = GPTOSS, 7, 1.702, true, true
	oss.MainGrad = GradBF16
	gated := base
	gated.SharedExperts, gated.SharedIntermediate, gated.SharedGate, gated.Routing = 2, 128, true, RoutingMap
	win := base
	win.TopK, win.RouterWeightOnInput, win.SharedExperts, win.SharedIntermediate = 1, true, 1, 256
	const T = 320
	for name, l := range map[string]Layer{"gpt-oss-bf16": oss, "shared-gate-map": gated, "weight-on-input": win} {
		g, err := NewWeightGen(l, 7)
		if err != nil {
			t.Fatal(err)
		}
		x, dy := RandomInput(T, l.Hidden, 8), RandomInput(T, l.Hidden, 9)
		r, err := GenerateRouting(l, x, 10)
		if err != nil {
			t.Fatal(err)
		}
		w := g.Weights()
		rows, experts := []int{0, 5, 17, 128, 200, T - 1}, []int{1, 3}
		cols := []int{3, 64, 100, 255}
		run := func(procs int) ([]float64, SampledGrads, SampledGrads) {
			old := runtime.GOMAXPROCS(procs)
			defer runtime.GOMAXPROCS(old)
			y, err := Forward(l, w, x, r)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			sg, err := g.BackwardSample(x, r, dy, rows, experts, nil, true)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			sc, err := g.BackwardSample(x, r, dy, rows, experts, cols, false)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return y, sg, sc
		}
		y1, s1, c1 := run(1)
		y4, s4, c4 := run(4)
		if !slices.Equal(y1, y4) {
			t.Errorf("%s: Forward depends on GOMAXPROCS", name)
		}
		if !slices.Equal(s1.DX, s4.DX) || !slices.Equal(s1.DWeights, s4.DWeights) {
			t.Errorf("%s: dx or dw depends on GOMAXPROCS", name)
		}
		same := func(what string, a, b [][]float32) {
			t.Helper()
			if len(a) != len(b) {
				t.Errorf("%s: %s: %d vs %d tensors", name, what, len(a), len(b))
				return
			}
			for i := range a {
				if !slices.Equal(a[i], b[i]) {
					t.Errorf("%s: %s[%d] depends on GOMAXPROCS", name, what, i)
				}
			}
		}
		if !slices.Equal(c1.DX, s1.DX) || !slices.Equal(c4.DX, s4.DX) || !slices.Equal(c1.DWeights, s1.DWeights) || !slices.Equal(c4.DWeights, s4.DWeights) {
			t.Errorf("%s: dx or dw depends on cols", name)
		}
		for _, e := range experts {
			for _, p := range [][2]SampledGrads{{s1, s4}, {c1, c4}} {
				a, b := p[0].Experts[e], p[1].Experts[e]
				same("expert FC1", a.FC1, b.FC1)
				same("expert FC2", a.FC2, b.FC2)
				same("expert FC1Bias", a.FC1Bias, b.FC1Bias)
				same("expert FC2Bias", a.FC2Bias, b.FC2Bias)
			}
		}
		if (s1.Shared == nil) != (l.SharedExperts == 0) || (s4.Shared == nil) != (l.SharedExperts == 0) {
			t.Fatalf("%s: shared grads missing or unexpected", name)
		}
		if s1.Shared != nil {
			same("SharedFC1", s1.Shared.SharedFC1, s4.Shared.SharedFC1)
			same("SharedFC2", s1.Shared.SharedFC2, s4.Shared.SharedFC2)
			same("SharedGate", [][]float32{s1.Shared.SharedGate}, [][]float32{s4.Shared.SharedGate})
		}
	}
}
