package moe

import (
	"fmt"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/mokc/mokc/internal/parallel"
	"github.com/mokc/mokc/schedule"
)

// interpLayers are small layers with every feature the programs cover.
func interpLayers() map[string]schedule.Layer {
	base := schedule.Layer{Hidden: 64, Intermediate: 32, Experts: 5, TopK: 2}
	gptoss := base
	gptoss.Activation, gptoss.SwiGLULimit, gptoss.GPTOSSAlpha = schedule.GPTOSS, 7, 1.702
	gptoss.GateUpInterleaved, gptoss.Biases = true, true
	shared := base
	shared.SharedExperts, shared.SharedIntermediate, shared.SharedGate = 2, 16, true
	shared.Activation, shared.SwiGLULimit = schedule.ClampedSwiGLU, 0.05
	shared.Routing, shared.MainGrad = schedule.RoutingMap, schedule.GradBF16
	llama := base
	llama.TopK, llama.RouterWeightOnInput, llama.SharedExperts, llama.SharedIntermediate = 1, true, 1, 48
	sharedF32 := shared
	sharedF32.MainGrad = schedule.GradFP32
	sharedIDs := sharedF32
	sharedIDs.Routing = schedule.RoutingIDs
	sharedIDs.Activation, sharedIDs.SwiGLULimit = schedule.SwiGLU, 0
	// Many FC1 outputs near the clamp: the derivative's jump there tests the
	// precision of the FC1 recompute (a bf16 one costs several percent).
	clamped := schedule.Layer{Hidden: 256, Intermediate: 128, Experts: 8, TopK: 2,
		Activation: schedule.ClampedSwiGLU, SwiGLULimit: 1}
	return map[string]schedule.Layer{"clamped-l1": clamped, "shared-f32": sharedF32, "shared-ids-swiglu": sharedIDs, "swiglu": base, "gpt-oss": gptoss, "shared-gate-map-bf16grad": shared, "weight-on-input": llama}
}

// bf16s rounds v to bf16 in place and returns it.
func bf16s(v []float32) []float32 {
	for i := range v {
		v[i] = schedule.RoundBF16(v[i])
	}
	return v
}

// problem is a random layer input: weights and x rounded to bf16, routing
// with some slots unrouted (RoutingIDs), dy.
type problem struct {
	l  schedule.Layer
	T  int
	w  schedule.Weights
	x  []float32
	r  schedule.Routing
	dy []float32
}

func newProblem(t *testing.T, l schedule.Layer, T int) problem { return newProblemSeed(t, l, T, 0) }

// newProblemSeed is newProblem with its random values offset by seed.
func newProblemSeed(t *testing.T, l schedule.Layer, T int, seed uint64) problem {
	w, err := schedule.RandomWeights(l, seed+7)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range [][][]float32{w.FC1, w.FC2, w.SharedFC1, w.SharedFC2} {
		for _, v := range s {
			bf16s(v)
		}
	}
	bf16s(w.SharedGate)
	x := bf16s(schedule.RandomInput(T, l.Hidden, seed+3))
	r, err := schedule.GenerateRouting(l, x, seed+5)
	if err != nil {
		t.Fatal(err)
	}
	if l.Routing == schedule.RoutingIDs {
		for s := 3; s < len(r.IDs); s += 7 {
			r.IDs[s], r.Weights[s] = -1, 0
		}
		if len(r.Weights) > 1 {
			r.Weights[1] = -0.25 // a negative weight: dw stays exact
		}
	}
	return problem{l: l, T: T, w: w, x: x, r: r, dy: bf16s(schedule.RandomInput(T, l.Hidden, seed+9))}
}

// bind packs the problem into the program's input buffers and adds the
// main grads mg0.
func (pr problem) bind(t *testing.T, p *Program, mg0 map[string][]float64) map[string][]float64 {
	b, err := HostInputs(p, pr.w, pr.x, pr.r, pr.dy)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range mg0 {
		b[k] = append([]float64(nil), v...)
	}
	return b
}

// checkRelL2 reports what when got is farther than tol from want in
// relative L2 (or NaN).
func checkRelL2(t *testing.T, what string, got, want []float64, tol float64) {
	t.Helper()
	if e := relL2(got, want); e > tol || math.IsNaN(e) {
		t.Errorf("%s rel L2 %.3g", what, e)
	}
}

