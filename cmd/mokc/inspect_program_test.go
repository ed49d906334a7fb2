package main

import (
	"slices"
	"strings"
	"testing"
)

func TestInspectProgram(t *testing.T) {
	out, err := runCLI("inspect", "program", "--model", "gpt-oss-120b", "--routing", "map", "--target", "sm_90a")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"input   routing_map u8[", "scratch ids i32[", "route(map:routing_map, probs:probs, ids=ids, weights=weights, err+=err)",
		"fc1(a:xs, b:fc1, bias:fc1_bias, c=h, offsets:offsets)", "moe_fc1_mid", "for T in 3200..6400", "tiles:tiles",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	out, err = runCLI("inspect", "program", "--model", "deepseek-v3")
	if err != nil || !strings.Contains(out, "shared_fc2(a:hs, b:shared_fc2, c=shared_out)") || strings.Contains(out, "kernels") {
		t.Errorf("deepseek-v3 without --target: %v\n%s", err, out)
	}
}

func TestInspectProgramBackward(t *testing.T) {
	out, err := runCLI("inspect", "program", "--model", "qwen2-57b-a14b", "--backward")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"inout   fc1_grad f32[", "output  dx bf16[T,", "fc2_dgrad(a:dys, b:fc2, c=dh, offsets:offsets)",
		"shared_gate_sigmoid(", "shared_gate_wgrad(a:dz, b:x, main+=shared_gate_grad)", "saved by the forward for the backward: nothing",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	out, err = runCLI("inspect", "program", "--model", "qwen3-30b-a3b", "--backward", "--target", "sm_90a")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"moe_fc2_dgrad ", "moe_act_grad", "moe_fc1_wgrad", "moe_combine_grad"} {
		if !strings.Contains(out, want) {
			t.Errorf("backward kernels lack %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "_transpose") { // sm_90a reads the N-major weights directly
		t.Errorf("sm_90a backward transposes a weight:\n%s", out)
	}
	// sm_80 reads them with ldmatrix .trans, grouped or per expert; sm_100a
	// and sm_90a's per-expert storage take a K-major copy.
	for _, c := range []struct {
		args      []string
		transpose bool
	}{
		{[]string{"--target", "sm_80"}, false},
		{[]string{"--target", "sm_80", "--storage", "per-expert"}, false},
		{[]string{"--target", "sm_90a", "--storage", "per-expert"}, true},
		{[]string{"--target", "sm_100a"}, true},
	} {
		out, err = runCLI(append([]string{"inspect", "program", "--model", "qwen3-30b-a3b", "--backward"}, c.args...)...)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(out, "moe_fc2_dgrad_transpose"); got != c.transpose {
			t.Errorf("%v: moe_fc2_dgrad_transpose among the kernels: %v, want %v:\n%s", c.args, got, c.transpose, out)
		}
	}
}

// TestInspectProgramBackwardPerExpert: with per-expert storage the routed
// weights and main grads are pointer tables, and inspect says what their
// entries point at.
func TestInspectProgramBackwardPerExpert(t *testing.T) {
	out, err := runCLI("inspect", "program", "--model", "gpt-oss-20b", "--backward", "--storage", "per-expert", "--main-grad", "bf16", "--target", "sm_80")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"input   fc1_table u64[32]", "inout   fc1_grad_table u64[32]", "inout   fc2_grad_table u64[32]", "inout   fc1_bias_grad bf16[32,5760]",
		"fc1_dgrad(a:dgu, b:fc1_table, c=dxs, offsets:offsets)", "fc2_wgrad(a:dys, b:hs_scaled, weights:weights, src_slot:src_slot, offsets:offsets, main+=fc2_grad_table, bias+=fc2_bias_grad)",
		"pointer table fc1_grad_table (inout): 32 entries, each a device pointer to one expert's bf16 [5760 2880] (1061683200 B behind the table in all)",
		"pointer table fc2_table (input): 32 entries, each a device pointer to one expert's bf16 [2880 2880]",
		"main:fc1_grad_table", "b:fc2_table",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "fc1_grad ") || strings.Contains(out, "inout   fc2_grad ") {
		t.Errorf("per-expert backward lists grouped main grads:\n%s", out)
	}
	if _, err := runCLI("inspect", "program", "--model", "gpt-oss-20b", "--storage", "stacked"); err == nil || !strings.Contains(err.Error(), `--storage "stacked": want grouped or per-expert`) {
		t.Errorf("--storage stacked: %v", err)
	}
	// Schedule flags describe one target's kernels: without --target they
	// are refused, not ignored.
	if _, err := runCLI("inspect", "program", "--model", "gpt-oss-20b", "--group-m", "-1"); err == nil || !strings.Contains(err.Error(), "--group-m, a schedule flag, describes the kernels of one target: give --target too") {
		t.Errorf("--group-m without --target: %v", err)
	}
	if _, err := runCLI("inspect", "program", "--model", "gpt-oss-20b", "--lowering", "persistent"); err == nil || !strings.Contains(err.Error(), "--lowering, a schedule flag") {
		t.Errorf("--lowering without --target: %v", err)
	}
}

