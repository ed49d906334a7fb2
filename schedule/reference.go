package schedule

import (
	"fmt"

	"github.com/mokc/mokc/internal/parallel"
)

// Weights holds a layer's parameters for the CPU reference. Values are
// float32; on the GPU they are bf16, so tests pass bf16-representable values
// (RoundBF16) and the reference computes in float64 from them. For mxfp8
// layers pass the dequantized routed weights (E4M3 data times their UE8M0
// scales, layouts.MXFP8.Dequantize): the reference computes from the
// values it is given and quantizes the routed GEMMs' activations itself
// (see Forward).
//
// All matrices are row-major, one slice per expert:
//   - FC1[e]: [2I*H], row r is output column r of FC1. Rows 0..I-1 are the
//     gate and I..2I-1 the up projection; with Layer.GateUpInterleaved row
//     2j is gate j and row 2j+1 is up j (gpt-oss).
//   - FC2[e]: [H*I], row h is output column h.
//   - FC1Bias[e]: [2I] and FC2Bias[e]: [H], in the same row order; only
//     with Layer.Biases (nil otherwise).
//   - SharedFC1[s]: [2I_s*H] (gate rows, then up rows) and SharedFC2[s]:
//     [H*I_s] for each of the Layer.SharedExperts shared experts.
//   - SharedGate: [H], the vector g of the sigmoid output gate
//     sigmoid(x·g) (Layer.SharedGate only).
//
// An expert that receives no route may have nil weights.
type Weights struct {
	FC1, FC2             [][]float32 // per routed expert: FC1 [2I*H], FC2 [H*I]
	FC1Bias, FC2Bias     [][]float32 // per routed expert: [2I] and [H]; nil without Layer.Biases
	SharedFC1, SharedFC2 [][]float32 // per shared expert: [2I_s*H] and [H*I_s]
	SharedGate           []float32   // [H], gate vector g; nil without Layer.SharedGate
}

// Routing is the routing input of T tokens, in the form Layer.Routing names:
//   - RoutingIDs: IDs [T*K] int32, row-major [T, K]; -1 = no route (the slot
//     reads no weight and contributes exactly 0); ids must be in -1..E-1.
//     Weights [T*K] float32. The same expert may appear twice in a token:
//     each slot counts.
//   - RoutingMap: Map [T*E] bool and Probs [T*E] float32, row-major [T, E];
//     a token may have at most K routes; probs are read only where the map
//     is true. Converted by FixedWidth.
//
// The fields of the other form must be nil.
type Routing struct {
	IDs     []int32   // RoutingIDs: [T*K] expert ids, -1 = no route
	Weights []float32 // RoutingIDs: [T*K] routing weights
	Map     []bool    // RoutingMap: [T*E], true where token t routes to expert e
	Probs   []float32 // RoutingMap: [T*E] probs, read where Map is true
}

// MainGrads are caller-owned main-grad buffers into which Backward
// accumulates weight gradients (main += dW, Megatron's main_grad). Shapes
// are those of the matching Weights fields. The values are float32 holding
// fp32 or, with Layer.MainGrad = GradBF16, bf16 values: each touched element
// becomes round(main + dW) with dW computed exactly in float64 and one
// rounding to the buffer's dtype (round to nearest even). A nil slice (or a
// nil entry of an outer slice) skips that gradient; an expert with no route
// is never touched (its gradient is exactly zero).
type MainGrads struct {
	FC1, FC2             [][]float32 // per routed expert: FC1 [2I*H], FC2 [H*I]
	FC1Bias, FC2Bias     [][]float32 // per routed expert: [2I] and [H]
	SharedFC1, SharedFC2 [][]float32 // per shared expert: [2I_s*H] and [H*I_s]
	SharedGate           []float32   // [H]
}

// Grads are the activation and routing gradients of Backward.
type Grads struct {
	// DX is dL/dx, [T*H] row-major [T, H].
	DX []float64
	// DWeights is the router-weight gradient of every fixed-width slot,
	// [T*K]: dw[t,k] = <dy[t], y[t,k]> with y[t,k] the unweighted output of
	// the expert (FC2 bias included), or with Layer.RouterWeightOnInput
	// dw[t,k] = <d(expert input), x[t]>. Exact for every valid slot,
	// including w <= 0; 0 for -1 slots. For RoutingMap layers the slots are
	// those of FixedWidth.
	DWeights []float64
	// DProbs is the same gradient in the dense form, [T*E] (0 where the
	// routing map is false); only for RoutingMap layers.
	DProbs []float64
}

