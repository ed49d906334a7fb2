package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mokc/mokc/moe"
	"github.com/mokc/mokc/schedule"
)

// TestBackwardChecksCols: backwardChecks picks the sampled experts'
// weight gradients at the reference's intermediate columns out of full
// fc1_grad[e] and fc2_grad[e] buffers, in both FC1 layouts: with the full
// gradients of schedule.Backward as the "GPU" buffers every check is exact
// (rel L2 0); a change at a sampled column fails its check and one at an
// unsampled column is not seen (so too for the FC1 bias gradient, with
// biases); a buffer of the wrong size is an error.
func TestBackwardChecksCols(t *testing.T) {
	for _, inter := range []bool{false, true} {
		l := schedule.Layer{Name: "c", Hidden: 32, Intermediate: 320, Experts: 4, TopK: 2, GateUpInterleaved: inter,
			Biases: inter, Router: schedule.Router{Score: schedule.ScoreSoftmax}}
		name := fmt.Sprintf("interleaved and biases %v", inter)
		gen, err := schedule.NewWeightGen(l, 1)
		if err != nil {
			t.Fatal(err)
		}
		const T = 24
		H, I, E := l.Hidden, l.Intermediate, l.Experts
		x, dy := schedule.RandomInput(T, H, 2), schedule.RandomInput(T, H, 3)
		r, err := schedule.GenerateRouting(l, x, 4)
		if err != nil {
			t.Fatal(err)
		}
		mg := schedule.MainGrads{FC1: make([][]float32, E), FC2: make([][]float32, E)}
		for e := range mg.FC1 {
			mg.FC1[e], mg.FC2[e] = make([]float32, 2*I*H), make([]float32, H*I)
		}
		if l.Biases {
			mg.FC1Bias, mg.FC2Bias = make([][]float32, E), make([][]float32, E)
			for e := range mg.FC1Bias {
				mg.FC1Bias[e], mg.FC2Bias[e] = make([]float32, 2*I), make([]float32, H)
			}
		}
		full, err := schedule.Backward(l, gen.Weights(), x, r, dy, &mg)
		if err != nil {
			t.Fatal(err)
		}
		rows, experts := []int{0, 5, T - 1}, sampledExperts(r.IDs, E, 1)
		cols := schedule.SampleIntermediate(I, 1)
		ref, err := gen.BackwardSample(x, r, dy, rows, experts, cols, false)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string][]float64{moe.BufDX: full.DX, moe.BufDW: full.DWeights}
		for _, e := range experts {
			got[fmt.Sprintf("fc1_grad[%d]", e)] = f64s(mg.FC1[e])
			got[fmt.Sprintf("fc2_grad[%d]", e)] = f64s(mg.FC2[e])
			if l.Biases {
				got[fmt.Sprintf("fc1_bias_grad[%d]", e)] = f64s(mg.FC1Bias[e])
				got[fmt.Sprintf("fc2_bias_grad[%d]", e)] = f64s(mg.FC2Bias[e])
			}
		}
		perExpert := 2
		if l.Biases {
			perExpert = 4
		}
		check := func(what string) map[string]gradCheck {
			t.Helper()
			checks, err := backwardChecks(l, got, ref, rows, r.IDs, experts, false)
			if err != nil {
				t.Fatalf("%s: %s: %v", name, what, err)
			}
			byName := map[string]gradCheck{}
			for _, c := range checks {
				byName[c.Name] = c
			}
			if len(byName) != 2+perExpert*len(experts) {
				t.Fatalf("%s: %s: checks %v", name, what, checks)
			}
			return byName
		}
		for n, c := range check("full gradients") {
			exact := strings.Contains(n, "_grad[") // bit-identical; dx and dw to float64 rounding
			if c.NaN > 0 || (exact && c.RelL2 != 0) || c.RelL2 > 1e-12 || c.Cosine < 1-1e-12 {
				t.Errorf("%s: %s: rel L2 %g, cosine %v, %d NaN", name, n, c.RelL2, c.Cosine, c.NaN)
			}
		}
		e := experts[0]
		fc1, fc2 := got[fmt.Sprintf("fc1_grad[%d]", e)], got[fmt.Sprintf("fc2_grad[%d]", e)]
		bias1 := got[fmt.Sprintf("fc1_bias_grad[%d]", e)] // nil without biases
		sampled := map[int]bool{}
		for _, j := range cols {
			sampled[j] = true
		}
		unsampled := 0
		for sampled[unsampled] {
			unsampled++
		}
		for _, c := range []struct {
			what   string
			buf    []float64
			at     int
			caught bool
		}{
			{"up row of a sampled column", fc1, schedule.FC1Rows(l, cols[3:4])[1]*H + 7, true},
			{"gate row of an unsampled column", fc1, schedule.FC1Rows(l, []int{unsampled})[0]*H + 7, false},
			{"fc2 at a sampled column", fc2, 9*I + cols[5], true},
			{"fc2 at an unsampled column", fc2, 9*I + unsampled, false},
			{"fc1 bias at a sampled column", bias1, schedule.FC1Rows(l, cols[2:3])[0], true},
			{"fc1 bias at an unsampled column", bias1, schedule.FC1Rows(l, []int{unsampled})[1], false},
		} {
			if c.buf == nil {
				continue
			}
			old := c.buf[c.at]
			c.buf[c.at] += 1
			checks := check(c.what)
			c.buf[c.at] = old
			bad := 0
			for _, k := range checks {
				if k.RelL2 != 0 && strings.Contains(k.Name, "_grad[") {
					bad++
				}
			}
			if want := map[bool]int{true: 1, false: 0}[c.caught]; bad != want {
				t.Errorf("%s: a change of the %s fails %d checks, want %d", name, c.what, bad, want)
			}
		}
		got[fmt.Sprintf("fc2_grad[%d]", e)] = fc2[1:]
		if _, err := backwardChecks(l, got, ref, rows, r.IDs, experts, false); err == nil {
			t.Errorf("%s: a short fc2_grad[%d] is accepted", name, e)
		}
	}
}
