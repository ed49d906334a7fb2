package schedule

import (
	"math"
	"math/rand/v2"
	goruntime "runtime"
	"slices"
	"strings"
	"testing"
)

// hashValue is element j of one tensor of one expert, written directly from
// WeightGen's documentation (SplitMix64 word j/4, 16 bits j%4, the point
// a*(2r+1-65536)/65536 rounded once to bf16), independent of the fill loops.
func hashValue(seed uint64, tensor, expert, j int, a float64) float32 {
	const gamma = 0x9E3779B97F4A7C15
	mix := func(z uint64) uint64 {
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
		z = (z ^ (z >> 27)) * 0x94D049BB133111EB
		return z ^ (z >> 31)
	}
	key := mix(mix(seed+gamma) ^ (uint64(tensor)<<32 | uint64(expert)))
	h := mix(key + uint64(j/4+1)*gamma)
	r := int(h>>(16*(j%4))) & 0xFFFF
	return roundBF16From64(a * float64(2*r+1-65536) / 65536)
}

func TestWeightGenValues(t *testing.T) {
	l := Layer{Name: "gen", Hidden: 64, Intermediate: 48, Experts: 6, TopK: 2,
		SharedExperts: 2, SharedIntermediate: 40, SharedGate: true,
		Activation: GPTOSS, SwiGLULimit: 7, GPTOSSAlpha: 1.702, GateUpInterleaved: true, Biases: true}
	seed := rand.Uint64()
	g, err := NewWeightGen(l, seed)
	if err != nil {
		t.Fatal(err)
	}
	H, I, Is := l.Hidden, l.Intermediate, l.SharedIntermediate
	a1, a2, as2, ag := 6/math.Sqrt(float64(H)), math.Sqrt(3/float64(I)), math.Sqrt(3/float64(Is)), math.Sqrt(3/float64(H))
	check := func(name string, got []float32, tensor, expert int, a float64) {
		t.Helper()
		var sum, sq float64
		for j, v := range got {
			if want := hashValue(seed, tensor, expert, j, a); v != want {
				t.Fatalf("%s[%d] = %v, want %v", name, j, v, want)
			}
			// Uniform in (-a, a), then rounded to bf16 (8 significant
			// bits): rounding can carry a value up to half an ulp past a.
			if lim := a * (1 + 1.0/256); !IsBF16(v) || math.Abs(float64(v)) > lim {
				t.Fatalf("%s[%d] = %v: not bf16 in [-%v, %v] (a = %v rounded to bf16)", name, j, v, lim, lim, a)
			}
			sum += float64(v)
			sq += float64(v) * float64(v)
		}
		// Uniform in (-a, a): mean 0 (standard error a/sqrt(3n)), mean
		// square a^2/3 (relative standard error sqrt(0.8/n)); 5 sigma.
		n := float64(len(got))
		if mean, v := sum/n, sq/n; math.Abs(mean) > 5*a/math.Sqrt(3*n) || math.Abs(v/(a*a/3)-1) > 5*math.Sqrt(0.8/n) {
			t.Errorf("%s: mean %v, variance %v, want 0 and %v", name, mean, v, a*a/3)
		}
	}
	for _, e := range []int{5, 0, 3} {
		fc1, fc2, b1, b2, err := g.Routed(e)
		if err != nil {
			t.Fatal(err)
		}
		check("FC1", fc1, hashFC1, e, a1)
		check("FC2", fc2, hashFC2, e, a2)
		check("FC1Bias", b1, hashFC1Bias, e, 0.5)
		check("FC2Bias", b2, hashFC2Bias, e, 0.5)
		// The bf16 bits are the upper halves of the same values.
		bf1, bf2 := make([]uint16, len(fc1)), make([]uint16, len(fc2))
		if err := g.RoutedBF16(e, bf1, bf2); err != nil {
			t.Fatal(err)
		}
		for j, v := range fc1 {
			if uint32(bf1[j])<<16 != math.Float32bits(v) {
				t.Fatalf("expert %d: RoutedBF16 FC1[%d] = %#04x, Routed %v", e, j, bf1[j], v)
			}
		}
		for j, v := range fc2 {
			if uint32(bf2[j])<<16 != math.Float32bits(v) {
				t.Fatalf("expert %d: RoutedBF16 FC2[%d] = %#04x, Routed %v", e, j, bf2[j], v)
			}
		}
		bb1, bb2 := make([]float32, 2*I), make([]float32, H)
		if err := g.RoutedBias(e, bb1, bb2); err != nil || !slices.Equal(bb1, b1) || !slices.Equal(bb2, b2) {
			t.Fatalf("RoutedBias(%d): %v", e, err)
		}
	}
	w := g.Weights()
	for s := 0; s < l.SharedExperts; s++ {
		check("SharedFC1", w.SharedFC1[s], hashSharedFC1, s, a1)
		check("SharedFC2", w.SharedFC2[s], hashSharedFC2, s, as2)
		bf1, bf2 := make([]uint16, 2*Is*H), make([]uint16, H*Is)
		if err := g.SharedBF16(s, bf1, bf2); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(FromBits(bf1), w.SharedFC1[s]) || !slices.Equal(FromBits(bf2), w.SharedFC2[s]) {
			t.Errorf("SharedBF16(%d) differs from the float32 values", s)
		}
	}
	check("SharedGate", w.SharedGate, hashSharedGate, 0, ag)
	gb := make([]uint16, H)
	if err := g.SharedGateBF16(gb); err != nil || !slices.Equal(FromBits(gb), w.SharedGate) {
		t.Errorf("SharedGateBF16: %v", err)
	}
	// Experts, tensors and seeds give different values; the same seed the
	// same, in any order of generation.
	if slices.Equal(w.FC1[1], w.FC1[2]) || slices.Equal(w.FC1[1][:H], w.FC2[1][:H]) {
		t.Error("experts or tensors repeat")
	}
	g2, _ := NewWeightGen(l, seed+1)
	if f, _, _, _, _ := g2.Routed(1); slices.Equal(f, w.FC1[1]) {
		t.Error("seeds repeat")
	}
	if f, _, _, _, _ := g.Routed(1); !slices.Equal(f, w.FC1[1]) {
		t.Error("expert 1 regenerated differently")
	}
}

