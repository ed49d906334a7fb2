package schedule

import (
	"math"
	"testing"

	"github.com/mokc/mokc/layouts"
)

// TestMXActivationsBlocks: each block of 32 is quantized on its own with
// the round-up scale, finite values land on E4M3 times a power of two
// within E4M3's rounding, and the special blocks follow layouts.Quantize.
func TestMXActivationsBlocks(t *testing.T) {
	const k = 128
	a := make([]float64, 2*k)
	for i := range a {
		a[i] = math.Sin(float64(i)*0.37) * math.Pow(2, float64(i%7)-3)
	}
	for i := 32; i < 64; i++ { // block 1 of row 0: zeros
		a[i] = 0
	}
	a[64+5] = math.NaN()  // block 2 of row 0: NaN
	a[96+1] = math.Inf(1) // block 3 of row 0: Inf
	for i := k; i < k+32; i++ {
		a[i] = 1e-45 * float64(i-k) // block 0 of row 1: tiny amax
	}
	q := MXActivations(a, 2, k)
	for i := 32; i < 64; i++ {
		if q[i] != 0 || math.Signbit(q[i]) != math.Signbit(a[i]) {
			t.Fatalf("zero block: %v", q[i])
		}
	}
	for i := 64; i < 96; i++ {
		if !math.IsNaN(q[i]) {
			t.Fatalf("element %d of the NaN block is %v", i, q[i])
		}
	}
	if !math.IsInf(q[97], 1) {
		t.Errorf("the Inf is %v", q[97])
	}
	for i := 96; i < 128; i++ {
		if i != 97 && (math.IsNaN(q[i]) || math.IsInf(q[i], 0)) {
			t.Errorf("finite element %d of the Inf block is %v", i, q[i])
		}
	}
	for i := k; i < k+32; i++ { // below 2^-136: E4M3's smallest subnormal at the smallest scale
		if q[i] != 0 {
			t.Errorf("tiny element %d quantized to %v", i, q[i])
		}
	}
	// Finite blocks: within half an E4M3 step (2^-4 relative for normals)
	// of the input, on the block's grid, and the amax never saturates.
	for _, b := range []int{0, 5, 6, 7} {
		var amax float64
		for _, v := range a[b*32 : b*32+32] {
			amax = math.Max(amax, math.Abs(float64(float32(v))))
		}
		x := float64(layouts.F32FromUE8M0(layouts.ScaleFromAmax(float32(amax), layouts.ScaleRoundUp)))
		if amax/x > 448 || amax/x <= 224 {
			t.Fatalf("block %d: amax %v scale %v: not the smallest power of two with amax/X <= 448", b, amax, x)
		}
		for i := b * 32; i < b*32+32; i++ {
			v := float64(float32(a[i]))
			if d := math.Abs(q[i] - v); d > math.Abs(v)/16+x*math.Pow(2, -10) {
				t.Errorf("block %d element %d: %v quantized to %v", b, i, v, q[i])
			}
			if e := float64(layouts.F32FromE4M3(layouts.E4M3FromF32(float32(q[i] / x)))); e*x != q[i] {
				t.Errorf("block %d element %d: %v is not an E4M3 value times %v", b, i, q[i], x)
			}
		}
	}
}