func TestBuildBackwardManifest(t *testing.T) {
	out, err := runCLI("build", "--model", "gpt-oss-20b", "--target", "sm_80", "--backward", "--emit", "manifest")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"pass": "backward"`, `"name": "fc1_grad"`, `"kind": "inout"`, `"name": "moe_act_grad"`} {
		if !strings.Contains(out, want) {
			t.Errorf("backward manifest lacks %s", want)
		}
	}
	out, err = runCLI("build", "--model", "gpt-oss-20b", "--target", "sm_80", "--backward", "--storage", "per-expert", "--emit", "manifest")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"name": "fc1_grad_table"`, `"name": "fc2_grad_table"`, `"dtype": "u64"`,
		"fc1_grad_table (inout) is a u64 [E] table of device addresses, entry e that of expert e's own f32 [5760 2880] tensor",
		"fc2_table (input) is a u64 [E] table of device addresses"} {
		if !strings.Contains(out, want) {
			t.Errorf("per-expert backward manifest lacks %s", want)
		}
	}
	if strings.Contains(out, `"name": "fc1_grad"`) {
		t.Error("per-expert backward manifest has the grouped fc1_grad")
	}
}

// TestInspectProgramMXFP8HalfK: the note on the bf16 GEMMs' half K block
// appears only for an mxfp8 program that has bf16 GEMMs (deepseek-v3's
// shared expert), not for one without (qwen3-30b-a3b's forward).
func TestInspectProgramMXFP8HalfK(t *testing.T) {
	for model, want := range map[string]bool{"qwen3-30b-a3b": false, "deepseek-v3": true} {
		out, err := runCLI("inspect", "program", "--model", model, "--precision", "mxfp8", "--target", "sm_90a")
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(out, "take half the K block"); got != want {
			t.Errorf("%s: half-K note %v, want %v", model, got, want)
		}
	}
}

// The variant flags tune the default schedule's GEMM variant in place: its
// token range and tiles change, no note says it was dropped, and the
// default variant is left as it was for the next schedule.
func TestVariantFlags(t *testing.T) {
	args := []string{"inspect", "program", "--model", "olmoe-1b-7b", "--target", "sm_90a", "--precision", "mxfp8"}
	out, err := runCLI(append(args, "--variant-max-rows", "48", "--variant-fc2-tile", "32x256x128", "--variant-stages", "5")...)
	if err != nil {
		t.Fatal(err)
	}
	want := "0..48 rows per expert: FC1 32x128x128 FC2 32x256x128 stages=5 mma warps=4"
	if !strings.Contains(out, want) || strings.Contains(out, "note:") {
		t.Errorf("tuned variant: want %q and no note in\n%s", want, out)
	}
	out, err = runCLI(args...)
	if err != nil {
		t.Fatal(err)
	}
	if want := "0..32 rows per expert: FC1 32x128x128 FC2 32x128x128 stages=8 mma warps=4"; !strings.Contains(out, want) {
		t.Errorf("default variant after a tuned one: want %q in\n%s", want, out)
	}
}

