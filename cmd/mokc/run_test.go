package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	goruntime "runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mokc/mokc/driver"
	"github.com/mokc/mokc/runtime"
	"github.com/mokc/mokc/schedule"
	"github.com/mokc/mokc/target"
)

// runCLI runs the mokc app in-process with args and returns its output and
// error.
func runCLI(args ...string) (string, error) {
	var out bytes.Buffer
	app := &cli.App{Name: "mokc", Commands: build(commands), Writer: &out, ErrWriter: &out,
		ExitErrHandler: func(*cli.Context, error) {}}
	err := app.Run(append([]string{"mokc"}, args...))
	return out.String(), err
}

// TestGPUCommandsWithoutDevice checks that run and bench fail with a clear
// reason where no GPU can be used: "built without CUDA support" without the
// cuda tag, "no usable CUDA device" with it on a machine without one.
func TestGPUCommandsWithoutDevice(t *testing.T) {
	_, err := driver.Open(0)
	var want string
	switch {
	case err == nil:
		t.Skip("a device is present")
	case errors.Is(err, driver.ErrNoCUDA):
		want = "built without CUDA support"
	case errors.Is(err, driver.ErrNoDevice):
		want = "no usable CUDA device"
	default:
		t.Fatal(err)
	}
	for _, cmd := range [][]string{
		{"run", "--model", "qwen3-30b-a3b", "--tokens", "4"},
		{"bench", "--model", "gpt-oss-20b", "--target", "sm_80"},
		// --grid-ctas 0 is the default's grid: no shape of one target
		{"run", "--model", "qwen3-30b-a3b", "--target", "sm_80,sm_90a", "--grid-ctas", "0", "--tokens", "1"},
	} {
		_, err := runCLI(cmd...)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), cmd[0]+": ") {
			t.Errorf("mokc %s: %v, want %q", strings.Join(cmd, " "), err, want)
		}
	}
}

func TestGPUCommandsFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--model", "qwen3-30b-a3b", "--tokens", "-1"}, "--tokens -1"},
		{[]string{"run", "--model", "qwen3-30b-a3b", "extra"}, "unexpected argument"},
		{[]string{"run", "--model", "qwen3-30b-a3b", "--target", "sm_80,sm_90a", "--grid-ctas", "8"}, "need exactly one --target, not 2"},
		{[]string{"run", "--model", "qwen3-30b-a3b", "--tokens", "0,1,1"}, "1 given twice"},
		{[]string{"run", "--model", "qwen3-30b-a3b", "--tokens", "0,,4"}, "is not an integer"},
		{[]string{"run", "--model", "qwen3-30b-a3b", "--target", "sm_80,sm_70"}, "--target sm_80,sm_70"},
		{[]string{"run", "--model", "qwen3-30b-a3b", "--target", "sm_90a,SM_90A"}, "given twice"},
		{[]string{"run", "--model", "qwen3-30b-a3b", "--repeat", "0"}, "--repeat 0"},
		{[]string{"run", "--model", "qwen3-30b-a3b", "--sample", "-2"}, "--sample -2"},
		{[]string{"run", "--model", "qwen3-30b-a3b", "--wait-limit", "-1s"}, "--wait-limit -1s: must be >= 0"},
		{[]string{"bench", "--model", "qwen3-30b-a3b", "--wait-limit", "-2s"}, "--wait-limit -2s: must be >= 0"},
		{[]string{"run", "--model", "qwen3-30b-a3b", "--wait-limit", "5"}, `--wait-limit "5": a duration with its unit, such as 30s`},
		{[]string{"run", "--model", "qwen3-30b-a3b", "--routing", "dense"}, "--routing"},
		{[]string{"run", "--model", "all", "--hf-config", "x.json"}, "not both"},
		{[]string{"run", "--model", "qwen4"}, "unknown preset"},
		{[]string{"run"}, "name a layer"},
		{[]string{"bench", "--model", "qwen3-30b-a3b", "--tokens", "0"}, "--tokens 0: must be > 0 (a benchmark times tokens; `mokc run --tokens 0` checks"},
		{[]string{"bench", "--model", "qwen3-30b-a3b", "--iters", "0"}, "--iters 0"},
		{[]string{"bench", "--model", "qwen3-30b-a3b", "--peak-gbs", "0"}, "--peak-gbs"},
	} {
		_, err := runCLI(c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("mokc %s: %v, want %q", strings.Join(c.args, " "), err, c.want)
		}
	}
}

