package schedule

import (
	"fmt"
	"math"
	"slices"
	"testing"
)

// TestBackwardSample: the sampled gradients equal those of Backward with
// the eager weights, for rows, experts and the shared experts, on layers
// with biases, the shared gate, a routing map and the weight on the input,
// with every intermediate index (cols nil): dx and dw to float64 rounding
// (summed in another order), the experts' weight gradients bit for bit
// (the same sums in the same order, see BackwardSample).
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
		checkBackwardSample(t, name, l, 19, []int{0, 3, 7, 18}, []int{0, 2, 5}, nil)
	}
}

// TestBackwardSampleCols: the experts' weight gradients at sampled
// intermediate indices (SampleIntermediate's for I > 256, with a partial
// last block; a hand-picked odd set, which pads the sub-expert; and nil)
// are bit-identical to those entries of Backward's full gradients, picked
// by PickIntermediate, on layers with the split and the interleaved FC1
// layout, biases, clamped SwiGLU and the gpt-oss activation, bf16 main
// grads, shared experts with the gate, a routing map, the weight on the
// input and mxfp8 weights (whose sub-expert's intermediate size must be a
// multiple of 32), with and without shared experts; dx, dw and the shared
// gradients still match.
func TestBackwardSampleCols(t *testing.T) {
	base := Layer{Name: "c", Hidden: 32, Intermediate: 328, Experts: 5, TopK: 2, Router: Router{Score: ScoreSoftmax}}
	oss := base
	oss.Intermediate = 1024 // 16 blocks: 32 sampled indices, no padding
	oss.Activation, oss.SwiGLULimit, oss.GPTOSSAlpha, oss.GateUpInterleaved, oss.Biases = GPTOSS, 7, 1.702, true, true
	oss.MainGrad = GradBF16
	gated := base
	gated.Intermediate = 264
	gated.SharedExperts, gated.SharedIntermediate, gated.SharedGate, gated.Routing = 2, 8, true, RoutingMap
	gated.Activation, gated.SwiGLULimit = ClampedSwiGLU, 1
	win := base
	win.Intermediate = 16
	win.TopK, win.RouterWeightOnInput, win.SharedExperts, win.SharedIntermediate = 1, true, 1, 24
	split := base
	split.Intermediate, split.Biases, split.MainGrad = 320, true, GradBF16
	mx := base
	mx.Hidden, mx.Intermediate, mx.Precision = 64, 320, MXFP8
	mxShared := mx
	mxShared.SharedExperts, mxShared.SharedIntermediate, mxShared.SharedGate = 1, 40, true
	for name, l := range map[string]Layer{"swiglu": base, "gpt-oss-interleaved-bf16": oss, "clamped-shared-gate-map": gated,
		"weight-on-input": win, "split-biases-bf16": split, "mxfp8": mx, "mxfp8-shared": mxShared} {
		I := l.Intermediate
		sampled := SampleIntermediate(I, 11)
		if I > 256 && len(sampled) >= I {
			t.Fatalf("%s: SampleIntermediate(%d) took %d indices, want a sample", name, I, len(sampled))
		}
		for _, cols := range [][]int{sampled, {1, I / 2, I - 1}, nil} {
			checkBackwardSample(t, name, l, 23, []int{0, 4, 22}, []int{1, 3}, cols)
		}
	}
}

