//go:build cuda

package runtime_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mokc/mokc/driver"
	"github.com/mokc/mokc/internal/gputest"
	"github.com/mokc/mokc/launch"
	"github.com/mokc/mokc/moe"
	"github.com/mokc/mokc/runtime"
	"github.com/mokc/mokc/schedule"
	"github.com/mokc/mokc/target"
)

// backwardCases are the layers of the Backward GPU test: two presets' sizes
// with fewer experts (main grads are as large as the weights) and small
// layers with the shared gate, a routing map and bf16 main grads, and the
// router weight on the input.
func backwardCases(t *testing.T) map[string]schedule.Layer {
	out := map[string]schedule.Layer{}
	for name, e := range map[string]int{"qwen3-30b-a3b": 16, "gpt-oss-20b": 4} {
		l, err := schedule.Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		l.Experts = e
		out[fmt.Sprintf("%s-E%d", name, e)] = l
	}
	out["shared-gate-map-bf16"] = schedule.Layer{Name: "shared-gate-map-bf16", Hidden: 256, Intermediate: 128, Experts: 8, TopK: 2,
		SharedExperts: 2, SharedIntermediate: 64, SharedGate: true, Routing: schedule.RoutingMap, MainGrad: schedule.GradBF16,
		Activation: schedule.ClampedSwiGLU, SwiGLULimit: 3, Router: schedule.Router{Score: schedule.ScoreSoftmax, Normalize: true}}
	out["weight-on-input"] = schedule.Layer{Name: "weight-on-input", Hidden: 136, Intermediate: 72, Experts: 6, TopK: 1,
		SharedExperts: 1, SharedIntermediate: 64, RouterWeightOnInput: true, Router: schedule.Router{Score: schedule.ScoreSigmoid}}
	return out
}

// TestLayerBackward runs Layer.Backward as a training step would (the same
// Layer after its Forward, three steps on the same inputs, main grads
// accumulating from random fp32 values, or from 0 for bf16) on every target
// the device runs, T = 0, 1, 64, and checks against schedule.Backward: dx
// and the routing-weight gradient after each step (relative L2 at most
// 1e-2, every element written, the same bits every step), and the main
// grads' increments over the three steps (relative L2 at most 1e-2; an
// expert without routes untouched).
func TestLayerBackward(t *testing.T) {
	ctx := gputest.Open(t)
	t.Setenv(runtime.CacheDirEnv, t.TempDir())
	stream, err := ctx.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Destroy()
	for name, l := range backwardCases(t) {
		for _, tg := range gputest.Targets(ctx.Device().ComputeCapability()) {
			for _, T := range []int{0, 1, 64} {
				t.Run(fmt.Sprintf("%s/%v/T=%d", name, tg, T), func(t *testing.T) {
					testLayerBackward(t, ctx, stream, l, tg, T)
				})
			}
		}
	}
}

// put allocates a device tensor holding v (bf16 bits, f32) with shape.
func put(t *testing.T, ctx *driver.Context, v any, dtype runtime.DType, shape ...int) runtime.Tensor {
	t.Helper()
	n := int(dtype.Size())
	for _, d := range shape {
		n *= d
	}
	p, err := ctx.Alloc(max(n, 16))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctx.Free(p) })
	if v != nil && n > 0 {
		if err := ctx.CopyToDevice(p, v); err != nil {
			t.Fatal(err)
		}
	}
	return runtime.NewTensor(p, n, dtype, shape...)
}

// f32Host is v as f32 or bf16 bits (dtype).
func f32Host(dtype runtime.DType, v []float64) any {
	f := make([]float32, len(v))
	for i, x := range v {
		f[i] = float32(x)
	}
	if dtype == moe.BF16 {
		return runtime.ToBF16(f)
	}
	return f
}

