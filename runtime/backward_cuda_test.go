//go:build cuda

package runtime_test

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
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
// router weight on the input; and each of them again with per-expert
// weight storage (weights and routed main grads one allocation per expert
// behind pointer tables), fp32 and bf16 main grads among them.
func backwardCases(t *testing.T) map[string]schedule.Layer {
	out := groupedBackwardCases(t)
	for name, l := range groupedBackwardCases(t) {
		l.Storage = schedule.PerExpertWeights
		l.Name += "-per-expert"
		out[name+"-per-expert"] = l
	}
	return out
}

// groupedBackwardCases are backwardCases' layers with grouped storage.
func groupedBackwardCases(t *testing.T) map[string]schedule.Layer {
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

// TestLayerBackward runs Layer.Backward as a training step would (one
// Layer and one set of weights per layer and target for every T, the
// Forward first, three steps on the same inputs, the third a replay of
// Layer.CaptureBackward's CUDA graph, outputs poisoned before each, main
// grads from AllocMainGrads accumulating from random fp32 values, or from
// 0 for bf16) on every target the device runs, T = 64, 1, 0, for grouped
// and per-expert weight storage, and checks against schedule.Backward: dx
// and the routing-weight gradient after each step (relative L2 at most
// 1e-2, every element written, the same bits every step; the
// routing-weight gradient against moe.Interpret too, checkRoutingGrad),
// the main grads' increments over the three steps (relative L2 at most
// 1e-2), the main grads of every expert without routes bit for bit as they
// started, and the pointer tables unchanged.
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
			t.Run(fmt.Sprintf("%s/%v", name, tg), func(t *testing.T) {
				// One set of weights and one Layer for every T, as a
				// training run keeps them (and building them, not the
				// steps, is most of the test's time).
				// The largest T first: steps 1 and 2 replay captured
				// graphs, which fix the workspace of the T they
				// captured (Layer.CaptureBackward).
				ls := newBackwardSetup(t, ctx, l, tg)
				for _, T := range []int{64, 1, 0} {
					t.Run(fmt.Sprintf("T=%d", T), func(t *testing.T) { testLayerBackward(t, ctx, stream, ls, T) })
				}
			})
		}
	}
}

// backwardSetup is what TestLayerBackward's runs of one layer and target
// share: the weights (bf16 values) on the host and the device, and the
// Layer.
type backwardSetup struct {
	l    schedule.Layer
	seed uint64
	w    schedule.Weights
	dwts *runtime.DeviceTensors
	ly   *runtime.Layer
}

