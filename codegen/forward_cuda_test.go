//go:build cuda

package codegen_test

import (
	"embed"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mokc/mokc/codegen"
	"github.com/mokc/mokc/driver"
	"github.com/mokc/mokc/launch"
	"github.com/mokc/mokc/ptx"
	"github.com/mokc/mokc/schedule"
	"github.com/mokc/mokc/target"
)

//go:embed testdata/forward/*.llc.ptx
var forwardPTX embed.FS

// ourPTX compiles a program's module with mokc's own backend (package ptx).
var ourPTX = func(p *codegen.Program) (string, error) { return ptx.Compile(p.Module, target.SM80) }

// executor runs a Program on the GPU: the small host-side loop that
// runtime.Layer provides (see Program's doc), written against package
// driver alone.
type executor struct {
	ctx   *driver.Context
	mod   *driver.Module
	p     *codegen.Program
	funcs map[string]*driver.Function
}

func newExecutor(ctx *driver.Context, p *codegen.Program, ptx string) (*executor, error) {
	mod, err := ctx.LoadModule(ptx)
	if err != nil {
		return nil, err
	}
	ex := &executor{ctx: ctx, mod: mod, p: p, funcs: map[string]*driver.Function{}}
	for _, k := range p.Kernels {
		f, err := mod.Function(k.Name)
		if err != nil {
			return nil, err
		}
		if k.SharedBytes > 48*1024 {
			if err := f.SetMaxDynamicSharedBytes(k.SharedBytes); err != nil {
				return nil, fmt.Errorf("%s: %w", k.Name, err)
			}
		}
		ex.funcs[k.Name] = f
	}
	return ex, nil
}

// run launches the kernels that run for T tokens (Kernel.RunsAt) with the
// given buffers (every buffer of the program must be present) and waits
// for the device.
func (ex *executor) run(T int, bufs map[string]driver.DevicePtr) error {
	for _, k := range ex.p.Kernels {
		if !k.RunsAt(int64(T)) {
			continue
		}
		args := driver.NewArgs()
		for _, prm := range k.Params {
			switch prm.Type {
			case codegen.ParamPtr:
				d, ok := bufs[prm.Buffer]
				if !ok {
					return fmt.Errorf("%s: no buffer %q", k.Name, prm.Buffer)
				}
				args.Ptr(d)
			case codegen.ParamI32:
				args.I32(int32(prm.Value.Eval(int64(T))))
			default:
				return fmt.Errorf("%s: parameter %s of type %s", k.Name, prm.Name, prm.Type)
			}
		}
		grid := driver.Dim3{X: int(k.Grid[0].Eval(int64(T))), Y: int(k.Grid[1].Eval(int64(T))), Z: int(k.Grid[2].Eval(int64(T)))}
		if err := ex.funcs[k.Name].Launch(grid, driver.Dim3{X: k.Block, Y: 1, Z: 1}, k.SharedBytes, nil, args); err != nil {
			return fmt.Errorf("%s: %w", k.Name, err)
		}
	}
	return ex.ctx.Synchronize()
}

