//go:build cuda

package codegen_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/mokc/mokc/codegen"
	"github.com/mokc/mokc/driver"
	"github.com/mokc/mokc/layouts"
	"github.com/mokc/mokc/moe"
	"github.com/mokc/mokc/ptx"
	"github.com/mokc/mokc/schedule"
	"github.com/mokc/mokc/target"
)

// backwardLayers are small layers with every feature of the backward's
// row-wise kernels.
func backwardLayers() map[string]schedule.Layer {
	base := schedule.Layer{Hidden: 128, Intermediate: 64, Experts: 6, TopK: 3}
	gptoss := base
	gptoss.Activation, gptoss.SwiGLULimit, gptoss.GPTOSSAlpha = schedule.GPTOSS, 7, 1.702
	gptoss.GateUpInterleaved, gptoss.Biases = true, true
	shared := base
	shared.SharedExperts, shared.SharedIntermediate, shared.SharedGate = 2, 32, true
	shared.Activation, shared.SwiGLULimit, shared.Routing = schedule.ClampedSwiGLU, 0.05, schedule.RoutingMap
	llama := base
	llama.TopK, llama.RouterWeightOnInput, llama.SharedExperts, llama.SharedIntermediate = 1, true, 1, 96
	// Weight-gradient tiles past M and N (2I = 192, H = 200: a second,
	// partial 128 x 128 tile each way) into bf16 main grads.
	ragged := schedule.Layer{Hidden: 200, Intermediate: 96, Experts: 5, TopK: 2, MainGrad: schedule.GradBF16}
	return map[string]schedule.Layer{"swiglu": base, "gpt-oss": gptoss, "shared-gate-map": shared, "weight-on-input": llama,
		"ragged-bf16": ragged}
}

// hostTo converts float64 values to the host slice of dtype d.
func hostTo(d moe.DType, v []float64) any {
	switch d {
	case moe.BF16:
		f := make([]float32, len(v))
		for i, x := range v {
			f[i] = float32(x)
		}
		return bf16Bits(f)
	case moe.F32:
		f := make([]float32, len(v))
		for i, x := range v {
			f[i] = float32(x)
		}
		return f
	case moe.I32:
		f := make([]int32, len(v))
		for i, x := range v {
			f[i] = int32(x)
		}
		return f
	case moe.U8, moe.UE8M0: // flags; scale codes
		f := make([]uint8, len(v))
		for i, x := range v {
			f[i] = uint8(x)
		}
		return f
	case moe.E4M3: // the interpretation holds e4m3 values, exactly
		f := make([]uint8, len(v))
		for i, x := range v {
			f[i] = layouts.E4M3FromF32(float32(x))
		}
		return f
	}
	f := make([]uint32, len(v))
	for i, x := range v {
		f[i] = uint32(x)
	}
	return f
}

// hostFrom widens a host slice back to float64.
func hostFrom(v any) []float64 {
	var out []float64
	switch v := v.(type) {
	case []uint16:
		for _, x := range bf16Vals(v) {
			out = append(out, float64(x))
		}
	case []float32:
		for _, x := range v {
			out = append(out, float64(x))
		}
	case []int32:
		for _, x := range v {
			out = append(out, float64(x))
		}
	case []uint8:
		for _, x := range v {
			out = append(out, float64(x))
		}
	case []uint32:
		for _, x := range v {
			out = append(out, float64(x))
		}
	}
	return out
}

