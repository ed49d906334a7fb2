//go:build cuda

package runtime_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mokc/mokc/driver"
	"github.com/mokc/mokc/internal/testlayer"
	"github.com/mokc/mokc/moe"
	"github.com/mokc/mokc/runtime"
	"github.com/mokc/mokc/schedule"
	"github.com/mokc/mokc/target"
)

// mxRows are the rows per expert of TestLayerMXFP8Rows: one row, a tile
// less one, a whole tile, a tile and one, none, two tiles less one, half a
// tile, three rows (tiles of 128 rows).
var mxRows = []int{1, 127, 128, 129, 0, 255, 64, 3}

// TestLayerMXFP8Rows runs an mxfp8 layer of gpt-oss's shape (H = I = 2880:
// not a multiple of 128, 90 scales per row; clamped activation, biases,
// gate and up interleaved) with top-1 routing that gives the experts
// mxRows rows, on sm_90a: the forward three times (rel L2 at most 1e-2
// against the float64 reference of the quantized values, bitwise equal
// runs), then the backward three times from the same inputs: dx and the
// routing-weight gradient (rel L2 at most 1e-2, cosine at least 0.996,
// bitwise equal runs), the main-grad increments after the three steps
// (the same bounds), and the main grads of the expert without rows bit for
// bit as they started. Three schedules: the default (128-row tiles at
// these rows), and the operand swap's 32-row tiles forced for every T (a
// TileVariant over all mean rows) with the gate and up rows interleaved
// and in halves.
func TestLayerMXFP8Rows(t *testing.T) {
	ctx, targets, stream := openLayerTest(t)
	if !slices.Contains(targets, target.SM90a) {
		t.Skip("mxfp8 runs on sm_90a only")
	}
	l := schedule.Layer{Name: "mxfp8-rows", Hidden: 2880, Intermediate: 2880, Experts: len(mxRows), TopK: 1,
		Activation: schedule.GPTOSS, SwiGLULimit: 7, GPTOSSAlpha: 1.702, GateUpInterleaved: true, Biases: true,
		Precision: schedule.MXFP8, Router: schedule.Router{Score: schedule.ScoreSoftmax}}
	halves := l
	halves.GateUpInterleaved = false
	swap := func(l schedule.Layer) schedule.Schedule {
		s := testlayer.DefaultSchedule(t, l, target.SM90a)
		s.Variant = &schedule.TileVariant{Name: "swap", FC1: schedule.Tile{M: 32, N: 128, K: 128}, FC2: schedule.Tile{M: 32, N: 128, K: 128},
			Stages: 8, MMAWarps: 4, MinRows: 0, MaxRows: 1 << 20, MXOnly: true}
		if err := s.Validate(l); err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, c := range []struct {
		name string
		l    schedule.Layer
		s    schedule.Schedule
	}{
		{"default", l, testlayer.DefaultSchedule(t, l, target.SM90a)},
		{"swap-interleaved", l, swap(l)},
		{"swap-halves", halves, swap(halves)},
	} {
		t.Run(c.name, func(t *testing.T) { mxRowsLayer(t, ctx, stream, c.l, c.s) })
	}
}

// mxRowsLayer is TestLayerMXFP8Rows's run of layer l with schedule s.
func mxRowsLayer(t *testing.T, ctx *driver.Context, stream *driver.Stream, l schedule.Layer, s schedule.Schedule) {
	H := l.Hidden
	seed, wq, dwts := randomWeightsOnDevice(t, ctx, l) // wq: the values the kernels compute with

	// Routing: expert e on mxRows[e] tokens, in a shuffled token order.
	var ids []int32
	for e, n := range mxRows {
		for range n {
			ids = append(ids, int32(e))
		}
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	T := len(ids)
	r := schedule.Routing{IDs: ids, Weights: make([]float32, T)}
	for i := range r.Weights {
		r.Weights[i] = float32(0.25 + 0.75*rng.Float64())
	}
	x := runtime.FromBF16(runtime.ToBF16(schedule.RandomInput(T, H, seed+1)))
	dy := runtime.FromBF16(runtime.ToBF16(schedule.RandomInput(T, H, seed+2)))

	ly, err := runtime.NewLayer(ctx, l, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ly.Close() })
	in, err := runtime.UploadInputs(ctx, l, x, r)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Free() })
	yRef, err := schedule.Forward(l, wq, x, r)
	if err != nil {
		t.Fatal(err)
	}
	args := argsOf(dwts, in, stream)
	runChecked(t, ctx, ly, args, yRef, "mxfp8 forward", nil)

	// The backward: main grads from random fp32 values.
	b := args.b
	delete(b, moe.BufY)
	b[moe.BufDY] = put(t, ctx, runtime.ToBF16(dy), moe.BF16, T, H)
	bw := bindBackward(t, ctx, ly, l, b, T, seed)
	start, parts, outputs := bw.start, bw.parts, bw.outputs
	mg := moe.MainGradsOf(l, start)
	var first map[string][]float64
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
		ref, err := schedule.Backward(l, wq, x, r, dy, &mg)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string][]float64{moe.BufDX: download(t, ctx, b[moe.BufDX]), moe.BufDW: download(t, ctx, b[moe.BufDW])}
		if step == 0 {
			checkMX(t, "dx", got[moe.BufDX], ref.DX, nil)
			checkMX(t, "dw", got[moe.BufDW], ref.DWeights, nil)
			first = got
			continue
		}
		for name, v := range got {
			if !slices.Equal(v, first[name]) {
				t.Errorf("step %d: %s differs from step 0's (same inputs)", step, name)
			}
		}
	}
	final := downloadParts(t, ctx, parts)
	for name, want := range moe.MainGradBuffers(l, mg) {
		checkMX(t, name+" after 3 steps", final[name], want, start[name])
	}
	// Expert 4 has no rows: its main grads are never touched.
	empty := slices.Index(mxRows, 0)
	for _, name := range []string{moe.BufFC1Grad, moe.BufFC2Grad, moe.BufFC1BiasGrad, moe.BufFC2BiasGrad} {
		v := final[name]
		per := len(v) / l.Experts
		if !slices.Equal(v[empty*per:(empty+1)*per], start[name][empty*per:(empty+1)*per]) {
			t.Errorf("%s of expert %d (no rows) changed", name, empty)
		}
	}
}

// checkMX checks got against want (start subtracted from both when not
// nil): relative L2 at most 1e-2 and cosine at least 0.996 (the MXFP8
// gradient bound), every element written.
func checkMX(t *testing.T, what string, got, want, start []float64) {
	t.Helper()
	rel, err := gradRelL2(got, want, start)
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	var dot, ng, nw float64
	for i := range want {
		g, v := got[i], want[i]
		if start != nil {
			g, v = g-start[i], v-start[i]
		}
		dot, ng, nw = dot+g*v, ng+g*g, nw+v*v
	}
	cos := dot / math.Sqrt(math.Max(ng*nw, 1e-300))
	if rel > 1e-2 || cos < 0.996 {
		t.Errorf("%s: rel L2 %.3g, cosine %.6f", what, rel, cos)
		return
	}
	t.Logf("%s: rel L2 %.3g, cosine %.6f", what, rel, cos)
}
