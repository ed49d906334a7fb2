package schedule

import (
	"fmt"
	"slices"

	"github.com/mokc/mokc/internal/parallel"
)

// SampledGrads are the gradients BackwardSample computes: those of
// Backward for a sample of token rows and of experts, the experts' weight
// gradients at a sample of intermediate indices.
type SampledGrads struct {
	// DX is dL/dx of the sampled rows, [len(rows)*H].
	DX []float64
	// DWeights is the routing-weight gradient of the sampled rows'
	// fixed-width slots, [len(rows)*K] (0 for -1 slots).
	DWeights []float64
	// Cols are the intermediate indices j (strictly increasing, in 0..I-1)
	// at which Experts holds the weight gradients: BackwardSample's cols,
	// or every index 0..I-1 when it was nil.
	Cols []int
	// Experts holds, for each sampled expert, its weight gradients dW at
	// the intermediate indices Cols, with n = len(Cols) and l the
	// generator's layer: FC1 [2n*H], the rows FC1Rows(l, Cols) of the
	// full [2I, H] gradient (gate and up row of each j of Cols, in l's FC1
	// row order); FC2 [H*n], the columns Cols of the full [H, I] gradient;
	// with Layer.Biases FC1Bias [2n], the entries FC1Rows(l, Cols) of the
	// full [2I], and FC2Bias [H] (nil without). PickIntermediate picks the
	// same entries out of full FC1 and FC2 gradients. Each field is a
	// one-element slice (MainGrads of a one-expert layer) of float32
	// values accumulated from zero with Backward's rule (fp32, or bf16
	// values with Layer.MainGrad = GradBF16); an expert without routes has
	// zeros.
	Experts map[int]MainGrads
	// Shared holds the shared experts' weight gradients (and the shared
	// gate's) when asked for, else nil.
	Shared *MainGrads
}

// Intermediate sampling of the sampled experts' weight gradients
// (SampleIntermediate).
const (
	// sampleBlock is the width of the blocks of intermediate indices
	// SampleIntermediate draws from: no wider than a GPU tile along I.
	sampleBlock = 64
	// samplePerBlock is the number of indices drawn per block.
	samplePerBlock = 2
	// sampleAllMax is the intermediate size up to which every index is
	// taken.
	sampleAllMax = 256
)

// SampleIntermediate returns the intermediate indices j at which
// BackwardSample's cols (and `mokc run --backward`) check the sampled
// experts' weight gradients, strictly increasing in 0..I-1: every index
// when I <= 256; otherwise, in each block of 64 consecutive indices (the
// last one I%64 wide when 64 does not divide I), 2 distinct indices at
// pseudo-random offsets (1 if the block has only one index). The offsets
// depend only on seed, I and the block (SplitMix64), so every run with the
// same seed checks the same columns. A GPU tile spans at least 64 indices
// along I, so every tile holds checked columns. I <= 0 gives an empty,
// non-nil slice.
func SampleIntermediate(I int, seed uint64) []int {
	if I <= sampleAllMax {
		all := make([]int, max(I, 0))
		for j := range all {
			all[j] = j
		}
		return all
	}
	const tag = 0x53414d504c45 // "SAMPLE": a key of its own for seed
	key := mix64(mix64(seed+golden64) ^ tag ^ uint64(I)<<48)
	out := make([]int, 0, samplePerBlock*((I+sampleBlock-1)/sampleBlock))
	for b0 := 0; b0 < I; b0 += sampleBlock {
		n := min(sampleBlock, I-b0)
		h := mix64(key + uint64(b0/sampleBlock+1)*golden64)
		if n == 1 {
			out = append(out, b0)
			continue
		}
		// Two distinct offsets: a, and a shifted by 1..n-1 (mod n).
		a := int(h % uint64(n))
		c := (a + 1 + int((h>>32)%uint64(n-1))) % n
		out = append(out, b0+min(a, c), b0+max(a, c))
	}
	return out
}