// TestForwardMXFP8: an mxfp8 layer's reference is the bf16 one with each
// routed expert's GEMM inputs replaced by MXActivations (weights as
// given), and differs from the bf16 reference by the quantization.
func TestForwardMXFP8(t *testing.T) {
	l := Layer{Hidden: 64, Intermediate: 96, Experts: 4, TopK: 2, SharedExperts: 1, SharedIntermediate: 32}
	lm := l
	lm.Precision = MXFP8
	w, err := RandomWeights(l, 3)
	if err != nil {
		t.Fatal(err)
	}
	const T = 9
	x := RandomInput(T, l.Hidden, 4)
	r, err := GenerateRouting(l, x, 5)
	if err != nil {
		t.Fatal(err)
	}
	ym, err := Forward(lm, w, x, r)
	if err != nil {
		t.Fatal(err)
	}
	yb, err := Forward(l, w, x, r)
	if err != nil {
		t.Fatal(err)
	}
	// By hand: the bf16 shared output plus each slot's quantized expert.
	var maxDiff, maxQ float64
	for tk := 0; tk < T; tk++ {
		xt := make([]float64, l.Hidden)
		for c := range xt {
			xt[c] = float64(x[tk*l.Hidden+c])
		}
		p := &problem{l: lm, w: w}
		want := make([]float64, l.Hidden)
		sp := p.sharedMLP(0)
		_, _, so := sp.forward(xt, 1)
		copy(want, so)
		for k := 0; k < l.TopK; k++ {
			e, wt := int(r.IDs[tk*l.TopK+k]), float64(r.Weights[tk*l.TopK+k])
			m := p.routedMLP(e)
			if !m.mx {
				t.Fatal("routed expert of an mxfp8 layer not quantized")
			}
			m.mx = false
			xq := MXActivations(xt, 1, l.Hidden)
			_, h, _ := m.forward(xq, 1)
			hq := MXActivations(h, 1, l.Intermediate)
			for c := 0; c < l.Hidden; c++ {
				var o float64
				for j := 0; j < l.Intermediate; j++ {
					o += float64(w.FC2[e][c*l.Intermediate+j]) * hq[j]
				}
				want[c] += wt * o
			}
		}
		for c, v := range want {
			maxDiff = math.Max(maxDiff, math.Abs(ym[tk*l.Hidden+c]-v))
			maxQ = math.Max(maxQ, math.Abs(ym[tk*l.Hidden+c]-yb[tk*l.Hidden+c]))
		}
	}
	if maxDiff > 1e-9 {
		t.Errorf("mxfp8 reference differs from the quantized computation by %v", maxDiff)
	}
	if maxQ < 1e-4 {
		t.Errorf("mxfp8 and bf16 references agree within %v: the activations were not quantized", maxQ)
	}
}

// TestWeightGenMXFP8: for an mxfp8 layer the generator's float32 weights
// (what the references compute with) are exactly the dequantized MXFP8
// form of its bf16 bits (what the runtime uploads, quantized with
// layouts.QuantizeBF16), and the lazy ForwardRows matches Forward over
// the eager weights.
func TestWeightGenMXFP8(t *testing.T) {
	l := Layer{Hidden: 64, Intermediate: 96, Experts: 3, TopK: 2, Precision: MXFP8, Biases: true, Activation: GPTOSS,
		SwiGLULimit: 7, GPTOSSAlpha: 1.702, GateUpInterleaved: true}
	g, err := NewWeightGen(l, 9)
	if err != nil {
		t.Fatal(err)
	}
	H, I := l.Hidden, l.Intermediate
	for e := 0; e < l.Experts; e++ {
		fc1, fc2, _, _, err := g.Routed(e)
		if err != nil {
			t.Fatal(err)
		}
		b1, b2 := make([]uint16, 2*I*H), make([]uint16, H*I)
		if err := g.RoutedBF16(e, b1, b2); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			got        []float32
			bits       []uint16
			rows, cols int
		}{{fc1, b1, 2 * I, H}, {fc2, b2, H, I}} {
			q, err := layouts.QuantizeBF16(c.bits, 1, c.rows, c.cols, layouts.QuantizeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for i, v := range q.Dequantize() {
				if math.Float32bits(v) != math.Float32bits(c.got[i]) {
					t.Fatalf("expert %d element %d: generator %v, quantized bf16 %v", e, i, c.got[i], v)
				}
			}
		}
	}
	x := RandomInput(11, H, 2)
	r, err := GenerateRouting(l, x, 3)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Forward(l, g.Weights(), x, r)
	if err != nil {
		t.Fatal(err)
	}
	rows := []int{0, 4, 10}
	got, err := g.ForwardRows(x, r, rows)
	if err != nil {
		t.Fatal(err)
	}
	for i, tk := range rows {
		for c := 0; c < H; c++ {
			if d := math.Abs(got[i*H+c] - want[tk*H+c]); d > 1e-9*(1+math.Abs(want[tk*H+c])) {
				t.Fatalf("row %d col %d: ForwardRows %v, Forward %v", tk, c, got[i*H+c], want[tk*H+c])
			}
		}
	}
}