// newBackwardSetup generates l's weights from a fresh seed (logged),
// rounds them to bf16 so that the reference sees the GPU's weights,
// uploads them and builds l's Layer for tg; t's cleanup frees them.
func newBackwardSetup(t *testing.T, ctx *driver.Context, l schedule.Layer, tg target.Target) backwardSetup {
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
	t.Cleanup(func() { dwts.Free() })
	return backwardSetup{l: l, seed: seed, w: w, dwts: dwts, ly: newLayer(t, ctx, l, tg)}
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

func testLayerBackward(t *testing.T, ctx *driver.Context, stream *driver.Stream, ls backwardSetup, T int) {
	l, w, dwts, ly := ls.l, ls.w, ls.dwts, ls.ly
	seed := ls.seed + uint64(T)<<32 // inputs of their own per T
	c := newCase(t, ctx, l, w, T, seed+1)
	x := runtime.FromBF16(runtime.ToBF16(c.x))
	dy := runtime.FromBF16(runtime.ToBF16(schedule.RandomInput(T, l.Hidden, seed+2)))
	b := runtime.Bindings{}
	dwts.SetIn(b)
	c.in.SetIn(b)
	if err := ly.Forward(stream, b); err != nil { // a training step runs the forward first
		t.Fatal(err)
	}
	delete(b, moe.BufY)
	b[moe.BufDY] = put(t, ctx, runtime.ToBF16(dy), moe.BF16, T, l.Hidden)
	bw := bindBackward(t, ctx, ly, l, b, T, seed)
	mgs, start, parts, outputs := bw.mgs, bw.start, bw.parts, bw.outputs
	tables := map[string][]uint64{}
	for name := range mgs.Experts {
		tables[name] = readTable(t, ctx, b[name])
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
		if step < 2 {
			if err := ly.Backward(stream, b); err != nil {
				t.Fatalf("step %d: Backward: %v", step, err)
			}
		} else {
			// The last step replays a captured backward: the same bits as
			// Backward, the main grads accumulating once more.
			g, err := ly.CaptureBackward(stream, b)
			if err != nil {
				t.Fatalf("step %d: CaptureBackward: %v", step, err)
			}
			defer g.Destroy()
			if err := g.Launch(stream); err != nil {
				t.Fatalf("step %d: replay: %v", step, err)
			}
		}
		if err := ly.CheckErrors(stream); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if T > 0 {
			var err error
			if ref, err = schedule.Backward(l, w, x, c.r, dy, &mg); err != nil {
				t.Fatal(err)
			}
		}
		dx := download(t, ctx, b[moe.BufDX])
		if step == 0 {
			firstDX = dx
			if T > 0 {
				check(t, "dx", dx, ref.DX, nil)
				name, want := moe.BufDW, ref.DWeights
				if l.Routing == schedule.RoutingMap {
					name, want = moe.BufDProbs, ref.DProbs
				}
				checkRoutingGrad(t, l, name, download(t, ctx, b[name]), want, programGrad(t, l, w, x, c.r, dy, name))

			}
		} else if !slices.Equal(dx, firstDX) {
			t.Errorf("step %d: dx differs from step 0's (same inputs)", step)
		}
	}
	got := downloadParts(t, ctx, parts)
	for name, want := range moe.MainGradBuffers(l, mg) {
		check(t, name+" after 3 steps", got[name], want, start[name])
	}
	// Experts without routes: their main grads are never touched.
	routes := expertRoutes(t, l, c.r)
	for _, name := range []string{moe.BufFC1Grad, moe.BufFC2Grad, moe.BufFC1BiasGrad, moe.BufFC2BiasGrad} {
		v, ok := got[name]
		if !ok {
			continue
		}
		n := len(v) / l.Experts
		for e, r := range routes {
			if r == 0 && !slices.Equal(v[e*n:(e+1)*n], start[name][e*n:(e+1)*n]) {
				t.Errorf("%s of expert %d (no routes) changed", name, e)
			}
		}
	}
	for name, want := range tables {
		if got := readTable(t, ctx, b[name]); !slices.Equal(got, want) {
			t.Errorf("pointer table %s changed: %#x, was %#x", name, got, want)
		}
	}
}

// backwardBinding is what bindBackward adds to a forward's bindings.
type backwardBinding struct {
	mgs     *runtime.DeviceTensors      // the main grads (AllocMainGrads)
	start   map[string][]float64        // their starting values, grouped layouts (moe.MainGradBuffers)
	parts   map[string][]runtime.Tensor // the device tensors of each main grad (per expert, or one)
	outputs []string                    // the backward's outputs (dx, dw or dprobs, ...)
}

// bindBackward binds, for Layer ly's Backward at T tokens, main grads from
// AllocMainGrads (freed when t ends) started from random fp32 values (seed)
// or, for bf16, from 0, and fresh output tensors; the upstream gradient is
// the caller's.
func bindBackward(t *testing.T, ctx *driver.Context, ly *runtime.Layer, l schedule.Layer, b runtime.Bindings, T int, seed uint64) backwardBinding {
	t.Helper()
	specs, err := ly.BackwardBuffers()
	if err != nil {
		t.Fatal(err)
	}
	mgs, err := runtime.AllocMainGrads(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mgs.Free() })
	mgs.SetIn(b)
	bw := backwardBinding{mgs: mgs, start: map[string][]float64{}, parts: mainGradParts(t, l, specs, mgs)}
	for i, name := range sortedKeys(bw.parts) {
		n := 0
		for _, p := range bw.parts[name] {
			n += p.Len()
		}
		v := make([]float64, n)
		if l.MainGrad == schedule.GradFP32 {
			for j, r := range schedule.RandomInput(1, n, seed+uint64(i)+3) {
				v[j] = float64(r)
			}
		}
		bw.start[name] = v
		upload(t, ctx, bw.parts[name], v)
	}
	for _, s := range specs {
		if s.Kind == launch.BufOutput {
			b[s.Name] = put(t, ctx, nil, s.DType, s.ShapeAt(T)...)
			bw.outputs = append(bw.outputs, s.Name)
		}
	}
	return bw
}

