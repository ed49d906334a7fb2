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
// (schedule.ItemsQueue, the default sm_90a schedule's) the forward passes
// runChecked's checks and gives the fixed walk's bits, in direct runs and
// in replays of a captured graph (each launch leaves the queue words zero
// for the next), bf16 and mxfp8 on sm_90a, at T = 4096, 1100 and 64 (the
// decode GEMMs).
func TestItemsQueueGPU(t *testing.T) {
	ctx, targets, stream := openLayerTest(t)
	if !slices.Contains(targets, target.SM90a) {
		t.Skip("the queue walk is sm_90a's")
	}
	for _, name := range []string{"qwen3-30b-a3b", "qwen3-30b-a3b mxfp8"} {
		sameAs(t, ctx, stream, name, func(s *schedule.Schedule) { s.Items = schedule.ItemsFixed },
			func(s *schedule.Schedule) { s.Items = schedule.ItemsQueue }, []int{4096, 1100, 64}, "fixed walk", "queue")
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
	sameAs(t, ctx, stream, name, func(*schedule.Schedule) {}, edit, Ts, baseWhat, otherWhat)
}

// sameAs is sameAsDefault with the base schedule the default changed by
// baseEdit, and the other the base changed by edit; each then keeps the
// queue walk of work items and FC2Large only where its settings allow
// them (schedule.Schedule.FixedItemsWhereNeeded and FC2LargeWhereValid,
// as mokc's flags do). It returns the other layer.
func sameAs(t *testing.T, ctx *driver.Context, stream *driver.Stream, name string, baseEdit, edit func(*schedule.Schedule), Ts []int, baseWhat, otherWhat string) *runtime.Layer {
	t.Helper()
	l := testlayer.Named(t, name)
	seed, w, dw := randomWeightsOnDevice(t, ctx, l)
	s := testlayer.DefaultSchedule(t, l, target.SM90a)
	baseEdit(&s)
	s = s.FixedItemsWhereNeeded(l).FC2LargeWhereValid(l)
	base := loadLayer(t, ctx, l, s)
	edit(&s)
	s = s.FixedItemsWhereNeeded(l).FC2LargeWhereValid(l)
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
	return other
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

// TestSharesSMGPU: with the GEMMs whose tiles fit half an SM built two
// blocks per SM (schedule.Schedule.BlocksPerSM = 2), of one producer warp
// (Warps.Producer 1) or of a producer warpgroup, the forward passes
// runChecked's checks and gives the bits of the same tiles one block per
// SM, in direct runs and graph replays, bf16 (qwen3-30b-a3b; deepseek-v2-
// lite with its shared experts) and mxfp8 (qwen3-30b-a3b, whose FC1 of 64
// token rows then quantizes h itself, and gpt-oss-20b: the register-fed
// GEMMs, with a producer warpgroup of 128 token rows) at T from 4096 to
// 1, across the default's GEMM variant's token range (the mxfp8 decode
// tiles, one per SM, beside the base kernels two per SM); and the runtime
// launches them two per SM (Layer.PerSMGrids).
func TestSharesSMGPU(t *testing.T) {
	ctx, targets, stream := openLayerTest(t)
	if !slices.Contains(targets, target.SM90a) {
		t.Skip("two blocks per SM are built for sm_90a")
	}
	for _, c := range []struct {
		name string
		prod int
	}{
		{"qwen3-30b-a3b", 1}, {"deepseek-v2-lite", 1}, {"qwen3-30b-a3b mxfp8", 1}, {"gpt-oss-20b mxfp8", 1},
		{"qwen3-30b-a3b", 4}, {"deepseek-v2-lite", 4}, {"qwen3-30b-a3b mxfp8", 4}, {"gpt-oss-20b mxfp8", 4},
	} {
		name, l := c.name, testlayer.Named(t, c.name)
		// The default's GEMM variant kept: its token range runs its own kernels.
		tiles := func(s *schedule.Schedule) { testlayer.SharesSMTiles(s, l, c.prod) }
		ly := sameAs(t, ctx, stream, name, tiles, func(s *schedule.Schedule) { s.BlocksPerSM, s.Warps.Producer = 2, c.prod }, []int{4096, 2000, 300, 64, 1}, "one block per SM", fmt.Sprintf("two blocks per SM (producer warps %d)", c.prod))
		g, sms := ly.PerSMGrids(), ctx.Device().SMCount
		ks := []string{"moe_fc1", "moe_fc2"}
		if l.SharedExperts > 0 {
			ks = append(ks, "moe_shared_fc1", "moe_shared_fc2")
		}
		for _, k := range ks {
			if g[k] != 2*sms {
				t.Errorf("%s: %s launched with %d blocks, want %d (two per SM): %v", name, k, g[k], 2*sms, g)
			}
		}
	}
}
