//go:build cuda

package runtime_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/mokc/mokc/driver"
	"github.com/mokc/mokc/internal/testlayer"
	"github.com/mokc/mokc/runtime"
	"github.com/mokc/mokc/schedule"
	"github.com/mokc/mokc/target"
)

// TestItemsQueueGPU: with the routed GEMMs' work items taken from a queue
// (schedule.ItemsQueue) the forward passes runChecked's checks and gives
// the fixed walk's bits, in direct runs and in replays of a captured graph
// (each launch leaves the queue words zero for the next), bf16 and mxfp8
// on sm_90a, at T = 4096, 1100 and 64 (the decode GEMMs).
func TestItemsQueueGPU(t *testing.T) {
	ctx, targets, stream := openLayerTest(t)
	if !slices.Contains(targets, target.SM90a) {
		t.Skip("the queue walk is sm_90a's")
	}
	for _, name := range []string{"qwen3-30b-a3b", "qwen3-30b-a3b mxfp8"} {
		sameAsDefault(t, ctx, stream, name, func(s *schedule.Schedule) { s.Items = schedule.ItemsQueue },
			[]int{4096, 1100, 64}, "fixed walk", "queue")
	}
}

// sameAsDefault checks the forward of layer name (testlayer.Named) under
// its default sm_90a schedule changed by edit against the default
// schedule's: runChecked's checks and the default's bits at each T of Ts
// (largest first: a capture pins the workspace), in direct runs and in
// two replays of a graph captured over the case's buffers (each launch
// leaves the workspace's queue words and counters as the next needs).
// baseWhat and otherWhat name the two in failures.
func sameAsDefault(t *testing.T, ctx *driver.Context, stream *driver.Stream, name string, edit func(*schedule.Schedule), Ts []int, baseWhat, otherWhat string) {
	t.Helper()
	l := testlayer.Named(t, name)
	seed, w, dw := randomWeightsOnDevice(t, ctx, l)
	base := newLayer(t, ctx, l, target.SM90a)
	s := testlayer.DefaultSchedule(t, l, target.SM90a)
	edit(&s)
	other := loadLayer(t, ctx, l, s)
	for _, T := range Ts {
		t.Run(fmt.Sprintf("%s/T=%d", name, T), func(t *testing.T) {
			c := newCase(t, ctx, l, w, T, seed+uint64(T))
			args := argsOf(dw, c.in, stream)
			want := sameBits(t, ctx, base, other, args, c.ref, baseWhat, otherWhat)
			g, err := other.CaptureForward(stream, args.b)
			if err != nil {
				t.Fatal(err)
			}
			defer g.Destroy()
			replayChecked(t, ctx, stream, other, g, args.b, want, "replay 1")
			replayChecked(t, ctx, stream, other, g, args.b, want, "replay 2")
		})
	}
}

// sameBits runs args through base and other (runChecked's checks, named
// baseWhat and otherWhat) and wants other's y bit for bit base's, which
// it returns.
func sameBits(t *testing.T, ctx *driver.Context, base, other *runtime.Layer, args forwardCall, ref []float64, baseWhat, otherWhat string) []uint16 {
	t.Helper()
	want := runChecked(t, ctx, base, args, ref, baseWhat, nil)
	got := runChecked(t, ctx, other, args, ref, otherWhat, nil)
	if i := firstDiffBits(got, want); i >= 0 {
		t.Fatalf("%s: y[%d] = %#04x, %s %#04x", otherWhat, i, got[i], baseWhat, want[i])
	}
	return want
}

// firstDiffBits is the first index where a and b differ, -1 if none.
func firstDiffBits(a, b []uint16) int {
	for i := range a {
		if i >= len(b) || a[i] != b[i] {
			return i
		}
	}
	if len(b) > len(a) {
		return len(a)
	}
	return -1
}