func TestSampleRows(t *testing.T) {
	if r := sampleRows(5, 0, 1); len(r) != 5 || r[4] != 4 {
		t.Fatalf("T=5: %v", r)
	}
	if r := sampleRows(0, 0, 1); len(r) != 0 {
		t.Fatalf("T=0: %v", r)
	}
	r := sampleRows(10000, 0, 7)
	if len(r) != 256 || r[0] != 0 || r[len(r)-1] != 9999 {
		t.Fatalf("T=10000: %d rows, first %d last %d", len(r), r[0], r[len(r)-1])
	}
	for i := 1; i < len(r); i++ {
		if r[i] <= r[i-1] {
			t.Fatalf("rows not strictly increasing at %d", i)
		}
	}
	r2 := sampleRows(10000, 0, 7)
	r3 := sampleRows(10000, 0, 8)
	if !slices.Equal(r, r2) {
		t.Fatal("same seed, different rows")
	}
	if slices.Equal(r, r3) {
		t.Fatal("different seeds, same rows")
	}
	if r := sampleRows(1000, 10, 3); len(r) != 10 {
		t.Fatalf("--sample 10: %d rows", len(r))
	}
}

func TestCompareRows(t *testing.T) {
	const H = 4
	bf := func(v ...float32) []uint16 { return runtime.ToBF16(v) }
	y := append(bf(1, 2, 3, 4), bf(5, 6, 7, 8)...)
	y = append(y, bf(-1, -2, -3, -4)...)
	rows := []int{0, 2}
	ref := []float64{1, 2, 3, 4, -1, -2, -3, -4.5}
	rel, maxAbs, rms := compareRows(y, H, rows, ref)
	wantRel := 0.5 / math.Sqrt(1+4+9+16+1+4+9+4.5*4.5)
	if math.Abs(rel-wantRel) > 1e-12 || maxAbs != 0.5 || math.Abs(rms-math.Sqrt((60+4.5*4.5-16)/8)) > 1e-12 {
		t.Fatalf("rel %v (want %v) maxAbs %v rms %v", rel, wantRel, maxAbs, rms)
	}
	if rel, _, _ := compareRows(bf(0, 0, 0, 0), H, []int{0}, []float64{0, 0, 0, 0}); rel != 0 {
		t.Fatalf("zero vs zero: %v", rel)
	}
	if rel, _, _ := compareRows(bf(1, 0, 0, 0), H, []int{0}, []float64{0, 0, 0, 0}); !math.IsInf(rel, 1) {
		t.Fatalf("nonzero vs zero: %v", rel)
	}
	u, n := poisonCounts([]uint16{0xFFFF, 0x7FC0, 0xFF80, 0x3F80, 0xFFFF, 0x0000})
	if u != 2 || n != 2 {
		t.Fatalf("poisonCounts: %d unwritten, %d non-finite", u, n)
	}
}