func openGPU(t *testing.T) *driver.Context {
	t.Helper()
	ctx, err := driver.Open(0)
	if err != nil {
		if errors.Is(err, driver.ErrNoDevice) || errors.Is(err, driver.ErrNoCUDA) {
			t.Skipf("no GPU: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { ctx.Close() })
	return ctx
}

func bf16Bits(v []float32) []uint16 {
	out := make([]uint16, len(v))
	for i, x := range v {
		out[i] = uint16(math.Float32bits(schedule.RoundBF16(x)) >> 16)
	}
	return out
}

func bf16Vals(b []uint16) []float32 {
	out := make([]float32, len(b))
	for i, x := range b {
		out[i] = math.Float32frombits(uint32(x) << 16)
	}
	return out
}

// device helpers that fail the test.
type dev struct {
	t     *testing.T
	ctx   *driver.Context
	alloc []driver.DevicePtr
}

func (d *dev) put(v any, bytes int) driver.DevicePtr {
	d.t.Helper()
	if bytes == 0 {
		bytes = 16
	}
	p, err := d.ctx.Alloc(bytes)
	if err != nil {
		d.t.Fatal(err)
	}
	d.alloc = append(d.alloc, p)
	if v != nil {
		if err := d.ctx.CopyToDevice(p, v); err != nil {
			d.t.Fatal(err)
		}
	} else if err := d.ctx.Memset(p, 0xFF, bytes); err != nil { // poison
		d.t.Fatal(err)
	}
	return p
}

// scratch allocates the program's buffer name of bytes bytes: the work
// queues zeroed (launch.BufWorkQueue), any other one poisoned (put).
func (d *dev) scratch(name string, bytes int) driver.DevicePtr {
	d.t.Helper()
	if name == launch.BufWorkQueue {
		return d.put(make([]byte, max(bytes, 16)), bytes)
	}
	return d.put(nil, bytes)
}

func (d *dev) free() {
	for _, p := range d.alloc {
		d.ctx.Free(p)
	}
	d.alloc = nil
}

func concat(xs [][]float32) []float32 {
	var out []float32
	for _, x := range xs {
		out = append(out, x...)
	}
	return out
}

// sharedPacked stacks S shared experts' FC1 [2I_s, H] as one [2*S*I_s, H]
// matrix: all gate rows (expert by expert), then all up rows.
func sharedPacked(l schedule.Layer, w schedule.Weights) []float32 {
	H, Is := l.Hidden, l.SharedIntermediate
	var gate, up []float32
	for _, m := range w.SharedFC1 {
		gate = append(gate, m[:Is*H]...)
		up = append(up, m[Is*H:]...)
	}
	return append(gate, up...)
}

// sharedFC2Packed concatenates S shared FC2 [H, I_s] along I: [H, S*I_s].
func sharedFC2Packed(l schedule.Layer, w schedule.Weights) []float32 {
	H, Is, S := l.Hidden, l.SharedIntermediate, l.SharedExperts
	out := make([]float32, 0, H*S*Is)
	for h := 0; h < H; h++ {
		for s := 0; s < S; s++ {
			out = append(out, w.SharedFC2[s][h*Is:(h+1)*Is]...)
		}
	}
	return out
}

func TestForwardSM80(t *testing.T) {
	ctx := openGPU(t)
	if cc := ctx.Device().ComputeCapability(); cc < 80 {
		t.Skipf("compute capability %d < 80", cc)
	}
	for _, c := range codegen.ForwardCases(t) {
		t.Run(c.Name, func(t *testing.T) { testForward(t, ctx, c) })
	}
}

func testForward(t *testing.T, ctx *driver.Context, c codegen.ForwardCase) {
	l := c.Layer
	p := codegen.BuildForwardCase(t, c)
	vs := forwardVariants(t, ctx, c, p)
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	w, err := schedule.RandomWeights(l, seed)
	if err != nil {
		t.Fatal(err)
	}
	d := &dev{t: t, ctx: ctx}
	defer d.free()
	weights := uploadWeights(d, l, w)
	for _, T := range []int{0, 1, 64, 257} {
		x := schedule.RandomInput(T, l.Hidden, seed+uint64(T))
		r, err := schedule.GenerateRouting(l, x, seed^uint64(T))
		if err != nil {
			t.Fatal(err)
		}
		var ref []float64
		if T > 0 {
			ref, err = schedule.Forward(l, w, x, r)
			if err != nil {
				t.Fatal(err)
			}
		}
		bufs := forwardBuffers(t, d, p, l, weights, T, x, r)
		runVariants(t, ctx, vs, T, l.Hidden, bufs, ref)
		if T == 64 {
			testBadRoutes(t, ctx, d, vs[0].ex, l, T, bufs, r)
		}
	}
}

// forwardVariant is one PTX of the forward: llc-19's or mokc's.
type forwardVariant struct {
	name string
	ex   *executor
}

// forwardVariants loads llc-19's PTX of case c (testdata) and, when the
// backend is wired in, mokc's PTX of p.
func forwardVariants(t *testing.T, ctx *driver.Context, c codegen.ForwardCase, p *codegen.Program) []forwardVariant {
	llc, err := forwardPTX.ReadFile("testdata/forward/" + c.Name + ".llc.ptx")
	if err != nil {
		t.Fatal(err)
	}
	ex, err := newExecutor(ctx, p, string(llc))
	if err != nil {
		t.Fatalf("llc PTX: %v", err)
	}
	vs := []forwardVariant{{"llc", ex}}
	if ourPTX != nil {
		ptx, err := ourPTX(p)
		if err != nil {
			t.Fatalf("ptx.Compile: %v", err)
		}
		ex, err := newExecutor(ctx, p, ptx)
		if err != nil {
			t.Fatalf("our PTX: %v", err)
		}
		vs = append(vs, forwardVariant{"ours", ex})
	}
	return vs
}

// uploadWeights puts the layer's weights (grouped or per-expert tables,
// biases, shared experts) on the device, by buffer name.
func uploadWeights(d *dev, l schedule.Layer, w schedule.Weights) map[string]driver.DevicePtr {
	H, I, E := l.Hidden, l.Intermediate, l.Experts
	weights := map[string]driver.DevicePtr{}
	if l.Storage == schedule.PerExpertWeights {
		t1, t2 := make([]uint64, E), make([]uint64, E)
		for e := 0; e < E; e++ {
			t1[e] = uint64(d.put(bf16Bits(w.FC1[e]), 2*2*I*H))
			t2[e] = uint64(d.put(bf16Bits(w.FC2[e]), 2*H*I))
		}
		weights["fc1_table"] = d.put(t1, 8*E)
		weights["fc2_table"] = d.put(t2, 8*E)
	} else {
		weights["fc1"] = d.put(bf16Bits(concat(w.FC1)), 2*E*2*I*H)
		weights["fc2"] = d.put(bf16Bits(concat(w.FC2)), 2*E*H*I)
	}
	if l.Biases {
		weights["fc1_bias"] = d.put(concat(w.FC1Bias), 4*E*2*I)
		weights["fc2_bias"] = d.put(concat(w.FC2Bias), 4*E*H)
	}
	if l.SharedExperts > 0 {
		weights["shared_fc1"] = d.put(bf16Bits(sharedPacked(l, w)), 2*2*l.SharedWidth()*H)
		weights["shared_fc2"] = d.put(bf16Bits(sharedFC2Packed(l, w)), 2*l.SharedWidth()*H)
		if l.SharedGate {
			weights["shared_gate"] = d.put(bf16Bits(w.SharedGate), 2*H)
		}
	}
	return weights
}

// forwardBuffers binds every buffer of p for T tokens: the weights, x and
// the routing in the layer's form, and fresh allocations for the rest.
func forwardBuffers(t *testing.T, d *dev, p *codegen.Program, l schedule.Layer, weights map[string]driver.DevicePtr,
	T int, x []float32, r schedule.Routing) map[string]driver.DevicePtr {
	H, E, K := l.Hidden, l.Experts, l.TopK
	bufs := map[string]driver.DevicePtr{}
	for k, v := range weights {
		bufs[k] = v
	}
	bufs["x"] = d.put(bf16Bits(x), 2*T*H)
	if l.Routing == schedule.RoutingMap {
		m := make([]uint8, T*E)
		for i, b := range r.Map {
			if b {
				m[i] = 1
			}
		}
		bufs["routing_map"] = d.put(m, T*E)
		bufs["probs"] = d.put(r.Probs, 4*T*E)
	} else {
		bufs["ids"] = d.put(r.IDs, 4*T*K)
		bufs["weights"] = d.put(r.Weights, 4*T*K)
	}
	for _, b := range p.Buffers {
		if _, ok := bufs[b.Name]; !ok {
			if b.Kind == codegen.BufInput {
				t.Fatalf("input %s not provided", b.Name)
			}
			bufs[b.Name] = d.scratch(b.Name, int(b.Bytes.Eval(int64(T))))
		}
	}
	return bufs
}

// runVariants runs every variant 3 times on T tokens with y poisoned,
// checks the first result against ref and every other one bit for bit
// against the first.
func runVariants(t *testing.T, ctx *driver.Context, vs []forwardVariant, T, H int, bufs map[string]driver.DevicePtr, ref []float64) {
	var first []uint16
	for _, v := range vs {
		for run := 0; run < 3; run++ {
			if err := ctx.Memset(bufs["y"], 0xFF, max(2*T*H, 16)); err != nil { // NaN poison
				t.Fatal(err)
			}
			if err := v.ex.run(T, bufs); err != nil {
				t.Fatalf("T=%d %s: %v", T, v.name, err)
			}
			y := make([]uint16, T*H)
			var errWord [1]uint32
			if T > 0 {
				if err := ctx.CopyFromDevice(y, bufs["y"]); err != nil {
					t.Fatal(err)
				}
			}
			if err := ctx.CopyFromDevice(errWord[:], bufs["err"]); err != nil {
				t.Fatal(err)
			}
			if errWord[0] != 0 {
				t.Fatalf("T=%d %s: error word %#x on valid routing", T, v.name, errWord[0])
			}
			if first == nil {
				first = y
				checkClose(t, fmt.Sprintf("T=%d %s", T, v.name), bf16Vals(y), ref)
			} else if i := firstDiff(first, y); i >= 0 {
				t.Fatalf("T=%d %s run %d: y differs from the first run at %d: %#04x vs %#04x", T, v.name, run, i, y[i], first[i])
			}
		}
	}
	names := ""
	for _, v := range vs {
		names += " " + v.name
	}
	t.Logf("T=%d: PTX variants%s agree bit for bit over 3 runs each", T, names)
}

func firstDiff(a, b []uint16) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// checkClose fails unless got has no NaN/Inf and its relative L2 error
// against ref is at most 1e-2.
func checkClose(t *testing.T, what string, got []float32, ref []float64) {
	t.Helper()
	var num, den float64
	for i, g := range got {
		if math.IsNaN(float64(g)) || math.IsInf(float64(g), 0) {
			t.Fatalf("%s: y[%d] = %v", what, i, g)
		}
		dd := float64(g) - ref[i]
		num += dd * dd
		den += ref[i] * ref[i]
	}
	if len(got) == 0 {
		return
	}
	rel := math.Sqrt(num / math.Max(den, 1e-30))
	t.Logf("%s: relative L2 error %.3g", what, rel)
	if rel > 1e-2 || math.IsNaN(rel) {
		t.Fatalf("%s: relative L2 error %.3g > 1e-2", what, rel)
	}
}

// testBadRoutes corrupts the routing and checks the error word: ids out of
// range (ids form) or a routing-map row with more than K routes (map form).
func testBadRoutes(t *testing.T, ctx *driver.Context, d *dev, ex *executor, l schedule.Layer, T int, bufs map[string]driver.DevicePtr, r schedule.Routing) {
	E, K := l.Experts, l.TopK
	want := uint32(codegen.ErrBadExpertID)
	if l.Routing == schedule.RoutingMap {
		m := make([]uint8, T*E)
		for i, b := range r.Map {
			if b {
				m[i] = 1
			}
		}
		for e := 0; e <= K && e < E; e++ {
			m[5*E+e] = 1
		}
		if K >= E {
			return
		}
		bufs["routing_map"] = d.put(m, T*E)
		want = codegen.ErrTooManyRoute
	} else {
		ids := append([]int32(nil), r.IDs...)
		ids[3*K] = int32(E)
		ids[7*K+K-1] = -5
		bufs["ids"] = d.put(ids, 4*T*K)
	}
	if err := ex.run(T, bufs); err != nil {
		t.Fatal(err)
	}
	var errWord [1]uint32
	if err := ctx.CopyFromDevice(errWord[:], bufs["err"]); err != nil {
		t.Fatal(err)
	}
	if errWord[0] != want {
		t.Fatalf("bad routing: error word %#x, want %#x", errWord[0], want)
	}
	y := make([]uint16, T*l.Hidden)
	if err := ctx.CopyFromDevice(y, bufs["y"]); err != nil {
		t.Fatal(err)
	}
	for i, v := range bf16Vals(y) {
		if math.IsNaN(float64(v)) {
			t.Fatalf("bad routing: y[%d] is NaN", i)
		}
	}
}
