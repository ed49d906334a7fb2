//go:build cuda

package runtime_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mokc/mokc/codegen"
	"github.com/mokc/mokc/internal/testlayer"
	"github.com/mokc/mokc/runtime"
	"github.com/mokc/mokc/schedule"
	"github.com/mokc/mokc/target"
)

// TestChainGPU: with the forward's FC1 and FC2 in one kernel
// (schedule.ChainFC, moe_fc1_fc2) the forward passes runChecked's checks
// and gives the two kernels' bits for two inputs, in direct runs and in
// replays of a graph captured over the first input's buffers, the second
// input then copied into them (the kernel writing the tile list zeroes
// the counters every run, so an FC2 item waits for this run's rows of h,
// not the last run's), on bf16 presets of both gate/up layouts
// (qwen3-30b-a3b's halves, gpt-oss-20b's interleaved rows with biases
// and the clamped activation) and two mxfp8 ones (the decode tiles'
// chained kernel, FC1's epilogue writing h's MXFP8 form), at the token
// counts chainTokens gives.
func TestChainGPU(t *testing.T) {
	ctx, targets, stream := openLayerTest(t)
	if !slices.Contains(targets, target.SM90a) {
		t.Skip("the chained kernel is sm_90a's")
	}
	for _, name := range []string{"qwen3-30b-a3b", "gpt-oss-20b", "olmoe-1b-7b", "qwen3-30b-a3b mxfp8", "olmoe-1b-7b mxfp8"} {
		l := testlayer.Named(t, name)
		seed, w, dw := randomWeightsOnDevice(t, ctx, l)
		off := newLayer(t, ctx, l, target.SM90a)
		s := testlayer.DefaultSchedule(t, l, target.SM90a)
		s.Chain = schedule.ChainFC
		s = s.FixedItemsWhereNeeded(l).FC2LargeWhereValid(l)
		chained := loadLayer(t, ctx, l, s)
		Ts := chainTokens(t, l, s)
		if len(Ts) == 0 {
			t.Fatalf("%s: the chained kernel runs at no T", name)
		}
		for _, T := range Ts { // largest first: a capture pins the workspace
			t.Run(fmt.Sprintf("%s/T=%d", name, T), func(t *testing.T) {
				c1, c2 := newCase(t, ctx, l, w, T, seed+uint64(T)), newCase(t, ctx, l, w, T, seed+uint64(T)+1)
				var want [2][]uint16
				for i, c := range []caseData{c1, c2} {
					want[i] = sameBits(t, ctx, off, chained, argsOf(dw, c.in, stream), c.ref, "two kernels", fmt.Sprintf("input %d chained", i+1))
				}
				b := argsOf(dw, c1.in, stream).b
				g, err := chained.CaptureForward(stream, b)
				if err != nil {
					t.Fatal(err)
				}
				defer g.Destroy()
				replayChecked(t, ctx, stream, chained, g, b, want[0], "replay of the captured inputs")
				copyInputs(t, ctx, c1.in, c2.in)
				replayChecked(t, ctx, stream, chained, g, b, want[1], "replay with new inputs in the same buffers")
				replayChecked(t, ctx, stream, chained, g, b, want[1], "second replay")
			})
		}
	}
}

// chainTokens is the token counts TestChainGPU runs for layer l under
// schedule s: one per chained kernel (moe_fc1_fc2, moe_fc1_fc2_<variant>,
// moe_fc1_fc2_gathered, moe_fc1_fc2_decode), 64 where it runs there, else
// the first T of its first range, and 4096 where one runs, largest first.
func chainTokens(t *testing.T, l schedule.Layer, s schedule.Schedule) []int {
	t.Helper()
	p, err := codegen.Build(l, s)
	if err != nil {
		t.Fatal(err)
	}
	var Ts []int
	for _, k := range p.Kernels {
		if !strings.HasPrefix(k.Name, "moe_fc1_fc2") || len(k.Tokens) == 0 { // and its _gathered, _<variant> forms
			continue
		}
		T := int(k.Tokens[0].Min)
		if k.RunsAt(64) {
			T = 64
		}
		Ts = append(Ts, T)
		if k.RunsAt(4096) {
			Ts = append(Ts, 4096)
		}
	}
	slices.Sort(Ts)
	slices.Reverse(Ts)
	return slices.Compact(Ts)
}