// inspect --model gives each sm_90a kernel shape the shared memory its
// kernels launch with, as inspect program lists it: the mxfp8 decode
// variant's moe_fc1_decode counts the quantization of h in its epilogue,
// moe_fc2_large its own tile.
func TestInspectModelKernelSharedMemory(t *testing.T) {
	model, err := runCLI("inspect", "--model", "qwen3-30b-a3b", "--precision", "mxfp8")
	if err != nil {
		t.Fatal(err)
	}
	prog, err := runCLI("inspect", "program", "--model", "qwen3-30b-a3b", "--precision", "mxfp8", "--target", "sm_90a")
	if err != nil {
		t.Fatal(err)
	}
	smem := func(kernel string) string { // from inspect program's "NAME grid ... smem N for T in ..."
		for _, line := range strings.Split(prog, "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == kernel {
				if i := slices.Index(f, "smem"); i > 0 && i+1 < len(f) {
					return f[i+1]
				}
			}
		}
		t.Fatalf("inspect program lists no %s:\n%s", kernel, prog)
		return ""
	}
	for _, c := range []struct{ line, kernel string }{
		{"as moe_fc1_decode/moe_fc2_decode", "moe_fc1_decode"},
		{"as moe_fc2_large", "moe_fc2_large"},
		{"shared memory", "moe_fc1"},
	} {
		want := "shared memory " + smem(c.kernel)
		found := false
		for _, line := range strings.Split(model, "\n") {
			if strings.Contains(line, c.line) && strings.Contains(line, want) {
				found = true
			}
		}
		if !found {
			t.Errorf("inspect --model has no line with %q and %q:\n%s", c.line, want, model)
		}
	}
}

