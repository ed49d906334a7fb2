package moe

import (
	"slices"
	"strings"
	"testing"

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
