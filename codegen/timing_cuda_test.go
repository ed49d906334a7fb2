//go:build cuda

package codegen_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/mokc/mokc/codegen"
	"github.com/mokc/mokc/driver"
	"github.com/mokc/mokc/schedule"
)

// TestForwardTimingSM80 times every kernel of the sm_80 forward of
// qwen3-30b-a3b at T tokens (MOKC_TIMING_T, default 4096) and logs the
// GEMMs' throughput. It checks nothing but that the launches succeed; it
// is skipped with -short.
func TestForwardTimingSM80(t *testing.T) {
	if testing.Short() {
		t.Skip("timing")
	}
	ctx := openGPU(t)
	T := 4096
	if v, err := strconv.Atoi(os.Getenv("MOKC_TIMING_T")); err == nil && v > 0 {
		T = v
	}
	c := codegen.ForwardCases(t)[0]
	l := c.Layer
	p, llc := timingProgram(t, c)
	ex, err := newExecutor(ctx, p, llc)
	if err != nil {
		t.Fatal(err)
	}
	d := &dev{t: t, ctx: ctx}
	defer d.free()
	bufs := timingBuffers(t, d, p, l, T)
	if err := ex.run(T, bufs); err != nil { // warm-up
		t.Fatal(err)
	}
	timeKernels(t, ctx, ex, l, T, bufs)
}

// timingProgram is the program of case c and llc-19's PTX of it (testdata),
// or, with MOKC_TIMING_SCHED=stages,warps,bk and MOKC_TIMING_PTX=file, a
// schedule variant and its PTX compiled elsewhere from the same variant.
func timingProgram(t *testing.T, c codegen.ForwardCase) (*codegen.Program, string) {
	p := codegen.BuildForwardCase(t, c)
	llc, err := forwardPTX.ReadFile("testdata/forward/" + c.Name + ".llc.ptx")
	if err != nil {
		t.Fatal(err)
	}
	if v := os.Getenv("MOKC_TIMING_SCHED"); v != "" {
		s, err := codegen.TimingSchedule(c.Layer, v)
		if err != nil {
			t.Fatal(err)
		}
		if p, err = codegen.Build(c.Layer, s); err != nil {
			t.Fatal(err)
		}
		if llc, err = os.ReadFile(os.Getenv("MOKC_TIMING_PTX")); err != nil {
			t.Fatal(err)
		}
		t.Logf("schedule %v", s)
	}
	return p, string(llc)
}

// timingBuffers binds p's buffers for T tokens: random x, routing and
// weights (uniform in +-0.05), fresh allocations for the rest.
func timingBuffers(t *testing.T, d *dev, p *codegen.Program, l schedule.Layer, T int) map[string]driver.DevicePtr {
	H, I, E, K := l.Hidden, l.Intermediate, l.Experts, l.TopK
	r := rand.New(rand.NewPCG(rand.Uint64(), 9))
	rnd := func(n int, scale float32) []uint16 {
		v := make([]float32, n)
		for i := range v {
			v[i] = (r.Float32()*2 - 1) * scale
		}
		return bf16Bits(v)
	}
	x := schedule.RandomInput(T, H, 7)
	rt, err := schedule.GenerateRouting(l, x, 8)
	if err != nil {
		t.Fatal(err)
	}
	bufs := map[string]driver.DevicePtr{
		"x":       d.put(bf16Bits(x), 2*T*H),
		"ids":     d.put(rt.IDs, 4*T*K),
		"weights": d.put(rt.Weights, 4*T*K),
		"fc1":     d.put(rnd(E*2*I*H, 0.05), 2*E*2*I*H),
		"fc2":     d.put(rnd(E*H*I, 0.05), 2*E*H*I),
	}
	for _, b := range p.Buffers {
		if _, ok := bufs[b.Name]; !ok {
			bufs[b.Name] = d.scratch(b.Name, int(b.Bytes.Eval(int64(T))))
		}
	}
	return bufs
}

// timeKernels launches ex's kernels one at a time with events in between
// and logs each kernel's time and the GEMMs' throughput.
func timeKernels(t *testing.T, ctx *driver.Context, ex *executor, l schedule.Layer, T int, bufs map[string]driver.DevicePtr) {
	H, I, K := l.Hidden, l.Intermediate, l.TopK
	var err error
	evs := make([]*driver.Event, len(ex.p.Kernels)+1)
	for i := range evs {
		if evs[i], err = ctx.NewEvent(); err != nil {
			t.Fatal(err)
		}
	}
	saved := ex.p.Kernels
	for i, k := range saved {
		if err := evs[i].Record(nil); err != nil {
			t.Fatal(err)
		}
		ex.p.Kernels = []codegen.Kernel{k}
		if err := ex.run(T, bufs); err != nil {
			t.Fatal(err)
		}
	}
	ex.p.Kernels = saved
	if err := evs[len(saved)].Record(nil); err != nil {
		t.Fatal(err)
	}
	var total float32
	for i, k := range saved {
		ms, err := driver.ElapsedMs(evs[i], evs[i+1])
		if err != nil {
			t.Fatal(err)
		}
		total += ms
		extra := ""
		switch k.Name {
		case "moe_fc1":
			extra = fmt.Sprintf("  %.0f TFLOP/s", 2*float64(T*K)*float64(2*I)*float64(H)/float64(ms)/1e9)
		case "moe_fc2":
			extra = fmt.Sprintf("  %.0f TFLOP/s", 2*float64(T*K)*float64(H)*float64(I)/float64(ms)/1e9)
		}
		t.Logf("%-16s %8.3f ms%s", k.Name, ms, extra)
	}
	t.Logf("T=%d total %.3f ms (kernels launched one at a time, synchronised)", T, total)
}