// relL2 is ||got - want|| / ||want||.
func relL2(got, want []float64) float64 {
	var d, n float64
	for i := range want {
		d += (got[i] - want[i]) * (got[i] - want[i])
		n += want[i] * want[i]
	}
	if n == 0 {
		return math.Sqrt(d)
	}
	return math.Sqrt(d / n)
}

// TestInterpretForward: the forward program computes schedule.Forward.
func TestInterpretForward(t *testing.T) {
	for name, l := range interpLayers() {
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
			ref, err := schedule.Forward(l, pr.w, pr.x, pr.r)
			if err != nil {
				t.Fatal(err)
			}
			if e := relL2(out["y"], ref); e > 1e-2 || math.IsNaN(e) {
				t.Errorf("%s T=%d: y rel L2 %.3g", name, T, e)
			}
			if out["err"][0] != 0 {
				t.Errorf("%s T=%d: error word %v", name, T, out["err"][0])
			}
		}
	}
}

// TestInterpretBackward: the backward program computes schedule.Backward's
// dx, routing-weight gradient and main-grad accumulation.
func TestInterpretBackward(t *testing.T) {
	for name, l := range interpLayers() {
		for _, T := range []int{0, 1, 64} {
			pr := newProblem(t, l, T)
			p, err := Backward(l)
			if err != nil {
				t.Fatal(err)
			}
			// fp32 main grads start from random values: the program adds to
			// them. bf16 ones start at 0, where the one rounding of main + dW
			// is relative to dW (an increment smaller than the main grad's ulp
			// is quantised away, the same in the reference and the program).
			mg0 := map[string][]float64{}
			for _, b := range p.Buffers {
				if b.Kind == InOut {
					v := f64(schedule.RandomInput(1, int(b.Len(0)), 11))
					if b.DType == BF16 {
						clear(v)
					}
					mg0[b.Name] = v
				}
			}
			out, err := Interpret(p, T, pr.bind(t, p, mg0))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			mg := pr.refMainGrads(mg0)
			g, err := schedule.Backward(l, pr.w, pr.x, pr.r, pr.dy, &mg.MainGrads)
			if err != nil {
				t.Fatal(err)
			}
			check := func(what string, got, want []float64, tol float64) {
				t.Helper()
				checkRelL2(t, fmt.Sprintf("%s T=%d: %s", name, T, what), got, want, tol)
			}
			check("dx", out["dx"], g.DX, 1e-2)
			if l.Routing == schedule.RoutingMap {
				check("dprobs", out["dprobs"], g.DProbs, 1e-2)
			} else {
				check("dw", out["dw"], g.DWeights, 1e-2)
			}
			for buf, want := range MainGradBuffers(l, mg.MainGrads) {
				d, dref := make([]float64, len(want)), make([]float64, len(want))
				for i := range want {
					d[i], dref[i] = out[buf][i]-mg0[buf][i], want[i]-mg0[buf][i]
				}
				check(buf+" increment", d, dref, 1e-2)
			}
		}
	}
}

// zeroMainGrads is a zero value for every InOut buffer (main grad) of p.
func zeroMainGrads(p *Program) map[string][]float64 {
	mg0 := map[string][]float64{}
	for _, b := range p.Buffers {
		if b.Kind == InOut {
			mg0[b.Name] = make([]float64, b.Len(0))
		}
	}
	return mg0
}

// refMain holds main grads in schedule.MainGrads form, started from mg0.
type refMain struct {
	schedule.MainGrads
	l schedule.Layer
}

// refMainGrads converts the program's main grads into schedule.MainGrads.
func (pr problem) refMainGrads(mg0 map[string][]float64) refMain {
	return refMain{MainGrads: MainGradsOf(pr.l, mg0), l: pr.l}
}

// TestBackwardProgram: the backward's structure, its ops and what it keeps.
func TestBackwardProgram(t *testing.T) {
	for _, name := range schedule.Presets() {
		l, _ := schedule.Preset(name)
		p, err := Backward(l)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		s := p.String()
		for _, op := range []string{"gather_dy(", "fc1(", "fc2_dgrad(", "act_grad(", "fc1_dgrad(", "fc2_wgrad(", "fc1_wgrad(", "combine_grad("} {
			if !strings.Contains(s, op) {
				t.Errorf("%s: no %s in\n%s", name, op, s)
			}
		}
	}
}

