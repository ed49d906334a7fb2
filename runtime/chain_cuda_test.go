//go:build cuda

package runtime_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mokc/mokc/codegen"
	"github.com/mokc/mokc/internal/testlayer"
	"github.com/mokc/mokc/runtime"
	"github.com/mokc/mokc/schedule"
	"github.com/mokc/mokc/target"
)

// TestChainGPU: with the forward's FC1 and FC2 in one kernel
// (schedule.ChainFC, moe_fc1_fc2) the forward passes runChecked's checks
// and gives the two kernels' bits, in direct runs and in replays of a
// captured graph (the kernel writing the tile list zeroes the counters
// every run), on bf16 presets of both gate/up layouts (qwen3-30b-a3b's
// halves, gpt-oss-20b's interleaved rows with biases and the clamped
// activation) at T = 4096 and at the first T of each token range where
// a chained kernel runs (the base tiles' and the tile variant's).
func TestChainGPU(t *testing.T) {
	ctx, targets, stream := openLayerTest(t)
	if !slices.Contains(targets, target.SM90a) {
		t.Skip("the chained kernel is sm_90a's")
	}
	for _, name := range []string{"qwen3-30b-a3b", "gpt-oss-20b", "olmoe-1b-7b"} {
		l := testlayer.Preset(t, name)
		seed, w, dw := randomWeightsOnDevice(t, ctx, l)
		off := newLayer(t, ctx, l, target.SM90a)
		s := testlayer.DefaultSchedule(t, l, target.SM90a)
		s.Chain = schedule.ChainFC
		chained, err := runtime.NewLayer(ctx, l, s)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { chained.Close() })
		Ts := chainTokens(t, l, s)
		if len(Ts) == 0 {
			t.Fatalf("%s: the chained kernel runs at no T", name)
		}
		for _, T := range Ts { // largest first: a capture pins the workspace
			t.Run(fmt.Sprintf("%s/T=%d", name, T), func(t *testing.T) {
				c := newCase(t, ctx, l, w, T, seed+uint64(T))
				args := argsOf(dw, c.in, stream)
				want := runChecked(t, ctx, off, args, c.ref, "two kernels", nil)
				got := runChecked(t, ctx, chained, args, c.ref, "chained", nil)
				if i := firstDiffBits(got, want); i >= 0 {
					t.Fatalf("chained: y[%d] = %#04x, two kernels %#04x", i, got[i], want[i])
				}
				g, err := chained.CaptureForward(stream, args.b)
				if err != nil {
					t.Fatal(err)
				}
				defer g.Destroy()
				replayChecked(t, ctx, stream, chained, g, args.b, want, "replay 1")
				replayChecked(t, ctx, stream, chained, g, args.b, want, "replay 2")
			})
		}
	}
}

// chainTokens is the token counts TestChainGPU runs for layer l under
// schedule s: 4096 and the first T of each range where a chained kernel
// runs (moe_fc1_fc2, the tile variant's moe_fc1_fc2_<name>), largest
// first.
func chainTokens(t *testing.T, l schedule.Layer, s schedule.Schedule) []int {
	t.Helper()
	p, err := codegen.Build(l, s)
	if err != nil {
		t.Fatal(err)
	}
	var Ts []int
	for _, k := range p.Kernels {
		if !strings.HasPrefix(k.Name, "moe_fc1_fc2") { // and the tile variant's moe_fc1_fc2_<name>
			continue
		}
		for _, r := range k.Tokens {
			Ts = append(Ts, int(r.Min))
			if r.Min <= 4096 && 4096 <= r.Max && r.Min != 4096 {
				Ts = append(Ts, 4096)
			}
		}
	}
	slices.Sort(Ts)
	slices.Reverse(Ts)
	return slices.Compact(Ts)
}