// TestBackwardPerOpsGPU runs each op of the backward that has PerOp
// kernels of its own (the row-wise ops and the weight gradients) on its
// own on the GPU (moe.Program.Isolate, lowered with PerOp, mokc's PTX for
// sm_80 and sm_90a) on the inputs the host interpretation of the whole
// backward gave it (fresh random layer data, random starting main grads),
// with poisoned outputs, and compares every element the interpretation
// writes: relative L2 at most 1e-2 per buffer (of the increment, for main
// grads), no element left unwritten (NaN poison) and none written that
// should not be. T = 300 gives the weight gradients experts of more than
// one 32-row stage. Two of the layers also run with MXFP8 weights on
// sm_90a: the dequantize ops (bf16 weights for the data gradients) and
// act_grad's dot over the MXFP8 values of h.
func TestBackwardPerOpsGPU(t *testing.T) {
	ctx := openGPU(t)
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	layers := backwardLayers()
	for _, name := range []string{"swiglu", "gpt-oss"} { // the MXFP8 backward's own ops (sm_90a)
		l := layers[name]
		l.Precision = schedule.MXFP8
		layers[name+"-mxfp8"] = l
	}
	for name, l := range layers {
		for _, T := range []int{37, 300} {
			p, err := moe.Backward(l)
			if err != nil {
				t.Fatal(err)
			}
			w, err := schedule.RandomWeights(l, seed)
			if err != nil {
				t.Fatal(err)
			}
			x := schedule.RandomInput(T, l.Hidden, seed+1)
			r, err := schedule.GenerateRouting(l, x, seed+2)
			if err != nil {
				t.Fatal(err)
			}
			in, err := moe.HostInputs(p, w, x, r, schedule.RandomInput(T, l.Hidden, seed+3))
			if err != nil {
				t.Fatal(err)
			}
			init := map[string][]float64{}
			rng := rand.New(rand.NewPCG(seed, uint64(T)))
			for _, b := range p.Buffers {
				if b.Kind == moe.InOut {
					v := make([]float64, b.Len(0))
					for i := range v {
						v[i] = float64(float32(rng.NormFloat64()))
					}
					if b.DType == moe.BF16 {
						v = hostFrom(hostTo(moe.BF16, v))
					}
					init[b.Name], in[b.Name] = v, slices.Clone(v)
				}
			}
			host, err := moe.Interpret(p, T, in)
			if err != nil {
				t.Fatal(err)
			}
			for _, op := range codegen.BackwardPerOps {
				q, err := p.Isolate(op)
				if err != nil {
					continue
				}
				for _, c := range []struct {
					tg target.Target
					wg schedule.WGradKernel
				}{{target.SM80, schedule.WGradMMA}, {target.SM90a, schedule.WGradMMA}, {target.SM90a, schedule.WGradWGMMA}, {target.SM90a, schedule.WGradWS}} {
					if c.wg != schedule.WGradMMA && !strings.Contains(op, "wgrad") {
						continue
					}
					if l.Precision == schedule.MXFP8 && codegen.CheckLayer(l, c.tg) != nil {
						continue
					}
					checkOpGPU(t, ctx, fmt.Sprintf("%s T=%d %s %v %v", name, T, op, c.tg, c.wg), q, c.tg, c.wg, T, init, host)
				}
			}
		}
	}
}

// checkOpGPU runs the one-op program q for T tokens (weight-gradient
// kernel wg) from the host values
// (InOut buffers from init) and compares its outputs and InOut buffers
// with host (InOut: the increments over init).
func checkOpGPU(t *testing.T, c *driver.Context, what string, q *moe.Program, tg target.Target, wg schedule.WGradKernel, T int, init, host map[string][]float64) {
	t.Helper()
	s, err := schedule.DefaultSchedule(q.Layer, tg)
	if err != nil {
		t.Fatal(err)
	}
	s.WGrad = wg
	prog, err := codegen.Lower(q, s, codegen.PerOp)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	text, err := ptx.Compile(prog.Module, tg)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	ex, err := newExecutor(c, prog, text)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	d := &dev{t: t, ctx: c}
	defer d.free()
	bufs := map[string]driver.DevicePtr{}
	outs := map[string]any{}
	for _, b := range q.Buffers {
		bytes := int(b.Bytes().Eval(int64(T)))
		switch b.Kind {
		case moe.Input:
			bufs[b.Name] = d.put(hostTo(b.DType, host[b.Name]), bytes)
		case moe.InOut:
			bufs[b.Name] = d.put(hostTo(b.DType, init[b.Name]), bytes)
			outs[b.Name] = hostTo(b.DType, make([]float64, int64(bytes)/b.DType.Size()))
		default:
			bufs[b.Name] = d.put(nil, bytes) // poisoned: 0xFF bytes
			outs[b.Name] = hostTo(b.DType, make([]float64, int64(bytes)/b.DType.Size()))
		}
	}
	if err := ex.run(T, bufs); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	for _, b := range q.Buffers {
		dst, ok := outs[b.Name]
		if !ok {
			continue
		}
		if err := c.CopyFromDevice(dst, bufs[b.Name]); err != nil {
			t.Fatal(err)
		}
		got, want := hostFrom(dst), host[b.Name]
		var num, den float64
		for i, v := range want {
			g := got[i]
			if math.IsNaN(v) { // not written by the whole program either
				continue
			}
			if math.IsNaN(g) {
				t.Errorf("%s: %s[%d] not written (poison), want %v", what, b.Name, i, v)
				break
			}
			if b.Kind == moe.InOut {
				g, v = g-init[b.Name][i], v-init[b.Name][i]
			}
			num += (g - v) * (g - v)
			den += v * v
		}
		if rel := math.Sqrt(num / math.Max(den, 1e-30)); rel > 1e-2 {
			t.Errorf("%s: %s rel L2 %.3g", what, b.Name, rel)
		} else {
			t.Logf("%s: %s rel L2 %.3g", what, b.Name, rel)
		}
	}
}

