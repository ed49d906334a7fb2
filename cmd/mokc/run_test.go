package main

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/mokc/mokc/runtime"
	"github.com/mokc/mokc/schedule"
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
	_, err := runtime.Open(0)
	var want string
	switch {
	case err == nil:
		t.Skip("a device is present")
	case errors.Is(err, runtime.ErrNoCUDA):
		want = "built without CUDA support"
	case errors.Is(err, runtime.ErrNoDevice):
		want = "no usable CUDA device"
	default:
		t.Fatal(err)
	}
	for _, cmd := range [][]string{
		{"run", "--model", "qwen3-30b-a3b", "--tokens", "4"},
		{"bench", "--model", "gpt-oss-20b", "--target", "sm_80"},
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
		{[]string{"bench", "--model", "qwen3-30b-a3b", "--tokens", "0"}, "--tokens 0"},
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
	s, b := roofline(750e12, 4200e9, 750, 4200)
	if s != 1 || b != "compute" {
		t.Fatalf("roofline %v %s", s, b)
	}
	if s, b := roofline(1e12, 8400e9, 750, 4200); s != 2 || b != "memory" {
		t.Fatalf("roofline %v %s", s, b)
	}
	v := []float64{1, 2, 3, 4}
	if median(v) != 2.5 || median(v[:3]) != 2 || percentile(v, 0.9) != 4 || percentile(v, 0.5) != 2 {
		t.Fatal("median/percentile")
	}
}