// FixedWidth converts a dense routing map [T*E] bool with probs [T*E] to the
// fixed-width form: ids [T*K] in increasing expert order, -1 padding when a
// token has fewer than K routes, and weights [T*K] (the probs of the routed
// experts, 0 for padding). T = len(routingMap)/E. A token with more than K
// routes, or lengths that do not match, is an error.
func FixedWidth(l Layer, routingMap []bool, probs []float32) (ids []int32, weights []float32, err error) {
	if err := l.Validate(); err != nil {
		return nil, nil, err
	}
	E, K := l.Experts, l.TopK
	if len(routingMap)%E != 0 {
		return nil, nil, fmt.Errorf("routing map has %d entries, not a multiple of E = %d", len(routingMap), E)
	}
	T := len(routingMap) / E
	if len(probs) != T*E {
		return nil, nil, fmt.Errorf("probs have %d entries, want T*E = %d*%d", len(probs), T, E)
	}
	ids = make([]int32, T*K)
	weights = make([]float32, T*K)
	for t := 0; t < T; t++ {
		k := 0
		for e := 0; e < E; e++ {
			if !routingMap[t*E+e] {
				continue
			}
			if k == K {
				return nil, nil, fmt.Errorf("routing map row %d has more than K = %d routes", t, K)
			}
			ids[t*K+k] = int32(e)
			weights[t*K+k] = probs[t*E+e]
			k++
		}
		for ; k < K; k++ {
			ids[t*K+k] = -1
		}
	}
	return ids, weights, nil
}

// problem is a checked reference input.
type problem struct {
	l       Layer
	w       Weights
	x       []float32
	T       int
	ids     []int32
	weights []float32
}

func newProblem(l Layer, w Weights, x []float32, r Routing) (*problem, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	T, ids, weights, err := checkRouting(l, x, r)
	if err != nil {
		return nil, err
	}
	p := &problem{l: l, w: w, x: x, T: T, ids: ids, weights: weights}
	if err := p.checkWeights(); err != nil {
		return nil, err
	}
	return p, nil
}

// checkRouting returns the token count T of x [T*H] and the routing r in
// the fixed-width form (ids and weights [T*K]; a routing map converted by
// FixedWidth), checking r against l.Routing and T, and every id against
// -1..E-1.
func checkRouting(l Layer, x []float32, r Routing) (T int, ids []int32, weights []float32, err error) {
	H, E, K := l.Hidden, l.Experts, l.TopK
	if len(x)%H != 0 {
		return 0, nil, nil, fmt.Errorf("x has %d values, not a multiple of H = %d", len(x), H)
	}
	T = len(x) / H
	ids, weights = r.IDs, r.Weights
	switch l.Routing {
	case RoutingIDs:
		if r.Map != nil || r.Probs != nil {
			return 0, nil, nil, fmt.Errorf("Routing.Map/Probs are set but Layer.Routing is ids")
		}
		if len(ids) != T*K || len(weights) != T*K {
			return 0, nil, nil, fmt.Errorf("Routing.IDs has %d and Routing.Weights %d entries, want T*K = %d*%d", len(ids), len(weights), T, K)
		}
	case RoutingMap:
		if r.IDs != nil || r.Weights != nil {
			return 0, nil, nil, fmt.Errorf("Routing.IDs/Weights are set but Layer.Routing is map")
		}
		if len(r.Map) != T*E {
			return 0, nil, nil, fmt.Errorf("Routing.Map has %d entries, want T*E = %d*%d", len(r.Map), T, E)
		}
		if ids, weights, err = FixedWidth(l, r.Map, r.Probs); err != nil {
			return 0, nil, nil, err
		}
	}
	for i, id := range ids {
		if id < -1 || int(id) >= E {
			return 0, nil, nil, fmt.Errorf("routing id %d of token %d slot %d is out of range (want -1..%d)", id, i/K, i%K, E-1)
		}
	}
	return T, ids, weights, nil
}

func checkLen(name string, got []float32, want int) error {
	if len(got) != want {
		return fmt.Errorf("%s has %d values, want %d", name, len(got), want)
	}
	return nil
}

