package schedule

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
)

// This file generates realistic, deterministic test inputs: every value is
// bf16-representable and depends only on the layer and the seed.

// stream returns a generator for (seed, tag, index): independent streams
// let experts be generated in parallel and identically on every run.
func stream(seed uint64, tag, index int) *rand.Rand {
	return rand.New(rand.NewPCG(seed, uint64(tag)<<32|uint64(uint32(index))))
}

// fillUniform fills v with bf16 values uniform in (-a, a).
func fillUniform(rng *rand.Rand, v []float32, a float64) {
	for i := range v {
		v[i] = RoundBF16(float32((2*rng.Float64() - 1) * a))
	}
}

// RandomInput returns x [T*H] with bf16 values uniform in (-1, 1),
// deterministic given seed.
func RandomInput(T, H int, seed uint64) []float32 {
	x := make([]float32, T*H)
	fillUniform(stream(seed, 1, 0), x, 1)
	return x
}

// RandomWeights returns bf16-valued weights for every expert of l,
// deterministic given seed: FC1 uniform in ±6/sqrt(H) (so FC1 outputs for
// inputs in (-1, 1) have a standard deviation of about 2, which reaches the
// clamp of clamped activations now and then), FC2 uniform in ±sqrt(3/I),
// biases uniform in ±0.5, the shared gate uniform in ±sqrt(3/H). It needs
// 12*E*I*H bytes for the routed experts; experts are generated in parallel.
func RandomWeights(l Layer, seed uint64) (Weights, error) {
	if err := l.Validate(); err != nil {
		return Weights{}, err
	}
	H, I, E := l.Hidden, l.Intermediate, l.Experts
	w := Weights{FC1: make([][]float32, E), FC2: make([][]float32, E)}
	if l.Biases {
		w.FC1Bias, w.FC2Bias = make([][]float32, E), make([][]float32, E)
	}
	a1 := 6 / math.Sqrt(float64(H))
	parallelFor(E, 3*I*H, func(e int) {
		rng := stream(seed, 2, e)
		w.FC1[e] = make([]float32, 2*I*H)
		w.FC2[e] = make([]float32, H*I)
		fillUniform(rng, w.FC1[e], a1)
		fillUniform(rng, w.FC2[e], math.Sqrt(3/float64(I)))
		if l.Biases {
			w.FC1Bias[e] = make([]float32, 2*I)
			w.FC2Bias[e] = make([]float32, H)
			fillUniform(rng, w.FC1Bias[e], 0.5)
			fillUniform(rng, w.FC2Bias[e], 0.5)
		}
	})
	S, Is := l.SharedExperts, l.SharedIntermediate
	w.SharedFC1, w.SharedFC2 = make([][]float32, S), make([][]float32, S)
	parallelFor(S, 3*Is*H, func(s int) {
		rng := stream(seed, 3, s)
		w.SharedFC1[s] = make([]float32, 2*Is*H)
		w.SharedFC2[s] = make([]float32, H*Is)
		fillUniform(rng, w.SharedFC1[s], a1)
		fillUniform(rng, w.SharedFC2[s], math.Sqrt(3/float64(Is)))
	})
	if l.SharedGate {
		w.SharedGate = make([]float32, H)
		fillUniform(stream(seed, 4, 0), w.SharedGate, math.Sqrt(3/float64(H)))
	}
	return w, nil
}

