//go:build cuda

package runtime_test

import (
	"testing"

	"github.com/mokc/mokc/internal/testlayer"
	"github.com/mokc/mokc/runtime"
)

// TestPhaseTimesGPU: an instrumented forward (schedule.Schedule.PhaseTimes)
// gives the uninstrumented forward's bits and records every kernel that
// ran at each T, in launch order, each starting no earlier than the
// previous kernel ended (its start is recorded after its wait for that
// kernel; 2 µs allowed for the timer's granularity) and ending after it
// started; a second Forward without a reset keeps the earliest starts; a
// workspace that grows for a larger T starts with its records reset.
// Each target the device runs, qwen3-30b-a3b at T = 1, 64 and 600.
func TestPhaseTimesGPU(t *testing.T) {
	ctx, targets, stream := openLayerTest(t)
	l := testlayer.Preset(t, "qwen3-30b-a3b")
	seed, w, dw := randomWeightsOnDevice(t, ctx, l)
	for _, target := range targets {
		t.Run(target.String(), func(t *testing.T) {
			plain := newLayer(t, ctx, l, target)
			s := testlayer.DefaultSchedule(t, l, target)
			s.PhaseTimes = true
			ly, err := runtime.NewLayer(ctx, l, s)
			if err != nil {
				t.Fatal(err)
			}
			defer ly.Close()
			if err := ly.ResetPhaseTimes(stream); err == nil {
				t.Error("ResetPhaseTimes before any Forward: no error")
			}
			if err := plain.ResetPhaseTimes(stream); err == nil {
				t.Error("ResetPhaseTimes of an uninstrumented layer: no error")
			}
			for i, T := range []int{1, 64, 600} {
				c := newCase(t, ctx, l, w, T, seed+uint64(i)+1)
				want := runChecked(t, ctx, plain, argsOf(dw, c.in, stream), c.ref, "uninstrumented", nil)
				got := runChecked(t, ctx, ly, argsOf(dw, c.in, stream), c.ref, "instrumented", nil)
				for j := range got {
					if got[j] != want[j] {
						t.Fatalf("T=%d: y[%d] = %#04x instrumented, %#04x without", T, j, got[j], want[j])
					}
				}
				// Without a reset: the records of runChecked's runs, in a
				// workspace that grew for this T (and so started reset).
				if pts, err := ly.PhaseTimes(nil); err != nil || len(pts) < 4 || pts[0].End <= pts[0].Start {
					t.Fatalf("T=%d: records of the unreset workspace: %+v, %v", T, pts, err)
				}
				b := argsOf(dw, c.in, stream).b
				if err := ly.ResetPhaseTimes(stream); err != nil {
					t.Fatal(err)
				}
				if err := ly.Forward(stream, b); err != nil {
					t.Fatal(err)
				}
				pts, err := ly.PhaseTimes(stream)
				if err != nil {
					t.Fatal(err)
				}
				ran := 0
				for _, name := range ly.Kernels() {
					if len(pts) > ran && pts[ran].Kernel == name {
						ran++
					}
				}
				if ran != len(pts) || ran < 4 {
					t.Fatalf("T=%d: %d phase records, %d of them in launch order: %+v", T, len(pts), ran, pts)
				}
				for k, p := range pts {
					if p.End <= p.Start {
						t.Errorf("T=%d: %s ends at %d, before its start %d", T, p.Kernel, p.End, p.Start)
					}
					if k > 0 && p.Start+2000 < pts[k-1].End {
						t.Errorf("T=%d: %s starts at %d, %d ns before %s ended", T, p.Kernel, p.Start, pts[k-1].End-p.Start, pts[k-1].Kernel)
					}
				}
				t.Logf("T=%d: %d kernels, %.1f µs from the first start to the last end", T, len(pts), float64(pts[len(pts)-1].End-pts[0].Start)/1e3)
				if err := ly.Forward(stream, b); err != nil {
					t.Fatal(err)
				}
				again, err := ly.PhaseTimes(stream)
				if err != nil {
					t.Fatal(err)
				}
				if len(again) != len(pts) || again[0].Start != pts[0].Start || again[len(again)-1].End <= pts[len(pts)-1].End {
					t.Errorf("T=%d: two forwards without a reset: first start %d (was %d), last end %d (was %d)", T, again[0].Start, pts[0].Start, again[len(again)-1].End, pts[len(pts)-1].End)
				}
			}
		})
	}
}