// checkWeights checks the shapes of every weight a route or a shared
// expert reads.
func (p *problem) checkWeights() error {
	l, w := p.l, p.w
	H, I, E := l.Hidden, l.Intermediate, l.Experts
	routed := make([]bool, E)
	for _, id := range p.ids {
		if id >= 0 {
			routed[id] = true
		}
	}
	if !l.Biases && (w.FC1Bias != nil || w.FC2Bias != nil) {
		return fmt.Errorf("Weights.FC1Bias/FC2Bias are set but Layer.Biases is false")
	}
	for i, s := range [][][]float32{w.FC1, w.FC2, w.FC1Bias, w.FC2Bias} {
		if s != nil && len(s) != E {
			name := []string{"Weights.FC1", "Weights.FC2", "Weights.FC1Bias", "Weights.FC2Bias"}[i]
			return fmt.Errorf("%s has %d experts, want E = %d", name, len(s), E)
		}
	}
	get := func(s [][]float32, e int) []float32 {
		if e < len(s) {
			return s[e]
		}
		return nil
	}
	for e := 0; e < E; e++ {
		if !routed[e] {
			continue
		}
		if err := checkLen(fmt.Sprintf("Weights.FC1[%d]", e), get(w.FC1, e), 2*I*H); err != nil {
			return err
		}
		if err := checkLen(fmt.Sprintf("Weights.FC2[%d]", e), get(w.FC2, e), H*I); err != nil {
			return err
		}
		if l.Biases {
			if err := checkLen(fmt.Sprintf("Weights.FC1Bias[%d]", e), get(w.FC1Bias, e), 2*I); err != nil {
				return err
			}
			if err := checkLen(fmt.Sprintf("Weights.FC2Bias[%d]", e), get(w.FC2Bias, e), H); err != nil {
				return err
			}
		}
	}
	S, Is := l.SharedExperts, l.SharedIntermediate
	if len(w.SharedFC1) != S || len(w.SharedFC2) != S {
		return fmt.Errorf("Weights.SharedFC1/SharedFC2 have %d/%d experts, want Layer.SharedExperts = %d", len(w.SharedFC1), len(w.SharedFC2), S)
	}
	for s := 0; s < S; s++ {
		if err := checkLen(fmt.Sprintf("Weights.SharedFC1[%d]", s), w.SharedFC1[s], 2*Is*H); err != nil {
			return err
		}
		if err := checkLen(fmt.Sprintf("Weights.SharedFC2[%d]", s), w.SharedFC2[s], H*Is); err != nil {
			return err
		}
	}
	if l.SharedGate {
		if err := checkLen("Weights.SharedGate", w.SharedGate, H); err != nil {
			return err
		}
	} else if w.SharedGate != nil {
		return fmt.Errorf("Weights.SharedGate is set but Layer.SharedGate is false")
	}
	return nil
}

// mlp is one expert: FC1 -> gated activation -> FC2, with optional biases.
type mlp struct {
	fc1, fc2    []float32 // [2I*H], [H*I]
	b1, b2      []float32 // [2I], [H] or nil
	H, I        int
	act         act
	interleaved bool
	// mx quantizes the inputs of both GEMMs to MXFP8 (a routed expert of
	// an mxfp8 layer: MXActivations).
	mx bool
}

func (p *problem) routedMLP(e int) mlp {
	l := p.l
	m := mlp{fc1: p.w.FC1[e], fc2: p.w.FC2[e], H: l.Hidden, I: l.Intermediate,
		act: act{l.Activation, l.SwiGLULimit, l.GPTOSSAlpha}, interleaved: l.GateUpInterleaved, mx: l.Precision == MXFP8}
	if l.Biases {
		m.b1, m.b2 = p.w.FC1Bias[e], p.w.FC2Bias[e]
	}
	return m
}

func (p *problem) sharedMLP(s int) mlp {
	l := p.l
	return mlp{fc1: p.w.SharedFC1[s], fc2: p.w.SharedFC2[s], H: l.Hidden, I: l.SharedIntermediate,
		act: act{l.SharedActivation, l.SharedSwiGLULimit, 0}}
}

// gu returns the indices of gate j and up j within a row of FC1's output.
func (m mlp) gu(j int) (int, int) {
	if m.interleaved {
		return 2 * j, 2*j + 1
	}
	return j, m.I + j
}