func TestForwardCost(t *testing.T) {
	l := schedule.Layer{Name: "c", Hidden: 16, Intermediate: 8, Experts: 4, TopK: 2, SharedExperts: 1, SharedIntermediate: 8}
	r := schedule.Routing{IDs: []int32{0, 1, 1, -1, 3, 3}, Weights: make([]float32, 6)}
	c := forwardCost(l, 3, r)
	// 5 routes, experts {0, 1, 3}; each expert GEMM pair is 2*8*16 + 16*8 = 384 multiply-adds.
	if c.routes != 5 || c.active != 3 {
		t.Fatalf("routes %d active %d", c.routes, c.active)
	}
	if c.flops != 5*384*2+3*384*2 {
		t.Fatalf("flops %v", c.flops)
	}
	if want := 3.0*384*2 + 384*2 + 2*3*16*2 + 3*2*8; c.bytes != want {
		t.Fatalf("bytes %v, want %v", c.bytes, want)
	}
	lm := l
	lm.Routing = schedule.RoutingMap
	m := make([]bool, 3*4)
	m[0*4+0], m[0*4+1], m[1*4+1], m[2*4+3] = true, true, true, true
	cm := forwardCost(lm, 3, schedule.Routing{Map: m, Probs: make([]float32, 12)})
	if cm.routes != 4 || cm.active != 3 || cm.bytes != 3.0*384*2+384*2+2*3*16*2+3*4*5 {
		t.Fatalf("map: %+v", cm)
	}
	lb := l
	lb.Biases, lb.SharedGate = true, true
	if cb := forwardCost(lb, 3, r); cb.bytes != c.bytes+3*(2*8+16)*4+16*2 {
		t.Fatalf("biases and gate: %v", cb.bytes)
	}
}

func TestBenchHelpers(t *testing.T) {
	if n := benchSets(100<<20, 50<<20); n != 2 {
		t.Fatalf("set larger than L2: %d sets", n)
	}
	if n := benchSets(10<<20, 50<<20); n != 11 {
		t.Fatalf("10 MB sets, 50 MB L2: %d sets", n)
	}
	if n := benchSets(1<<10, 50<<20); n != 16 {
		t.Fatalf("tiny sets: %d", n)
	}
	s, b := rooflineTime(750e12, 4200e9, 750, 4200)
	if s != 1 || b != "compute" {
		t.Fatalf("roofline %v %s", s, b)
	}
	if s, b := rooflineTime(1e12, 8400e9, 750, 4200); s != 2 || b != "memory" {
		t.Fatalf("roofline %v %s", s, b)
	}
	v := []float64{1, 2, 3, 4}
	if median(v) != 2.5 || median(v[:3]) != 2 || percentile(v, 0.9) != 4 || percentile(v, 0.5) != 2 {
		t.Fatal("median/percentile")
	}
}

func TestParseRunLists(t *testing.T) {
	T, err := parseTokenList("0, 1,64,4096")
	if err != nil || !slices.Equal(T, []int{0, 1, 64, 4096}) {
		t.Fatalf("tokens: %v %v", T, err)
	}
	tg, err := parseTargetList("sm_80,sm_90a")
	if err != nil || !slices.Equal(tg, []target.Target{target.SM80, target.SM90a}) {
		t.Fatalf("targets: %v %v", tg, err)
	}
	for _, bad := range []string{"", "1,", "-1", "1.5", "2,2"} {
		if _, err := parseTokenList(bad); err == nil {
			t.Errorf("--tokens %q: want an error", bad)
		}
	}
	for _, bad := range []string{"", "sm_80,", "sm_75", "sm_80,80"} {
		if _, err := parseTargetList(bad); err == nil {
			t.Errorf("--target %q: want an error", bad)
		}
	}
}

// fakeMode makes the stand-in device misbehave in one way.
type fakeMode int

const (
	fakeExact       fakeMode = iota // y = bf16(reference)
	fakeZeros                       // y = 0 (no computation)
	fakeWrong                       // one element far off
	fakeUnwritten                   // one element left unwritten
	fakeNaN                         // one element NaN
	fakeFlaky                       // run 3 differs in one bit
	fakeWord                        // the error word is set
	fakeCompileFail                 // sm_80 does not compile
)

// fakeBackend is a host stand-in for the GPU: it generates the weights
// through runtime.GenerateWeights (as the upload does) and answers each
// forward from the lazy float64 reference rounded to bf16, or misbehaves as
// its mode says. It checks that a model's device memory is freed before the
// next model's is loaded.
type fakeBackend struct {
	t         *testing.T
	mode      fakeMode
	gen       *schedule.WeightGen
	inputs    int // input sets loaded
	models    []string
	generated int64 // weights handed out by GenerateWeights
}

type fakeInputs struct {
	b *fakeBackend
	x []float32
	r schedule.Routing
	y []uint16 // bf16 of the reference, computed on first use
}