// refMainGrads are random initial main grads in schedule.MainGrads form (0
// for bf16 main grads: see moe's interpreter test) and the same values in
// the program's buffer layouts.
func refMainGrads(l schedule.Layer, seed uint64) (schedule.MainGrads, map[string][]float32) {
	H, I, E, S, Is := l.Hidden, l.Intermediate, l.Experts, l.SharedExperts, l.SharedIntermediate
	n := 0
	rnd := func(count, each int) [][]float32 {
		out := make([][]float32, count)
		for i := range out {
			n++
			out[i] = schedule.RandomInput(1, each, seed+uint64(n))
			if l.MainGrad == schedule.GradBF16 {
				clear(out[i])
			}
		}
		return out
	}
	var mg schedule.MainGrads
	mg.FC1, mg.FC2 = rnd(E, 2*I*H), rnd(E, H*I)
	if l.Biases {
		mg.FC1Bias, mg.FC2Bias = rnd(E, 2*I), rnd(E, H)
	}
	if S > 0 {
		mg.SharedFC1, mg.SharedFC2 = rnd(S, 2*Is*H), rnd(S, H*Is)
		if l.SharedGate {
			mg.SharedGate = rnd(1, H)[0]
		}
	}
	return mg, packMainGrads(l, mg)
}

// packMainGrads lays schedule.MainGrads out as the backward's buffers.
func packMainGrads(l schedule.Layer, mg schedule.MainGrads) map[string][]float32 {
	out := map[string][]float32{}
	for k, v := range moe.MainGradBuffers(l, mg) {
		out[k] = f32s(v)
	}
	return out
}

