package schedule

import "fmt"

// SampledGrads are the gradients BackwardSample computes: those of
// Backward for a sample of token rows and of experts.
type SampledGrads struct {
	// DX is dL/dx of the sampled rows, [len(rows)*H].
	DX []float64
	// DWeights is the routing-weight gradient of the sampled rows'
	// fixed-width slots, [len(rows)*K] (0 for -1 slots).
	DWeights []float64
	// Experts holds, for each sampled expert, its weight gradients dW (FC1
	// [2I*H], FC2 [H*I], biases [2I] and [H] with Layer.Biases), accumulated
	// from zero with Backward's rule (float32, or bf16 with
	// Layer.MainGrad = GradBF16); an expert without routes has zeros.
	Experts map[int]MainGrads
	// Shared holds the shared experts' weight gradients (and the shared
	// gate's) when asked for, else nil.
	Shared *MainGrads
}

// BackwardSample computes Backward's gradients for a sample, generating the
// weights one routed expert at a time (host memory: the shared experts plus
// one routed expert and O(rows*K*H + routes of the sampled experts * H)
// values): dx and the routing-weight gradient of the token rows rows, the
// weight gradients of the routed experts experts (which need every route to
// them) and, with shared, those of the shared experts (which need every
// token). Each routed expert's part is Backward of a one-expert top-1 layer
// over its routes, each slot a token of its own with its routing weight;
// the shared part is Backward of the layer with every slot unrouted; dx
// sums them. Sums run in float64, in another order than Backward's, so the
// results agree with Backward's to float64 rounding. Errors: those of
// Backward, a row or expert out of range.
func (g *WeightGen) BackwardSample(x []float32, r Routing, dy []float32, rows, experts []int, shared bool) (SampledGrads, error) {
	l := g.l
	H, E, K := l.Hidden, l.Experts, l.TopK
	T, ids, wts, err := checkRouting(l, x, r)
	if err != nil {
		return SampledGrads{}, err
	}
	if len(dy) != T*H {
		return SampledGrads{}, fmt.Errorf("dy has %d values, want T*H = %d*%d", len(dy), T, H)
	}
	at := map[int]int{} // token -> index in rows
	for i, t := range rows {
		if t < 0 || t >= T {
			return SampledGrads{}, fmt.Errorf("rows[%d] = %d is out of range (T = %d)", i, t, T)
		}
		at[t] = i
	}
	want := map[int]bool{}
	for i, e := range experts {
		if e < 0 || e >= E {
			return SampledGrads{}, fmt.Errorf("experts[%d] = %d is out of range (E = %d)", i, e, E)
		}
		want[e] = true
	}
	out := SampledGrads{DX: make([]float64, len(rows)*H), DWeights: make([]float64, len(rows)*K), Experts: map[int]MainGrads{}}
	// Slots per expert: every slot for a sampled expert, else the sampled rows' slots.
	by := make([][]int, E)
	for t := 0; t < T; t++ {
		for k := 0; k < K; k++ {
			if id := ids[t*K+k]; id >= 0 {
				if _, ok := at[t]; ok || want[int(id)] {
					by[id] = append(by[id], t*K+k)
				}
			}
		}
	}
	var w Weights // one routed expert's weights, refilled for each expert
	for e := 0; e < E; e++ {
		if len(by[e]) == 0 && !want[e] {
			continue
		}
		if err := g.expertBackward(e, &w, x, wts, dy, by[e], want[e], at, &out); err != nil {
			return SampledGrads{}, err
		}
	}
	if l.SharedExperts > 0 {
		if err := g.sharedBackward(x, dy, rows, shared, &out); err != nil {
			return SampledGrads{}, err
		}
	}
	return out, nil
}

// routedInto fills w with routed expert e's weights (the values of
// Routed) as the one expert of a one-expert layer, allocating its buffers
// on first use and reusing them afterwards: a fresh allocation of
// 12*I*H bytes per expert would be zeroed on one core.
func (g *WeightGen) routedInto(e int, w *Weights) error {
	l := g.l
	H, I := l.Hidden, l.Intermediate
	if err := g.checkIndex("expert", e, l.Experts); err != nil {
		return err
	}
	if w.FC1 == nil {
		w.FC1, w.FC2 = [][]float32{make([]float32, 2*I*H)}, [][]float32{make([]float32, H*I)}
		if l.Biases {
			w.FC1Bias, w.FC2Bias = [][]float32{make([]float32, 2*I)}, [][]float32{make([]float32, H)}
		}
	}
	g.fillRouted(e, w.FC1[0], w.FC2[0])
	if l.Biases {
		g.fillF32(w.FC1Bias[0], hashFC1Bias, e)
		g.fillF32(w.FC2Bias[0], hashFC2Bias, e)
	}
	return nil
}

