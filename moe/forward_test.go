package moe

import (
	"strings"
	"testing"

	"github.com/mokc/mokc/launch"
	"github.com/mokc/mokc/schedule"
)

// TestForwardPresets builds the forward of every preset and checks its
// structure, the buffers each layer form needs and their sizes.
func TestForwardPresets(t *testing.T) {
	for _, name := range schedule.Presets() {
		l, err := schedule.Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		p, err := Forward(l)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := map[string]bool{BufX: true, BufY: true, BufErr: true, BufXS: true, BufH: true, BufOutRows: true,
			BufRoutingMap: l.Routing == schedule.RoutingMap, BufFC1Table: l.Storage == schedule.PerExpertWeights,
			BufFC1: l.Storage != schedule.PerExpertWeights, BufFC1Bias: l.Biases, BufSharedFC1: l.SharedWidth() > 0,
			BufSharedGate: l.SharedGate, BufHS: l.SharedWidth() > 0}
		for b, ok := range want {
			if (p.Buffer(b) != nil) != ok {
				t.Errorf("%s: buffer %s present = %v, want %v", name, b, p.Buffer(b) != nil, ok)
			}
		}
		T := int64(37)
		H, I, E, K := int64(l.Hidden), int64(l.Intermediate), int64(l.Experts), int64(l.TopK)
		for b, bytes := range map[string]int64{BufX: 2 * T * H, BufXS: 2 * T * K * H, BufH: 2 * T * K * I, BufErr: 8, BufOffsets: 4 * (E + 1)} {
			if got := p.Buffer(b).Bytes().Eval(T); got != bytes {
				t.Errorf("%s: %s is %d bytes at T=%d, want %d", name, b, got, T, bytes)
			}
		}
		ops := p.String()
		for _, op := range []string{"init(", "count(", "scan(", "permute(", "gather(", "fc1(", "fc2(", "combine("} {
			if !strings.Contains(ops, op) {
				t.Errorf("%s: the program lacks op %s:\n%s", name, op, ops)
			}
		}
		if n := len(p.Ops); n < 8 || n > 11 {
			t.Errorf("%s: %d ops", name, n)
		}
	}
}

// TestCheck breaks a valid program in each way Check must catch.
func TestCheck(t *testing.T) {
	l, _ := schedule.Preset("qwen3-30b-a3b")
	for _, c := range []struct {
		name   string
		break_ func(p *Program)
		want   string
	}{
		{"duplicate buffer", func(p *Program) {
			p.Buffers = append(p.Buffers, &Buffer{Name: BufX, DType: BF16, Shape: []launch.Expr{launch.Const(1)}})
		}, "declared twice"},
		{"unknown dtype", func(p *Program) { p.Buffer(BufH).DType = "f16" }, "unknown dtype"},
		{"two T dims", func(p *Program) { b := p.Buffer(BufH); b.Shape = []launch.Expr{launch.PerT(1, 0), launch.PerT(1, 0)} }, "at most one"},
		{"undeclared operand", func(p *Program) {
			p.Ops[0] = Init{Counts: &Buffer{Name: BufCounts}, Err: p.Buffer(BufErr)}
		}, "does not declare"},
		{"input written", func(p *Program) {
			p.Ops = append([]Op{Init{Counts: p.Buffer(BufX), Err: p.Buffer(BufErr)}}, p.Ops[1:]...)
		}, "writes input " + BufX},
		{"read before write", func(p *Program) { p.Ops = p.Ops[1:] }, "reads scratch " + BufCounts + " before"},
		{"output never written", func(p *Program) { p.Ops = p.Ops[:len(p.Ops)-1] }, BufY + " is never written"},
		{"op twice", func(p *Program) { p.Ops = append(p.Ops, p.Ops[len(p.Ops)-1]) }, "appears twice"},
	} {
		p, err := Forward(l)
		if err != nil {
			t.Fatal(err)
		}
		c.break_(p)
		if err := p.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Check() = %v, want %q", c.name, err, c.want)
		}
	}
}

func TestForwardRefuses(t *testing.T) {
	l, _ := schedule.Preset("qwen3-30b-a3b")
	l.Precision, l.Storage = schedule.MXFP8, schedule.PerExpertWeights
	if _, err := Forward(l); err == nil || !strings.Contains(err.Error(), "need grouped storage") {
		t.Errorf("MXFP8 per-expert: %v", err)
	}
	if _, err := Backward(l); err == nil || !strings.Contains(err.Error(), "grouped only") {
		t.Errorf("MXFP8 backward: %v", err)
	}
	l, _ = schedule.Preset("qwen3-30b-a3b")
	l.TopK = 0
	if _, err := Forward(l); err == nil {
		t.Error("TopK = 0 accepted")
	}
}

func TestDTypeSize(t *testing.T) {
	for d, n := range map[DType]int64{BF16: 2, F32: 4, I32: 4, U8: 1, U32: 4, U64: 8, "f16": 0} {
		if d.Size() != n {
			t.Errorf("%s.Size() = %d, want %d", d, d.Size(), n)
		}
	}
}