// FromBits widens bf16 bits to float32 (test helper).
func FromBits(b []uint16) []float32 {
	out := make([]float32, len(b))
	for i, x := range b {
		out[i] = math.Float32frombits(uint32(x) << 16)
	}
	return out
}

// TestWeightGenChunks checks the fill loops across chunk boundaries and on
// lengths that are not a multiple of 4, and that they do not depend on the
// number of goroutines.
func TestWeightGenChunks(t *testing.T) {
	l := Layer{Hidden: 64, Intermediate: 64, Experts: 2, TopK: 1}
	g, _ := NewWeightGen(l, 77)
	a := 6 / math.Sqrt(64)
	for _, n := range []int{1, 3, 5, hashChunk - 1, hashChunk, 2*hashChunk + 3} {
		bits := make([]uint16, n)
		f := make([]float32, n)
		g.fillBits(bits, hashFC1, 1)
		g.fillF32(f, hashFC1, 1)
		for _, j := range []int{0, n / 2, n - 1, min(n-1, hashChunk), min(n-1, hashChunk+1)} {
			if want := hashValue(77, hashFC1, 1, j, a); f[j] != want || uint32(bits[j])<<16 != math.Float32bits(want) {
				t.Fatalf("n = %d: element %d = %v / %#04x, want %v", n, j, f[j], bits[j], want)
			}
		}
	}
	one := func(procs int) []uint16 {
		old := goruntime.GOMAXPROCS(procs)
		defer goruntime.GOMAXPROCS(old)
		v := make([]uint16, 3*hashChunk+7)
		g.fillBits(v, hashFC2, 0)
		return v
	}
	if !slices.Equal(one(1), one(3)) {
		t.Error("values depend on GOMAXPROCS")
	}
}