// expertBackward adds expert e's part over slots (indices t*K+k): each
// sampled row's dx and dw, and with grads e's weight gradients. w holds
// the weight buffers shared by the calls (see routedInto).
func (g *WeightGen) expertBackward(e int, w *Weights, x, wts, dy []float32, slots []int, grads bool, at map[int]int, out *SampledGrads) error {
	l := g.l
	H, I, K := l.Hidden, l.Intermediate, l.TopK
	le := l.routedOnly()
	le.Experts = 1
	if err := g.routedInto(e, w); err != nil {
		return err
	}
	m := len(slots)
	xe, dye := make([]float32, m*H), make([]float32, m*H)
	re := Routing{IDs: make([]int32, m), Weights: make([]float32, m)}
	parallelRange(m, 2*H, func(lo, hi int) {
		for j := lo; j < hi; j++ {
			s := slots[j]
			t := s / K
			copy(xe[j*H:(j+1)*H], x[t*H:(t+1)*H])
			copy(dye[j*H:(j+1)*H], dy[t*H:(t+1)*H])
			re.Weights[j] = wts[s]
		}
	})
	var mg *MainGrads
	if grads {
		mg = &MainGrads{FC1: [][]float32{make([]float32, 2*I*H)}, FC2: [][]float32{make([]float32, H*I)}}
		if l.Biases {
			mg.FC1Bias, mg.FC2Bias = [][]float32{make([]float32, 2*I)}, [][]float32{make([]float32, H)}
		}
		out.Experts[e] = *mg
	}
	if m == 0 {
		return nil
	}
	ge, err := Backward(le, *w, xe, re, dye, mg)
	if err != nil {
		return fmt.Errorf("expert %d: %w", e, err)
	}
	for j, s := range slots {
		i, ok := at[s/K]
		if !ok {
			continue
		}
		out.DWeights[i*K+s%K] = ge.DWeights[j]
		for c := 0; c < H; c++ {
			out.DX[i*H+c] += ge.DX[j*H+c]
		}
	}
	return nil
}

// sharedBackward adds the shared experts' part: Backward of the layer with
// every slot unrouted, over the sampled rows (or, with grads, over every
// token, for the shared experts' and the gate's weight gradients).
func (g *WeightGen) sharedBackward(x, dy []float32, rows []int, grads bool, out *SampledGrads) error {
	l := g.l
	H := l.Hidden
	T := len(x) / H
	ls := l
	ls.Experts, ls.Intermediate, ls.TopK, ls.Routing, ls.Biases = 1, 8, 1, RoutingIDs, false
	ls.Activation, ls.SwiGLULimit, ls.GPTOSSAlpha, ls.GateUpInterleaved = SwiGLU, 0, 0, false
	ls.Router = Router{Score: l.Router.Score}
	sw := g.sharedWeights()
	sw.FC1, sw.FC2 = [][]float32{make([]float32, 2*8*H)}, [][]float32{make([]float32, H*8)} // never read: no route
	tokens := rows
	var mg *MainGrads
	if grads {
		tokens = make([]int, T)
		for i := range tokens {
			tokens[i] = i
		}
		Is := l.SharedIntermediate
		mg = &MainGrads{SharedFC1: make([][]float32, l.SharedExperts), SharedFC2: make([][]float32, l.SharedExperts)}
		for s := range mg.SharedFC1 {
			mg.SharedFC1[s], mg.SharedFC2[s] = make([]float32, 2*Is*H), make([]float32, H*Is)
		}
		if l.SharedGate {
			mg.SharedGate = make([]float32, H)
		}
		out.Shared = mg
	}
	n := len(tokens)
	xs, dys := make([]float32, n*H), make([]float32, n*H)
	rs := Routing{IDs: make([]int32, n), Weights: make([]float32, n)}
	pos := map[int]int{}
	for j, t := range tokens {
		rs.IDs[j] = -1
		pos[t] = j
	}
	parallelRange(n, 2*H, func(lo, hi int) {
		for j := lo; j < hi; j++ {
			t := tokens[j]
			copy(xs[j*H:(j+1)*H], x[t*H:(t+1)*H])
			copy(dys[j*H:(j+1)*H], dy[t*H:(t+1)*H])
		}
	})
	if n == 0 {
		return nil
	}
	gs, err := Backward(ls, sw, xs, rs, dys, mg)
	if err != nil {
		return fmt.Errorf("shared experts: %w", err)
	}
	for i, t := range rows {
		j := pos[t]
		for c := 0; c < H; c++ {
			out.DX[i*H+c] += gs.DX[j*H+c]
		}
	}
	return nil
}