// forward computes, for n input rows X [n*H], the FC1 output pre [n*2I],
// the activation h [n*I] and the FC2 output o [n*H] (biases included).
// With mx, FC1 reads MXActivations of X rounded to bf16 (the dispatched
// rows the kernels quantize are bf16: x, or w·x with the router weight on
// the input) and FC2 MXActivations(h); h is returned before its
// quantization.
func (m mlp) forward(X []float64, n int) (pre, h, o []float64) {
	H, I := m.H, m.I
	if m.mx {
		xb := make([]float64, len(X))
		for i, v := range X {
			xb[i] = float64(RoundBF16(float32(v)))
		}
		X = MXActivations(xb, n, H)
	}
	pre = make([]float64, n*2*I)
	gemmNT(n, 2*I, H, X, m.fc1, false, func(i, j0 int, v []float64) {
		dst := pre[i*2*I+j0 : i*2*I+j0+len(v)]
		copy(dst, v)
		if m.b1 != nil {
			for j := range dst {
				dst[j] += float64(m.b1[j0+j])
			}
		}
	})
	h = make([]float64, n*I)
	parallel.For(n, 8*I, func(i int) {
		for j := 0; j < I; j++ {
			g, u := m.gu(j)
			h[i*I+j] = m.act.forward(pre[i*2*I+g], pre[i*2*I+u])
		}
	})
	o = make([]float64, n*H)
	hq := h
	if m.mx {
		hq = MXActivations(h, n, I)
	}
	gemmNT(n, H, I, hq, m.fc2, false, func(i, j0 int, v []float64) {
		dst := o[i*H+j0 : i*H+j0+len(v)]
		copy(dst, v)
		if m.b2 != nil {
			for j := range dst {
				dst[j] += float64(m.b2[j0+j])
			}
		}
	})
	return pre, h, o
}

// mlpGrads are the main-grad buffers of one expert (nil = skip).
type mlpGrads struct {
	fc1, fc2, b1, b2 []float32
}

// accumulate sets dst[i] = round(dst[i] + v[i]) for the main-grad dtype:
// one rounding of the exact float64 sum.
func accumulate(d GradDType, dst []float32, v []float64) {
	dst = dst[:len(v)]
	if d == GradBF16 {
		for i, x := range v {
			dst[i] = roundBF16From64(float64(dst[i]) + x)
		}
		return
	}
	for i, x := range v {
		dst[i] = float32(float64(dst[i]) + x)
	}
}

// transpose returns the [cols, rows] transpose of a [rows, cols] matrix,
// in 32x32 tiles.
func transpose[T float32 | float64](a []T, rows, cols int) []T {
	out := make([]T, rows*cols)
	const blk = 32
	nr := (rows + blk - 1) / blk
	parallel.For(nr, blk*cols, func(b int) {
		r0, r1 := b*blk, min(b*blk+blk, rows)
		for c0 := 0; c0 < cols; c0 += blk {
			c1 := min(c0+blk, cols)
			for r := r0; r < r1; r++ {
				row := a[r*cols+c0 : r*cols+c1]
				for c, v := range row {
					out[(c0+c)*rows+r] = v
				}
			}
		}
	})
	return out
}

