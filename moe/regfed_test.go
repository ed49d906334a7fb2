package moe

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/mokc/mokc/layouts"
	"github.com/mokc/mokc/schedule"
)

// TestRegisterFed: the register-fed form of the mxfp8 forward and backward
// programs writes xs_rf and h_rf (bf16) instead of the e4m3 rows and
// their scales, its MXFP8 GEMMs read them with ARegisterFed, and it
// computes every output bit for bit as the e4m3 form does (the same
// values, the same sums); a bf16 program is unchanged.
func TestRegisterFed(t *testing.T) {
	for name, l := range interpLayers() {
		l.Precision = schedule.MXFP8
		p, err := Forward(l)
		if err != nil {
			t.Fatal(err)
		}
		rf, err := RegisterFed(p)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, b := range []string{BufXSQ, BufXSScales, BufHQ, BufHScales} {
			if rf.Buffer(b) != nil {
				t.Errorf("%s: register-fed form keeps %s", name, b)
			}
		}
		for _, b := range []string{"xs_rf", "h_rf"} {
			if v := rf.Buffer(b); v == nil || v.DType != BF16 {
				t.Errorf("%s: register-fed form: buffer %s is %v", name, b, v)
			}
		}
		n := 0
		for _, op := range rf.Ops {
			if g, ok := op.(GEMM); ok && g.ARegisterFed {
				n++
			}
		}
		if n != 2 {
			t.Errorf("%s: %d register-fed GEMMs, want 2 (fc1, fc2)\n%s", name, n, rf)
		}
		for _, T := range []int{0, 1, 23} {
			pr := newProblem(t, l, T)
			want, err := Interpret(p, T, pr.bind(t, p, nil))
			if err != nil {
				t.Fatal(err)
			}
			got, err := Interpret(rf, T, pr.bind(t, rf, nil))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if !slices.Equal(got[BufY], want[BufY]) {
				t.Errorf("%s T=%d: register-fed y differs from the e4m3 form's", name, T)
			}
			// xs_rf holds xs_q's values, each block in RegisterFedOrder.
			q, sc, v, H := want[BufXSQ], want[BufXSScales], got["xs_rf"], l.Hidden
			for i := range q {
				j := i - i%32 + layouts.RegisterFedOrder(i%32)
				if w := q[j] * float64(layouts.F32FromUE8M0(uint8(sc[j/32]))); v[i] != w && !(math.IsNaN(v[i]) && math.IsNaN(w)) {
					t.Fatalf("%s T=%d: xs_rf[%d] = %v, want xs_q's element %d (row %d) times its scale, %v", name, T, i, v[i], j, j/H, w)
				}
			}
		}
		// The backward: quantize_xs and fc1 (its recompute) convert, the
		// outputs are the same bits.
		bp, err := Backward(l)
		if err != nil {
			t.Fatal(err)
		}
		brf, err := RegisterFed(bp)
		if err != nil {
			t.Fatalf("%s backward: %v", name, err)
		}
		if brf.Buffer(BufXSQ) != nil || brf.Buffer("xs_rf") == nil {
			t.Errorf("%s backward: register-fed form keeps xs_q or lacks xs_rf", name)
		}
		pr := newProblem(t, l, 23)
		want, err := Interpret(bp, 23, pr.bind(t, bp, zeroMainGrads(bp)))
		if err != nil {
			t.Fatal(err)
		}
		got, err := Interpret(brf, 23, pr.bind(t, brf, zeroMainGrads(brf)))
		if err != nil {
			t.Fatalf("%s backward: %v", name, err)
		}
		for _, b := range bp.Buffers {
			if b.Kind != Scratch && !slices.Equal(got[b.Name], want[b.Name]) {
				t.Errorf("%s backward: %s differs in the register-fed form", name, b.Name)
			}
		}
	}
	l := schedule.Layer{Name: "b", Hidden: 64, Intermediate: 32, Experts: 4, TopK: 2}
	p, err := Forward(l)
	if err != nil {
		t.Fatal(err)
	}
	rf, err := RegisterFed(p)
	if err != nil || rf.String() != p.String() {
		t.Errorf("bf16 program changed by RegisterFed (%v):\n%s", err, rf)
	}
	// A checked program refuses a register-fed GEMM with A scales.
	l.Precision = schedule.MXFP8
	p, _ = Forward(l)
	rf, _ = RegisterFed(p)
	g := rf.op("fc1").(GEMM)
	g.AScales = p.Buffer(BufXSScales)
	rf.setOp(g)
	if err := rf.Check(); err == nil || !strings.Contains(err.Error(), "no A scales") {
		t.Errorf("register-fed GEMM with A scales: %v", err)
	}
}