// FC1Rows returns, for the intermediate indices cols of l's routed experts
// (n = len(cols)), the rows of an FC1 [2I, H] (or entries of an FC1 bias
// [2I]) that hold their gate and up projections, [2n], in the FC1 row
// order of an expert of intermediate size n with l's layout (Weights):
// rows[i] = cols[i] (gate j) and rows[n+i] = I+cols[i] (up j), or with
// Layer.GateUpInterleaved rows[2i] = 2*cols[i] and rows[2i+1] =
// 2*cols[i]+1. With cols = 0..I-1 it is 0..2I-1. The indices are not
// checked (PickIntermediate checks them). This is the one place that maps
// a sub-expert's FC1 rows to the full expert's: BackwardSample builds its
// sub-experts with it and PickIntermediate picks gradients with it.
func FC1Rows(l Layer, cols []int) []int {
	n, I := len(cols), l.Intermediate
	rows := make([]int, 2*n)
	for i, j := range cols {
		if l.GateUpInterleaved {
			rows[2*i], rows[2*i+1] = 2*j, 2*j+1
		} else {
			rows[i], rows[n+i] = j, I+j
		}
	}
	return rows
}

// PickIntermediate returns the part of one routed expert's FC1 [2I*H] and
// FC2 [H*I] of layer l (weights or weight gradients, row-major as in
// Weights) that belongs to the intermediate indices cols (n = len(cols)):
// sub1 [2n*H], the rows FC1Rows(l, cols) of fc1, and sub2 [H*n], the
// columns cols of fc2: the FC1 and FC2 of an expert of intermediate size
// n with l's layout, the form of SampledGrads.Experts. cols may be in any
// order and repeat an index. The results are new slices. Errors: fc1 or fc2 of the wrong length, an index of cols
// outside 0..I-1.
func PickIntermediate[T float32 | float64](l Layer, cols []int, fc1, fc2 []T) (sub1, sub2 []T, err error) {
	H, I := l.Hidden, l.Intermediate
	if len(fc1) != 2*I*H || len(fc2) != H*I {
		return nil, nil, fmt.Errorf("PickIntermediate: FC1 has %d and FC2 %d values, want 2I*H = %d and H*I = %d", len(fc1), len(fc2), 2*I*H, H*I)
	}
	if err := checkCols(cols, I, false); err != nil {
		return nil, nil, fmt.Errorf("PickIntermediate: %w", err)
	}
	n := len(cols)
	sub1 = pickRows(fc1, FC1Rows(l, cols), H)
	sub2 = make([]T, H*n)
	parallel.Range(H, n, func(lo, hi int) {
		for h := lo; h < hi; h++ {
			src, dst := fc2[h*I:(h+1)*I], sub2[h*n:(h+1)*n]
			for i, j := range cols {
				dst[i] = src[j]
			}
		}
	})
	return sub1, sub2, nil
}

// pickRows returns the rows rows of a row-major matrix with width columns.
func pickRows[T float32 | float64](a []T, rows []int, width int) []T {
	out := make([]T, len(rows)*width)
	parallel.Range(len(rows), width, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			copy(out[i*width:(i+1)*width], a[rows[i]*width:(rows[i]+1)*width])
		}
	})
	return out
}

// checkCols checks that cols are indices in 0..I-1 and, with increasing,
// that they strictly increase.
func checkCols(cols []int, I int, increasing bool) error {
	for i, j := range cols {
		if j < 0 || j >= I {
			return fmt.Errorf("cols[%d] = %d is out of range (I = %d)", i, j, I)
		}
		if increasing && i > 0 && j <= cols[i-1] {
			return fmt.Errorf("cols[%d] = %d does not exceed cols[%d] = %d (want strictly increasing)", i, j, i-1, cols[i-1])
		}
	}
	return nil
}