// backward takes the forward intermediates of n rows (input X, pre, h) and
// the gradient dO [n*H] of the expert output, accumulates the weight
// gradients into g (main += dW, rounded by acc) and returns dX [n*H].
func (m mlp) backward(X, pre, h, dO []float64, n int, g mlpGrads, gd GradDType) []float64 {
	H, I := m.H, m.I
	// dh = dO · FC2: FC2 is [H, I], so multiply by its transpose's rows.
	dh := make([]float64, n*I)
	gemmNT(n, I, H, dO, m.fc2, true, func(i, j0 int, v []float64) { copy(dh[i*I+j0:], v) })
	dpre := make([]float64, n*2*I)
	parallel.For(n, 8*I, func(i int) {
		for j := 0; j < I; j++ {
			gi, ui := m.gu(j)
			dg, du := m.act.backward(pre[i*2*I+gi], pre[i*2*I+ui], dh[i*I+j])
			dpre[i*2*I+gi], dpre[i*2*I+ui] = dg, du
		}
	})
	dX := make([]float64, n*H)
	gemmNT(n, H, 2*I, dpre, m.fc1, true, func(i, j0 int, v []float64) { copy(dX[i*H+j0:], v) })
	if g.fc2 != nil {
		// dFC2[h][c] = sum_i dO[i][h] * h[i][c].
		gemmNT(H, I, n, transpose(dO, n, H), h, true, func(i, j0 int, v []float64) {
			accumulate(gd, g.fc2[i*I+j0:], v)
		})
	}
	if g.fc1 != nil {
		// dFC1[r][c] = sum_i dpre[i][r] * X[i][c].
		gemmNT(2*I, H, n, transpose(dpre, n, 2*I), X, true, func(i, j0 int, v []float64) {
			accumulate(gd, g.fc1[i*H+j0:], v)
		})
	}
	// colSum accumulates the column sums of a [n, cols] into dst, each
	// summed in increasing row; the goroutines split the columns.
	colSum := func(dst []float32, a []float64, cols int) {
		s := make([]float64, cols)
		parallel.Range(cols, n, func(lo, hi int) {
			for i := 0; i < n; i++ {
				for j, v := range a[i*cols+lo : i*cols+hi] {
					s[lo+j] += v
				}
			}
			accumulate(gd, dst[lo:hi], s[lo:hi])
		})
	}
	if g.b2 != nil {
		colSum(g.b2, dO, H)
	}
	if g.b1 != nil {
		colSum(g.b1, dpre, 2*I)
	}
	return dX
}

// routesByExpert lists, per expert, the slots (index r*K+k into the rows'
// fixed-width routing) that route to it, in increasing slot order.
func (p *problem) routesByExpert(rows []int) [][]int {
	K := p.l.TopK
	by := make([][]int, p.l.Experts)
	for r, t := range rows {
		for k := 0; k < K; k++ {
			if id := p.ids[t*K+k]; id >= 0 {
				by[id] = append(by[id], r*K+k)
			}
		}
	}
	return by
}

// expertInput gathers the expert input rows of the given slots: x[t], or
// w[t,k]*x[t] with Layer.RouterWeightOnInput.
func (p *problem) expertInput(rows, slots []int) []float64 {
	H, K := p.l.Hidden, p.l.TopK
	X := make([]float64, len(slots)*H)
	parallel.Range(len(slots), H, func(lo, hi int) {
		for i, s := range slots[lo:hi] {
			t := rows[s/K]
			scale := 1.0
			if p.l.RouterWeightOnInput {
				scale = float64(p.weights[t*K+s%K])
			}
			for c, v := range p.x[t*H : t*H+H] {
				X[(lo+i)*H+c] = scale * float64(v)
			}
		}
	})
	return X
}

// rowsX gathers the given token rows of x as float64, [len(rows)*H].
func (p *problem) rowsX(rows []int) []float64 {
	H := p.l.Hidden
	X := make([]float64, len(rows)*H)
	parallel.Range(len(rows), H, func(lo, hi int) {
		for i, t := range rows[lo:hi] {
			for c, v := range p.x[t*H : t*H+H] {
				X[(lo+i)*H+c] = float64(v)
			}
		}
	})
	return X
}

// gateZ returns x[t]·g for each row.
func (p *problem) gateZ(X []float64, n int) []float64 {
	H := p.l.Hidden
	z := make([]float64, n)
	g := make([]float64, H)
	for c, v := range p.w.SharedGate {
		g[c] = float64(v)
	}
	parallel.Range(n, H, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			z[i] = dot(X[i*H:i*H+H], g)
		}
	})
	return z
}