// TestIsolate: one op alone, interpreted on the values the whole program
// gave its inputs, gives the same outputs.
func TestIsolate(t *testing.T) {
	l := interpLayers()["gpt-oss"]
	pr := newProblem(t, l, 9)
	p, err := Backward(l)
	if err != nil {
		t.Fatal(err)
	}
	mg0 := zeroMainGrads(p)
	full, err := Interpret(p, pr.T, pr.bind(t, p, mg0))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"act_grad", "combine_grad", "fc2_wgrad"} {
		q, err := p.Isolate(name)
		if err != nil {
			t.Fatal(err)
		}
		in := map[string][]float64{}
		for _, b := range q.Buffers {
			switch b.Kind {
			case Input:
				in[b.Name] = full[b.Name]
			case InOut:
				in[b.Name] = make([]float64, len(full[b.Name]))
			}
		}
		out, err := Interpret(q, pr.T, in)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, b := range q.Buffers {
			if b.Kind == Input {
				continue
			}
			for i, v := range full[b.Name] { // rows past the routed ones stay NaN in both
				if g := out[b.Name][i]; g != v && !(math.IsNaN(g) && math.IsNaN(v)) {
					t.Errorf("%s: %s[%d] = %v, the whole program's %v", name, b.Name, i, g, v)
					break
				}
			}
		}
	}
	if _, err := p.Isolate("nope"); err == nil {
		t.Error("Isolate of a missing op succeeded")
	}
}

// TestMainGradsRoundTrip: MainGradsOf undoes MainGradBuffers.
func TestMainGradsRoundTrip(t *testing.T) {
	l := interpLayers()["shared-f32"]
	pr := newProblem(t, l, 1)
	mg := schedule.MainGrads{FC1: pr.w.FC1, FC2: pr.w.FC2, SharedFC1: pr.w.SharedFC1, SharedFC2: pr.w.SharedFC2, SharedGate: pr.w.SharedGate}
	back := MainGradBuffers(l, MainGradsOf(l, MainGradBuffers(l, mg)))
	for name, v := range MainGradBuffers(l, mg) {
		if e := relL2(back[name], v); e != 0 {
			t.Errorf("%s: round trip differs (rel L2 %g)", name, e)
		}
	}
}

// TestSharedGateGradOneToken: one token's shared-gate gradient is dz·x with
// dz a dot <dh, h> that cancels; the program keeps dh in f32, so over many
// random layers it stays within 1e-2 of schedule.Backward (with dh in bf16,
// about one layer in ten was off by more, up to a third).
func TestSharedGateGradOneToken(t *testing.T) {
	l := schedule.Layer{Name: "shared-gate-one-token", Hidden: 256, Intermediate: 128, Experts: 8, TopK: 2,
		SharedExperts: 2, SharedIntermediate: 64, SharedGate: true, Routing: schedule.RoutingMap, MainGrad: schedule.GradBF16,
		Activation: schedule.ClampedSwiGLU, SwiGLULimit: 3, Router: schedule.Router{Score: schedule.ScoreSoftmax, Normalize: true}}
	p, err := Backward(l)
	if err != nil {
		t.Fatal(err)
	}
	for seed := uint64(0); seed < 60; seed++ {
		pr := newProblemSeed(t, l, 1, 16*seed)
		mg0 := zeroMainGrads(p)
		out, err := Interpret(p, 1, pr.bind(t, p, mg0))
		if err != nil {
			t.Fatal(err)
		}
		mg := pr.refMainGrads(mg0)
		if _, err := schedule.Backward(l, pr.w, pr.x, pr.r, pr.dy, &mg.MainGrads); err != nil {
			t.Fatal(err)
		}
		want := MainGradBuffers(l, mg.MainGrads)[BufSharedGateGrad]
		if e := relL2(out[BufSharedGateGrad], want); e > 1e-2 || math.IsNaN(e) {
			t.Errorf("seed %d: shared_gate_grad rel L2 %.3g", seed, e)
		}
	}
}