// checkBackwardSample compares BackwardSample on T tokens with Backward on
// the eager weights: dx and dw of rows and the shared gradients to float64
// rounding, the weight gradients of experts at cols (nil: every index) bit
// for bit, and checks that these are not all zero.
func checkBackwardSample(t *testing.T, name string, l Layer, T int, rows, experts, cols []int) {
	t.Helper()
	g, err := NewWeightGen(l, 3)
	if err != nil {
		t.Fatal(err)
	}
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
	got, err := g.BackwardSample(x, r, dy, rows, experts, cols, true)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	name = name + " cols " + colsName(cols, l.Intermediate)
	wantCols := cols
	if cols == nil {
		wantCols = make([]int, l.Intermediate)
		for j := range wantCols {
			wantCols[j] = j
		}
	}
	if !slices.Equal(got.Cols, wantCols) {
		t.Fatalf("%s: Cols = %v, want %v", name, got.Cols, wantCols)
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
	same := func(what string, a, b []float32) {
		t.Helper()
		if len(a) != len(b) {
			t.Errorf("%s: %s has %d values, want %d", name, what, len(a), len(b))
			return
		}
		nonzero := false
		for i := range a {
			if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
				t.Errorf("%s: %s[%d] = %v, want %v (bitwise)", name, what, i, a[i], b[i])
				return
			}
			nonzero = nonzero || a[i] != 0
		}
		if !nonzero {
			t.Errorf("%s: %s is all zero", name, what)
		}
	}
	for _, e := range experts {
		ge, ok := got.Experts[e]
		if !ok || len(ge.FC1) != 1 || len(ge.FC2) != 1 {
			t.Fatalf("%s: expert %d: no gradients", name, e)
		}
		want1, want2, err := PickIntermediate(l, got.Cols, mg.FC1[e], mg.FC2[e])
		if err != nil {
			t.Fatal(err)
		}
		same("fc1 grad", ge.FC1[0], want1)
		same("fc2 grad", ge.FC2[0], want2)
		if l.Biases {
			b1 := make([]float32, 0, 2*len(got.Cols))
			for _, row := range FC1Rows(l, got.Cols) {
				b1 = append(b1, mg.FC1Bias[e][row])
			}
			same("fc1 bias grad", ge.FC1Bias[0], b1)
			same("fc2 bias grad", ge.FC2Bias[0], mg.FC2Bias[e])
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

// colsName is a short name of a column set for messages.
func colsName(cols []int, I int) string {
	switch {
	case cols == nil:
		return "nil"
	case len(cols) == I:
		return "all"
	case len(cols) <= 4:
		return fmt.Sprint(cols)
	}
	return fmt.Sprintf("%d of %d", len(cols), I)
}

// TestSampleIntermediate: every index up to I = 256; above, 2 distinct
// indices in each block of 64 (1 in a block of one), strictly increasing,
// the same for the same seed and another set for another seed.
func TestSampleIntermediate(t *testing.T) {
	for _, I := range []int{0, 8, 64, 256, 257, 264, 320, 328, 1000, 1024, 1408, 2880, 14336} {
		for _, seed := range []uint64{0, 1, 42} {
			cols := SampleIntermediate(I, seed)
			if cols == nil {
				t.Fatalf("I=%d: nil", I)
			}
			if !slices.Equal(cols, SampleIntermediate(I, seed)) {
				t.Fatalf("I=%d seed %d: not deterministic", I, seed)
			}
			if err := checkCols(cols, I, true); err != nil {
				t.Fatalf("I=%d seed %d: %v", I, seed, err)
			}
			if I <= 256 {
				if len(cols) != I {
					t.Fatalf("I=%d: %d indices, want all", I, len(cols))
				}
				continue
			}
			per := map[int]int{}
			for _, j := range cols {
				per[j/64]++
			}
			for b := 0; b*64 < I; b++ {
				if want := min(2, I-b*64); per[b] != want {
					t.Fatalf("I=%d seed %d: block %d has %d indices, want %d (%v)", I, seed, b, per[b], want, cols)
				}
			}
			if other := SampleIntermediate(I, seed+1000); slices.Equal(cols, other) {
				t.Errorf("I=%d: seeds %d and %d give the same indices", I, seed, seed+1000)
			}
		}
	}
}

// TestFC1Rows: the rows FC1Rows gives for a sub-expert's gate and up of
// index i are those the reference reads for gate and up of cols[i] in
// the full expert (mlp.gu), in both FC1 layouts, and PickIntermediate
// picks those rows of FC1 and the columns cols of FC2; bad inputs are
// errors.
func TestFC1Rows(t *testing.T) {
	const H, I = 8, 24
	cols := []int{0, 5, 6, 23}
	for _, inter := range []bool{false, true} {
		l := Layer{Hidden: H, Intermediate: I, GateUpInterleaved: inter}
		rows := FC1Rows(l, cols)
		full := mlp{I: I, interleaved: inter}
		sub := mlp{I: len(cols), interleaved: inter}
		for i, j := range cols {
			sg, su := sub.gu(i)
			fg, fu := full.gu(j)
			if rows[sg] != fg || rows[su] != fu {
				t.Fatalf("interleaved %v: sub gate/up rows %d/%d map to %d/%d, want %d/%d", inter, sg, su, rows[sg], rows[su], fg, fu)
			}
		}
		fc1, fc2 := make([]float64, 2*I*H), make([]float64, H*I)
		for i := range fc1 {
			fc1[i] = float64(i)
		}
		for i := range fc2 {
			fc2[i] = float64(-i)
		}
		s1, s2, err := PickIntermediate(l, cols, fc1, fc2)
		if err != nil {
			t.Fatal(err)
		}
		for r, src := range rows {
			for c := 0; c < H; c++ {
				if s1[r*H+c] != float64(src*H+c) {
					t.Fatalf("interleaved %v: sub FC1[%d,%d] = %v, want FC1[%d,%d]", inter, r, c, s1[r*H+c], src, c)
				}
			}
		}
		for h := 0; h < H; h++ {
			for i, j := range cols {
				if s2[h*len(cols)+i] != float64(-(h*I + j)) {
					t.Fatalf("interleaved %v: sub FC2[%d,%d] = %v, want FC2[%d,%d]", inter, h, i, s2[h*len(cols)+i], h, j)
				}
			}
		}
		all := make([]int, I)
		for j := range all {
			all[j] = j
		}
		if a1, a2, _ := PickIntermediate(l, all, fc1, fc2); !slices.Equal(a1, fc1) || !slices.Equal(a2, fc2) {
			t.Errorf("interleaved %v: every index does not give the expert itself", inter)
		}
		if _, _, err := PickIntermediate(l, []int{I}, fc1, fc2); err == nil {
			t.Error("index I accepted")
		}
		if _, _, err := PickIntermediate(l, cols, fc1[1:], fc2); err == nil {
			t.Error("short FC1 accepted")
		}
	}
}

// TestBackwardSampleColsErrors: cols out of range, not increasing or empty
// are errors.
func TestBackwardSampleColsErrors(t *testing.T) {
	l := Layer{Name: "e", Hidden: 32, Intermediate: 16, Experts: 4, TopK: 2}
	g, err := NewWeightGen(l, 1)
	if err != nil {
		t.Fatal(err)
	}
	x, dy := RandomInput(4, l.Hidden, 2), RandomInput(4, l.Hidden, 3)
	r, err := GenerateRouting(l, x, 4)
	if err != nil {
		t.Fatal(err)
	}
	for _, cols := range [][]int{{}, {-1}, {16}, {3, 3}, {5, 2}} {
		if _, err := g.BackwardSample(x, r, dy, []int{0}, []int{1}, cols, false); err == nil {
			t.Errorf("cols %v accepted", cols)
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