func (in *fakeInputs) Free() error { in.b.inputs--; return nil }

type fakeKernel struct {
	b      *fakeBackend
	target target.Target
	runs   map[*fakeInputs]int
}

func (b *fakeBackend) describe() string { return "host stand-in" }

func (b *fakeBackend) loadWeights(l schedule.Layer, src runtime.WeightSource) error {
	if b.gen != nil || b.inputs != 0 {
		b.t.Errorf("%s: the previous model's weights (%v) or %d input sets are still loaded", l.Name, b.gen != nil, b.inputs)
	}
	b.models = append(b.models, l.Name)
	if err := runtime.GenerateWeights(l, src, func(p runtime.WeightPart) error {
		switch d := p.Data.(type) {
		case []uint16:
			b.generated += int64(len(d))
		case []float32:
			b.generated += int64(len(d))
		}
		return nil
	}); err != nil {
		return err
	}
	b.gen = src.(*schedule.WeightGen)
	return nil
}

func (b *fakeBackend) freeWeights() error { b.gen = nil; return nil }

func (b *fakeBackend) loadInputs(l schedule.Layer, x []float32, r schedule.Routing) (runInputs, error) {
	b.inputs++
	return &fakeInputs{b: b, x: x, r: r}, nil
}

func (b *fakeBackend) compile(l schedule.Layer, s schedule.Schedule) (runKernel, error) {
	if b.mode == fakeCompileFail && s.Target == target.SM80 {
		return nil, errors.New("fake compile error")
	}
	return &fakeKernel{b: b, target: s.Target, runs: map[*fakeInputs]int{}}, nil
}

func (k *fakeKernel) close() error { return nil }

func (k *fakeKernel) forward(in runInputs, y []uint16) (string, error) {
	fi := in.(*fakeInputs)
	k.runs[fi]++
	for i := range y {
		y[i] = 0xFFFF // the poison
	}
	if len(y) == 0 {
		return "", nil
	}
	if k.b.mode == fakeZeros {
		clear(y)
		return "", nil
	}
	if fi.y == nil {
		H := k.b.gen.Layer().Hidden
		rows := make([]int, len(fi.x)/H)
		for i := range rows {
			rows[i] = i
		}
		ref, err := k.b.gen.ForwardRows(fi.x, fi.r, rows)
		if err != nil {
			return "", err
		}
		fi.y = make([]uint16, len(ref))
		for i, v := range ref {
			fi.y[i] = runtime.ToBF16([]float32{float32(v)})[0]
		}
	}
	copy(y, fi.y)
	last := len(y) - 1
	switch k.b.mode {
	case fakeWrong:
		y[last] = runtime.ToBF16([]float32{1e4})[0]
	case fakeUnwritten:
		y[last] = 0xFFFF
	case fakeNaN:
		y[last] = 0x7FC0
	case fakeFlaky:
		if k.runs[fi] == 3 {
			y[last] ^= 1
		}
	case fakeWord:
		return "routing: expert id out of range", nil
	}
	return "", nil
}

// smallPreset is a preset shrunk to H = 64, I = I_s = 32, with E, K, the
// activation, biases, shared experts, gate and router kept.
func smallPreset(name string) (schedule.Layer, error) {
	l, err := schedule.Preset(name)
	if err != nil {
		return l, err
	}
	l.Hidden, l.Intermediate = 64, 32
	if l.SharedExperts > 0 {
		l.SharedIntermediate = 32
	}
	return l, nil
}

// withFake runs the mokc CLI with the stand-in device, with the presets
// shrunk (smallPreset) when shrink is set; it returns stdout, stderr and
// the error.
func withFake(t *testing.T, b *fakeBackend, shrink bool, args ...string) (string, string, error) {
	t.Helper()
	oldOpen, oldPreset := openRunBackend, runPresetLayer
	defer func() { openRunBackend, runPresetLayer = oldOpen, oldPreset }()
	openRunBackend = func(int, *time.Duration) (runBackend, func(), error) { return b, func() {}, nil }
	if shrink {
		runPresetLayer = smallPreset
	}
	var out, errw bytes.Buffer
	app := &cli.App{Name: "mokc", Commands: build(commands), Writer: &out, ErrWriter: &errw,
		ExitErrHandler: func(*cli.Context, error) {}}
	err := app.Run(append([]string{"mokc"}, args...))
	return out.String(), errw.String(), err
}