// TestDecodeMaxRowsFlag: --decode-max-rows moves the bf16 decode tiles'
// range (inspect program lists their kernels there, and with the
// persistent lowering their persistent kernel, moe_forward_decode), off
// removes them without a note, and a number is refused where they cannot
// run: an mxfp8 layer, a shape flag; the persistent lowering of a layer
// with shared experts (deepseek-v3) keeps them; a shape flag leaves the
// default's out with a note naming the flag that says so without it.
func TestDecodeMaxRowsFlag(t *testing.T) {
	args := []string{"inspect", "program", "--model", "qwen3-30b-a3b", "--target", "sm_90a"}
	out, err := runCLI(append(args, "--decode-max-rows", "2")...)
	if err != nil {
		t.Fatal(err)
	}
	if want := "moe_fc2_decode   grid 132 x 1 x 1 block 256 smem 166128 for T in 1..32"; !strings.Contains(out, want) {
		t.Errorf("--decode-max-rows 2: want %q in\n%s", want, out)
	}
	out, err = runCLI(append(args, "--decode-max-rows", "off")...)
	if err != nil || strings.Contains(out, "_decode") || strings.Contains(out, "note:") {
		t.Errorf("--decode-max-rows off: %v, want no decode kernel and no note in\n%s", err, out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--precision", "mxfp8", "--decode-max-rows", "4"}, "decode tiles (FC1 32x128x128, FC2 32x128x128) are its GEMM variant: --variant-max-rows sets their range"},
		{[]string{"--fc1-tile", "128x128x64", "--decode-max-rows", "4"}, "--fc1-tile replaces them"},
		{[]string{"--decode-max-rows", "150"}, "must lie below the variant's"},
		{[]string{"--decode-max-rows", "-1"}, "the most mean rows per expert"},
	} {
		if _, err := runCLI(append(args, c.args...)...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error saying %q", c.args, err, c.want)
		}
	}
	out, err = runCLI(append(args, "--lowering", "persistent", "--decode-max-rows", "2")...)
	if want := "moe_forward_decode grid 132 x 1 x 1 block 256 smem 166128 co-resident for T in 1..32"; err != nil || !strings.Contains(out, want) {
		t.Errorf("--lowering persistent --decode-max-rows 2: %v, want %q in\n%s", err, want, out)
	}
	out, err = runCLI("inspect", "program", "--model", "deepseek-v3", "--target", "sm_90a", "--lowering", "persistent", "--decode-max-rows", "2")
	if want := "moe_forward_decode grid 132 x 1 x 1 block 256 smem 166128 co-resident for T in 1..64"; err != nil || !strings.Contains(out, want) {
		t.Errorf("deepseek-v3 --lowering persistent --decode-max-rows 2: %v, want %q (the shared experts' GEMMs take the decode tiles too) in\n%s", err, want, out)
	}
	for _, c := range []struct{ flag, value, dropper string }{{"--fc2-tile", "128x128x64", "--fc2-tile"}} {
		out, err := runCLI(append(args, c.flag, c.value)...)
		if want := c.dropper + " leaves out the default schedule's bf16 decode tiles"; err != nil || !strings.Contains(out, want) || !strings.Contains(out, "--decode-max-rows off asks for that") {
			t.Errorf("%s %s: %v, want a note %q in\n%s", c.flag, c.value, err, want, out)
		}
	}
}

// inspect program --backward describes the tiles the backward's kernels
// take: the mid variant with --wgrad wgmma (the persistent default,
// wgmma-ws, leaves it out), but neither the forward's decode tiles nor
// the store-warp gather's threshold, which the forward's header gives.
func TestInspectBackwardHeader(t *testing.T) {
	args := []string{"inspect", "program", "--model", "qwen3-30b-a3b", "--target", "sm_90a", "--lowering", "persistent"}
	fwd, err := runCLI(args...)
	if err != nil {
		t.Fatal(err)
	}
	bwd, err := runCLI(append(args, "--backward", "--wgrad", "wgmma")...)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := runCLI(append(args, "--backward")...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ws, "backward weight gradients on wgmma-ws") || strings.Contains(ws, "192x192x64 stages") {
		t.Errorf("persistent backward: want wgmma-ws and no mid tiles in\n%s", ws)
	}
	decode, mid, gather := "0..4 rows per expert: FC1 64x128x64", "100..200 rows per expert: FC1 192x192x64", "store-gather-min-rows 256"
	for _, want := range []string{decode, mid, gather} {
		if !strings.Contains(fwd, want) {
			t.Errorf("forward: want %q in\n%s", want, fwd)
		}
	}
	if !strings.Contains(bwd, mid) {
		t.Errorf("backward: want %q in\n%s", mid, bwd)
	}
	for _, not := range []string{decode, gather, "_decode "} {
		if strings.Contains(bwd, not) {
			t.Errorf("backward: %q, which its kernels do not take, in\n%s", not, bwd)
		}
	}
}

// --split-k off is noted where it changes nothing (a layer without shared
// experts, whose GEMMs are the only ones split; another target than
// sm_90a; the backward), and not where it keeps the shared GEMMs whole.
func TestSplitKOffNote(t *testing.T) {
	const note = "--split-k off changes nothing here"
	for _, c := range []struct {
		args []string
		want bool
	}{
		{[]string{"--model", "qwen3-30b-a3b"}, true},
		{[]string{"--model", "deepseek-v3", "--target", "sm_80"}, true},
		{[]string{"--model", "deepseek-v3", "--target", "sm_100a"}, true},
		{[]string{"--model", "deepseek-v3", "--backward"}, true},
		{[]string{"--model", "deepseek-v3"}, false},
	} {
		args := append([]string{"inspect", "program", "--target", "sm_90a", "--split-k", "off"}, c.args...)
		msg, err := runCLI(args...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", c.args, err, msg)
		}
		if got := strings.Contains(msg, note); got != c.want {
			t.Errorf("%v --split-k off: note %q given %v, want %v:\n%s", c.args, note, got, c.want, msg)
		}
	}
}
