package moe

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/mokc/mokc/schedule"
)

// TestInterpretForwardMXFP8: the mxfp8 program (quantize ops, e4m3 GEMMs
// with their scales) computes schedule.Forward of the mxfp8 layer with the
// MXFP8 values of the weights, for every layer shape the bf16 test covers;
// the quantization shows against the bf16 program's expert outputs.
func TestInterpretForwardMXFP8(t *testing.T) {
	for name, l := range interpLayers() {
		l.Precision = schedule.MXFP8
		for _, T := range []int{0, 1, 23} {
			pr := newProblem(t, l, T)
			p, err := Forward(l)
			if err != nil {
				t.Fatal(err)
			}
			out, err := Interpret(p, T, pr.bind(t, p, nil))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			wq, err := schedule.MXWeights(l, pr.w)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := schedule.Forward(l, wq, pr.x, pr.r)
			if err != nil {
				t.Fatal(err)
			}
			if e := relL2(out["y"], ref); e > 5e-3 || math.IsNaN(e) {
				t.Errorf("%s T=%d: y rel L2 %.3g against the mxfp8 reference", name, T, e)
			}
			// The routed experts' outputs (the shared ones stay bf16) of the
			// bf16 program differ by the quantization.
			lb := l
			lb.Precision = schedule.BF16
			pb, err := Forward(lb)
			if err != nil {
				t.Fatal(err)
			}
			outB, err := Interpret(pb, T, pr.bind(t, pb, nil))
			if err != nil {
				t.Fatal(err)
			}
			if e := relL2(out[BufOutRows], outB[BufOutRows]); T > 1 && e < 1e-2 {
				t.Errorf("%s T=%d: mxfp8 and bf16 expert outputs within %.3g: nothing was quantized", name, T, e)
			}
		}
	}
}

// TestCheckMXFP8: Check refuses MXFP8 GEMMs, Quantize ops and quantizing
// gathers with wrong dtypes or shapes.
func TestCheckMXFP8(t *testing.T) {
	l := schedule.Layer{Hidden: 64, Intermediate: 32, Experts: 4, TopK: 2, Precision: schedule.MXFP8}
	for name, c := range map[string]struct {
		edit func(p *Program)
		want string
	}{
		"a scales missing": {func(p *Program) { g := p.op("fc1").(GEMM); g.AScales = nil; p.setOp(g) }, "scales of both"},
		"bf16 a":           {func(p *Program) { g := p.op("fc2").(GEMM); g.A = p.Buffer(BufH); p.setOp(g) }, "reads e4m3 A and B"},
		"scales columns":   {func(p *Program) { p.Buffer(BufFC1Scales).Shape[2] = c(3) }, "with 2 columns"},
		"gather to bf16":   {func(p *Program) { p.Buffer(BufXSQ).DType = BF16 }, "writes e4m3"},
		"quantize to bf16": {func(p *Program) { p.Buffer(BufHQ).DType = BF16 }, "writes e4m3"},
		"gather q only":    {func(p *Program) { g := p.op("gather").(Gather); g.S = nil; p.setOp(g) }, "both Q and S"},
		"gather xs and q":  {func(p *Program) { g := p.op("gather").(Gather); g.XS = p.Buffer(BufH); p.setOp(g) }, "no XS"},
		"gather f32 x":     {func(p *Program) { p.Buffer(BufX).DType = F32 }, "reads bf16 rows"},
		"gather scales":    {func(p *Program) { p.Buffer(BufXSScales).Shape[1] = c(3) }, "with 2 columns"},
		"e4m3 unscaled": {func(p *Program) {
			g := p.op("fc1").(GEMM)
			g.AScales, g.BScales = nil, nil
			p.setOp(g)
		}, "need their scales"},
	} {
		p, err := Forward(l)
		if err != nil {
			t.Fatal(err)
		}
		c.edit(p)
		if err := p.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, c.want)
		}
	}
}

// op returns the op named name.
func (p *Program) op(name string) Op {
	for _, o := range p.Ops {
		if o.Name() == name {
			return o
		}
	}
	return nil
}

// setOp replaces the op of o's name with o.
func (p *Program) setOp(o Op) {
	for i := range p.Ops {
		if p.Ops[i].Name() == o.Name() {
			p.Ops[i] = o
		}
	}
}

// TestInterpretBackwardMXFP8: the mxfp8 backward program (FC1 recomputed
// on the quantized rows, data gradients over the dequantized weights, the
// routing-weight dot over the MXFP8 values of h) computes schedule.Backward
// of the mxfp8 layer with the MXFP8 values of the weights: dx, the
// routing-weight gradient and the main-grad increments, for every layer
// shape the bf16 test covers. Without ActGrad.MX the routing-weight
// gradient misses the quantization of h by more than the tolerance.
func TestInterpretBackwardMXFP8(t *testing.T) {
	for name, l := range interpLayers() {
		l.Precision = schedule.MXFP8
		for _, T := range []int{0, 1, 64} {
			pr := newProblem(t, l, T)
			p, err := Backward(l)
			if err != nil {
				t.Fatal(err)
			}
			mg0 := zeroMainGrads(p)
			out, err := Interpret(p, T, pr.bind(t, p, mg0))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			wq, err := schedule.MXWeights(l, pr.w)
			if err != nil {
				t.Fatal(err)
			}
			mg := pr.refMainGrads(mg0)
			g, err := schedule.Backward(l, wq, pr.x, pr.r, pr.dy, &mg.MainGrads)
			if err != nil {
				t.Fatal(err)
			}
			check := func(what string, got, want []float64, tol float64) {
				t.Helper()
				checkRelL2(t, fmt.Sprintf("%s T=%d: %s", name, T, what), got, want, tol)
			}
			check("dx", out["dx"], g.DX, 1e-2)
			dwName, dwRef := BufDW, g.DWeights
			if l.Routing == schedule.RoutingMap {
				dwName, dwRef = BufDProbs, g.DProbs
			}
			check(dwName, out[dwName], dwRef, 1e-2)
			for buf, want := range MainGradBuffers(l, mg.MainGrads) {
				check(buf, out[buf], want, 1e-2)
			}
			if T < 64 || l.RouterWeightOnInput {
				continue
			}
			// The dot over unquantized h: the routing-weight gradient of a
			// forward that had not quantized h.
			for i, op := range p.Ops {
				if a, ok := op.(ActGrad); ok && a.Op == "act_grad" {
					a.MX = false
					p.Ops[i] = a
				}
			}
			out, err = Interpret(p, T, pr.bind(t, p, zeroMainGrads(p)))
			if err != nil {
				t.Fatal(err)
			}
			if e := relL2(out[dwName], dwRef); e <= 1e-2 {
				t.Errorf("%s T=%d: %s without the MXFP8 dot within %.3g: the test cannot tell", name, T, dwName, e)
			}
		}
	}
}