// downloadParts reads each main grad's device tensors (per expert, or
// one) as one float64 slice, in the grouped layout of moe.MainGradBuffers.
func downloadParts(t *testing.T, ctx *driver.Context, parts map[string][]runtime.Tensor) map[string][]float64 {
	t.Helper()
	out := map[string][]float64{}
	for name, ps := range parts {
		for _, p := range ps {
			out[name] = append(out[name], download(t, ctx, p)...)
		}
	}
	return out
}

// mainGradParts maps each main grad of l, by its name in the grouped
// layouts (moe.MainGradBuffers: fc1_grad, ..., shared_gate_grad), to the
// tensors of mgs (AllocMainGrads) that hold it, in order: the grouped
// tensor, or each expert's allocation behind a pointer table. It checks
// that mgs holds every main grad Backward binds (specs), as specs say.
func mainGradParts(t *testing.T, l schedule.Layer, specs []runtime.BufferSpec, mgs *runtime.DeviceTensors) map[string][]runtime.Tensor {
	t.Helper()
	grouped := map[string]string{moe.BufFC1GradTable: moe.BufFC1Grad, moe.BufFC2GradTable: moe.BufFC2Grad}
	out := map[string][]runtime.Tensor{}
	n := 0
	for _, s := range specs {
		if s.Kind != launch.BufInOut {
			continue
		}
		n++
		tn := mgs.Tensors[s.Name]
		if tn.DType != s.DType || !slices.Equal(tn.Shape, s.ShapeAt(0)) {
			t.Fatalf("AllocMainGrads: %s is %s %v, Backward binds %s %v", s.Name, tn.DType, tn.Shape, s.DType, s.ShapeAt(0))
		}
		if g, ok := grouped[s.Name]; ok {
			es := mgs.Experts[s.Name]
			if l.Storage != schedule.PerExpertWeights || s.DType != moe.U64 || len(es) != l.Experts {
				t.Fatalf("%s: %d per-expert allocations for a %s table of a %v layer", s.Name, len(es), s.DType, l.Storage)
			}
			out[g] = es
			continue
		}
		out[s.Name] = []runtime.Tensor{tn}
	}
	if n != len(mgs.Tensors) || n == 0 {
		t.Fatalf("AllocMainGrads gave %d tensors, Backward binds %d main grads", len(mgs.Tensors), n)
	}
	return out
}

// upload writes v, split in order over the tensors ts (bf16 or f32).
func upload(t *testing.T, ctx *driver.Context, ts []runtime.Tensor, v []float64) {
	t.Helper()
	for _, tn := range ts {
		n := tn.Len()
		if n > 0 {
			if err := ctx.CopyToDevice(tn.Ptr, f32Host(tn.DType, v[:n])); err != nil {
				t.Fatal(err)
			}
		}
		v = v[n:]
	}
}

// readTable reads a u64 pointer table.
func readTable(t *testing.T, ctx *driver.Context, tn runtime.Tensor) []uint64 {
	t.Helper()
	v := make([]uint64, tn.Len())
	if err := ctx.CopyFromDevice(v, tn.Ptr); err != nil {
		t.Fatal(err)
	}
	return v
}

// expertRoutes counts the routes of each expert in r.
func expertRoutes(t *testing.T, l schedule.Layer, r schedule.Routing) []int {
	t.Helper()
	ids := r.IDs
	if l.Routing == schedule.RoutingMap {
		var err error
		if ids, _, err = schedule.FixedWidth(l, r.Map, r.Probs); err != nil {
			t.Fatal(err)
		}
	}
	n := make([]int, l.Experts)
	for _, id := range ids {
		if id >= 0 && int(id) < l.Experts {
			n[id]++
		}
	}
	return n
}