func f32s(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

func f64s(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// TestBackwardGPU runs the whole backward (PerOp, mokc's PTX for sm_80) on fresh random layer data with poisoned outputs and scratch and
// compares dx, the routing-weight gradient and every main grad (started
// from random values: the kernels add to them) with schedule.Backward's
// float64 gradients: relative L2 at most 1e-2, nothing left unwritten, and
// a second run from the same main grads bitwise identical.
func TestBackwardGPU(t *testing.T) {
	ctx := openGPU(t)
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	layers := backwardLayers()
	// Two presets' sizes with fewer experts: main grads as large as the
	// weights stay small enough for the host reference.
	for name, e := range map[string]int{"qwen3-30b-a3b": 16, "gpt-oss-20b": 4} {
		l, err := schedule.Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		l.Experts, l.Router.Groups, l.Router.TopKGroups = e, 0, 0
		layers[fmt.Sprintf("%s-E%d", name, e)] = l
	}
	bf16grad := layers["shared-gate-map"]
	bf16grad.MainGrad = schedule.GradBF16
	layers["shared-gate-map-bf16-grads"] = bf16grad
	// sm_80 only: this executor binds no tensor maps (runtime's
	// TestLayerBackward runs the sm_90a backward).
	for name, l := range layers {
		for _, tg := range []target.Target{target.SM80} {
			for _, T := range []int{0, 1, 64} {
				testBackwardGPU(t, ctx, fmt.Sprintf("%s %v T=%d", name, tg, T), l, tg, T, seed)
			}
		}
	}
}

func testBackwardGPU(t *testing.T, ctx *driver.Context, what string, l schedule.Layer, tg target.Target, T int, seed uint64) {
	p, err := moe.Backward(l)
	if err != nil {
		t.Fatal(err)
	}
	s, err := schedule.DefaultSchedule(l, tg)
	if err != nil {
		t.Fatal(err)
	}
	prog, err := codegen.Lower(p, s, codegen.PerOp)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	text, err := ptx.Compile(prog.Module, tg)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	ex, err := newExecutor(ctx, prog, text)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	w, err := schedule.RandomWeights(l, seed)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range [][][]float32{w.FC1, w.FC2, w.SharedFC1, w.SharedFC2, {w.SharedGate}} {
		for _, v := range m {
			copy(v, bf16Vals(bf16Bits(v))) // the reference sees the weights the GPU does
		}
	}
	x := schedule.RandomInput(T, l.Hidden, seed+1)
	r, err := schedule.GenerateRouting(l, x, seed+2)
	if err != nil {
		t.Fatal(err)
	}
	dy := schedule.RandomInput(T, l.Hidden, seed+3)
	in, err := moe.HostInputs(p, w, x, r, dy)
	if err != nil {
		t.Fatal(err)
	}
	mg0, packed := refMainGrads(l, seed+4)
	d := &dev{t: t, ctx: ctx}
	defer d.free()
	bufs := map[string]driver.DevicePtr{}
	for _, b := range prog.Buffers {
		bytes := int(b.Bytes.Eval(int64(T)))
		if v, ok := in[b.Name]; ok {
			bufs[b.Name] = d.put(hostTo(moe.DType(b.DType), v), bytes)
		} else {
			bufs[b.Name] = d.scratch(b.Name, bytes) // poisoned (the work queue zeroed); main grads are uploaded per run
		}
	}
	// The reference: float64 gradients, main grads accumulated from mg0.
	ref := mg0
	for _, s := range [][][]float32{ref.FC1, ref.FC2, ref.FC1Bias, ref.FC2Bias, ref.SharedFC1, ref.SharedFC2} {
		for i := range s {
			s[i] = append([]float32(nil), s[i]...)
		}
	}
	ref.SharedGate = append([]float32(nil), ref.SharedGate...)
	var g schedule.Grads
	if T > 0 {
		if g, err = schedule.Backward(l, w, bf16Vals(bf16Bits(x)), r, bf16Vals(bf16Bits(dy)), &ref); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string][]float64{}
	for k, v := range packMainGrads(l, ref) {
		want[k] = f64s(v)
	}
	if T > 0 {
		want[moe.BufDX] = g.DX
		if l.Routing == schedule.RoutingMap {
			want[moe.BufDProbs] = g.DProbs
		} else {
			want[moe.BufDW] = g.DWeights
		}
	}
	var first map[string]any
	for run := 0; run < 2; run++ {
		for k, v := range packed {
			dt := moe.F32
			if l.MainGrad == schedule.GradBF16 {
				dt = moe.BF16
			}
			if err := ctx.CopyToDevice(bufs[k], hostTo(dt, f64s(v))); err != nil {
				t.Fatal(err)
			}
		}
		if err := ex.run(T, bufs); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		got := map[string]any{}
		for k, v := range want {
			b := prog.Buffer(k)
			host := hostTo(moe.DType(b.DType), make([]float64, len(v)))
			if err := ctx.CopyFromDevice(host, bufs[k]); err != nil {
				t.Fatal(err)
			}
			got[k] = host
			if run == 0 {
				var start []float64 // main grads: compare the increments
				if m, ok := packed[k]; ok {
					start = f64s(m)
				}
				checkGrad(t, what+" "+k, hostFrom(host), v, start)
			} else if !sameBits(host, first[k]) {
				t.Errorf("%s: %s differs between two runs from the same main grads", what, k)
			}
		}
		first = got
	}
}

// checkGrad compares a gradient (or a main grad, whose increment over
// start is compared) with the reference: relative L2 of the increment at
// most 1e-2 and no NaN (poison left unwritten).
func checkGrad(t *testing.T, what string, got, want, start []float64) {
	t.Helper()
	var num, den float64
	for i, v := range want {
		g := got[i]
		if math.IsNaN(g) {
			t.Errorf("%s[%d] is NaN (unwritten?), want %v", what, i, v)
			return
		}
		if start != nil {
			g, v = g-start[i], v-start[i]
		}
		num += (g - v) * (g - v)
		den += v * v
	}
	rel := math.Sqrt(num / math.Max(den, 1e-300))
	if rel > 1e-2 {
		t.Errorf("%s: rel L2 %.3g (over %d values)", what, rel, len(want))
		return
	}
	t.Logf("%s: rel L2 %.3g", what, rel)
}

// sameBits reports whether two host slices from hostTo hold the same bits.
func sameBits(a, b any) bool {
	switch a := a.(type) {
	case []uint16:
		return slices.Equal(a, b.([]uint16))
	case []float32:
		b := b.([]float32)
		for i := range a {
			if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
				return false
			}
		}
		return len(a) == len(b)
	}
	return false
}
