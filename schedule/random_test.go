package schedule

import (
	"math"
	"slices"
	"testing"
)

func TestRoundBF16(t *testing.T) {
	cases := []struct{ in, want float32 }{
		{1, 1},
		{1 + 0x1p-8, 1},                    // tie, to even
		{1 + 3*0x1p-8, 1 + 0x1p-6},         // tie, to even (up)
		{1 + 0x1p-8 + 0x1p-20, 1 + 0x1p-7}, // above the tie
		{-1 - 0x1p-8 - 0x1p-20, -1 - 0x1p-7},
		{float32(math.Inf(1)), float32(math.Inf(1))},
		{math.MaxFloat32, float32(math.Inf(1))},
		{0x1p-133, 0x1p-133},
	}
	for _, c := range cases {
		if got := RoundBF16(c.in); got != c.want {
			t.Errorf("RoundBF16(%g) = %g, want %g", c.in, got, c.want)
		}
	}
	if n := RoundBF16(float32(math.NaN())); n == n {
		t.Error("NaN not kept")
	}
	if !IsBF16(1.5) || IsBF16(1+0x1p-10) {
		t.Error("IsBF16")
	}
}

func TestRoundBF16From64(t *testing.T) {
	// One rounding from float64: going through float32 first would round
	// 1 + 2^-8 + 2^-30 to the tie 1 + 2^-8 and then down to 1.
	if got := roundBF16From64(1 + 0x1p-8 + 0x1p-30); got != 1+0x1p-7 {
		t.Errorf("double rounding: got %g", got)
	}
	if got := roundBF16From64(3.4e38); !math.IsInf(float64(got), 1) {
		t.Errorf("overflow: got %g", got)
	}
	if got := roundBF16From64(0.5 * 0x1p-133); got != 0 {
		t.Errorf("half the smallest subnormal: got %g, want 0 (tie to even)", got)
	}
	if got := roundBF16From64(0.75 * 0x1p-133); got != 0x1p-133 {
		t.Errorf("0.75 of the smallest subnormal: got %g", got)
	}
	// Agrees with RoundBF16 on float32 inputs.
	x := RandomInput(1, 4096, 1)
	for i, v := range x {
		f := v * float32(1+float64(i)*1e-4) * float32(math.Ldexp(1, i%200-100))
		if a, b := roundBF16From64(float64(f)), RoundBF16(f); a != b {
			t.Fatalf("%g: %g vs %g", f, a, b)
		}
	}
}

func TestRandomInputsDeterministic(t *testing.T) {
	l, _ := Preset("gpt-oss-20b")
	l.Hidden, l.Intermediate, l.Experts = 64, 32, 4
	w1, err := RandomWeights(l, 7)
	if err != nil {
		t.Fatal(err)
	}
	w2, _ := RandomWeights(l, 7)
	w3, _ := RandomWeights(l, 8)
	if !slices.Equal(w1.FC1[3], w2.FC1[3]) || !slices.Equal(w1.FC2Bias[1], w2.FC2Bias[1]) {
		t.Error("RandomWeights not deterministic")
	}
	if slices.Equal(w1.FC1[3], w3.FC1[3]) || slices.Equal(w1.FC1[0], w1.FC1[1]) {
		t.Error("RandomWeights repeats across seeds or experts")
	}
	for _, v := range w1.FC1[2] {
		if !IsBF16(v) {
			t.Fatal("non-bf16 weight")
		}
	}
	if _, err := RandomWeights(Layer{}, 1); err == nil {
		t.Error("RandomWeights of an invalid layer: want an error")
	}
	x := RandomInput(3, 16, 5)
	if !slices.Equal(x, RandomInput(3, 16, 5)) || slices.Equal(x, RandomInput(3, 16, 6)) {
		t.Error("RandomInput seeds")
	}
}