// sortedKeys lists m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// check fails t when got is not within 1e-2 relative L2 of want (of the
// increments over start when start is set).
// checkRoutingGrad checks the routing-weight gradient got (dw or dprobs)
// against the float64 reference want and against prog, the same gradient
// from moe.Interpret of the backward program. Each value is a dot product
// over H or 2I terms that cancel, taken from bf16 intermediates (the
// dispatched rows, dgu): its error against the reference scales with the
// terms, not with the result. Over many values (at least 16 nonzero ones)
// the relative L2 against the reference stays far below 1e-2; one value of
// T = 1 can be the one whose terms cancel (measured on the H200: 1.5e-2
// for a single top-1 dw of 4.2 from terms of ~50; moe.Interpret, which
// rounds where the kernels do, gives the same value). So the kernels are
// judged against prog (relative L2 at most 1e-3: only the f32 summation
// order differs), and against the reference where there are enough values
// for the relative L2 to measure the program rather than one cancellation.
func checkRoutingGrad(t *testing.T, l schedule.Layer, what string, got, want, prog []float64) {
	t.Helper()
	rel, err := gradRelL2(got, prog, nil)
	switch {
	case err != nil:
		t.Errorf("%s: %v", what, err)
	case rel > 1e-3:
		t.Errorf("%s: rel L2 %.3g against the interpreted program", what, rel)
	}
	nonzero := 0
	for _, v := range want {
		if v != 0 {
			nonzero++
		}
	}
	if nonzero >= 16 {
		check(t, what, got, want, nil)
		return
	}
	r, _ := gradRelL2(got, want, nil)
	t.Logf("%s: rel L2 %.3g against the interpreted program, %.3g against the reference (%d values: not judged there)", what, rel, r, nonzero)
}

// programGrad is buffer name of moe.Interpret of l's backward program (its
// grouped-storage form: the same arithmetic) on the given inputs (bf16
// values), main grads from 0.
func programGrad(t *testing.T, l schedule.Layer, w schedule.Weights, x []float32, r schedule.Routing, dy []float32, name string) []float64 {
	t.Helper()
	l.Storage = schedule.GroupedWeights
	p, err := moe.Backward(l)
	if err != nil {
		t.Fatal(err)
	}
	T := len(x) / l.Hidden
	in, err := moe.HostInputs(p, w, x, r, dy)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range p.Buffers {
		if b.Kind == moe.InOut {
			in[b.Name] = make([]float64, b.Len(int64(T)))
		}
	}
	out, err := moe.Interpret(p, T, in)
	if err != nil {
		t.Fatal(err)
	}
	return out[name]
}

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

