//go:build cuda

package codegen_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mokc/mokc/codegen"
	"github.com/mokc/mokc/driver"
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
	return map[string]schedule.Layer{"swiglu": base, "gpt-oss": gptoss, "shared-gate-map": shared, "weight-on-input": llama}
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
	case moe.U8:
		f := make([]uint8, len(v))
		for i, x := range v {
			f[i] = uint8(x)
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

// TestBackwardRowOpsGPU runs each row-wise op of the backward on its own on
// the GPU (moe.Program.Isolate, lowered with PerOp, mokc's PTX for sm_80 and
// sm_90a) on the inputs the host interpretation of the whole backward gave
// it (fresh random layer data), with poisoned outputs, and compares every
// element the interpretation writes: relative L2 at most 1e-2 per buffer,
// no element left unwritten (NaN poison) and none written that should not
// be.
func TestBackwardRowOpsGPU(t *testing.T) {
	ctx := openGPU(t)
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	for name, l := range backwardLayers() {
		T := 37
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
		for _, b := range p.Buffers {
			if b.Kind == moe.InOut {
				in[b.Name] = make([]float64, b.Bytes().Eval(0)/b.DType.Size())
			}
		}
		host, err := moe.Interpret(p, T, in)
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range codegen.BackwardRowOps {
			q, err := p.Isolate(op)
			if err != nil {
				continue
			}
			for _, tg := range []target.Target{target.SM80, target.SM90a} {
				checkOpGPU(t, ctx, name+" "+op+" "+tg.String(), q, tg, T, host)
			}
		}
	}
}

// checkOpGPU runs the one-op program q for T tokens and compares its
// outputs with host.
func checkOpGPU(t *testing.T, c *driver.Context, what string, q *moe.Program, tg target.Target, T int, host map[string][]float64) {
	t.Helper()
	s, err := schedule.DefaultSchedule(q.Layer, tg)
	if err != nil {
		t.Fatal(err)
	}
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
		case moe.Input, moe.InOut:
			bufs[b.Name] = d.put(hostTo(b.DType, host[b.Name]), bytes)
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