// forwardRows computes y for the given token rows: [len(rows)*H].
func (p *problem) forwardRows(rows []int) []float64 {
	l := p.l
	H, K := l.Hidden, l.TopK
	n := len(rows)
	y := make([]float64, n*H)
	if l.SharedExperts > 0 {
		X := p.rowsX(rows)
		for s := 0; s < l.SharedExperts; s++ {
			_, _, o := p.sharedMLP(s).forward(X, n)
			addTo(y, o)
		}
		if l.SharedGate {
			z := p.gateZ(X, n)
			parallel.Range(n, H, func(lo, hi int) {
				for i := lo; i < hi; i++ {
					sg := sigmoid(z[i])
					for c := 0; c < H; c++ {
						y[i*H+c] *= sg
					}
				}
			})
		}
	}
	// Unweighted expert outputs per slot [n*K, H]; only routed slots are set.
	out := make([]float64, n*K*H)
	for e, slots := range p.routesByExpert(rows) {
		if len(slots) == 0 {
			continue
		}
		_, _, o := p.routedMLP(e).forward(p.expertInput(rows, slots), len(slots))
		parallel.Range(len(slots), H, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				s := slots[i]
				copy(out[s*H:s*H+H], o[i*H:i*H+H])
			}
		})
	}
	// Combine in fixed slot order; a -1 slot reads no weight.
	parallel.Range(n, K*H, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			t := rows[r]
			for k := 0; k < K; k++ {
				if p.ids[t*K+k] < 0 {
					continue
				}
				w := 1.0
				if !l.RouterWeightOnInput {
					w = float64(p.weights[t*K+k])
				}
				o := out[(r*K+k)*H : (r*K+k)*H+H]
				yr := y[r*H : r*H+H]
				for c := range yr {
					yr[c] += w * o[c]
				}
			}
		}
	})
	return y
}

// chunkRows is the number of token rows the forward pass handles at once,
// bounding its temporary memory to about 2^25 float64 values.
func chunkRows(l Layer) int {
	per := l.TopK*max(l.Hidden, 2*l.Intermediate) + 2*l.SharedWidth() + 2*l.Hidden
	return max(1, (1<<25)/per)
}

// Forward computes the layer's output y [T*H] (row-major [T, H]) in float64
// for x [T*H] (T = len(x)/H) and the routing r:
//
//	y[t] = shared(x[t]) + sum over k with id[t,k] >= 0 of w[t,k] * (FC2_e act(FC1_e x[t] + b1_e) + b2_e)
//	shared(x) = sigmoid(x·g) * sum over s of FC2_s act_s(FC1_s x)     (gate only with Layer.SharedGate)
//
// with e = id[t,k] (Layer.RouterWeightOnInput moves w[t,k] onto the
// expert input x[t]), as in the package documentation, with the shared
// experts' outputs summed in order, then the routed slots added in
// increasing k. Products are exact float64 products of the float32 inputs;
// sums run in float64 in a fixed order, so the result does not depend on
// the number of cores. With Layer.Precision = MXFP8 each routed expert's
// FC1 reads MXActivations of its input rows rounded to bf16 (along H; the
// rows are x, or bf16(w·x) with the router weight on the input) and its
// FC2 MXActivations of h (along I); the weights are the dequantized values
// given (MXWeights); the shared experts stay BF16.
//
// Edge cases: T = 0 gives an empty result; a token whose slots are all -1
// gets only the shared output (0 without shared experts); duplicate expert
// ids in one token each count; an id >= E or < -1 is an error; NaN or Inf
// in x[t] or in a weight read by token t makes y[t] non-finite (NaN
// propagates through the clamps) and changes no other token; an expert with
// no route is never read. Errors name the bad input; Forward never panics on
// shapes it was given.
func Forward(l Layer, w Weights, x []float32, r Routing) ([]float64, error) {
	p, err := newProblem(l, w, x, r)
	if err != nil {
		return nil, err
	}
	rows := make([]int, p.T)
	for i := range rows {
		rows[i] = i
	}
	return p.forwardChunked(rows), nil
}

// ForwardRows computes the rows y[rows[i]] of Forward, [len(rows)*H], from
// the full inputs x [T*H] and routing r. The values are bit-identical to
// those rows of Forward; the cost is that of len(rows) tokens, so GPU tests
// can check a sample of a large T. A row outside 0..T-1 is an error.
func ForwardRows(l Layer, w Weights, x []float32, r Routing, rows []int) ([]float64, error) {
	p, err := newProblem(l, w, x, r)
	if err != nil {
		return nil, err
	}
	for i, t := range rows {
		if t < 0 || t >= p.T {
			return nil, fmt.Errorf("rows[%d] = %d is out of range (T = %d)", i, t, p.T)
		}
	}
	return p.forwardChunked(rows), nil
}

func (p *problem) forwardChunked(rows []int) []float64 {
	H := p.l.Hidden
	y := make([]float64, len(rows)*H)
	c := chunkRows(p.l)
	for i := 0; i < len(rows); i += c {
		j := min(i+c, len(rows))
		copy(y[i*H:j*H], p.forwardRows(rows[i:j]))
	}
	return y
}