// download reads tensor t (bf16 or f32) as float64.
func download(t *testing.T, ctx *driver.Context, tn runtime.Tensor) []float64 {
	t.Helper()
	v, err := runtime.ReadFloats(ctx, tn)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// gradRelL2 is the relative L2 error of got against want, with start
// subtracted from both when it is not nil; a NaN in got is an error.
func gradRelL2(got, want, start []float64) (float64, error) {
	var num, den float64
	for i, v := range want {
		g := got[i]
		if math.IsNaN(g) {
			return 0, fmt.Errorf("element %d is NaN (unwritten?), want %v", i, v)
		}
		if start != nil {
			g, v = g-start[i], v-start[i]
		}
		num += (g - v) * (g - v)
		den += v * v
	}
	return math.Sqrt(num / math.Max(den, 1e-300)), nil
}

func testLayerBackward(t *testing.T, ctx *driver.Context, stream *driver.Stream, l schedule.Layer, tg target.Target, T int) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	w, err := schedule.RandomWeights(l, seed)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range [][][]float32{w.FC1, w.FC2, w.SharedFC1, w.SharedFC2, {w.SharedGate}} {
		for _, v := range m {
			copy(v, runtime.FromBF16(runtime.ToBF16(v))) // the reference sees the GPU's weights
		}
	}
	dwts, err := runtime.UploadWeights(ctx, l, w)
	if err != nil {
		t.Fatal(err)
	}
	defer dwts.Free()
	c := newCase(t, ctx, l, w, T, seed+1)
	x := runtime.FromBF16(runtime.ToBF16(c.x))
	dy := runtime.FromBF16(runtime.ToBF16(schedule.RandomInput(T, l.Hidden, seed+2)))
	ly := newLayer(t, ctx, l, tg)
	b := runtime.Bindings{}
	dwts.SetIn(b)
	c.in.SetIn(b)
	if err := ly.Forward(stream, b); err != nil { // a training step runs the forward first
		t.Fatal(err)
	}
	delete(b, moe.BufY)
	b[moe.BufDY] = put(t, ctx, runtime.ToBF16(dy), moe.BF16, T, l.Hidden)
	specs, err := ly.BackwardBuffers()
	if err != nil {
		t.Fatal(err)
	}
	// Main grads: random fp32 values, bf16 ones from 0, in both forms.
	var outputs []string
	start := map[string][]float64{}
	for _, s := range specs {
		shape := s.ShapeAt(T)
		switch s.Kind {
		case launch.BufOutput:
			b[s.Name] = put(t, ctx, nil, s.DType, shape...)
			outputs = append(outputs, s.Name)
		case launch.BufInOut:
			v := make([]float64, s.BytesAt(T)/int(s.DType.Size()))
			if l.MainGrad == schedule.GradFP32 {
				for i, r := range schedule.RandomInput(1, len(v), seed+uint64(len(start))+3) {
					v[i] = float64(r)
				}
			}
			start[s.Name] = v
			b[s.Name] = put(t, ctx, f32Host(s.DType, v), s.DType, shape...)
		}
	}
	mg := moe.MainGradsOf(l, start)
	var ref schedule.Grads
	var firstDX []float64
	for step := 0; step < 3; step++ {
		for _, o := range outputs {
			if err := runtime.Poison(ctx, stream, b[o]); err != nil {
				t.Fatal(err)
			}
		}
		if err := ly.Backward(stream, b); err != nil {
			t.Fatalf("step %d: Backward: %v", step, err)
		}
		if err := ly.CheckErrors(stream); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if T > 0 {
			if ref, err = schedule.Backward(l, w, x, c.r, dy, &mg); err != nil {
				t.Fatal(err)
			}
		}
		dx := download(t, ctx, b[moe.BufDX])
		if step == 0 {
			firstDX = dx
			if T > 0 {
				check(t, "dx", dx, ref.DX, nil)
				if l.Routing == schedule.RoutingMap {
					check(t, "dprobs", download(t, ctx, b[moe.BufDProbs]), ref.DProbs, nil)
				} else {
					check(t, "dw", download(t, ctx, b[moe.BufDW]), ref.DWeights, nil)
				}
			}
		} else if !slices.Equal(dx, firstDX) {
			t.Errorf("step %d: dx differs from step 0's (same inputs)", step)
		}
	}
	for name, want := range moe.MainGradBuffers(l, mg) {
		check(t, name+" after 3 steps", download(t, ctx, b[name]), want, start[name])
	}
}

// check fails t when got is not within 1e-2 relative L2 of want (of the
// increments over start when start is set).
func check(t *testing.T, what string, got, want, start []float64) {
	t.Helper()
	rel, err := gradRelL2(got, want, start)
	switch {
	case err != nil:
		t.Errorf("%s: %v", what, err)
	case rel > 1e-2:
		t.Errorf("%s: rel L2 %.3g", what, rel)
	default:
		t.Logf("%s: rel L2 %.3g", what, rel)
	}
}
