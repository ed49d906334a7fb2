package schedule

import (
	"math"
	"testing"
)

// TestBackwardSample: the sampled gradients equal those of Backward with
// the eager weights, for rows, experts and the shared experts, on layers
// with biases, the shared gate, a routing map and the weight on the input.
func TestBackwardSample(t *testing.T) {
	base := Layer{Name: "s", Hidden: 32, Intermediate: 16, Experts: 6, TopK: 2, Router: Router{Score: ScoreSoftmax}}
	gated := base
	gated.SharedExperts, gated.SharedIntermediate, gated.SharedGate, gated.Routing = 2, 8, true, RoutingMap
	gated.Activation, gated.SwiGLULimit = ClampedSwiGLU, 1
	oss := base
	oss.Activation, oss.SwiGLULimit, oss.GPTOSSAlpha, oss.GateUpInterleaved, oss.Biases = GPTOSS, 7, 1.702, true, true
	oss.MainGrad = GradBF16
	win := base
	win.TopK, win.RouterWeightOnInput, win.SharedExperts, win.SharedIntermediate = 1, true, 1, 24
	for name, l := range map[string]Layer{"base": base, "shared-gate-map": gated, "gpt-oss-bf16": oss, "weight-on-input": win} {
		g, err := NewWeightGen(l, 3)
		if err != nil {
			t.Fatal(err)
		}
		T := 19
		x, dy := RandomInput(T, l.Hidden, 4), RandomInput(T, l.Hidden, 5)
		r, err := GenerateRouting(l, x, 6)
		if err != nil {
			t.Fatal(err)
		}
		w := g.Weights()
		mg := MainGrads{FC1: zeros(l.Experts, 2*l.Intermediate*l.Hidden), FC2: zeros(l.Experts, l.Hidden*l.Intermediate)}
		if l.Biases {
			mg.FC1Bias, mg.FC2Bias = zeros(l.Experts, 2*l.Intermediate), zeros(l.Experts, l.Hidden)
		}
		if l.SharedExperts > 0 {
			mg.SharedFC1 = zeros(l.SharedExperts, 2*l.SharedIntermediate*l.Hidden)
			mg.SharedFC2 = zeros(l.SharedExperts, l.Hidden*l.SharedIntermediate)
			if l.SharedGate {
				mg.SharedGate = zeros(1, l.Hidden)[0]
			}
		}
		ref, err := Backward(l, w, x, r, dy, &mg)
		if err != nil {
			t.Fatal(err)
		}
		rows, experts := []int{0, 3, 7, 18}, []int{0, 2, 5}
		got, err := g.BackwardSample(x, r, dy, rows, experts, true)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		close := func(what string, a []float64, b []float32) {
			t.Helper()
			for i := range a {
				if d := math.Abs(a[i] - float64(b[i])); d > 1e-5*(1+math.Abs(float64(b[i]))) {
					t.Errorf("%s: %s[%d] = %v, want %v", name, what, i, a[i], b[i])
					return
				}
			}
		}
		for i, tk := range rows {
			for c := 0; c < l.Hidden; c++ {
				if d := math.Abs(got.DX[i*l.Hidden+c] - ref.DX[tk*l.Hidden+c]); d > 1e-9*(1+math.Abs(ref.DX[tk*l.Hidden+c])) {
					t.Fatalf("%s: dx[%d,%d] = %v, want %v", name, tk, c, got.DX[i*l.Hidden+c], ref.DX[tk*l.Hidden+c])
				}
			}
			for k := 0; k < l.TopK; k++ {
				if d := math.Abs(got.DWeights[i*l.TopK+k] - ref.DWeights[tk*l.TopK+k]); d > 1e-9*(1+math.Abs(ref.DWeights[tk*l.TopK+k])) {
					t.Fatalf("%s: dw[%d,%d] = %v, want %v", name, tk, k, got.DWeights[i*l.TopK+k], ref.DWeights[tk*l.TopK+k])
				}
			}
		}
		for _, e := range experts {
			close("fc1 grad", f64(got.Experts[e].FC1[0]), mg.FC1[e])
			close("fc2 grad", f64(got.Experts[e].FC2[0]), mg.FC2[e])
			if l.Biases {
				close("fc1 bias grad", f64(got.Experts[e].FC1Bias[0]), mg.FC1Bias[e])
			}
		}
		if l.SharedExperts > 0 {
			for s := 0; s < l.SharedExperts; s++ {
				close("shared fc1 grad", f64(got.Shared.SharedFC1[s]), mg.SharedFC1[s])
				close("shared fc2 grad", f64(got.Shared.SharedFC2[s]), mg.SharedFC2[s])
			}
			if l.SharedGate {
				close("shared gate grad", f64(got.Shared.SharedGate), mg.SharedGate)
			}
		}
	}
}

func zeros(n, each int) [][]float32 {
	out := make([][]float32, n)
	for i := range out {
		out[i] = make([]float32, each)
	}
	return out
}
