//go:build cuda

package runtime_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/mokc/mokc/driver"
	"github.com/mokc/mokc/internal/gputest"
	"github.com/mokc/mokc/internal/testlayer"
	"github.com/mokc/mokc/moe"
	"github.com/mokc/mokc/runtime"
	"github.com/mokc/mokc/schedule"
	"github.com/mokc/mokc/target"
)

// The GPU tests of runtime.Layer: the full forward of real presets through
// compiler → PTX → Layer against schedule's float64 reference. They skip
// without a device (fail with MOKC_REQUIRE_GPU=1). Build with
// `go test -c -tags cuda ./runtime` (or `make device-bins`) and run on the
// GPU machine from the runtime directory.

// relL2 is the relative L2 error sqrt(sum (y-ref)^2 / sum ref^2) of y (bf16
// bits) over its finite elements (the poison and other NaN/Inf values are
// counted by runtime.PoisonCounts).
func relL2(y []uint16, ref []float64) float64 {
	var num, den float64
	for i, v := range runtime.FromBF16(y) {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			continue
		}
		d := float64(v) - ref[i]
		num += d * d
		den += ref[i] * ref[i]
	}
	return math.Sqrt(num / math.Max(den, 1e-300))
}

// runChecked runs the forward of args three times on stream, poisoning y
// (0xFF bytes, a bf16 NaN) before each run, and checks each run: no device
// fault, the error word as wantErr says (nil: no error; else wantErr must
// accept CheckErrors' error), every element written, no NaN/Inf, the
// relative L2 error against ref at most 1e-2, and bitwise-identical output
// across runs. It returns y of the first run.
func runChecked(t *testing.T, ctx *driver.Context, ly *runtime.Layer, args forwardCall, ref []float64, what string, wantErr func(error) bool) []uint16 {
	t.Helper()
	y0 := args.b[moe.BufY]
	n := y0.Len()
	var first []uint16
	for run := 0; run < 3; run++ {
		if err := runtime.Poison(ctx, args.stream, y0); err != nil {
			t.Fatal(err)
		}
		if err := args.run(ly); err != nil {
			t.Fatalf("%s run %d: Forward: %v", what, run, err)
		}
		err := ly.CheckErrors(args.stream)
		if wantErr == nil && err != nil {
			t.Fatalf("%s run %d: CheckErrors: %v", what, run, err)
		}
		if wantErr != nil && (err == nil || !wantErr(err)) {
			t.Fatalf("%s run %d: CheckErrors = %v, not the expected error", what, run, err)
		}
		y := make([]uint16, n)
		if n > 0 {
			if err := ctx.CopyFromDevice(y, y0.Ptr); err != nil {
				t.Fatal(err)
			}
		}
		unwritten, nonFinite := runtime.PoisonCounts(y)
		if unwritten > 0 || nonFinite > 0 {
			t.Fatalf("%s run %d: %d of %d elements not written, %d NaN/Inf", what, run, unwritten, n, nonFinite)
		}
		if run == 0 {
			rel := relL2(y, ref)
			if n > 0 {
				t.Logf("%s: relative L2 error %.3g", what, rel)
			}
			if !(rel <= 1e-2) && n > 0 {
				t.Fatalf("%s: relative L2 error %.3g > 1e-2", what, rel)
			}
			first = y
			continue
		}
		for i := range y {
			if y[i] != first[i] {
				t.Fatalf("%s run %d: y[%d] = %#04x, first run %#04x: not deterministic", what, run, i, y[i], first[i])
			}
		}
	}
	return first
}

// caseData is one input of a test: x, its routing and the reference.
type caseData struct {
	x   []float32
	r   schedule.Routing
	ref []float64
	in  *runtime.DeviceTensors
}

func newCase(t *testing.T, ctx *driver.Context, l schedule.Layer, w schedule.Weights, T int, seed uint64) caseData {
	t.Helper()
	x := schedule.RandomInput(T, l.Hidden, seed)
	r, err := schedule.GenerateRouting(l, x, seed^0x5851f42d4c957f2d)
	if err != nil {
		t.Fatal(err)
	}
	var ref []float64
	if T > 0 {
		if ref, err = schedule.Forward(l, w, x, r); err != nil {
			t.Fatal(err)
		}
	}
	in, err := runtime.UploadInputs(ctx, l, x, r)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Free() })
	return caseData{x, r, ref, in}
}