func TestGenerateRouting(t *testing.T) {
	for _, name := range Presets() {
		p, _ := Preset(name)
		// Keep the router rule and E, K; shrink H.
		l := p
		l.Hidden, l.Intermediate = 64, 32
		l.SharedIntermediate = 0
		if l.SharedExperts > 0 {
			l.SharedIntermediate = 32
		}
		T := 50
		x := RandomInput(T, l.Hidden, 3)
		r, err := GenerateRouting(l, x, 4)
		if err != nil {
			t.Fatal(err)
		}
		r2, _ := GenerateRouting(l, x, 4)
		if !slices.Equal(r.IDs, r2.IDs) || !slices.Equal(r.Weights, r2.Weights) {
			t.Errorf("%s: not deterministic", name)
		}
		K, E := l.TopK, l.Experts
		scale := l.Router.Scale
		if scale == 0 {
			scale = 1
		}
		counts := make([]int, E)
		for tk := 0; tk < T; tk++ {
			ids := r.IDs[tk*K : tk*K+K]
			ws := r.Weights[tk*K : tk*K+K]
			var sum float64
			seen := map[int32]bool{}
			for k, id := range ids {
				if id < 0 || int(id) >= E || seen[id] {
					t.Fatalf("%s token %d: ids %v", name, tk, ids)
				}
				seen[id] = true
				counts[id]++
				sum += float64(ws[k])
				if k > 0 && ws[k] > ws[k-1] {
					t.Errorf("%s token %d: weights not in descending order %v", name, tk, ws)
				}
				if !(ws[k] > 0) {
					t.Errorf("%s token %d: weight %v", name, tk, ws[k])
				}
			}
			if l.Router.Normalize && math.Abs(sum-scale) > 1e-5*scale {
				t.Errorf("%s token %d: weights sum to %v, want %v", name, tk, sum, scale)
			}
			if !l.Router.Normalize && l.Router.Score == ScoreSoftmax && sum >= 1 {
				t.Errorf("%s token %d: softmax weights without renormalisation sum to %v", name, tk, sum)
			}
			if g := l.Router.Groups; g > 1 {
				groups := map[int]bool{}
				for _, id := range ids {
					groups[int(id)/(E/g)] = true
				}
				if len(groups) > l.Router.TopKGroups {
					t.Errorf("%s token %d: experts from %d groups", name, tk, len(groups))
				}
			}
		}
		used := 0
		for _, c := range counts {
			if c > 0 {
				used++
			}
		}
		if used < min(E, T*K)/4 {
			t.Errorf("%s: only %d experts used", name, used)
		}
	}
}

// TestGenerateRoutingTopK checks the choice against the scores recomputed
// here: every chosen expert scores at least as high as every other.
func TestGenerateRoutingTopK(t *testing.T) {
	l := Layer{Hidden: 32, Intermediate: 32, Experts: 16, TopK: 4, Routing: RoutingMap,
		Router: Router{Score: ScoreSqrtSoftplus, Normalize: true, Scale: 1.5}}
	T := 20
	x := RandomInput(T, l.Hidden, 9)
	r, err := GenerateRouting(l, x, 10)
	if err != nil {
		t.Fatal(err)
	}
	if r.IDs != nil || len(r.Map) != T*l.Experts {
		t.Fatal("map form expected")
	}
	// Rebuild the router matrix the way GenerateRouting does.
	wr := make([]float32, l.Experts*l.Hidden)
	fillUniform(stream(10, 5, 0), wr, 1.5*3/math.Sqrt(float64(l.Hidden)))
	for tk := 0; tk < T; tk++ {
		var minIn, maxOut = math.Inf(1), math.Inf(-1)
		n := 0
		for e := 0; e < l.Experts; e++ {
			var z float64
			for c := 0; c < l.Hidden; c++ {
				z += float64(x[tk*l.Hidden+c]) * float64(wr[e*l.Hidden+c])
			}
			s := math.Sqrt(math.Log1p(math.Exp(z)))
			if r.Map[tk*l.Experts+e] {
				n++
				minIn = math.Min(minIn, s)
			} else {
				maxOut = math.Max(maxOut, s)
				if r.Probs[tk*l.Experts+e] != 0 {
					t.Error("prob set where the map is false")
				}
			}
		}
		if n != l.TopK || minIn < maxOut {
			t.Errorf("token %d: %d routes, lowest chosen %v < best other %v", tk, n, minIn, maxOut)
		}
	}
	if _, err := GenerateRouting(l, x[:33], 1); err == nil {
		t.Error("x not a multiple of H: want an error")
	}
}