// TestLayerSaveFC1: a Layer with schedule.Layer.SaveFC1 gives the bits of
// one without, on the same weights and inputs: y of the Forward, and dx,
// the routing-weight gradient and every main grad of the Backward that
// reads the saved FC1 output instead of recomputing it (T = 64, every
// target the device runs, a preset's sizes and gpt-oss's activation with
// biases). A binding of the saved buffer and a Backward of another T than
// the last Forward's are refused; a captured Backward gives the same dx,
// and then a Forward that needs a larger workspace is refused.
func TestLayerSaveFC1(t *testing.T) {
	ctx := gputest.Open(t)
	t.Setenv(runtime.CacheDirEnv, t.TempDir())
	cases := groupedBackwardCases(t)
	const T = 64
	for _, name := range []string{"qwen3-30b-a3b-E16", "gpt-oss-20b-E4"} {
		l := cases[name]
		for _, tg := range gputest.Targets(ctx.Device().ComputeCapability()) {
			t.Run(fmt.Sprintf("%s/%v", name, tg), func(t *testing.T) {
				ls := newBackwardSetup(t, ctx, l, tg)
				saving := l
				saving.SaveFC1 = true
				lySave := newLayer(t, ctx, saving, tg)
				c := newCase(t, ctx, l, ls.w, T, ls.seed+1)
				dy := put(t, ctx, runtime.ToBF16(schedule.RandomInput(T, l.Hidden, ls.seed+2)), moe.BF16, T, l.Hidden)
				// step runs a training step's Forward and Backward with ly and
				// returns y and what the Backward wrote, by name.
				step := func(ly *runtime.Layer, l schedule.Layer) (map[string][]float64, runtime.Bindings) {
					b := runtime.Bindings{}
					ls.dwts.SetIn(b)
					c.in.SetIn(b)
					if err := runtime.Poison(ctx, nil, b[moe.BufY]); err != nil {
						t.Fatal(err)
					}
					if err := ly.Forward(nil, b); err != nil {
						t.Fatal(err)
					}
					out := map[string][]float64{moe.BufY: download(t, ctx, b[moe.BufY])}
					delete(b, moe.BufY)
					b[moe.BufDY] = dy
					bw := bindBackward(t, ctx, ly, l, b, T, ls.seed)
					if err := ly.Backward(nil, b); err != nil {
						t.Fatal(err)
					}
					if err := ly.CheckErrors(nil); err != nil {
						t.Fatal(err)
					}
					for _, o := range bw.outputs {
						out[o] = download(t, ctx, b[o])
					}
					for n, v := range downloadParts(t, ctx, bw.parts) {
						out[n] = v
					}
					return out, b
				}
				want, _ := step(ls.ly, l)
				got, b := step(lySave, saving)
				for _, n := range sortedKeys(want) {
					g, w := got[n], want[n]
					if len(g) != len(w) {
						t.Fatalf("%s: %d values with SaveFC1, %d without", n, len(g), len(w))
					}
					for i := range w {
						if math.Float64bits(g[i]) != math.Float64bits(w[i]) {
							t.Errorf("%s[%d] = %v with SaveFC1, %v recomputing FC1", n, i, g[i], w[i])
							break
						}
					}
				}
				full := maps.Clone(b) // the bindings of the Backward of T tokens
				b[moe.BufFC1Out] = put(t, ctx, nil, moe.F32, T*l.TopK, 2*l.Intermediate)
				if err := lySave.Backward(nil, b); err == nil || !strings.Contains(err.Error(), "saved state") {
					t.Errorf("Backward with fc1_out bound: %v, want a refusal naming the saved state", err)
				}
				delete(b, moe.BufFC1Out)
				// A Backward of fewer tokens than the last Forward: refused.
				small := newCase(t, ctx, l, ls.w, 1, ls.seed+3)
				small.in.SetIn(b)
				delete(b, moe.BufY)
				b[moe.BufDY] = put(t, ctx, nil, moe.BF16, 1, l.Hidden)
				b[moe.BufDX] = put(t, ctx, nil, moe.BF16, 1, l.Hidden)
				b[moe.BufDW] = put(t, ctx, nil, moe.F32, 1, l.TopK)
				if err := lySave.Backward(nil, b); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("last Forward, of T = %d", T)) {
					t.Errorf("Backward of T = 1 after a Forward of T = %d: %v, want a refusal naming that Forward", T, err)
				}
				// A captured Backward replays the saved state: the same dx, and
				// the forward's workspace can no longer grow.
				stream, err := ctx.NewStream()
				if err != nil {
					t.Fatal(err)
				}
				defer stream.Destroy()
				g, err := lySave.CaptureBackward(stream, full)
				if err != nil {
					t.Fatal(err)
				}
				defer g.Destroy()
				if err := runtime.Poison(ctx, stream, full[moe.BufDX]); err != nil {
					t.Fatal(err)
				}
				if err := g.Launch(stream); err != nil {
					t.Fatal(err)
				}
				if err := lySave.CheckErrors(stream); err != nil {
					t.Fatal(err)
				}
				if dx := download(t, ctx, full[moe.BufDX]); !slices.Equal(dx, want[moe.BufDX]) {
					t.Errorf("dx of the captured Backward differs")
				}
				big := newCase(t, ctx, l, ls.w, 4*T, ls.seed+4)
				fb := runtime.Bindings{}
				ls.dwts.SetIn(fb)
				big.in.SetIn(fb)
				if err := lySave.Forward(nil, fb); err == nil || !strings.Contains(err.Error(), "captured graph") {
					t.Errorf("Forward of T = %d after a captured Backward of T = %d: %v, want a refusal (the workspace cannot grow)", 4*T, T, err)
				}
			})
		}
	}
}