// forwardCall is the arguments of one Forward: the bindings, the stream
// and, for ForwardMarked, the marks.
type forwardCall struct {
	b      runtime.Bindings
	stream *driver.Stream
	marks  []*driver.Event // nil: Forward
}

func (c forwardCall) run(ly *runtime.Layer) error {
	if c.marks != nil {
		return ly.ForwardMarked(c.stream, c.b, c.marks)
	}
	return ly.Forward(c.stream, c.b)
}

func argsOf(weights, in *runtime.DeviceTensors, stream *driver.Stream) forwardCall {
	b := runtime.Bindings{}
	weights.SetIn(b)
	in.SetIn(b)
	return forwardCall{b: b, stream: stream}
}

// openLayerTest opens the device (skipping the test without one, or when
// it runs none of the targets), points the compiled-module cache at a
// temporary directory and returns the targets to test and a stream,
// destroyed when t ends.
func openLayerTest(t *testing.T) (*driver.Context, []target.Target, *driver.Stream) {
	t.Helper()
	ctx := gputest.Open(t)
	t.Setenv(runtime.CacheDirEnv, t.TempDir())
	targets := gputest.Targets(ctx.Device().ComputeCapability())
	if len(targets) == 0 {
		t.Skipf("compute capability %d runs none of the targets", ctx.Device().ComputeCapability())
	}
	stream, err := ctx.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stream.Destroy() })
	return ctx, targets, stream
}

func TestLayerForward(t *testing.T) {
	ctx, targets, stream := openLayerTest(t)
	for _, name := range []string{"qwen3-30b-a3b", "gpt-oss-20b", "deepseek-v2-lite"} {
		t.Run(name, func(t *testing.T) {
			l := testlayer.Preset(t, name)
			seed, w, dw := randomWeightsOnDevice(t, ctx, l)
			for _, target := range targets {
				t.Run(target.String(), func(t *testing.T) {
					testLayerTarget(t, ctx, stream, l, w, dw, target, seed)
					if name == "qwen3-30b-a3b" {
						lm := l
						lm.Routing = schedule.RoutingMap
						t.Run("routing-map", func(t *testing.T) {
							testLayerMap(t, ctx, stream, lm, w, dw, target, seed)
						})
					}
				})
			}
		})
	}
}

// randomWeightsOnDevice generates random weights of l from a fresh seed
// (logged) and uploads them; the device copy is freed when the test ends.
func randomWeightsOnDevice(t *testing.T, ctx *driver.Context, l schedule.Layer) (uint64, schedule.Weights, *runtime.DeviceTensors) {
	t.Helper()
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	w, err := schedule.RandomWeights(l, seed)
	if err != nil {
		t.Fatal(err)
	}
	if l.Precision == schedule.MXFP8 {
		for _, m := range [][][]float32{w.FC1, w.FC2} {
			for _, v := range m {
				copy(v, runtime.FromBF16(runtime.ToBF16(v))) // the bf16 weights the upload quantizes
			}
		}
	}
	dw, err := runtime.UploadWeights(ctx, l, w)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dw.Free() })
	if l.Precision == schedule.MXFP8 {
		if w, err = schedule.MXWeights(l, w); err != nil { // the values the kernels compute with
			t.Fatal(err)
		}
	}
	return seed, w, dw
}

// newLayer compiles and loads l with the default schedule of target,
// closed when t ends.
func newLayer(t *testing.T, ctx *driver.Context, l schedule.Layer, target target.Target) *runtime.Layer {
	t.Helper()
	return loadLayer(t, ctx, l, testlayer.DefaultSchedule(t, l, target))
}

// loadLayer compiles and loads l with schedule s, closed when t ends.
func loadLayer(t *testing.T, ctx *driver.Context, l schedule.Layer, s schedule.Schedule) *runtime.Layer {
	t.Helper()
	ly, err := runtime.NewLayer(ctx, l, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ly.Close() })
	return ly
}