// GenerateRouting returns realistic routing for x [T*H] in the form of
// l.Routing, deterministic given seed. A router matrix Wr [E, H] (uniform,
// scaled so the logits z = x·Wr have a standard deviation of about 1.5) gives
// the scores s = score(z) of l.Router.Score; the top-k experts are chosen by
// score (ties to the lower id), within the Router.TopKGroups best groups
// when Router.Groups > 1 (a group scored by the sum of its two best scores,
// DeepSeek-V3); the weights are s, or s/sum(chosen s) with
// Router.Normalize, times Router.Scale. Fixed-width ids are in descending
// score order (as torch.topk returns them); the dense form has probs only
// where the map is true.
func GenerateRouting(l Layer, x []float32, seed uint64) (Routing, error) {
	if err := l.Validate(); err != nil {
		return Routing{}, err
	}
	H, E, K := l.Hidden, l.Experts, l.TopK
	if len(x)%H != 0 {
		return Routing{}, fmt.Errorf("x has %d values, not a multiple of H = %d", len(x), H)
	}
	T := len(x) / H
	wr := make([]float32, E*H)
	fillUniform(stream(seed, 5, 0), wr, 1.5*3/math.Sqrt(float64(H)))
	logits := make([]float64, T*E)
	gemmNT(T, E, H, f64(x), wr, false, func(i, j0 int, v []float64) { copy(logits[i*E+j0:], v) })
	ids := make([]int32, T*K)
	weights := make([]float32, T*K)
	r := l.Router
	scale := r.Scale
	if scale == 0 {
		scale = 1
	}
	parallelFor(T, E*8, func(t int) {
		s := scores(r.Score, logits[t*E:t*E+E])
		allowed := make([]bool, E)
		for e := range allowed {
			allowed[e] = true
		}
		if r.Groups > 1 {
			allowed = groupMask(s, r.Groups, r.TopKGroups)
		}
		order := make([]int, 0, E)
		for e := 0; e < E; e++ {
			if allowed[e] {
				order = append(order, e)
			}
		}
		sort.SliceStable(order, func(a, b int) bool { return s[order[a]] > s[order[b]] })
		var sum float64
		for k := 0; k < K; k++ {
			sum += s[order[k]]
		}
		for k := 0; k < K; k++ {
			v := s[order[k]]
			if r.Normalize {
				v /= sum
			}
			ids[t*K+k] = int32(order[k])
			weights[t*K+k] = float32(scale * v)
		}
	})
	if l.Routing == RoutingIDs {
		return Routing{IDs: ids, Weights: weights}, nil
	}
	m := make([]bool, T*E)
	probs := make([]float32, T*E)
	for t := 0; t < T; t++ {
		for k := 0; k < K; k++ {
			e := int(ids[t*K+k])
			m[t*E+e] = true
			probs[t*E+e] = weights[t*K+k]
		}
	}
	return Routing{Map: m, Probs: probs}, nil
}

// scores applies the router score function to one token's logits.
func scores(f RouterScore, z []float64) []float64 {
	s := make([]float64, len(z))
	switch f {
	case ScoreSoftmax:
		mx := math.Inf(-1)
		for _, v := range z {
			mx = math.Max(mx, v)
		}
		var sum float64
		for i, v := range z {
			s[i] = math.Exp(v - mx)
			sum += s[i]
		}
		for i := range s {
			s[i] /= sum
		}
	case ScoreSigmoid:
		for i, v := range z {
			s[i] = sigmoid(v)
		}
	case ScoreSqrtSoftplus:
		for i, v := range z {
			sp := math.Max(v, 0) + math.Log1p(math.Exp(-math.Abs(v)))
			s[i] = math.Sqrt(sp)
		}
	}
	return s
}

// groupMask keeps the experts of the topG best of groups groups, a group
// scored by the sum of its two best scores.
func groupMask(s []float64, groups, topG int) []bool {
	E := len(s)
	per := E / groups
	gs := make([]float64, groups)
	for g := range gs {
		b1, b2 := math.Inf(-1), math.Inf(-1)
		for _, v := range s[g*per : g*per+per] {
			if v > b1 {
				b1, b2 = v, b1
			} else if v > b2 {
				b2 = v
			}
		}
		if per == 1 {
			b2 = 0
		}
		gs[g] = b1 + b2
	}
	order := make([]int, groups)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return gs[order[a]] > gs[order[b]] })
	mask := make([]bool, E)
	for _, g := range order[:topG] {
		for e := g * per; e < g*per+per; e++ {
			mask[e] = true
		}
	}
	return mask
}