// TestChainWaitTimeoutGPU: launched with twice as many blocks as SMs
// (runtime.SetLaunchGrid), the chained kernel's first wave of blocks
// reaches FC2 items whose row tiles have FC1 items of blocks that cannot
// start until the first wave ends: its waits give up after the wait limit
// (200 ms here), the kernel ends, and CheckErrors returns a
// *runtime.WaitTimeoutError naming the kernel and the limit, not a routing
// error. With the plan's grid and the default limit back, the next run
// gives the two kernels' bits (the counters a timed-out run leaves are
// zeroed by the next run's tile-list writer, and CheckErrors cleared the
// error words).
func TestChainWaitTimeoutGPU(t *testing.T) {
	ctx, targets, stream := openLayerTest(t)
	if !slices.Contains(targets, target.SM90a) {
		t.Skip("the chained kernel is sm_90a's")
	}
	l := testlayer.Preset(t, "qwen3-30b-a3b")
	seed, w, dw := randomWeightsOnDevice(t, ctx, l)
	off := newLayer(t, ctx, l, target.SM90a)
	s := testlayer.DefaultSchedule(t, l, target.SM90a)
	s.Chain = schedule.ChainFC
	s = s.FixedItemsWhereNeeded(l).FC2LargeWhereValid(l)
	chained := loadLayer(t, ctx, l, s)
	const T = 4096
	c := newCase(t, ctx, l, w, T, seed+T)
	args := argsOf(dw, c.in, stream)
	runtime.SetLaunchGrid(chained, "moe_fc1_fc2", 2*ctx.Device().SMCount)
	if err := chained.SetWaitLimit(200 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := args.run(chained); err != nil {
		t.Fatal(err)
	}
	err := chained.CheckErrors(stream)
	var we *runtime.WaitTimeoutError
	var re *runtime.RoutingError
	switch {
	case !errors.As(err, &we) || errors.As(err, &re):
		t.Fatalf("CheckErrors = %v (%T), want only a *runtime.WaitTimeoutError", err, err)
	case !slices.Contains(we.Kernels, "moe_fc1_fc2") || we.Limit != 200*time.Millisecond:
		t.Fatalf("WaitTimeoutError names kernels %v and limit %v, want moe_fc1_fc2 and 200ms: %v", we.Kernels, we.Limit, err)
	}
	t.Logf("twice the blocks, limit 200 ms: ended after %v: %v", time.Since(start), err)
	runtime.SetLaunchGrid(chained, "moe_fc1_fc2", 0)
	if err := chained.SetWaitLimit(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	sameBits(t, ctx, off, chained, args, c.ref, "two kernels", "chained, after a run that gave up")
}

// TestClusterGPU: with the routed GEMMs in 2-CTA clusters
// (schedule.Schedule.Cluster = 2: CTA pairs sharing A by TMA multicast)
// the forward passes runChecked's checks and gives the bits of the
// unclustered forward of the same (fixed) walk of work items (each output
// computed by one CTA with the same tiles in the same K order), and a
// captured graph replays them, on
// qwen3-30b-a3b (gate/up halves) and gpt-oss-20b (interleaved rows,
// biases) in bf16, qwen3-30b-a3b and olmoe-1b-7b in mxfp8 (the
// register-fed GEMMs), at T = 4096 and 2000 (the base tiles and the tile
// variant), and olmoe-1b-7b's chained FC1 and FC2 in clusters (T = 4096,
// 300).
func TestClusterGPU(t *testing.T) {
	ctx, targets, stream := openLayerTest(t)
	if !slices.Contains(targets, target.SM90a) {
		t.Skip("2-CTA clusters are built for sm_90a")
	}
	for _, name := range []string{"qwen3-30b-a3b", "gpt-oss-20b", "qwen3-30b-a3b mxfp8", "olmoe-1b-7b mxfp8"} {
		sameAs(t, ctx, stream, name, func(s *schedule.Schedule) { s.Items = schedule.ItemsFixed },
			func(s *schedule.Schedule) { s.Cluster = 2 }, []int{4096, 2000}, "unclustered", "clustered")
	}
	// The chained FC1 and FC2 in clusters (olmoe-1b-7b: both GEMMs pair).
	sameAsDefault(t, ctx, stream, "olmoe-1b-7b", func(s *schedule.Schedule) { s.Cluster, s.Chain = 2, schedule.ChainFC }, []int{4096, 300}, "two kernels", "chained in clusters")
}