// runBadRouting runs the forward of x with the invalid routing bad, which
// the kernels must treat as asIf (the reference), and wants the error word
// wantErr accepts.
func runBadRouting(t *testing.T, ctx *driver.Context, stream *driver.Stream, ly *runtime.Layer, l schedule.Layer, w schedule.Weights,
	dw *runtime.DeviceTensors, x []float32, bad, asIf schedule.Routing, what string, wantErr func(*runtime.RoutingError) bool) {
	t.Helper()
	ref, err := schedule.Forward(l, w, x, asIf)
	if err != nil {
		t.Fatal(err)
	}
	in, err := runtime.UploadInputs(ctx, l, x, bad)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Free()
	runChecked(t, ctx, ly, argsOf(dw, in, stream), ref, what, func(err error) bool {
		var re *runtime.RoutingError
		return errors.As(err, &re) && wantErr(re)
	})
}

func testLayerTarget(t *testing.T, ctx *driver.Context, stream *driver.Stream, l schedule.Layer, w schedule.Weights,
	dw *runtime.DeviceTensors, target target.Target, seed uint64) {
	ly := newLayer(t, ctx, l, target)
	K := l.TopK
	name := l.Name + " " + target.String()
	// T = 1 again after 64: a smaller T in the grown workspace, with new
	// addresses for x and y.
	for i, T := range []int{0, 1, 64, 1} {
		c := newCase(t, ctx, l, w, T, seed+uint64(i+1)*7919)
		runChecked(t, ctx, ly, argsOf(dw, c.in, stream), c.ref, name+" T="+strconv.Itoa(T), nil)
		if T == 64 && ly.WorkspaceBytes() < ly.WorkspaceBytesFor(64) {
			t.Fatalf("workspace %d bytes < %d needed at T = 64", ly.WorkspaceBytes(), ly.WorkspaceBytesFor(64))
		}
	}

	testMarks(t, ctx, stream, ly, l, w, dw, seed, name)

	checkBadIDs(t, ctx, stream, ly, l, w, dw, name, seed)

	// A wrong argument is refused before anything runs.
	const T = 64
	c := newCase(t, ctx, l, w, T, seed^0xbad)
	args := argsOf(dw, c.in, stream)
	ids := args.b[moe.BufIDs]
	ids.Shape = []int{T, K + 1}
	args.b[moe.BufIDs] = ids
	if err := args.run(ly); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("buffer %q: shape", moe.BufIDs)) {
		t.Fatalf("Forward with a wrong ids shape: %v", err)
	}
}

// checkBadIDs runs layer ly with out-of-range expert ids at T = 2048/K + 1
// and 64: CheckErrors reports them and their slots count as -1 (no
// contribution); the next valid forward reports nothing. At T = 64 the
// dispatch is one block (moe_dispatch_small), at 2048/K + 1 the four
// routing kernels (codegen's TestDispatchQueueGPU checks the work-queue
// kernel of larger T, moe_dispatch, against them, out-of-range ids and
// error word included).
func checkBadIDs(t *testing.T, ctx *driver.Context, stream *driver.Stream, ly *runtime.Layer, l schedule.Layer, w schedule.Weights,
	dw *runtime.DeviceTensors, name string, seed uint64) {
	t.Helper()
	K, E := l.TopK, l.Experts
	for _, T := range []int{2048/K + 1, 64} {
		c := newCase(t, ctx, l, w, T, seed^0xbad)
		bad := c.r
		bad.IDs = append([]int32(nil), c.r.IDs...)
		badSlots := []int{3 * K, 7*K + K - 1, 9*K + 1, T*K - 2}
		bad.IDs[badSlots[0]] = int32(E)
		bad.IDs[badSlots[1]] = -5
		bad.IDs[badSlots[2]] = math.MaxInt32
		bad.IDs[badSlots[3]] = int32(E + 1)
		asNone := bad
		asNone.IDs = append([]int32(nil), bad.IDs...)
		for _, i := range badSlots {
			asNone.IDs[i] = -1
		}
		what := fmt.Sprintf("%s T=%d", name, T)
		runBadRouting(t, ctx, stream, ly, l, w, dw, c.x, bad, asNone, what+" ids out of range", func(re *runtime.RoutingError) bool {
			return re.BadExpertID() && !re.TooManyRoutes() && strings.Contains(re.Error(), "expert id out of range")
		})
		runChecked(t, ctx, ly, argsOf(dw, c.in, stream), c.ref, what+" valid after invalid", nil)
	}
}