// Backward computes the gradients of the layer for the upstream gradient
// dy [T*H] = dL/dy: it returns dx and the router-weight gradient (Grads),
// and accumulates dW of the routed and shared FC1/FC2 (and biases and the
// shared gate vector) into the caller's main-grad buffers mg (nil = no
// weight gradients). See MainGrads for the accumulation rule and Grads for
// the router-weight gradient. The activations' derivatives follow from
// their formulas (see Activation) by the chain rule; an input cut by a
// clamp passes no gradient.
//
// Mxfp8 layers (moe.Backward's program, docs/mxfp8.md): the expert
// outputs, and so dw, are those of Forward's quantized GEMMs; the
// gradients pass straight through the activation quantizers (dx and dh
// through the dequantized weights from the unquantized dy, the weight
// gradients from the unquantized activations x and h).
//
// Edge cases as in Forward. NaN/Inf in token t makes dx[t] and dw[t,*]
// non-finite and, as the mathematics demands, the weight gradients of the
// experts token t is routed to; other tokens' dx and dw are unaffected.
// Memory: about 8*T*K*(H + 3I) bytes of temporaries plus, per expert,
// transposed copies of its weights.
func Backward(l Layer, w Weights, x []float32, r Routing, dy []float32, mg *MainGrads) (Grads, error) {
	p, err := newProblem(l, w, x, r)
	if err != nil {
		return Grads{}, err
	}
	H, E, K, T := l.Hidden, l.Experts, l.TopK, p.T
	if len(dy) != T*H {
		return Grads{}, fmt.Errorf("dy has %d values, want T*H = %d*%d", len(dy), T, H)
	}
	if mg == nil {
		mg = &MainGrads{}
	}
	if err := checkMainGrads(l, mg); err != nil {
		return Grads{}, err
	}
	rows := make([]int, T)
	for i := range rows {
		rows[i] = i
	}
	dyRow := func(t int) []float32 { return dy[t*H : t*H+H] }
	g := Grads{DX: make([]float64, T*H), DWeights: make([]float64, T*K)}
	slotDX := make([]float64, T*K*H) // dx contribution per slot
	pick := func(s [][]float32, e int) []float32 {
		if e < len(s) {
			return s[e]
		}
		return nil
	}
	for e, slots := range p.routesByExpert(rows) {
		n := len(slots)
		if n == 0 {
			continue
		}
		m := p.routedMLP(e)
		X := p.expertInput(rows, slots)
		pre, h, o := m.forward(X, n)
		dO := make([]float64, n*H)
		parallel.Range(n, 2*H, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				s := slots[i]
				t := s / K
				wt := 1.0
				if !l.RouterWeightOnInput {
					wt = float64(p.weights[s])
					g.DWeights[s] = dot(o[i*H:i*H+H], f64(dyRow(t)))
				}
				for c, v := range dyRow(t) {
					dO[i*H+c] = wt * float64(v)
				}
			}
		})
		dX := m.backward(X, pre, h, dO, n,
			mlpGrads{pick(mg.FC1, e), pick(mg.FC2, e), pick(mg.FC1Bias, e), pick(mg.FC2Bias, e)}, l.MainGrad)
		parallel.Range(n, 2*H, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				s := slots[i]
				t := s / K
				d := dX[i*H : i*H+H]
				if l.RouterWeightOnInput {
					g.DWeights[s] = dot(d, f64(p.x[t*H:t*H+H]))
					wt := float64(p.weights[s])
					for c := range d {
						d[c] *= wt
					}
				}
				copy(slotDX[s*H:s*H+H], d)
			}
		})
	}
	if l.SharedExperts > 0 && T > 0 {
		X := p.rowsX(rows)
		var z []float64
		dOs := make([]float64, T*H)
		parallel.Range(T*H, 1, func(lo, hi int) {
			for i, v := range dy[lo:hi] {
				dOs[lo+i] = float64(v)
			}
		})
		type fwd struct{ pre, h, o []float64 }
		outs := make([]fwd, l.SharedExperts)
		for s := range outs {
			outs[s].pre, outs[s].h, outs[s].o = p.sharedMLP(s).forward(X, T)
		}
		if l.SharedGate {
			// shared = sigmoid(z) * m(x), z = x·g:
			// dm = sigmoid(z)*dy; dz = <dy, m> * sigmoid'(z).
			z = p.gateZ(X, T)
			dz := make([]float64, T)
			parallel.Range(T, (l.SharedExperts+3)*H, func(lo, hi int) {
				for t := lo; t < hi; t++ {
					var mdy float64
					for c := 0; c < H; c++ {
						var mv float64
						for s := range outs {
							mv += outs[s].o[t*H+c]
						}
						mdy += mv * dOs[t*H+c]
					}
					sg := sigmoid(z[t])
					dz[t] = mdy * sg * (1 - sg)
					for c := 0; c < H; c++ {
						dOs[t*H+c] *= sg
					}
					for c, gv := range p.w.SharedGate {
						g.DX[t*H+c] += dz[t] * float64(gv)
					}
				}
			})
			if mg.SharedGate != nil {
				// s[c] = sum over t of dz[t]*x[t][c], in increasing t; the
				// goroutines split the columns.
				s := make([]float64, H)
				parallel.Range(H, T, func(lo, hi int) {
					for t := 0; t < T; t++ {
						for c, v := range X[t*H+lo : t*H+hi] {
							s[lo+c] += dz[t] * v
						}
					}
				})
				accumulate(l.MainGrad, mg.SharedGate, s)
			}
		}
		for s := range outs {
			dX := p.sharedMLP(s).backward(X, outs[s].pre, outs[s].h, dOs, T,
				mlpGrads{fc1: pick(mg.SharedFC1, s), fc2: pick(mg.SharedFC2, s)}, l.MainGrad)
			addTo(g.DX, dX)
		}
	}
	parallel.Range(T, K*H, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			for k := 0; k < K; k++ {
				if p.ids[t*K+k] < 0 {
					continue
				}
				d := slotDX[(t*K+k)*H : (t*K+k)*H+H]
				dx := g.DX[t*H : t*H+H]
				for c := range dx {
					dx[c] += d[c]
				}
			}
		}
	})
	if l.Routing == RoutingMap {
		g.DProbs = make([]float64, T*E)
		for t := 0; t < T; t++ {
			for k := 0; k < K; k++ {
				if id := p.ids[t*K+k]; id >= 0 {
					g.DProbs[t*E+int(id)] = g.DWeights[t*K+k]
				}
			}
		}
	}
	return g, nil
}

