package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestPersistentNotes: `mokc build --lowering persistent` notes what the
// persistent kernel has not yet run on a GPU with (persistentUnrun: a
// routing map; not the forward's kernels per block shape nor the
// default's FC1 store-gathering form, which run 53 ran, nor the
// backward's kernel of the "mid" tiles' blocks, run 54's, nor the mxfp8
// backward, run 55's, nor the saved FC1 output, run 60's) and the GEMM
// variants it leaves out (notePersistent: the "mid" tiles of a layer with
// shared experts, never the decode tiles); it does not claim the FC2 tile
// for many rows per expert, which goes for another reason where it goes
// (--mx-gemm promote: noteLargeDropped says why).
func TestPersistentNotes(t *testing.T) {
	out := filepath.Join(t.TempDir(), "m.ptx")
	for _, c := range []struct {
		args       []string
		want, none string
	}{
		{[]string{"--model", "deepseek-v2-lite"}, `leaves out the GEMM variant "mid"`, "--lowering persistent: built and assembled, not yet run"},
		{[]string{"--model", "llama4-scout"}, "", "FC1's store warps"},
		{[]string{"--model", "qwen3-30b-a3b", "--precision", "mxfp8", "--mx-gemm", "promote"}, "", "and its FC2 tile for many rows per expert"},
		{[]string{"--model", "qwen3-30b-a3b"}, "", "not yet run"},
		{[]string{"--model", "qwen3-30b-a3b", "--backward"}, "", "not yet run"},
		{[]string{"--model", "deepseek-v3"}, "", "not yet run"},
		{[]string{"--model", "qwen3-30b-a3b", "--backward"}, `leaves out the GEMM variant "mid" (FC1 192x192x64, FC2 192x192x64 at T = 1600..3200, 12 MMA warps where the base GEMMs have 8): it would run in a persistent kernel of its own, but in this backward the weight gradients of wgmma-ws (--wgrad; the persistent backward's default on sm_90a)`, ""},
		{[]string{"--model", "qwen3-30b-a3b", "--backward", "--wgrad", "wgmma"}, "", `leaves out the GEMM variant "mid"`},
		// GEMM blocks of 256 threads: the row-wise weight gradients, not wgmma-ws's 384-thread blocks
		{[]string{"--model", "qwen3-30b-a3b", "--backward", "--mma-warps", "4", "--fc1-tile", "64x128x64", "--fc2-tile", "64x128x64"}, "with --wgrad wgmma 18-20% slower", ""},
		{[]string{"--model", "qwen3-30b-a3b", "--backward"}, "the persistent backward ran level with per-op's kernels at qwen3-30b-a3b T = 4096", ""},
		{[]string{"--model", "qwen3-30b-a3b", "--backward", "--wgrad", "wgmma"}, "run 59); with --wgrad wgmma 18-20% slower in run 55: its weight gradients", ""},
		{[]string{"--model", "qwen3-30b-a3b"}, "", "the persistent backward ran"},
		{[]string{"--model", "deepseek-v3"}, `leaves out the GEMM variant "mid"`, `leaves out the GEMM variant "decode"`},
		{[]string{"--model", "qwen3-30b-a3b", "--routing", "map", "--chain", "fc1-fc2"}, "not yet run on a GPU: a routing map (the presets", "FC1's store warps"},
		{[]string{"--model", "qwen3-30b-a3b", "--precision", "mxfp8", "--backward"}, "", "not yet run"},
		{[]string{"--model", "qwen3-30b-a3b", "--gather", "store-warps"}, "", "not yet run"},
		{[]string{"--model", "qwen3-30b-a3b", "--backward", "--save-fc1"}, "", "not yet run"},
	} {
		msg, err := runCLI(append([]string{"build", "--target", "sm_90a", "--lowering", "persistent", "-o", out}, c.args...)...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", c.args, err, msg)
		}
		if c.want != "" && !strings.Contains(msg, c.want) {
			t.Errorf("%v: the output does not say %q:\n%s", c.args, c.want, msg)
		}
		if c.none != "" && strings.Contains(msg, c.none) {
			t.Errorf("%v: the output says %q:\n%s", c.args, c.none, msg)
		}
	}
}