// testLayerMap runs the dense-routing form at T = 64: a valid map, then a
// map with a row of K+1 routes (reported; the first K in expert order kept).
func testLayerMap(t *testing.T, ctx *driver.Context, stream *driver.Stream, l schedule.Layer, w schedule.Weights,
	dw *runtime.DeviceTensors, target target.Target, seed uint64) {
	ly := newLayer(t, ctx, l, target)
	const T = 64
	E, K := l.Experts, l.TopK
	name := l.Name + " " + target.String() + " map"
	c := newCase(t, ctx, l, w, T, seed^0x3a9)
	runChecked(t, ctx, ly, argsOf(dw, c.in, stream), c.ref, name, nil)

	bad := schedule.Routing{Map: append([]bool(nil), c.r.Map...), Probs: append([]float32(nil), c.r.Probs...)}
	const row = 5
	for e := 0; e <= K; e++ {
		if !bad.Map[row*E+e] {
			bad.Map[row*E+e] = true
			bad.Probs[row*E+e] = 0.05 * float32(e+1)
		}
	}
	kept := schedule.Routing{Map: append([]bool(nil), bad.Map...), Probs: bad.Probs}
	n := 0
	for e := 0; e < E; e++ {
		if kept.Map[row*E+e] {
			n++
			if n > K {
				kept.Map[row*E+e] = false
			}
		}
	}
	runBadRouting(t, ctx, stream, ly, l, w, dw, c.x, bad, kept, name+" too many routes", func(re *runtime.RoutingError) bool {
		return re.TooManyRoutes() && !re.BadExpertID()
	})
}

// TestLayerTargetMismatch checks that a target the device cannot run is
// refused by NewLayer with Target.RunsOn's error, before compiling.
func TestLayerTargetMismatch(t *testing.T) {
	ctx := gputest.Open(t)
	cc := ctx.Device().ComputeCapability()
	l := testlayer.Preset(t, "qwen3-30b-a3b")
	for _, target := range target.All() {
		if target.RunsOn(cc) == nil {
			continue
		}
		s := testlayer.DefaultSchedule(t, l, target)
		_, err := runtime.NewLayer(ctx, l, s)
		if err == nil || !strings.Contains(err.Error(), "compute capability") {
			t.Fatalf("%s on compute capability %d: %v", target, cc, err)
		}
	}
}

// testMarks times each kernel with ForwardMarked: a wrong number of
// events is refused before any launch; with the right number the output is
// unchanged (checked, poisoned, repeated) and the kernels' times are
// non-negative and add up to the whole forward.
func testMarks(t *testing.T, ctx *driver.Context, stream *driver.Stream, ly *runtime.Layer, l schedule.Layer,
	w schedule.Weights, dw *runtime.DeviceTensors, seed uint64, name string) {
	t.Helper()
	c := newCase(t, ctx, l, w, 64, seed+99)
	a := argsOf(dw, c.in, stream)
	names := ly.Kernels()
	marks := make([]*driver.Event, len(names)+1)
	for i := range marks {
		e, err := ctx.NewEvent()
		if err != nil {
			t.Fatal(err)
		}
		defer e.Destroy()
		marks[i] = e
	}
	a.marks = marks[:len(names)]
	if err := a.run(ly); err == nil || !strings.Contains(err.Error(), "marks, want") {
		t.Fatalf("%s: Forward with %d marks for %d kernels: %v", name, len(names), len(names), err)
	}
	a.marks = marks
	runChecked(t, ctx, ly, a, c.ref, name+" T=64 with marks", nil)
	var sum float64
	var parts []string
	for i, k := range names {
		ms, err := driver.ElapsedMs(marks[i], marks[i+1])
		if err != nil || ms < 0 {
			t.Fatalf("%s: kernel %s: %v ms, %v", name, k, ms, err)
		}
		sum += float64(ms)
		parts = append(parts, fmt.Sprintf("%s %.3f", k, ms))
	}
	whole, err := driver.ElapsedMs(marks[0], marks[len(names)])
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s T=64 per kernel (ms): %s; whole %.3f", name, strings.Join(parts, ", "), whole)
	if math.Abs(sum-float64(whole)) > 0.01 {
		t.Errorf("%s: kernel times add up to %.4f ms, the forward took %.4f ms", name, sum, whole)
	}
}