// BackwardSample computes Backward's gradients for a sample, generating the
// weights one routed expert at a time (host memory: the shared experts plus
// one routed expert and O(rows*K*H + routes of the sampled experts * H)
// values): dx and the routing-weight gradient of the token rows rows, the
// weight gradients of the routed experts experts (which need every route
// to them) at the intermediate indices cols (nil: all of them; see
// SampledGrads.Experts and SampleIntermediate) and, with shared, those of
// the shared experts (which need every token).
//
// Each routed expert's dx and routing-weight gradient are those of
// Backward of a one-expert top-1 layer over its slots among rows, each
// slot a token of its own with its routing weight; the shared part is
// Backward of the layer with every slot unrouted; dx sums them. Sums run
// in float64, in another order than Backward's, so dx and the
// routing-weight gradient agree with Backward's to float64 rounding. A
// sampled expert's weight gradients are those of Backward of a one-expert
// sub-expert over every slot routed to it, in increasing slot order: its
// FC1 (and FC1 bias) rows and FC2 columns are those of cols (FC1Rows,
// PickIntermediate), its FC2 bias the expert's. With cols nil (or every
// index) the sub-expert is the expert itself, and one Backward over the
// expert's slots gives its weight gradients and the rows' dx and dw. In
// Backward every quantity of intermediate index j (the FC1 outputs, the
// activation with its clamps, dh, the FC1 and FC2 weight gradients and
// their rounding to the main-grad dtype) depends on index j alone, each
// summed in float64 over H or over the slots in the same order (the MXFP8
// quantization of h along I changes only the expert's output, which the
// weight gradients do not read), so the weight gradients are
// bit-identical to those entries of Backward's (on zeroed main grads).
// Cost of a sampled expert's weight gradients: about 9*routes*len(cols)*H
// multiply-adds instead of 9*routes*I*H.
//
// Errors: those of Backward, a row or expert out of range, cols not
// strictly increasing indices in 0..I-1 or empty but non-nil.
func (g *WeightGen) BackwardSample(x []float32, r Routing, dy []float32, rows, experts, cols []int, shared bool) (SampledGrads, error) {
	l := g.l
	H, I, E, K := l.Hidden, l.Intermediate, l.Experts, l.TopK
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
	if cols != nil && len(cols) == 0 {
		return SampledGrads{}, fmt.Errorf("cols is empty (nil means every intermediate index)")
	}
	if err := checkCols(cols, I, true); err != nil {
		return SampledGrads{}, err
	}
	all := cols == nil || len(cols) == I // strictly increasing in 0..I-1: every index
	out := SampledGrads{DX: make([]float64, len(rows)*H), DWeights: make([]float64, len(rows)*K),
		Cols: slices.Clone(cols), Experts: map[int]MainGrads{}}
	if cols == nil {
		out.Cols = make([]int, I)
		for j := range out.Cols {
			out.Cols[j] = j
		}
	}
	// Slots per expert, in increasing slot order: those of the sampled
	// rows, and every slot for a sampled expert.
	rowSlots, allSlots := make([][]int, E), make([][]int, E)
	for t := 0; t < T; t++ {
		_, sampled := at[t]
		for k := 0; k < K; k++ {
			if id := ids[t*K+k]; id >= 0 {
				if sampled {
					rowSlots[id] = append(rowSlots[id], t*K+k)
				}
				if want[int(id)] {
					allSlots[id] = append(allSlots[id], t*K+k)
				}
			}
		}
	}
	ex := expertInputs{x: x, wts: wts, dy: dy, K: K, at: at, out: &out}
	le := l.routedOnly() // one routed expert's part
	le.Experts = 1
	for e := 0; e < E; e++ {
		if len(rowSlots[e]) == 0 && !want[e] {
			continue
		}
		if err := g.routedInto(e, &ex.w); err != nil {
			return SampledGrads{}, err
		}
		switch {
		case !want[e]:
			err = ex.backward(le, ex.w, rowSlots[e], nil, true)
		case all:
			// The expert is its own sub-expert: one pass over every slot.
			mg := zeroGrads(le)
			out.Experts[e] = *mg
			err = ex.backward(le, ex.w, allSlots[e], mg, true)
		default:
			// dx and dw from the whole expert over the rows' slots, the
			// weight gradients from its sub-expert over every slot.
			if err = ex.backward(le, ex.w, rowSlots[e], nil, true); err == nil {
				err = ex.subExpert(le, e, allSlots[e])
			}
		}
		if err != nil {
			return SampledGrads{}, fmt.Errorf("expert %d: %w", e, err)
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
	var b1, b2 []float32
	if l.Biases {
		b1, b2 = w.FC1Bias[0], w.FC2Bias[0]
	}
	g.fillRouted(e, w.FC1[0], w.FC2[0], b1, b2)
	return nil
}

// zeroGrads returns zeroed main grads of the one expert of the one-expert
// layer le (FC1, FC2 and, with Layer.Biases, the biases).
func zeroGrads(le Layer) *MainGrads {
	H, I := le.Hidden, le.Intermediate
	mg := &MainGrads{FC1: [][]float32{make([]float32, 2*I*H)}, FC2: [][]float32{make([]float32, H*I)}}
	if le.Biases {
		mg.FC1Bias, mg.FC2Bias = [][]float32{make([]float32, 2*I)}, [][]float32{make([]float32, H)}
	}
	return mg
}

// expertInputs are BackwardSample's inputs and output for the routed
// experts' parts; w holds the current expert's weights (routedInto).
type expertInputs struct {
	x, wts, dy []float32
	K          int
	at         map[int]int // token -> index in rows
	out        *SampledGrads
	w          Weights
}

// backward runs Backward of the one-expert layer le with weights w over
// slots (indices t*K+k of the full routing, each a token of its own with
// the slot's routing weight), accumulating weight gradients into mg (nil:
// none); with rowGrads it adds each sampled row's dx and sets its dw.
func (ex *expertInputs) backward(le Layer, w Weights, slots []int, mg *MainGrads, rowGrads bool) error {
	H, K := le.Hidden, ex.K
	m := len(slots)
	if m == 0 {
		return nil
	}
	xe, dye := make([]float32, m*H), make([]float32, m*H)
	re := Routing{IDs: make([]int32, m), Weights: make([]float32, m)}
	parallel.Range(m, 2*H, func(lo, hi int) {
		for j := lo; j < hi; j++ {
			s := slots[j]
			t := s / K
			copy(xe[j*H:(j+1)*H], ex.x[t*H:(t+1)*H])
			copy(dye[j*H:(j+1)*H], ex.dy[t*H:(t+1)*H])
			re.Weights[j] = ex.wts[s]
		}
	})
	ge, err := Backward(le, w, xe, re, dye, mg)
	if err != nil || !rowGrads {
		return err
	}
	out := ex.out
	for j, s := range slots {
		i, ok := ex.at[s/K]
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

// subPad is the multiple to which subExpert pads its intermediate size:
// Layer.Validate asks for a multiple of 8, of 32 with mxfp8.
const subPad = 32

// subExpert sets out.Experts[e] to the weight gradients of expert e (the
// one expert of le, weights in w) at the intermediate indices out.Cols:
// Backward over slots of the sub-expert whose FC1 rows and FC2 columns are
// those of out.Cols (FC1Rows, PickIntermediate). Its intermediate size is
// padded to a multiple of subPad with repeats of the last index; being
// computed independently of the others, their gradients are dropped.
func (ex *expertInputs) subExpert(le Layer, e int, slots []int) error {
	cols := ex.out.Cols
	n := len(cols)
	pad := slices.Clone(cols)
	for len(pad)%subPad != 0 {
		pad = append(pad, cols[n-1])
	}
	fc1, fc2, err := PickIntermediate(le, pad, ex.w.FC1[0], ex.w.FC2[0])
	if err != nil {
		return err
	}
	sw := Weights{FC1: [][]float32{fc1}, FC2: [][]float32{fc2}}
	if le.Biases {
		sw.FC1Bias = [][]float32{pickRows(ex.w.FC1Bias[0], FC1Rows(le, pad), 1)}
		sw.FC2Bias = ex.w.FC2Bias
	}
	ls := le
	ls.Intermediate = len(pad)
	mg := zeroGrads(ls)
	if err := ex.backward(ls, sw, slots, mg, false); err != nil {
		return err
	}
	if len(pad) > n { // drop the padding: keep the sub-expert's first n indices
		first := make([]int, n)
		for i := range first {
			first[i] = i
		}
		g1, g2, err := PickIntermediate(ls, first, mg.FC1[0], mg.FC2[0])
		if err != nil {
			return err
		}
		mg.FC1[0], mg.FC2[0] = g1, g2
		if le.Biases {
			mg.FC1Bias[0] = pickRows(mg.FC1Bias[0], FC1Rows(ls, first), 1)
		}
	}
	ex.out.Experts[e] = *mg
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
	ls.Precision = BF16 // shared experts are BF16; the one routed stand-in gets no route
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
	parallel.Range(n, 2*H, func(lo, hi int) {
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