func f64(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// checkMainGrads checks the shapes of every non-nil main-grad buffer.
func checkMainGrads(l Layer, mg *MainGrads) error {
	H, I, E, S, Is := l.Hidden, l.Intermediate, l.Experts, l.SharedExperts, l.SharedIntermediate
	type spec struct {
		name  string
		s     [][]float32
		n     int
		size  int
		apply bool
	}
	for _, c := range []spec{
		{"MainGrads.FC1", mg.FC1, E, 2 * I * H, true},
		{"MainGrads.FC2", mg.FC2, E, H * I, true},
		{"MainGrads.FC1Bias", mg.FC1Bias, E, 2 * I, l.Biases},
		{"MainGrads.FC2Bias", mg.FC2Bias, E, H, l.Biases},
		{"MainGrads.SharedFC1", mg.SharedFC1, S, 2 * Is * H, true},
		{"MainGrads.SharedFC2", mg.SharedFC2, S, H * Is, true},
	} {
		if c.s == nil {
			continue
		}
		if !c.apply {
			return fmt.Errorf("%s is set but Layer.Biases is false", c.name)
		}
		if len(c.s) != c.n {
			return fmt.Errorf("%s has %d entries, want %d", c.name, len(c.s), c.n)
		}
		for i, b := range c.s {
			if b != nil && len(b) != c.size {
				return fmt.Errorf("%s[%d] has %d values, want %d", c.name, i, len(b), c.size)
			}
		}
	}
	if mg.SharedGate != nil {
		if !l.SharedGate {
			return fmt.Errorf("MainGrads.SharedGate is set but Layer.SharedGate is false")
		}
		if len(mg.SharedGate) != H {
			return fmt.Errorf("MainGrads.SharedGate has %d values, want H = %d", len(mg.SharedGate), H)
		}
	}
	return nil
}