func TestWeightGenErrors(t *testing.T) {
	if _, err := NewWeightGen(Layer{}, 1); err == nil {
		t.Error("invalid layer: want an error")
	}
	l := Layer{Name: "e", Hidden: 16, Intermediate: 8, Experts: 3, TopK: 2}
	g, _ := NewWeightGen(l, 1)
	for name, err := range map[string]error{
		"expert -1": g.RoutedBF16(-1, make([]uint16, 256), make([]uint16, 128)),
		"expert 3":  g.RoutedBF16(3, make([]uint16, 256), make([]uint16, 128)),
		"short FC1": g.RoutedBF16(0, make([]uint16, 255), make([]uint16, 128)),
		"long FC2":  g.RoutedBF16(0, make([]uint16, 256), make([]uint16, 129)),
		"no biases": g.RoutedBias(0, make([]float32, 16), make([]float32, 16)),
		"no shared": g.SharedBF16(0, nil, nil),
		"no gate":   g.SharedGateBF16(make([]uint16, 16)),
		"Routed(3)": func() error { _, _, _, _, err := g.Routed(3); return err }(),
		"rows": func() error {
			_, err := g.ForwardRows(make([]float32, 32), Routing{IDs: []int32{0, 1, 2, 0}, Weights: make([]float32, 4)}, []int{2})
			return err
		}(),
		"bad id": func() error {
			_, err := g.ForwardRows(make([]float32, 16), Routing{IDs: []int32{0, 3}, Weights: make([]float32, 2)}, []int{0})
			return err
		}(),
		"routing size": func() error {
			_, err := g.ForwardRows(make([]float32, 16), Routing{IDs: []int32{0}, Weights: make([]float32, 1)}, []int{0})
			return err
		}(),
		"x size":     func() error { _, err := g.ForwardRows(make([]float32, 15), Routing{}, nil); return err }(),
		"map on ids": func() error { _, err := g.ForwardRows(nil, Routing{Map: []bool{}}, nil); return err }(),
	} {
		if err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
	lm := l
	lm.Routing = RoutingMap
	gm, _ := NewWeightGen(lm, 1)
	if _, err := gm.ForwardRows(make([]float32, 16), Routing{Map: []bool{true, true, true}, Probs: make([]float32, 3)}, []int{0}); err == nil || !strings.Contains(err.Error(), "more than K") {
		t.Errorf("map row with 3 routes, K = 2: %v", err)
	}
}

// sameFloats compares bitwise, so that NaN equals NaN.
func sameFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) && !(math.IsNaN(a[i]) && math.IsNaN(b[i])) {
			return false
		}
	}
	return true
}

// TestWeightGenForwardRowsExact checks the lazy reference against Forward
// and ForwardRows with every weight materialised, bit for bit, on every
// test layer (shared experts and gate, clamps, gpt-oss biases and
// interleaving, the routing map, the weight on the input) with generated
// routing and with the hard cases (empty, duplicate and -1 slots, zero,
// negative and NaN weights, an expert without tokens).
func TestWeightGenForwardRowsExact(t *testing.T) {
	for name, l := range testLayers() {
		g, err := NewWeightGen(l, rand.Uint64())
		if err != nil {
			t.Fatal(err)
		}
		w := g.Weights()
		T := 23
		x := RandomInput(T, l.Hidden, rand.Uint64())
		routings := map[string]Routing{}
		if r, err := GenerateRouting(l, x, rand.Uint64()); err == nil {
			routings["generated"] = r
		} else {
			t.Fatal(err)
		}
		if l.Routing == RoutingIDs {
			ids, wts := testRouting(l, T, rand.Uint64())
			routings["hard"] = Routing{IDs: ids, Weights: wts}
		}
		for rname, r := range routings {
			y, err := Forward(l, w, x, r)
			if err != nil {
				t.Fatal(err)
			}
			rows := []int{22, 0, 1, 2, 3, 7, 7, 15}
			lazy, err := g.ForwardRows(x, r, rows)
			if err != nil {
				t.Fatalf("%s/%s: %v", name, rname, err)
			}
			eager, err := ForwardRows(l, w, x, r, rows)
			if err != nil {
				t.Fatal(err)
			}
			if !sameFloats(lazy, eager) {
				t.Errorf("%s/%s: lazy ForwardRows differs from ForwardRows", name, rname)
			}
			H := l.Hidden
			for i, t0 := range rows {
				if !sameFloats(lazy[i*H:(i+1)*H], y[t0*H:(t0+1)*H]) {
					t.Errorf("%s/%s: row %d (token %d) differs from Forward", name, rname, i, t0)
				}
			}
			all := make([]int, T)
			for i := range all {
				all[i] = i
			}
			if full, err := g.ForwardRows(x, r, all); err != nil || !sameFloats(full, y) {
				t.Errorf("%s/%s: lazy forward of every row differs from Forward (%v)", name, rname, err)
			}
		}
		if y, err := g.ForwardRows(nil, Routing{IDs: []int32{}, Weights: []float32{}, Map: nil}, nil); l.Routing == RoutingIDs && (err != nil || len(y) != 0) {
			t.Errorf("%s: T = 0: %v, %d values", name, err, len(y))
		}
	}
}

// BenchmarkWeightGen measures the generation of bf16 weights: SetBytes is
// the number of elements, so MB/s reads as millions of weights per second.
func BenchmarkWeightGen(b *testing.B) {
	l, _ := Preset("deepseek-v3")
	g, _ := NewWeightGen(l, 1)
	fc1, fc2 := make([]uint16, 2*l.Intermediate*l.Hidden), make([]uint16, l.Hidden*l.Intermediate)
	b.SetBytes(int64(len(fc1) + len(fc2)))
	for i := 0; i < b.N; i++ {
		g.RoutedBF16(i%l.Experts, fc1, fc2)
	}
}
