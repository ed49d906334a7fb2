package schedule

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"

	"github.com/mokc/mokc/internal/parallel"
)

// This file generates realistic, deterministic test inputs: every value is
// bf16-representable and depends only on the layer and the seed.

// stream returns a generator for (seed, tag, index): independent streams
// let experts be generated in parallel and identically on every run.
func stream(seed uint64, tag, index int) *rand.Rand {
	return rand.New(rand.NewPCG(seed, uint64(tag)<<32|uint64(uint32(index))))
}

// fillUniform fills v with values uniform in (-a, a), rounded to bf16 (so
// |v| <= a(1 + 2^-8)).
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
	parallel.For(E, 3*I*H, func(e int) {
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
	parallel.For(S, 3*Is*H, func(s int) {
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
	parallel.For(T, E*8, func(t int) {
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

// WeightGen generates the weights of a layer from a counter-based hash, so
// that any expert's weights can be regenerated on demand, bit-identically,
// without holding the others: element j of a tensor depends only on (seed,
// tensor, expert, j). A layer too large for host memory as float32 (12*E*I*H
// bytes) can so be uploaded to the device one expert at a time (bf16) and
// checked by a reference that regenerates only the experts its tokens route
// to (WeightGen.ForwardRows).
//
// The hash is SplitMix64 (Steele, Lea, Flood, "Fast splittable
// pseudorandom number generators", OOPSLA 2014): the 64-bit word w of a
// tensor is mix64(key + (w+1)*0x9E3779B97F4A7C15) with key =
// mix64(mix64(seed + 0x9E3779B97F4A7C15) ^ (tensor<<32 | expert)), and each
// word gives four elements, element j taking the 16 bits j%4 (lowest
// first) of word j/4. The 16 bits r select the value
// bf16(a * (2r + 1 - 65536) / 65536): 65536 evenly spaced points in (-a, a),
// symmetric about 0, rounded once to bfloat16 (round to nearest even). The
// amplitudes a are those of RandomWeights: FC1 and the shared FC1 6/sqrt(H),
// FC2 sqrt(3/I), the shared FC2 sqrt(3/I_s), biases 0.5, the shared gate
// sqrt(3/H). The values differ from RandomWeights' (a different generator),
// not their distribution.
//
// A WeightGen is immutable and safe for concurrent use. Every generating
// method spreads its work over GOMAXPROCS goroutines.
type WeightGen struct {
	l    Layer
	seed uint64
	tab  [numHashTensors]*[1 << 16]uint16 // bf16 bits of each 16-bit draw
}

// Tensor ids of the hash (the "tensor" of the key).
const (
	hashFC1 = iota + 1
	hashFC2
	hashFC1Bias
	hashFC2Bias
	hashSharedFC1
	hashSharedFC2
	hashSharedGate
	numHashTensors
)

const golden64 = 0x9E3779B97F4A7C15

// mix64 is SplitMix64's output function (the finaliser of MurmurHash3 with
// Stafford's "Mix13" constants).
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// NewWeightGen returns the generator of l's weights for seed. It fails
// only for an invalid layer (the error of Layer.Validate).
func NewWeightGen(l Layer, seed uint64) (*WeightGen, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	g := &WeightGen{l: l, seed: seed}
	amp := map[int]float64{
		hashFC1:        6 / math.Sqrt(float64(l.Hidden)),
		hashFC2:        math.Sqrt(3 / float64(l.Intermediate)),
		hashFC1Bias:    0.5,
		hashFC2Bias:    0.5,
		hashSharedFC1:  6 / math.Sqrt(float64(l.Hidden)),
		hashSharedGate: math.Sqrt(3 / float64(l.Hidden)),
	}
	if l.SharedExperts > 0 {
		amp[hashSharedFC2] = math.Sqrt(3 / float64(l.SharedIntermediate))
	}
	byAmp := map[float64]*[1 << 16]uint16{}
	for id, a := range amp {
		t, ok := byAmp[a]
		if !ok {
			t = new([1 << 16]uint16)
			for r := range t {
				v := roundBF16From64(float64(2*r+1-(1<<16)) * (a / (1 << 16)))
				t[r] = uint16(math.Float32bits(v) >> 16)
			}
			byAmp[a] = t
		}
		g.tab[id] = t
	}
	return g, nil
}

// Layer returns the layer g generates weights for.
func (g *WeightGen) Layer() Layer { return g.l }

// Seed returns g's seed.
func (g *WeightGen) Seed() uint64 { return g.seed }

// key returns the hash key of one tensor of one expert.
func (g *WeightGen) key(tensor, expert int) uint64 {
	return mix64(mix64(g.seed+golden64) ^ (uint64(tensor)<<32 | uint64(uint32(expert))))
}

// hashChunk is the number of elements one goroutine generates at a time (a
// multiple of 4).
const hashChunk = 1 << 15

// fillBits writes the elements of one tensor of one expert as bf16 bits.
func (g *WeightGen) fillBits(dst []uint16, tensor, expert int) {
	key, tab, n := g.key(tensor, expert), g.tab[tensor], len(dst)
	parallel.For((n+hashChunk-1)/hashChunk, hashChunk, func(c int) {
		bitsChunk(dst[c*hashChunk:min(n, (c+1)*hashChunk)], key, tab, c)
	})
}

// fillF32 writes the same values as fillBits, widened to float32 (exact).
func (g *WeightGen) fillF32(dst []float32, tensor, expert int) {
	key, tab, n := g.key(tensor, expert), g.tab[tensor], len(dst)
	parallel.With((n+hashChunk-1)/hashChunk, hashChunk, func() []uint16 { return make([]uint16, hashChunk) }, func(buf []uint16, c int) {
		d := dst[c*hashChunk : min(n, (c+1)*hashChunk)]
		bits := buf[:len(d)]
		bitsChunk(bits, key, tab, c)
		for i, b := range bits {
			d[i] = math.Float32frombits(uint32(b) << 16)
		}
	})
}

// bitsChunk writes chunk c of a tensor's bf16 bits (elements c*hashChunk
// onwards, len(d) of them) to d: four elements per 64-bit hash of key and
// the element's group, each 16-bit draw mapped through tab.
func bitsChunk(d []uint16, key uint64, tab *[1 << 16]uint16, c int) {
	w := uint64(c * hashChunk / 4)
	j := 0
	for ; j+4 <= len(d); j += 4 {
		w++
		h := mix64(key + w*golden64)
		d4 := d[j : j+4 : j+4]
		d4[0] = tab[h&0xFFFF]
		d4[1] = tab[(h>>16)&0xFFFF]
		d4[2] = tab[(h>>32)&0xFFFF]
		d4[3] = tab[h>>48]
	}
	if j < len(d) {
		h := mix64(key + (w+1)*golden64)
		for i := j; i < len(d); i++ {
			d[i] = tab[(h>>(16*(i-j)))&0xFFFF]
		}
	}
}

func checkGen(name string, got, want int) error {
	if got != want {
		return fmt.Errorf("WeightGen: %s has %d values, want %d", name, got, want)
	}
	return nil
}

func (g *WeightGen) checkIndex(what string, i, n int) error {
	if i < 0 || i >= n {
		return fmt.Errorf("WeightGen: %s %d out of range 0..%d (layer %s)", what, i, n-1, g.l.Name)
	}
	return nil
}

// checkPair checks index i of what (0..n-1) and the lengths of the two
// slices an expert's weights are written to: name1 has got1 values and
// must have want1, name2 likewise.
func (g *WeightGen) checkPair(what string, i, n int, name1 string, got1, want1 int, name2 string, got2, want2 int) error {
	if err := g.checkIndex(what, i, n); err != nil {
		return err
	}
	if err := checkGen(name1, got1, want1); err != nil {
		return err
	}
	return checkGen(name2, got2, want2)
}

// RoutedBF16 writes routed expert e's FC1 [2I*H] and FC2 [H*I] as bf16 bits
// (the upper halves of the float32 values Routed returns), in the row
// orders of Weights.FC1 and Weights.FC2. An expert outside 0..E-1 or a
// slice of the wrong length is an error.
func (g *WeightGen) RoutedBF16(e int, fc1, fc2 []uint16) error {
	H, I := g.l.Hidden, g.l.Intermediate
	if err := g.checkPair("expert", e, g.l.Experts, "FC1", len(fc1), 2*I*H, "FC2", len(fc2), H*I); err != nil {
		return err
	}
	g.fillBits(fc1, hashFC1, e)
	g.fillBits(fc2, hashFC2, e)
	return nil
}

// RoutedBias writes routed expert e's FC1Bias [2I] and FC2Bias [H]
// (bf16-representable float32). Only for layers with Layer.Biases.
func (g *WeightGen) RoutedBias(e int, b1, b2 []float32) error {
	if !g.l.Biases {
		return fmt.Errorf("WeightGen: layer %s has no biases", g.l.Name)
	}
	if err := g.checkPair("expert", e, g.l.Experts, "FC1Bias", len(b1), 2*g.l.Intermediate, "FC2Bias", len(b2), g.l.Hidden); err != nil {
		return err
	}
	g.fillF32(b1, hashFC1Bias, e)
	g.fillF32(b2, hashFC2Bias, e)
	return nil
}

// SharedBF16 writes shared expert s's FC1 [2I_s*H] (gate rows, then up
// rows) and FC2 [H*I_s] as bf16 bits, in the row orders of Weights.SharedFC1
// and Weights.SharedFC2.
func (g *WeightGen) SharedBF16(s int, fc1, fc2 []uint16) error {
	H, Is := g.l.Hidden, g.l.SharedIntermediate
	if err := g.checkPair("shared expert", s, g.l.SharedExperts, "SharedFC1", len(fc1), 2*Is*H, "SharedFC2", len(fc2), H*Is); err != nil {
		return err
	}
	g.fillBits(fc1, hashSharedFC1, s)
	g.fillBits(fc2, hashSharedFC2, s)
	return nil
}

// SharedGateBF16 writes the shared gate vector [H] as bf16 bits. Only for
// layers with Layer.SharedGate.
func (g *WeightGen) SharedGateBF16(gate []uint16) error {
	if !g.l.SharedGate {
		return fmt.Errorf("WeightGen: layer %s has no shared gate", g.l.Name)
	}
	if err := checkGen("SharedGate", len(gate), g.l.Hidden); err != nil {
		return err
	}
	g.fillBits(gate, hashSharedGate, 0)
	return nil
}

// Routed returns routed expert e's weights as float32 (bf16 values; for an
// mxfp8 layer FC1 and FC2 hold the MXFP8 values of those bf16 weights, as
// MXWeights gives them): FC1 [2I*H], FC2 [H*I] and, with Layer.Biases,
// FC1Bias [2I] and FC2Bias [H] (nil otherwise), freshly allocated.
// 12*I*H bytes.
func (g *WeightGen) Routed(e int) (fc1, fc2, b1, b2 []float32, err error) {
	H, I := g.l.Hidden, g.l.Intermediate
	if err := g.checkIndex("expert", e, g.l.Experts); err != nil {
		return nil, nil, nil, nil, err
	}
	fc1, fc2 = make([]float32, 2*I*H), make([]float32, H*I)
	if g.l.Biases {
		b1, b2 = make([]float32, 2*I), make([]float32, H)
	}
	g.fillRouted(e, fc1, fc2, b1, b2)
	return fc1, fc2, b1, b2, nil
}

// sharedWeights returns the shared experts' weights and the shared gate as
// float32, in Weights' layout (fields for the routed experts nil).
func (g *WeightGen) sharedWeights() Weights {
	l := g.l
	H, Is := l.Hidden, l.SharedIntermediate
	var w Weights
	w.SharedFC1, w.SharedFC2 = make([][]float32, l.SharedExperts), make([][]float32, l.SharedExperts)
	for s := range w.SharedFC1 {
		w.SharedFC1[s], w.SharedFC2[s] = make([]float32, 2*Is*H), make([]float32, H*Is)
		g.fillF32(w.SharedFC1[s], hashSharedFC1, s)
		g.fillF32(w.SharedFC2[s], hashSharedFC2, s)
	}
	if l.SharedGate {
		w.SharedGate = make([]float32, H)
		g.fillF32(w.SharedGate, hashSharedGate, 0)
	}
	return w
}

// fillRouted writes routed expert e's FC1 [2I*H] and FC2 [H*I] as float32:
// the bf16 values RoutedBF16 gives, or for an mxfp8 layer their MXFP8
// values (each row quantized along K with the round-up scale and
// dequantized: what a GPU computes with after quantizing RoutedBF16's
// bits the same way, layouts.QuantizeBF16); and, when b1 and b2 are not
// nil, its FC1Bias [2I] and FC2Bias [H] (RoutedBias's values).
func (g *WeightGen) fillRouted(e int, fc1, fc2, b1, b2 []float32) {
	g.fillF32(fc1, hashFC1, e)
	g.fillF32(fc2, hashFC2, e)
	if g.l.Precision == MXFP8 {
		H, I := g.l.Hidden, g.l.Intermediate
		mxInPlace(fc1, 2*I, H)
		mxInPlace(fc2, H, I)
	}
	if b1 != nil {
		g.fillF32(b1, hashFC1Bias, e)
		g.fillF32(b2, hashFC2Bias, e)
	}
}

// Weights materialises every weight of the layer as float32 (12*E*I*H bytes
// for the routed experts): the eager form of what g generates, for small
// layers and for tests of the lazy reference.
func (g *WeightGen) Weights() Weights {
	w := g.sharedWeights()
	E := g.l.Experts
	w.FC1, w.FC2 = make([][]float32, E), make([][]float32, E)
	if g.l.Biases {
		w.FC1Bias, w.FC2Bias = make([][]float32, E), make([][]float32, E)
	}
	for e := 0; e < E; e++ {
		fc1, fc2, b1, b2, _ := g.Routed(e)
		w.FC1[e], w.FC2[e] = fc1, fc2
		if g.l.Biases {
			w.FC1Bias[e], w.FC2Bias[e] = b1, b2
		}
	}
	return w
}

// routedOnly is l without shared experts and with top-1 fixed-width
// routing: the layer of one routed expert's part (each slot a token of its
// own, its routing weight the token's).
func (l Layer) routedOnly() Layer {
	l.TopK, l.Routing = 1, RoutingIDs
	l.SharedExperts, l.SharedIntermediate, l.SharedGate = 0, 0, false
	l.SharedActivation, l.SharedSwiGLULimit = SwiGLU, 0
	l.Router = Router{Score: l.Router.Score}
	return l
}

// ForwardRows is ForwardRows(g.Layer(), g.Weights(), x, r, rows) computed
// without materialising the routed experts together: the shared experts
// are generated once, and each routed expert that a slot of the given rows
// routes to is generated (Routed), applied to its rows and dropped, one
// expert at a time; experts no row routes to are never generated. The
// result is bit-identical to ForwardRows with the eager weights: each
// expert's outputs come from ForwardRows itself (of a one-slot layer whose
// routing weight is 1, or the slot's weight with
// Layer.RouterWeightOnInput, which leaves the output exact), and they are
// combined in the order Forward documents (shared outputs, then the routed
// slots in increasing k, y += w*o in float64). Host memory: the shared
// experts plus one routed expert (12*I*H bytes) and O(len(rows)*K*H)
// values. Errors as ForwardRows.
func (g *WeightGen) ForwardRows(x []float32, r Routing, rows []int) ([]float64, error) {
	l := g.l
	H, E, K := l.Hidden, l.Experts, l.TopK
	T, ids, wts, err := checkRouting(l, x, r)
	if err != nil {
		return nil, err
	}
	for i, t := range rows {
		if t < 0 || t >= T {
			return nil, fmt.Errorf("rows[%d] = %d is out of range (T = %d)", i, t, T)
		}
	}
	n := len(rows)
	// The selected rows as a problem of their own, all slots -1: its
	// ForwardRows is the shared part (zero without shared experts).
	xs := make([]float32, n*H)
	for i, t := range rows {
		copy(xs[i*H:(i+1)*H], x[t*H:(t+1)*H])
	}
	ls := l
	ls.Routing = RoutingIDs
	none := Routing{IDs: make([]int32, n*K), Weights: make([]float32, n*K)}
	for i := range none.IDs {
		none.IDs[i] = -1
	}
	all := make([]int, n*K) // 0, 1, 2, ...: every row of a sub-problem
	for i := range all {
		all[i] = i
	}
	y := make([]float64, n*H)
	if l.SharedExperts > 0 && n > 0 {
		var err error
		if y, err = ForwardRows(ls, g.sharedWeights(), xs, none, all[:n]); err != nil {
			return nil, err
		}
	}
	// Slots by expert, in increasing slot order.
	by := make([][]int, E)
	for i, t := range rows {
		for k := 0; k < K; k++ {
			if id := ids[t*K+k]; id >= 0 {
				by[id] = append(by[id], i*K+k)
			}
		}
	}
	// One routed expert alone: a one-slot layer without shared experts.
	le := l.routedOnly()
	out := make([]float64, n*K*H) // unweighted output of each routed slot
	// One expert's weights at a time, in buffers reused from expert to
	// expert (zeroing fresh ones would be a serial pass over each expert).
	I := l.Intermediate
	fc1, fc2 := make([]float32, 2*I*H), make([]float32, H*I)
	var b1, b2 []float32
	if l.Biases {
		b1, b2 = make([]float32, 2*I), make([]float32, H)
	}
	for e, slots := range by {
		if len(slots) == 0 {
			continue
		}
		g.fillRouted(e, fc1, fc2, b1, b2)
		w := Weights{FC1: make([][]float32, E), FC2: make([][]float32, E)}
		w.FC1[e], w.FC2[e] = fc1, fc2
		if l.Biases {
			w.FC1Bias, w.FC2Bias = make([][]float32, E), make([][]float32, E)
			w.FC1Bias[e], w.FC2Bias[e] = b1, b2
		}
		m := len(slots)
		xe := make([]float32, m*H)
		re := Routing{IDs: make([]int32, m), Weights: make([]float32, m)}
		for j, s := range slots {
			copy(xe[j*H:(j+1)*H], xs[(s/K)*H:(s/K+1)*H])
			re.IDs[j] = int32(e)
			re.Weights[j] = 1
			if l.RouterWeightOnInput {
				re.Weights[j] = wts[rows[s/K]*K+s%K]
			}
		}
		o, err := ForwardRows(le, w, xe, re, all[:m:m])
		if err != nil {
			return nil, err
		}
		for j, s := range slots {
			copy(out[s*H:(s+1)*H], o[j*H:(j+1)*H])
		}
	}
	for i, t := range rows {
		yr := y[i*H : (i+1)*H]
		for k := 0; k < K; k++ {
			if ids[t*K+k] < 0 {
				continue
			}
			wk := 1.0
			if !l.RouterWeightOnInput {
				wk = float64(wts[t*K+k])
			}
			o := out[(i*K+k)*H : (i*K+k+1)*H]
			for c := range yr {
				yr[c] += wk * o[c]
			}
		}
	}
	return y, nil
}