// TestRunAllModels runs `mokc run --model all` over both targets and four
// token counts (one above the sample size) on the stand-in device: one
// passing JSON object per (model, target, T), every model's device memory
// freed before the next, the weights generated once per model.
func TestRunAllModels(t *testing.T) {
	b := &fakeBackend{t: t}
	out, logs, err := withFake(t, b, true, "run", "--model", "all", "--target", "sm_80,sm_90a", "--tokens", "0,1,5,300",
		"--repeat", "4", "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, logs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	presets := schedule.Presets()
	if len(lines) != len(presets)*2*4 {
		t.Fatalf("%d JSON lines, want %d", len(lines), len(presets)*2*4)
	}
	var wantGenerated int64
	for i, line := range lines {
		var rep runReport
		if err := json.Unmarshal([]byte(line), &rep); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		m, tg, T := presets[i/8], []string{"sm_80", "sm_90a"}[i/4%2], []int{0, 1, 5, 300}[i%4]
		if rep.Model != m || rep.Target != tg || rep.Tokens != T {
			t.Fatalf("line %d is %s %s T=%d, want %s %s T=%d", i, rep.Model, rep.Target, rep.Tokens, m, tg, T)
		}
		if !rep.Pass || rep.Runs != 4 || rep.IdenticalRuns != 4 || !rep.AllWritten || rep.ErrorWord != "ok" {
			t.Errorf("%s %s T=%d: %+v", m, tg, T, rep)
		}
		if rep.Precision != "bf16" || !strings.HasPrefix(rep.Schedule, tg+":") {
			t.Errorf("%s %s T=%d: precision %q, schedule %q", m, tg, T, rep.Precision, rep.Schedule)
		}
		if want := min(T, runDefaultSample); rep.CheckedTokens != want {
			t.Errorf("%s %s T=%d: %d tokens checked, want %d", m, tg, T, rep.CheckedTokens, want)
		}
		if T > 0 && !(rep.RelL2 > 0 && rep.RelL2 < 4e-3 && rep.RefRMS > 0.1) {
			t.Errorf("%s %s T=%d: rel L2 %v (ref RMS %v): want the bf16 rounding of a non-trivial output", m, tg, T, rep.RelL2, rep.RefRMS)
		}
		if i%8 == 0 {
			l, _ := smallPreset(m)
			wantGenerated += int64(3*l.Experts*l.Intermediate*l.Hidden + 3*l.SharedWidth()*l.Hidden)
			if l.Biases {
				wantGenerated += int64(l.Experts * (2*l.Intermediate + l.Hidden))
			}
			if l.SharedGate {
				wantGenerated += int64(l.Hidden)
			}
		}
	}
	if !slices.Equal(b.models, presets) || b.generated != wantGenerated {
		t.Errorf("weights loaded for %v (%d values), want each preset once (%d values)", b.models, b.generated, wantGenerated)
	}
	if !strings.Contains(logs, "mokc run: PASS: 104 checks") {
		t.Errorf("no verdict on stderr:\n%s", logs)
	}
}

// TestRunDetectsFailures checks that each kind of wrong output fails its
// (target, T) with the right reason and makes mokc run exit non-zero.
func TestRunDetectsFailures(t *testing.T) {
	for _, c := range []struct {
		mode fakeMode
		want string
	}{
		{fakeZeros, "relative L2 error 1 > 0.01"},
		{fakeWrong, "relative L2 error"},
		{fakeUnwritten, "1 elements of y not written"},
		{fakeNaN, "1 NaN/Inf values"},
		{fakeFlaky, "y differs between runs (4 of 5 identical to the first)"},
		{fakeWord, "error word: routing: expert id out of range"},
		{fakeCompileFail, "fake compile error"},
	} {
		b := &fakeBackend{t: t, mode: c.mode}
		out, _, err := withFake(t, b, true, "run", "--model", "gpt-oss-20b", "--target", "sm_80,sm_90a", "--tokens", "0,300",
			"--repeat", "5", "--sample", "40")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("mode %d: %v, want %q", c.mode, err, c.want)
			continue
		}
		// T = 0 writes nothing and passes, except where compiling fails:
		// two lines fail either way, and the verdict.
		if n := strings.Count(out, "FAIL:"); n != 3 || !strings.Contains(out, "checked  40") {
			t.Errorf("mode %d: %d failed lines, want 2:\n%s", c.mode, n-1, out)
		}
	}
}

