//go:build cuda

package runtime_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mokc/mokc/driver"
	"github.com/mokc/mokc/internal/testlayer"
	"github.com/mokc/mokc/moe"
	"github.com/mokc/mokc/runtime"
	"github.com/mokc/mokc/target"
)

// captureCase is one target and token count of TestCaptureForward.
type captureCase struct {
	target target.Target
	T      int
}

// captureCases is every target with every T of ts.
func captureCases(targets []target.Target, ts ...int) []captureCase {
	var out []captureCase
	for _, tg := range targets {
		for _, T := range ts {
			out = append(out, captureCase{tg, T})
		}
	}
	return out
}

// TestCaptureForward: a forward captured into a CUDA graph and replayed
// gives the bits of the uncaptured Forward, first with the inputs it was
// captured with, then with other inputs written into the same buffers; a
// larger T after the capture is refused (the workspace is pinned); each
// target the device runs, T = 64 and 1100.
func TestCaptureForward(t *testing.T) {
	ctx, targets, stream := openLayerTest(t)
	l := testlayer.Preset(t, "qwen3-30b-a3b")
	seed, w, dw := randomWeightsOnDevice(t, ctx, l)
	// T = 1100 runs the dispatch as moe_dispatch, whose work queue must be
	// zero again after every replay.
	for _, tc := range captureCases(targets, 64, 1100) {
		target, T := tc.target, tc.T
		t.Run(fmt.Sprintf("%v/T=%d", target, T), func(t *testing.T) {
			ly := newLayer(t, ctx, l, target)
			c1, c2 := newCase(t, ctx, l, w, T, seed+1), newCase(t, ctx, l, w, T, seed+2)
			y1 := runChecked(t, ctx, ly, argsOf(dw, c1.in, stream), c1.ref, "uncaptured 1", nil)
			y2 := runChecked(t, ctx, ly, argsOf(dw, c2.in, stream), c2.ref, "uncaptured 2", nil)
			// Capture over c1's buffers, replay, then overwrite them with c2's inputs.
			b := argsOf(dw, c1.in, stream).b
			g, err := ly.CaptureForward(stream, b)
			if err != nil {
				t.Fatal(err)
			}
			defer g.Destroy()
			replay := func(want []uint16, what string) {
				t.Helper()
				replayChecked(t, ctx, stream, ly, g, b, want, what)
			}
			replay(y1, "replay of the captured inputs")
			copyInputs(t, ctx, c1.in, c2.in)
			replay(y2, "replay with new inputs in the same buffers")
			replay(y2, "second replay")
			big := newCase(t, ctx, l, w, 4*T, seed+3)
			if err := ly.Forward(stream, argsOf(dw, big.in, stream).b); err == nil || !strings.Contains(err.Error(), "captured graph") {
				t.Errorf("a Forward beyond the captured workspace: %v", err)
			}
		})
	}
}

// copyInputs copies the input tensors of src (all but y) into dst's
// buffers of the same names, as a caller replaying a captured graph
// writes new inputs.
func copyInputs(t *testing.T, ctx *driver.Context, dst, src *runtime.DeviceTensors) {
	t.Helper()
	for name, s := range src.Tensors {
		if name == moe.BufY {
			continue
		}
		d := dst.Tensors[name]
		if err := ctx.CopyDeviceToDevice(d.Ptr, s.Ptr, d.Bytes); err != nil {
			t.Fatal(err)
		}
	}
}

// replayChecked launches the captured forward g of ly on stream over the
// bindings b (y poisoned first), checks the error word and wants y's bits
// to be want.
func replayChecked(t *testing.T, ctx *driver.Context, stream *driver.Stream, ly *runtime.Layer, g *driver.Graph, b runtime.Bindings, want []uint16, what string) {
	t.Helper()
	if err := runtime.Poison(ctx, stream, b[moe.BufY]); err != nil {
		t.Fatal(err)
	}
	if err := g.Launch(stream); err != nil {
		t.Fatal(err)
	}
	if err := ly.CheckErrors(stream); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	y := make([]uint16, len(want))
	if err := ctx.CopyFromDevice(y, b[moe.BufY].Ptr); err != nil {
		t.Fatal(err)
	}
	if i := firstDiffBits(y, want); i >= 0 {
		t.Fatalf("%s: y[%d] = %#04x, want %#04x", what, i, y[i], want[i])
	}
}