// TestInterpretSaveFC1: with schedule.Layer.SaveFC1 the forward computes the
// same y (its FC1 output rounded to f32 before the activation: within
// 1e-3) and keeps fc1_out, and the backward that reads it computes every
// gradient bit for bit as the one that recomputes FC1, for bf16 and mxfp8
// layers of every feature; the backward has no FC1 GEMM then.
func TestInterpretSaveFC1(t *testing.T) {
	for name, l := range interpLayers() {
		for _, prec := range []schedule.Precision{schedule.BF16, schedule.MXFP8} {
			l.Precision = prec
			saving := l
			saving.SaveFC1 = true
			for _, T := range []int{1, 37} {
				what := fmt.Sprintf("%s %v T=%d", name, prec, T)
				pr := newProblem(t, l, T)
				run := func(l schedule.Layer, backward bool, extra map[string][]float64) (*Program, map[string][]float64) {
					t.Helper()
					build := Forward
					if backward {
						build = Backward
					}
					p, err := build(l)
					if err != nil {
						t.Fatal(err)
					}
					b := pr.bind(t, p, zeroMainGrads(p))
					for k, v := range extra {
						b[k] = v
					}
					out, err := Interpret(p, T, b)
					if err != nil {
						t.Fatalf("%s: %v", what, err)
					}
					return p, out
				}
				_, fwd := run(l, false, nil)
				_, fwdSaved := run(saving, false, nil)
				checkRelL2(t, what+": y of the saving forward", fwdSaved[BufY], fwd[BufY], 1e-3)
				_, bwd := run(l, true, nil)
				p, bwdSaved := run(saving, true, map[string][]float64{BufFC1Out: fwdSaved[BufFC1Out]})
				for _, op := range p.Ops {
					if op.Name() == "fc1" || op.Name() == "quantize_xs" {
						t.Errorf("%s: the saving backward still runs %s", what, op.Name())
					}
				}
				for _, b := range p.Buffers {
					if b.Kind != Output && b.Kind != InOut {
						continue
					}
					got, want := bwdSaved[b.Name], bwd[b.Name]
					for i := range want {
						if got[i] != want[i] && !(math.IsNaN(got[i]) && math.IsNaN(want[i])) {
							t.Errorf("%s: %s[%d] = %v with the saved FC1 output, %v recomputed", what, b.Name, i, got[i], want[i])
							break
						}
					}
				}
			}
		}
	}
}

// TestInterpretParallel: the GEMMs and weight gradients of a layer large
// enough to split over goroutines (parallel.Range) give every buffer bit for
// bit what one goroutine gives, forward and backward.
func TestInterpretParallel(t *testing.T) {
	l := schedule.Layer{Hidden: 512, Intermediate: 256, Experts: 4, TopK: 2, SharedExperts: 1, SharedIntermediate: 128, Biases: true}
	const T = 96
	pr := newProblem(t, l, T)
	for dir, build := range map[string]func(schedule.Layer) (*Program, error){"forward": Forward, "backward": Backward} {
		p, err := build(l)
		if err != nil {
			t.Fatal(err)
		}
		mg0 := map[string][]float64{}
		for _, b := range p.Buffers {
			if b.Kind == InOut {
				mg0[b.Name] = f64(schedule.RandomInput(1, int(b.Len(0)), 13))
			}
		}
		bindMany, bindOne := pr.bind(t, p, mg0), pr.bind(t, p, mg0)
		procs := runtime.GOMAXPROCS(4)
		t.Cleanup(func() { runtime.GOMAXPROCS(procs) })
		// the routed FC1's rows (about T·top-k of them) split 4 ways
		if w := parallel.Workers(T*l.TopK/2, 2*l.Intermediate*l.Hidden); w != 4 {
			t.Fatalf("FC1 over %d goroutines, want 4", w)
		}
		many, err := Interpret(p, T, bindMany)
		runtime.GOMAXPROCS(1)
		one, err1 := Interpret(p, T, bindOne)
		runtime.GOMAXPROCS(procs)
		if err != nil || err1 != nil {
			t.Fatal(err, err1)
		}
		for name, want := range one {
			got := many[name]
			for i := range want {
				if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
					t.Errorf("%s: %s[%d] = %v on 4 goroutines, %v on one", dir, name, i, got[i], want[i])
					break
				}
			}
		}
	}
}