// TestRunMemoryBounded runs a full-size preset (qwen3-30b-a3b: 0.6e9
// weights, 2.4 GB as float32, 1.2 GB as bf16) through the whole host side
// of mokc run, weights generated for the upload and the reference on 65
// tokens, and checks that the Go heap never holds more than a small part
// of the layer.
func TestRunMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("full-size layer (-short)")
	}
	var peak atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var ms goruntime.MemStats
		for {
			goruntime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	b := &fakeBackend{t: t, mode: fakeZeros}
	_, logs, err := withFake(t, b, false, "run", "--model", "qwen3-30b-a3b", "--target", "sm_90a", "--tokens", "0,1,64")
	close(stop)
	<-done
	if err == nil || !strings.Contains(err.Error(), "relative L2 error 1 > 0.01") {
		t.Fatalf("zero output: %v\n%s", err, logs)
	}
	if b.generated != 3*128*768*2048 {
		t.Errorf("%d weights generated", b.generated)
	}
	t.Logf("peak Go heap %.0f MB\n%s", float64(peak.Load())/1e6, logs)
	if p := peak.Load(); p > 400<<20 {
		t.Errorf("peak Go heap %.0f MB: the layer is 1.2 GB as bf16, 2.4 GB as float32; want < 400 MB", float64(p)/1e6)
	}
}

// TestUsageErrorOneLine: a flag a command does not know is one error line
// naming the command's help, with nothing written to stdout (which may be
// redirected into an output file), for commands and subcommands, and the
// subcommands that take it when the flag is theirs.
func TestUsageErrorOneLine(t *testing.T) {
	for _, c := range []struct{ args, help string }{
		{"build --model qwen3-30b-a3b --tokens 0", "mokc build --help"},
		{"inspect layout --bogus", "mokc inspect layout --help"},
		{"plot roofline --zzz 1", "mokc plot roofline --help"},
		// A subcommand's flag on its parent names the subcommand.
		{"inspect --model qwen3-30b-a3b --backward", "mokc inspect --help; mokc inspect program takes it"},
	} {
		out, err := runCLI(strings.Fields(c.args)...)
		if err == nil || !strings.Contains(err.Error(), "not defined") || !strings.Contains(err.Error(), c.help) || out != "" {
			t.Errorf("%s: error %v, output %q", c.args, err, out)
		}
	}
}

// TestYDigest: yDigest hashes y's bf16 values as little-endian bytes
// (the empty y gives the SHA-256 of nothing), and one bit flipped changes
// it.
func TestYDigest(t *testing.T) {
	if got, want := yDigest(nil), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"; got != want {
		t.Fatalf("yDigest(nil) = %s, want %s", got, want)
	}
	// 0x3F80 (1.0) and 0xC000 (-2.0): bytes 80 3f 00 c0.
	if got, want := yDigest([]uint16{0x3F80, 0xC000}), fmt.Sprintf("%x", sha256.Sum256([]byte{0x80, 0x3f, 0x00, 0xc0})); got != want {
		t.Fatalf("yDigest = %s, want %s", got, want)
	}
	if yDigest([]uint16{0x3F80, 0xC000}) == yDigest([]uint16{0x3F81, 0xC000}) {
		t.Fatal("one flipped bit gives the same digest")
	}
}
