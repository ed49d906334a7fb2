package runtime

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mokc/mokc/codegen"
	"github.com/mokc/mokc/compiler"
	"github.com/mokc/mokc/driver"
	"github.com/mokc/mokc/internal/testlayer"
	"github.com/mokc/mokc/launch"
	"github.com/mokc/mokc/moe"
	"github.com/mokc/mokc/schedule"
	"github.com/mokc/mokc/target"
)

// These tests run without a GPU: the manifest reader, argument validation,
// tensor-map checks, the workspace layout and the compiled-module cache are
// pure Go. The manifests come from codegen.Build, serialised as the
// launch.Manifest package compiler writes, without the PTX parameter layout.

// manifestFor builds l for target with its default schedule and returns the
// schedule and the manifest JSON.
func manifestFor(t testing.TB, l schedule.Layer, target target.Target) (schedule.Schedule, []byte) {
	t.Helper()
	s := testlayer.DefaultSchedule(t, l, target)
	p, err := codegen.Build(l, s)
	if err != nil {
		t.Fatalf("%s %s: %v", l.Name, target, err)
	}
	m := launch.Manifest{Mokc: "test", Layer: l.Name, Target: target.String(), PTXVersion: "8.0",
		Shape:   launch.ShapeOf(l),
		Buffers: p.Buffers, Schedule: s.String()}
	for _, k := range p.Kernels {
		m.Kernels = append(m.Kernels, launch.ManifestKernel{Kernel: k})
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return s, b
}

// testLayers are the layers of the validation tests: two presets with and
// without shared experts and biases, and two small layers with the dense
// routing map, per-expert weight tables and the shared gate (codegen's
// forward test cases).
func testLayers(t testing.TB) []schedule.Layer {
	var ls []schedule.Layer
	for _, n := range []string{"qwen3-30b-a3b", "gpt-oss-20b", "deepseek-v2-lite"} {
		l, err := schedule.Preset(n)
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	return append(ls,
		schedule.Layer{Name: "small-odd", Hidden: 192, Intermediate: 96, Experts: 8, TopK: 2,
			SharedExperts: 2, SharedIntermediate: 40, SharedGate: true,
			Activation: schedule.ClampedSwiGLU, SwiGLULimit: 3,
			Routing: schedule.RoutingMap, Storage: schedule.PerExpertWeights,
			Router: schedule.Router{Score: schedule.ScoreSoftmax, Normalize: true}},
		schedule.Layer{Name: "small-input-weight", Hidden: 136, Intermediate: 72, Experts: 6, TopK: 3,
			SharedExperts: 1, SharedIntermediate: 64, RouterWeightOnInput: true,
			Router: schedule.Router{Score: schedule.ScoreSigmoid}})
}

// fakeBindings returns valid Bindings for plan p at T tokens, one for every
// buffer Inputs and Outputs list, with distinct, 256-byte aligned,
// non-overlapping fake addresses.
func fakeBindings(p *plan, T int) Bindings {
	b := Bindings{}
	next := driver.DevicePtr(1 << 40)
	for _, spec := range append(p.specs(launch.BufInput), p.specs(launch.BufOutput)...) {
		n := spec.BytesAt(T)
		b[spec.Name] = NewTensor(next, n, spec.DType, spec.ShapeAt(T)...)
		next = next.Offset((n + 4096) &^ 255)
	}
	return b
}

func TestLayerPlanFromCodegen(t *testing.T) {
	for _, l := range testLayers(t) {
		for _, target := range []target.Target{target.SM80, target.SM90a, target.SM100a} {
			s, m := manifestFor(t, l, target)
			p, err := parsePlan(m, l)
			if err != nil {
				t.Fatalf("%s %s: %v", l.Name, target, err)
			}
			if p.Target != s.Target.String() {
				t.Fatalf("%s: target %q", l.Name, p.Target)
			}
			// Every tensor map of every kernel is encodable and inside its
			// buffer at these T, with the caller's and the workspace's sizes.
			for _, T := range []int{1, 63, 64, 4096} {
				gotT, bind, err := p.bind(fakeBindings(p, T))
				if err != nil || gotT != T {
					t.Fatalf("%s %s T=%d: bind: T=%d %v", l.Name, target, T, gotT, err)
				}
				off, _ := p.scratchLayout(T)
				for i, b := range p.Buffers {
					if b.Kind == launch.BufScratch || b.Name == launch.ErrBuffer {
						bind[i] = driver.DevicePtr(1 << 44).Offset(max(off[i], 0))
					}
				}
				ly := &Layer{plan: p, layer: l}
				sizes := ly.bufferBytes(T)
				for _, k := range p.Kernels {
					for _, prm := range k.Params {
						if prm.Type != launch.ParamTmap {
							continue
						}
						bi := p.bufIndex[prm.Buffer]
						if _, _, _, _, _, err := tensorMapArgs(prm.TensorMap, bind[bi], sizes[bi], T); err != nil {
							t.Errorf("%s %s T=%d kernel %s %s: %v", l.Name, target, T, k.Name, prm.Name, err)
						}
					}
				}
			}
		}
	}
}

func TestLayerPlanRejects(t *testing.T) {
	l := testlayer.Preset(t, "qwen3-30b-a3b")
	_, good := manifestFor(t, l, target.SM90a)
	edit := func(f func(m map[string]any)) []byte {
		var m map[string]any
		if err := json.Unmarshal(good, &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	kernel := func(m map[string]any, i int) map[string]any { return m["kernels"].([]any)[i].(map[string]any) }
	param := func(m map[string]any, k, i int) map[string]any {
		return kernel(m, k)["params"].([]any)[i].(map[string]any)
	}
	cases := []struct {
		name, want string
		manifest   []byte
	}{
		{"not json", "layer manifest", []byte("{")},
		{"unknown field", "unknown field", edit(func(m map[string]any) { kernel(m, 0)["cluster_shape"] = 2 })},
		{"shape", "does not match the layer", edit(func(m map[string]any) { m["shape"].(map[string]any)["top_k"] = 4 })},
		{"target", "unknown target", edit(func(m map[string]any) { m["target"] = "sm_75" })},
		{"missing buffer", "lacks", edit(func(m map[string]any) { param(m, 0, 0)["buffer"] = "nowhere" })},
		{"param type", "unknown parameter type", edit(func(m map[string]any) { param(m, 0, 0)["type"] = "f16" })},
		{"no err", "error word", edit(func(m map[string]any) {
			for _, b := range m["buffers"].([]any) {
				if b.(map[string]any)["name"] == moe.BufErr {
					b.(map[string]any)["kind"] = "scratch"
				}
			}
		})},
		{"unknown dtype", "unknown dtype", edit(func(m map[string]any) {
			m["buffers"] = append(m["buffers"].([]any), map[string]any{"name": "scales", "kind": "input", "dtype": "e8m0",
				"shape": []any{}, "bytes": map[string]any{"a": 0, "b": 4, "d": 1, "min": 0}, "doc": ""})
		})},
		{"no token input", "token count", edit(func(m map[string]any) {
			for _, b := range m["buffers"].([]any) {
				if b.(map[string]any)["kind"] == "input" {
					b.(map[string]any)["kind"] = "scratch"
				}
			}
		})},
		{"block", "block of", edit(func(m map[string]any) { kernel(m, 0)["block"] = 2048 })},
		{"scalar without value", "without a value", edit(func(m map[string]any) {
			for _, k := range m["kernels"].([]any) {
				for _, p := range k.(map[string]any)["params"].([]any) {
					if p.(map[string]any)["type"] == "i32" {
						delete(p.(map[string]any), "value")
					}
				}
			}
		})},
	}
	if _, err := parsePlan(good, l); err != nil {
		t.Fatalf("unedited manifest: %v", err)
	}
	for _, c := range cases {
		_, err := parsePlan(c.manifest, l)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
}

// TestBindingsValidation checks that Forward's arguments are checked
// against the manifest's buffers, with errors naming the buffer.
func TestBindingsValidation(t *testing.T) {
	ls := testLayers(t)
	q, odd := ls[0], ls[3]
	_, mq := manifestFor(t, q, target.SM80)
	pq, err := parsePlan(mq, q)
	if err != nil {
		t.Fatal(err)
	}
	_, mo := manifestFor(t, odd, target.SM80)
	po, err := parsePlan(mo, odd)
	if err != nil {
		t.Fatal(err)
	}
	for _, T := range []int{0, 1, 64} {
		for _, p := range []*plan{pq, po} {
			if got, _, err := p.bind(fakeBindings(p, T)); err != nil || got != T {
				t.Fatalf("%s T=%d: %d %v", p.Layer, T, got, err)
			}
		}
	}
	// T = 0: null pointers are fine.
	b0 := fakeBindings(pq, 0)
	for _, name := range []string{moe.BufX, moe.BufIDs, moe.BufWeights, moe.BufY} {
		b0[name] = NewTensor(0, 0, b0[name].DType, b0[name].Shape...)
	}
	if _, _, err := pq.bind(b0); err != nil {
		t.Fatalf("T=0 with null pointers: %v", err)
	}

	const T = 64
	// Each case changes the binding of buffer buf (edit, set, copyOf) and
	// wants an error naming buf and containing want.
	edit := func(f func(t *Tensor)) func(b Bindings, buf string) {
		return func(b Bindings, buf string) {
			t := b[buf]
			f(&t)
			b[buf] = t
		}
	}
	set := func(t Tensor) func(Bindings, string) { return func(b Bindings, buf string) { b[buf] = t } }
	copyOf := func(from string) func(Bindings, string) { return func(b Bindings, buf string) { b[buf] = b[from] } }
	list := func(names ...string) string { return strings.Join(names, ", ") }
	cases := []struct {
		name string
		p    *plan
		buf  string
		want string
		edit func(b Bindings, buf string)
	}{
		{"x rank", pq, moe.BufX, ": shape [131072]; want [T, 2048]", edit(func(t *Tensor) { t.Shape = []int{T * q.Hidden} })},
		{"negative T", pq, moe.BufX, "negative", edit(func(t *Tensor) { t.Shape = []int{-1, q.Hidden} })},
		{"x missing", pq, moe.BufX, " is not bound; this layer reads it: bf16 [T, 2048]", set(Tensor{})},
		{"x hidden", pq, moe.BufX, ": shape [64 1024]; want [64 2048]", edit(func(t *Tensor) { t.Shape = []int{T, 1024} })},
		{"x dtype", pq, moe.BufX, `: dtype "f32"`, edit(func(t *Tensor) { t.DType = F32 })},
		{"x bytes", pq, moe.BufX, ": 100 bytes", edit(func(t *Tensor) { t.Bytes = 100 })},
		{"x null", pq, moe.BufX, ": null pointer", edit(func(t *Tensor) { t.Ptr = 0 })},
		{"x misaligned", pq, moe.BufX, "not 16-byte aligned", edit(func(t *Tensor) { t.Ptr += 8 })},
		{"ids rows", pq, moe.BufIDs, ": shape [63 8]; want [64 8]", edit(func(t *Tensor) { t.Shape = []int{T - 1, q.TopK} })},
		{"ids dtype", pq, moe.BufIDs, `: dtype "u32"`, edit(func(t *Tensor) { t.DType = U32 })},
		{"weights missing", pq, moe.BufWeights, " is not bound", set(Tensor{})},
		{"map on ids layer", pq, moe.BufRoutingMap, " is bound, but this layer has no such buffer (its buffers: " +
			list(moe.BufX, moe.BufIDs, moe.BufWeights, moe.BufFC1, moe.BufFC2, moe.BufY) + ")",
			set(NewTensor(1<<30, T*q.Experts, U8, T, q.Experts))},
		{"table on grouped layer", pq, moe.BufFC1Table, " is bound", set(NewTensor(1<<30, 8*q.Experts, U64, q.Experts))},
		{"bias on bias-free layer", pq, moe.BufFC1Bias, " is bound", copyOf(moe.BufFC1)},
		{"shared on layer without", pq, moe.BufSharedFC1, " is bound", copyOf(moe.BufFC1)},
		{"typo", pq, "fc_1", " is bound, but this layer has no such buffer", copyOf(moe.BufFC1)},
		{"scratch", pq, moe.BufXS, " is bound, but it is a scratch buffer of the layer's workspace", copyOf(moe.BufFC1)},
		{"error word", pq, moe.BufErr, " is bound, but the error word is the layer's own", set(NewTensor(1<<30, 16, U32, 1))},
		{"fc1 shape", pq, moe.BufFC1, ": shape", edit(func(t *Tensor) { t.Shape = []int{q.Experts, q.Intermediate, q.Hidden} })},
		{"fc2 transposed", pq, moe.BufFC2, ": shape", edit(func(t *Tensor) { t.Shape = []int{q.Experts, q.Intermediate, q.Hidden} })},
		{"y overlaps x", pq, moe.BufY, " [", func(b Bindings, buf string) { edit(func(t *Tensor) { t.Ptr = b[moe.BufX].Ptr.Offset(256) })(b, buf) }},
		{"y is ids", pq, moe.BufY, "overlaps buffer " + strconv.Quote(moe.BufIDs), func(b Bindings, buf string) { edit(func(t *Tensor) { t.Ptr = b[moe.BufIDs].Ptr })(b, buf) }},
		{"y missing", pq, moe.BufY, " is not bound; this layer writes it", set(Tensor{})},
		{"ids on map layer", po, moe.BufIDs, " is bound, but it is a scratch buffer of the layer's workspace; bind only: " +
			list(moe.BufX, moe.BufRoutingMap, moe.BufProbs) + ",", set(NewTensor(1<<30, 4*T*odd.TopK, I32, T, odd.TopK))},
		{"map dtype", po, moe.BufRoutingMap, ": dtype", edit(func(t *Tensor) { t.DType = I32 })},
		{"grouped on per-expert layer", po, moe.BufFC1, " is bound", copyOf(moe.BufFC1Table)},
		{"table length", po, moe.BufFC2Table, ": shape", edit(func(t *Tensor) { t.Shape = []int{odd.Experts - 1} })},
		{"shared gate missing", po, moe.BufSharedGate, " is not bound", set(Tensor{})},
		{"shared fc1 shape", po, moe.BufSharedFC1, ": shape", edit(func(t *Tensor) { t.Shape = []int{2 * 40, odd.Hidden} })},
	}
	for _, c := range cases {
		b := fakeBindings(c.p, T)
		c.edit(b, c.buf)
		_, _, err := c.p.bind(b)
		named := fmt.Sprintf("buffer %q", c.buf)
		if err == nil || !strings.Contains(err.Error(), named) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %s and %q", c.name, err, named, c.want)
		}
	}
	// A zero Tensor is not a binding, whatever its name.
	b := fakeBindings(pq, T)
	b[moe.BufRoutingMap] = Tensor{}
	if _, _, err := pq.bind(b); err != nil {
		t.Fatalf("zero Tensor under an unused name: %v", err)
	}
}

// TestInputsOutputs checks the buffers a Layer lists for the caller: the
// manifest's inputs and outputs in its order, without the error word or
// scratch, with shapes and bytes at T.
func TestInputsOutputs(t *testing.T) {
	q := testLayers(t)[0]
	_, m := manifestFor(t, q, target.SM90a)
	p, err := parsePlan(m, q)
	if err != nil {
		t.Fatal(err)
	}
	ly := &Layer{plan: p, layer: q}
	var names []string
	for _, s := range append(ly.Inputs(), ly.Outputs()...) {
		names = append(names, s.Name+":"+string(s.Kind))
	}
	if got, want := strings.Join(names, " "), "x:input ids:input weights:input fc1:input fc2:input y:output"; got != want {
		t.Fatalf("caller buffers %q, want %q", got, want)
	}
	x := ly.Inputs()[0]
	if got := x.ShapeAt(5); !slices.Equal(got, []int{5, q.Hidden}) || x.BytesAt(5) != 2*5*q.Hidden || x.DType != BF16 {
		t.Fatalf("x at T = 5: %v, %d bytes, %s", got, x.BytesAt(5), x.DType)
	}
}

func TestScratchLayout(t *testing.T) {
	for _, l := range testLayers(t)[:3] {
		_, m := manifestFor(t, l, target.SM90a)
		p, err := parsePlan(m, l)
		if err != nil {
			t.Fatal(err)
		}
		// A workspace laid out for wsT holds every buffer of any T <= wsT in
		// its slot, 256-byte aligned, without overlap.
		for _, wsT := range []int{1, 100, 4096} {
			off, total := p.scratchLayout(wsT)
			for _, T := range []int{0, 1, wsT / 2, wsT} {
				end := 0
				for i, b := range p.Buffers {
					if b.Kind != launch.BufScratch {
						if off[i] != -1 {
							t.Fatalf("%s: non-scratch %s has offset %d", l.Name, b.Name, off[i])
						}
						continue
					}
					if off[i]%256 != 0 || off[i] < end {
						t.Fatalf("%s: %s at %d (previous end %d)", l.Name, b.Name, off[i], end)
					}
					end = off[i] + int(max(b.Bytes.Eval(int64(T)), 1))
					if end > total {
						t.Fatalf("%s wsT=%d T=%d: %s ends at %d > %d", l.Name, wsT, T, b.Name, end, total)
					}
				}
			}
		}
	}
}

func TestTensorMapArgsRejects(t *testing.T) {
	tm := &launch.TensorMap{Operand: "a", DType: "bf16", Dims: []launch.Expr{{B: 2048, D: 1, Min: 2048}, {A: 8, D: 1, Min: 1}},
		StrideBytes: []launch.Expr{{B: 4096, D: 1, Min: 4096}}, Box: []int{64, 128}, Swizzle: 128}
	const T = 10
	need := int64(8 * T * 4096)
	if _, dims, _, _, _, err := tensorMapArgs(tm, 1<<20, need, T); err != nil || dims[1] != 8*T {
		t.Fatalf("valid map: %v %v", dims, err)
	}
	for _, c := range []struct {
		name, want string
		ptr        driver.DevicePtr
		bytes      int64
		edit       func(tm *launch.TensorMap)
	}{
		{"small buffer", "buffer holds", 1 << 20, need - 2, nil},
		{"misaligned", "aligned", 1<<20 + 8, need, nil},
		{"swizzle", "swizzle", 1 << 20, need, func(tm *launch.TensorMap) { tm.Swizzle = 16 }},
		{"box too wide for swizzle", "swizzle span", 1 << 20, need, func(tm *launch.TensorMap) { tm.Box[0] = 128 }},
		{"dtype", "dtype", 1 << 20, need, func(tm *launch.TensorMap) { tm.DType = "e4m3x" }},
	} {
		m := *tm
		m.Box = append([]int(nil), tm.Box...)
		if c.edit != nil {
			c.edit(&m)
		}
		_, _, _, _, _, err := tensorMapArgs(&m, c.ptr, c.bytes, T)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

func TestRoutingError(t *testing.T) {
	e := &RoutingError{Layer: "q", Code: 3, Experts: 128, TopK: 8}
	if !e.BadExpertID() || !e.TooManyRoutes() {
		t.Fatal(e)
	}
	s := e.Error()
	for _, w := range []string{"expert id out of range [-1, 128)", "more than K = 8 routes", "0x3"} {
		if !strings.Contains(s, w) {
			t.Errorf("%q lacks %q", s, w)
		}
	}
	if s := (&RoutingError{Code: 8}).Error(); !strings.Contains(s, "unknown error bits 0x8") {
		t.Error(s)
	}
}

func TestCompileCache(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(CacheDirEnv, dir)
	l := testlayer.Preset(t, "qwen3-30b-a3b")
	s80, m80 := manifestFor(t, l, target.SM80)
	s90, m90 := manifestFor(t, l, target.SM90a)
	calls := 0
	fake := func(l schedule.Layer, s schedule.Schedule, _ bool) (compiled, error) {
		calls++
		m := m80
		if s.Target != target.SM80 {
			m = m90
		}
		man, err := decodeManifest(m)
		if err != nil {
			return compiled{}, err
		}
		return compiled{ptx: ".target " + s.Target.String() + " // " + fmt.Sprint(calls), manifest: man}, nil
	}
	// Tests of this binary share the compiler and the memory cache: restore
	// the compiler, start from an empty cache.
	prev := compileLayer
	defer func() { compileLayer = prev }()
	forget := func() {
		memCache.Lock()
		memCache.m = map[string]compiled{}
		memCache.Unlock()
	}
	forget()
	defer forget()
	compileLayer = fake
	c1, err := compileCached(l, s80, 12040, false)
	if err != nil || calls != 1 {
		t.Fatalf("first compile: %d calls, %v", calls, err)
	}
	if c2, err := compileCached(l, s80, 12040, false); err != nil || calls != 1 || c2.ptx != c1.ptx {
		t.Fatalf("memory cache: %d calls, %v", calls, err)
	}
	if exeHash() == "" {
		t.Skip("cannot hash the test executable; disk cache disabled")
	}
	if n := len(cacheFiles(dir)); n != 2 {
		t.Fatalf("disk cache holds %d files, want 2: %v", n, cacheFiles(dir))
	}
	// A new process (the memory cache emptied) reads the disk cache, with
	// the manifest as it was compiled.
	forget()
	c3, err := compileCached(l, s80, 12040, false)
	if err != nil || calls != 1 || c3.ptx != c1.ptx {
		t.Fatalf("disk cache: %d calls, %v", calls, err)
	}
	if got, _ := json.Marshal(c3.manifest); string(got) != string(m80) {
		t.Fatalf("disk cache: the manifest read back differs from the one compiled")
	}
	// Every part of the key matters.
	s80b := s80
	s80b.Stages++
	l2 := l
	l2.TopK = 4
	for i, f := range []func() (compiled, error){
		func() (compiled, error) { return compileCached(l, s90, 12040, false) },
		func() (compiled, error) { return compileCached(l, s80, 12080, false) },
		func() (compiled, error) { return compileCached(l, s80b, 12040, false) },
		func() (compiled, error) { return compileCached(l2, s80, 12040, false) },
	} {
		before := calls
		if _, err := f(); err != nil || calls != before+1 {
			t.Fatalf("key change %d: %d calls (was %d), %v", i, calls, before, err)
		}
	}
	if cacheKey(compiler.Version, "", l, s80, 12040) == cacheKey(compiler.Version+"+1", "", l, s80, 12040) {
		t.Fatal("the compiler version is not part of the key")
	}
	// A failing compiler's error comes back; nothing is cached.
	forget()
	compileLayer = func(schedule.Layer, schedule.Schedule, bool) (compiled, error) {
		return compiled{}, errors.New("ptx: in function @moe_fc1: unsupported")
	}
	t.Setenv(CacheDirEnv, "off")
	if cacheDir() != "" {
		t.Fatal("MOKC_CACHE_DIR=off does not disable the disk cache")
	}
	if _, err := compileCached(l, s80, 12040, false); err == nil || !strings.Contains(err.Error(), "unsupported") {
		t.Fatalf("failing compiler: %v", err)
	}
	if len(memCache.m) != 0 {
		t.Fatal("a failed compile was cached")
	}
}

// TestNewLayerWithoutDevice checks that NewLayer fails cleanly where no GPU
// can be used: ErrNoCUDA without the cuda tag, ErrNoDevice on a machine
// without a driver or device.
func TestNewLayerWithoutDevice(t *testing.T) {
	if driver.Available() {
		t.Skip("a device is present")
	}
	l := testlayer.Preset(t, "qwen3-30b-a3b")
	s := testlayer.DefaultSchedule(t, l, target.SM80)
	_, err := NewLayer(nil, l, s)
	if !errors.Is(err, driver.ErrNoCUDA) && !errors.Is(err, driver.ErrNoDevice) {
		t.Fatalf("NewLayer without a device: %v", err)
	}
	_, err = LoadLayer(&driver.Context{}, l, s, "", nil)
	if !errors.Is(err, driver.ErrNoCUDA) && !errors.Is(err, driver.ErrNoDevice) {
		t.Fatalf("LoadLayer without a device: %v", err)
	}
}

// TestLayerPlanFromCompiler reads the manifests package compiler writes
// (with the PTX entries' parameter layouts) for the presets of the GPU
// tests on every target.
func TestLayerPlanFromCompiler(t *testing.T) {
	for _, l := range testLayers(t)[:3] {
		for _, target := range target.All() {
			a, err := compiler.CompileDefault(l, target)
			if err != nil {
				t.Fatalf("%s %s: %v", l.Name, target, err)
			}
			m, err := a.ManifestJSON()
			if err != nil {
				t.Fatal(err)
			}
			p, err := parsePlan(m, l)
			if err != nil {
				t.Fatalf("%s %s: %v", l.Name, target, err)
			}
			if !strings.Contains(a.PTX.Text, ".target "+p.Target) {
				t.Fatalf("%s %s: the PTX lacks \".target %s\"", l.Name, target, p.Target)
			}
			for _, k := range p.Kernels {
				if len(k.ParamLayout) != len(k.Params) {
					t.Fatalf("%s %s: kernel %s: %d parameters, layout of %d", l.Name, target, k.Name, len(k.Params), len(k.ParamLayout))
				}
				if !strings.Contains(a.PTX.Text, ".entry "+k.Name+"(") {
					t.Fatalf("%s %s: kernel %s is not an entry of the PTX", l.Name, target, k.Name)
				}
			}
		}
	}
}

// TestLayerArgsPacking packs the kernel arguments of real compiled layers
// (package compiler's manifests, with the PTX parameter layouts) with a
// stand-in tensor-map encoder, and checks every argument: its size against
// the PTX entry, pointers against the bound buffers, scalars against their
// Exprs at T, tensor maps encoded for the bound buffer and the dims at T;
// and that tensor maps are re-encoded only when an address or T changes.
func TestLayerArgsPacking(t *testing.T) {
	type call struct {
		addr driver.DevicePtr
		dims string
	}
	var calls []call
	fake := func(dtype driver.TensorMapDataType, rank int, addr driver.DevicePtr, dims, strides []uint64, box, es []uint32,
		il driver.TensorMapInterleave, sw driver.TensorMapSwizzle, l2 driver.TensorMapL2Promotion, oob driver.TensorMapOOBFill) ([driver.TensorMapBytes]byte, error) {
		var enc [driver.TensorMapBytes]byte
		if err := driver.CheckTensorMapTiled(dtype, rank, addr, dims, strides, box, es, il, sw, l2, oob); err != nil {
			return enc, err
		}
		calls = append(calls, call{addr, fmt.Sprint(dims)})
		copy(enc[:], fmt.Sprintf("%x %v", uint64(addr), dims))
		return enc, nil
	}
	for _, l := range testLayers(t)[:3] {
		for _, target := range target.All() {
			a, err := compiler.CompileDefault(l, target)
			if err != nil {
				t.Fatal(err)
			}
			ly := packingLayer(t, a, l, fake)
			p := ly.plan
			what := l.Name + " " + target.String()
			// extents returns a tensor map's dims and strides at T.
			extents := func(tm *launch.TensorMap, T int) string {
				var v []int64
				for _, e := range append(append([]launch.Expr(nil), tm.Dims...), tm.StrideBytes...) {
					v = append(v, e.Eval(int64(T)))
				}
				return fmt.Sprint(v)
			}
			var prev []driver.DevicePtr
			prevT := -1
			for step, T := range []int{64, 64, 100, 100} {
				fb := fakeBindings(p, T)
				if step == 3 {
					// A new address for x: the maps over x are re-encoded.
					x := fb[moe.BufX]
					x.Ptr = x.Ptr.Offset(1 << 20)
					fb[moe.BufX] = x
				}
				_, bind, err := p.bind(fb)
				if err != nil {
					t.Fatal(err)
				}
				if err := ly.bindOwn(bind, T); err != nil {
					t.Fatal(err)
				}
				// The maps whose address or extents changed since the last step.
				want := 0
				for _, k := range p.Kernels {
					if !k.RunsAt(int64(T)) {
						continue // a GEMM variant for other T
					}
					for _, prm := range k.Params {
						if prm.Type != launch.ParamTmap {
							continue
						}
						bi := p.bufIndex[prm.Buffer]
						if prev == nil || bind[bi] != prev[bi] || extents(prm.TensorMap, T) != extents(prm.TensorMap, prevT) {
							want++
						}
					}
				}
				calls = calls[:0]
				if T == ly.lastT && slices.Equal(bind, ly.lastBind) {
					// Forward skips buildArgs: nothing changed.
				} else if err := ly.buildArgs(T, bind); err != nil {
					t.Fatalf("%s T=%d: %v", what, T, err)
				}
				if len(calls) != want {
					t.Fatalf("%s step %d (T=%d): %d tensor maps encoded, %d changed", what, step, T, len(calls), want)
				}
				if step == 1 && want != 0 {
					t.Fatalf("%s: the test changed nothing but expects %d encodings", what, want)
				}
				prev, prevT = bind, T
				for i, k := range p.Kernels {
					args := ly.args[i]
					if args == nil {
						if k.RunsAt(int64(T)) {
							t.Fatalf("%s T=%d: kernel %s has no arguments", what, T, k.Name)
						}
						continue
					}
					sizes := args.Sizes()
					for j, prm := range k.Params {
						if sizes[j] != k.ParamLayout[j].Size {
							t.Fatalf("%s: kernel %s parameter %s: %d bytes, PTX %d", what, k.Name, prm.Name, sizes[j], k.ParamLayout[j].Size)
						}
						v := args.Value(j)
						switch prm.Type {
						case launch.ParamPtr:
							if got := driver.DevicePtr(leU64(v)); got != bind[p.bufIndex[prm.Buffer]] {
								t.Fatalf("%s: kernel %s parameter %s = %v, buffer %s is at %v", what, k.Name, prm.Name, got, prm.Buffer, bind[p.bufIndex[prm.Buffer]])
							}
						case launch.ParamI32:
							if got := int64(int32(leU64(append(v, 0, 0, 0, 0)))); got != prm.Value.Eval(int64(T)) {
								t.Fatalf("%s: kernel %s parameter %s = %d at T = %d", what, k.Name, prm.Name, got, T)
							}
						case launch.ParamTmap:
							addr := bind[p.bufIndex[prm.Buffer]]
							if !strings.HasPrefix(string(v), fmt.Sprintf("%x ", uint64(addr))) {
								t.Fatalf("%s: kernel %s %s is not encoded over %s at %v: %q", what, k.Name, prm.Name, prm.Buffer, addr, v[:40])
							}
						}
					}
				}
			}
		}
	}
}

func leU64(b []byte) uint64 {
	var v uint64
	for i := len(b) - 1; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}

// The cache key depends on the schedule's values, not on where its GEMM
// variant and its decode tiles are allocated.
func TestCacheKeyVariantByValue(t *testing.T) {
	l := testlayer.Preset(t, "deepseek-v3")
	a, b := testlayer.DefaultSchedule(t, l, target.SM90a), testlayer.DefaultSchedule(t, l, target.SM90a)
	if a.Variant == nil || a.Variant == b.Variant {
		t.Fatal("want two default schedules with distinct variant pointers")
	}
	if cacheKey("v", "", l, a, 1) != cacheKey("v", "", l, b, 1) {
		t.Error("equal schedules with distinct variant pointers have different keys")
	}
	c := b
	v := *b.Variant
	v.MaxRows++
	c.Variant = &v
	if cacheKey("v", "", l, a, 1) == cacheKey("v", "", l, c, 1) {
		t.Error("a different variant has the same key")
	}
	d := a
	d.Variant = nil
	if cacheKey("v", "", l, a, 1) == cacheKey("v", "", l, d, 1) {
		t.Error("no variant has the same key as a variant")
	}
	// The decode tiles likewise.
	if a.Decode == nil || a.Decode == b.Decode {
		t.Fatal("want two default schedules with distinct decode-tile pointers")
	}
	e := b
	dt := *b.Decode
	dt.MaxRows++
	e.Decode = &dt
	f := a
	f.Decode = nil
	if cacheKey("v", "", l, a, 1) == cacheKey("v", "", l, e, 1) || cacheKey("v", "", l, a, 1) == cacheKey("v", "", l, f, 1) {
		t.Error("other decode tiles, or none, have the same key")
	}
}

// TestForwardRefusesTooManyTokens checks that Forward refuses a T above
// schedule.Schedule.MaxTokens before touching the device: with 8-column
// FC2 tiles over H = 65536 the GEMM work items, not T*K, set the limit.
func TestForwardRefusesTooManyTokens(t *testing.T) {
	l := schedule.Layer{Name: "wide", Hidden: 65536, Intermediate: 64, Experts: 128, TopK: 32}
	s, m := manifestFor(t, l, target.SM90a)
	p, err := parsePlan(m, l)
	if err != nil {
		t.Fatal(err)
	}
	s.Variant, s.FC2.N = nil, 8
	limit := s.MaxTokens(l)
	if limit <= 0 || limit >= l.MaxTokens() || limit >= math.MaxInt32/l.Experts {
		t.Fatalf("MaxTokens = %d: want a limit below the layer's %d and the plan's %d", limit, l.MaxTokens(), math.MaxInt32/l.Experts)
	}
	ly := &Layer{plan: p, layer: l, sched: s, lastT: -1}
	err = ly.Forward(nil, fakeBindings(p, limit+1))
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("T = %d: more than the %d tokens", limit+1, limit)) {
		t.Errorf("Forward at T = %d: %v", limit+1, err)
	}
}

// TestWaitLimitArgs: a chained forward's co-resident kernel gets the
// manifest's wait limit (launch.DefaultWaitLimitNs) as its wait_limit_ns
// argument, and after SetWaitLimit the given one (the arguments packed
// again, even at the same T and buffers); the WaitTimeoutError of such a
// layer names the kernel and the limit in effect; a negative limit is
// refused.
func TestWaitLimitArgs(t *testing.T) {
	l := testlayer.Preset(t, "qwen3-30b-a3b")
	s := testlayer.DefaultSchedule(t, l, target.SM90a)
	s.Chain = schedule.ChainFC
	s = s.FixedItemsWhereNeeded(l).FC2LargeWhereValid(l)
	a, err := compiler.Compile(l, s)
	if err != nil {
		t.Fatal(err)
	}
	fake := func(driver.TensorMapDataType, int, driver.DevicePtr, []uint64, []uint64, []uint32, []uint32,
		driver.TensorMapInterleave, driver.TensorMapSwizzle, driver.TensorMapL2Promotion, driver.TensorMapOOBFill) ([driver.TensorMapBytes]byte, error) {
		return [driver.TensorMapBytes]byte{}, nil
	}
	ly := packingLayer(t, a, l, fake)
	p := ly.plan
	const T = 4096
	_, bind, err := p.bind(fakeBindings(p, T))
	if err != nil {
		t.Fatal(err)
	}
	if err := ly.bindOwn(bind, T); err != nil {
		t.Fatal(err)
	}
	// limits returns the wait_limit_ns argument of every kernel that takes one.
	limits := func() map[string]int64 {
		if T != ly.lastT || !slices.Equal(bind, ly.lastBind) {
			if err := ly.buildArgs(T, bind); err != nil {
				t.Fatal(err)
			}
		}
		got := map[string]int64{}
		for i, k := range p.Kernels {
			for j, prm := range k.Params {
				if prm.Name == launch.ParamWaitLimit && ly.args[i] != nil {
					got[k.Name] = int64(leU64(ly.args[i].Value(j)))
				}
			}
		}
		return got
	}
	if got := limits(); len(got) != 1 || got["moe_fc1_fc2"] != launch.DefaultWaitLimitNs {
		t.Fatalf("wait limits %v, want moe_fc1_fc2: %d", got, int64(launch.DefaultWaitLimitNs))
	}
	if err := ly.SetWaitLimit(3 * time.Second); err != nil {
		t.Fatal(err)
	}
	if got := limits(); got["moe_fc1_fc2"] != 3e9 {
		t.Fatalf("after SetWaitLimit(3s): wait limits %v", got)
	}
	e := ly.waitTimeout()
	if !slices.Equal(e.Kernels, []string{"moe_fc1_fc2"}) || e.Limit != 3*time.Second {
		t.Errorf("waitTimeout() = %+v", e)
	}
	for _, w := range []string{"moe_fc1_fc2 waited longer than the wait limit (3s)", "not valid", "SetWaitLimit"} {
		if !strings.Contains(e.Error(), w) {
			t.Errorf("%q lacks %q", e.Error(), w)
		}
	}
	if err := ly.SetWaitLimit(0); err != nil {
		t.Fatal(err)
	}
	if got := limits(); got["moe_fc1_fc2"] != 0 {
		t.Fatalf("after SetWaitLimit(0): wait limits %v, want 0 (no limit)", got)
	}
	if err := ly.SetWaitLimit(-time.Second); err == nil {
		t.Error("SetWaitLimit(-1s) = nil, want an error")
	}
}

// TestWordErrors: the error words' OR becomes nil, a *RoutingError, a
// *WaitTimeoutError, or both joined, each with its own bits.
func TestWordErrors(t *testing.T) {
	l := schedule.Layer{Name: "q", Experts: 128, TopK: 8}
	timeout := func() *WaitTimeoutError {
		return &WaitTimeoutError{Layer: "q", Kernels: []string{"moe_fc1_fc2"}, Limit: time.Second}
	}
	for _, c := range []struct {
		word             uint32
		routing, waiting bool
	}{{0, false, false}, {launch.ErrBadExpertID, true, false}, {launch.ErrWaitTimeout, false, true}, {launch.ErrTooManyRoute | launch.ErrWaitTimeout, true, true}} {
		err := wordErrors(l, c.word, timeout)
		var re *RoutingError
		var we *WaitTimeoutError
		if (err == nil) != (c.word == 0) || errors.As(err, &re) != c.routing || errors.As(err, &we) != c.waiting {
			t.Errorf("word %#x: %v (routing %v, timeout %v)", c.word, err, c.routing, c.waiting)
			continue
		}
		if re != nil && re.Code&launch.ErrWaitTimeout != 0 {
			t.Errorf("word %#x: the routing error keeps the timeout bit: %v", c.word, re)
		}
	}
}

// packingLayer is a Layer over artifact a's plan for packing arguments
// without a device: tensor maps encoded by encode, the error word and the
// workspace at made-up addresses, the workspace laid out for T = 4096.
func packingLayer(t *testing.T, a *compiler.Artifact, l schedule.Layer, encode func(driver.TensorMapDataType, int, driver.DevicePtr, []uint64, []uint64, []uint32, []uint32,
	driver.TensorMapInterleave, driver.TensorMapSwizzle, driver.TensorMapL2Promotion, driver.TensorMapOOBFill) ([driver.TensorMapBytes]byte, error)) *Layer {
	t.Helper()
	m, err := a.ManifestJSON()
	if err != nil {
		t.Fatal(err)
	}
	p, err := parsePlan(m, l)
	if err != nil {
		t.Fatal(err)
	}
	ly := &Layer{plan: p, layer: l, lastT: -1, tmaps: map[[2]int]tmapEntry{}, encode: encode, errPtr: 1 << 45, ws: 1 << 46}
	ly.wsOff, _ = p.scratchLayout(4096)
	ly.wsT = 4096
	return ly
}
