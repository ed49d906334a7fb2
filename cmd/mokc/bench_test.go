package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/mokc/mokc/launch"
)

func TestWriteBenchReport(t *testing.T) {
	rep := benchReport{Model: "qwen3-30b-a3b", Target: "sm_90a", Tokens: 4096, MedianMs: 0.8, ErrorWord: "ok",
		KernelTimes: []kernelTime{{Name: "moe_fc1", MedianMs: 0.5, Fraction: 0.625}, {Name: "moe_fc2", MedianMs: 0.3, Fraction: 0.375}}}
	var text bytes.Buffer
	if err := writeBenchReport(&text, rep, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"median 0.8000 ms", "moe_fc1", "0.5000 ms  62.5%", "moe_fc2"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}
	var js bytes.Buffer
	if err := writeBenchReport(&js, rep, true); err != nil {
		t.Fatal(err)
	}
	var back benchReport
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.KernelTimes) != 2 || back.KernelTimes[1].Name != "moe_fc2" || back.KernelTimes[0].Fraction != 0.625 {
		t.Errorf("JSON round trip: %+v", back.KernelTimes)
	}
	// Without --kernels the JSON has no kernel_times key.
	rep.KernelTimes = nil
	js.Reset()
	writeBenchReport(&js, rep, true)
	if strings.Contains(js.String(), "kernel_times") {
		t.Errorf("kernel_times without --kernels: %s", js.String())
	}
}

// The schedule flags reach the compiled kernels, and bad values are refused
// with the reason before any device is opened.
func TestScheduleFlags(t *testing.T) {
	out := t.TempDir() + "/moe.ptx"
	if _, err := runCLI("build", "--model", "qwen3-30b-a3b", "--target", "sm_90a", "--fc1-tile", "192x192x64",
		"--fc2-tile", "192x192x64", "--mma-warps", "12", "--stages", "3", "-o", out); err != nil {
		t.Fatal(err)
	}
	ptx, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	// 12 MMA warps + one producer warpgroup = 512 threads per CTA, and no
	// T-dependent variant beside the tiles the flags give.
	if !strings.Contains(string(ptx), ".maxntid 512") {
		t.Error("the 192-row tiles did not give 512-thread GEMM kernels")
	}
	if strings.Contains(string(ptx), "moe_fc1_mid") || strings.Contains(string(ptx), ".maxntid 384") {
		t.Error("the schedule flags kept the default schedule's GEMM variant")
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"build", "--model", "qwen3-30b-a3b", "--target", "sm_90a", "--fc1-tile", "12x256"}, "want MxNxK"},
		{[]string{"build", "--model", "qwen3-30b-a3b", "--target", "sm_90a", "--stages", "5"}, "shared memory"},
		{[]string{"build", "--model", "qwen3-30b-a3b", "--target", "sm_90a", "--mma-warps", "12"}, "64 rows per consumer warpgroup"},
		{[]string{"build", "--model", "qwen3-30b-a3b", "--target", "sm_80", "--grid-ctas", "64"}, "sm_80 engine is not persistent"},
		{[]string{"build", "--model", "qwen3-30b-a3b", "--target", "sm_90a", "--grid-ctas", "4294967297"}, "must be in 0..65535"},
		{[]string{"build", "--model", "qwen3-30b-a3b", "--target", "sm_90a", "--fc1-tile", "192x192x64", "--fc2-tile", "192x256x64", "--mma-warps", "12"},
			"reproduce: mokc build --model qwen3-30b-a3b --target sm_90a --fc1-tile 192x192x64 --fc2-tile 192x256x64 --stages 3 --mma-warps 12"},
		{[]string{"build", "--model", "qwen3-30b-a3b", "--target", "sm_90a", "--stages", "0"}, "--stages 0: must be in 2..16"},
		{[]string{"run", "--model", "qwen3-30b-a3b", "--target", "sm_80,sm_90a", "--stages", "4"}, "exactly one --target"},
		{[]string{"bench", "--model", "qwen3-30b-a3b", "--fc1-tile", "64x64"}, "want MxNxK"},
	} {
		_, err := runCLI(c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("mokc %s: %v, want %q", strings.Join(c.args, " "), err, c.want)
		}
	}
	// --mx-gemm keeps the default mxfp8 schedule's decode variant, but for
	// expand, whose stages it does not fit; a flag of the GEMM shape drops
	// it too, before or after --mx-gemm (not --grid-ctas 0, the default
	// grid). Dropping it is noted on stderr.
	for _, c := range []struct {
		flags  []string
		decode bool
	}{{nil, true}, {[]string{"--mx-gemm", "promote"}, true}, {[]string{"--mx-gemm", "expand"}, false},
		{[]string{"--mx-gemm", "regfed"}, true}, {[]string{"--grid-ctas", "66", "--mx-gemm", "regfed"}, false},
		{[]string{"--mx-gemm", "promote", "--fc1-tile", "128x128x128", "--fc2-tile", "128x128x128"}, false},
		{[]string{"--group-m", "4"}, true}, {[]string{"--grid-ctas", "66"}, false}, {[]string{"--grid-ctas", "0"}, true}} {
		args := append([]string{"build", "--model", "qwen3-30b-a3b", "--precision", "mxfp8", "--target", "sm_90a", "-o", out}, c.flags...)
		msg, err := runCLI(args...)
		if err != nil {
			t.Fatalf("mokc %s: %v", strings.Join(args, " "), err)
		}
		if noted := strings.Contains(msg, `replaces the default schedule's GEMM variant "decode"`); noted == c.decode {
			t.Errorf("mokc %s: variant note %v with decode kernels %v: %q", strings.Join(args, " "), noted, c.decode, msg)
		}
		ptx, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(string(ptx), "moe_fc1_decode"); got != c.decode {
			t.Errorf("%v: decode kernels %v, want %v", c.flags, got, c.decode)
		}
	}
}

// --fc2-large-min-rows and --fc2-large-mid-rows set where the
// register-fed mxfp8 FC2 runs its tile for many rows per expert
// (moe_fc2_large), 0 and off turn either range off, and a flag it cannot
// run with leaves it out with a note naming that flag (a refusal naming
// the flag when both are given).
func TestFC2LargeFlag(t *testing.T) {
	out := t.TempDir() + "/m.json"
	for _, c := range []struct {
		flags []string
		large string // moe_fc2_large's token ranges in the manifest ("LO..HI", "LO.." to the last T), "" for none
		note  string // on stderr
	}{
		{nil, "960..1536 2560..", ""},
		{[]string{"--fc2-large-min-rows", "512"}, "960..1536 4096..", ""},
		{[]string{"--fc2-large-min-rows", "0"}, "960..1536", ""},
		{[]string{"--fc2-large-mid-rows", "off"}, "2560..", ""},
		{[]string{"--fc2-large-mid-rows", "100..150"}, "800..1200 2560..", ""},
		{[]string{"--fc2-large-min-rows", "0", "--fc2-large-mid-rows", "off"}, "", ""},
		{[]string{"--fc2-large-min-rows", "off", "--fc2-large-mid-rows", "off"}, "", ""},
		{[]string{"--fc2-large-min-rows", "off"}, "960..1536", ""},
		// A switch below the default band cuts it there (100: off; 150:
		// 120..150, and the tile from 150 on).
		{[]string{"--fc2-large-min-rows", "100"}, "800..", ""},
		{[]string{"--fc2-large-min-rows", "150"}, "960..", ""},
		// A range turned off leaves the other where it runs (as without the
		// flags), and a GEMM variant reaching into the band drops the band.
		{[]string{"--fc2-large-mid-rows", "off", "--chain", "fc1-fc2"}, "", "--chain fc1-fc2 leaves out the default schedule's FC2 tile for many rows per expert (192x128x128 from 320 mean rows"},
		{[]string{"--fc2-large-min-rows", "0", "--cluster", "2"}, "", "--cluster 2 leaves out the default schedule's FC2 tile for many rows per expert (192x128x128 in 120..192 mean rows"},
		{[]string{"--variant-max-rows", "150"}, "2560..", "--variant-max-rows 150 leaves out the default schedule's FC2 tile for many rows per expert (192x128x128 in 120..192 mean rows per expert (T = 960..1536): moe_fc2_large), which does not run with it; moe_fc2 (or the GEMM variant's FC2) runs there instead (--fc2-large-mid-rows off asks"},
		{[]string{"--backward", "--fc2-large-mid-rows", "off"}, "", ""},
		{[]string{"--chain", "fc1-fc2"}, "", "--chain fc1-fc2 leaves out the default schedule's FC2 tile for many rows per expert"},
		{[]string{"--variant-max-rows", "600"}, "", "--variant-max-rows 600 leaves out"},
		{[]string{"--backward", "--fc2-large-min-rows", "512"}, "", "the backward has no FC2 of dispatched rows"},
		// A layer with shared experts: the tile from the same 320 rows, and
		// CTA pairs (tiles of at most 128 token rows) leave it out.
		{[]string{"--model", "qwen2-57b-a14b"}, "960..1536 2560..", ""},
		{[]string{"--model", "qwen2-57b-a14b", "--cluster", "2"}, "", "--cluster 2 leaves out the default schedule's FC2 tile"},
	} {
		args := append([]string{"build", "--model", "olmoe-1b-7b", "--precision", "mxfp8", "--target", "sm_90a", "--emit", "manifest", "-o", out}, c.flags...)
		if slices.Contains(c.flags, "--model") {
			args = append([]string{"build"}, args[3:]...) // the case's --model instead
		}
		msg, err := runCLI(args...)
		if err != nil {
			t.Fatalf("mokc %s: %v", strings.Join(args, " "), err)
		}
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			Kernels []struct {
				Name   string `json:"name"`
				Tokens []struct {
					Min int64 `json:"min"`
					Max int64 `json:"max"`
				} `json:"tokens"`
			} `json:"kernels"`
		}
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		var ranges []string
		for _, k := range m.Kernels {
			if k.Name != "moe_fc2_large" {
				continue
			}
			for _, r := range k.Tokens {
				if r.Max == launch.MaxTokens {
					ranges = append(ranges, fmt.Sprintf("%d..", r.Min))
				} else {
					ranges = append(ranges, fmt.Sprintf("%d..%d", r.Min, r.Max))
				}
			}
		}
		large := strings.Join(ranges, " ")
		if large != c.large || c.note != "" && !strings.Contains(msg, c.note) || c.note == "" && strings.Contains(msg, "moe_fc2_large") {
			t.Errorf("mokc %s: moe_fc2_large from T = %q, want %q; stderr %q", strings.Join(args, " "), large, c.large, msg)
		}
	}
	for _, c := range []struct {
		flags []string
		err   string
	}{
		{[]string{"--fc2-large-min-rows", "384", "--chain", "fc1-fc2"}, "--fc2-large-min-rows 384: the chained FC1 and FC2 (--chain) pair one FC1 kernel with one FC2 kernel per token range: give --chain or --fc2-large-min-rows, not both"},
		{[]string{"--fc2-large-min-rows", "320", "--cluster", "2"}, "--fc2-large-min-rows 320: its kernel's schedule (FC2 192x128x128 in 120..192 and from 320 rows per expert) is refused: --cluster = 2"},
		{[]string{"--fc2-large-min-rows", "-1"}, `--fc2-large-min-rows: "-1": want off, or the fewest mean rows per expert`},
		{[]string{"--fc2-large-min-rows", "some"}, `--fc2-large-min-rows: "some": want off`},
		{[]string{"--fc2-large-mid-rows", "120..400"}, "--fc2-large-mid-rows 120..400: must end at or below the 320 mean rows per expert from which the tile runs at every larger T (--fc2-large-min-rows)"},
		{[]string{"--fc2-large-mid-rows", "16..200"}, `--fc2-large-mid-rows 16..200: reaches into the 0..32 mean rows per expert of the GEMM variant "decode"`},
		// Refusals of the whole tile name the band's flag when only it is given.
		{[]string{"--fc2-large-mid-rows", "100..150", "--precision", "bf16"}, "--fc2-large-mid-rows 100..150: sets the 192-row tile of the register-fed mxfp8 FC2 (moe_fc2_large), which runs only in an mxfp8 layer: this one is bf16"},
		{[]string{"--fc2-large-mid-rows", "120..192", "--cluster", "2"}, "--fc2-large-mid-rows 120..192: its kernel's schedule"},
		{[]string{"--fc2-large-mid-rows", "120..192", "--chain", "fc1-fc2"}, "--fc2-large-mid-rows 120..192: the chained FC1 and FC2 (--chain) pair one FC1 kernel with one FC2 kernel per token range: give --chain or --fc2-large-mid-rows, not both"},
		{[]string{"--fc2-large-mid-rows", "120-200"}, `--fc2-large-mid-rows: "120-200": want LO..HI`},
	} {
		args := append([]string{"build", "--model", "olmoe-1b-7b", "--precision", "mxfp8", "--target", "sm_90a", "-o", out}, c.flags...)
		if _, err := runCLI(args...); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("mokc %s: %v, want %q", strings.Join(args, " "), err, c.err)
		}
	}
}

// A config with quantization_config builds, with a note that the kernels
// take bf16 weights; the layer is named after the checkpoint's directory.
func TestBuildNotesQuantization(t *testing.T) {
	dir := t.TempDir() + "/DeepSeek-V3-fp8"
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := `{"model_type": "deepseek_v3", "n_routed_experts": 256, "hidden_size": 7168, "moe_intermediate_size": 2048,
		"num_experts_per_tok": 8, "quantization_config": {"quant_method": "fp8", "fmt": "e4m3"}}`
	if err := os.WriteFile(dir+"/config.json", []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI("build", "--hf-config", dir+"/config.json", "--emit", "manifest", "-o", dir+"/m.json")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "quantization_config (fp8)") || !strings.Contains(out, "bf16") {
		t.Errorf("no quantization note in %q", out)
	}
	m, err := os.ReadFile(dir + "/m.json")
	if err != nil || !strings.Contains(string(m), `"layer": "DeepSeek-V3-fp8"`) && !strings.Contains(string(m), `"layer":"DeepSeek-V3-fp8"`) {
		t.Errorf("manifest does not name the layer DeepSeek-V3-fp8: %v", err)
	}
}

// --blocks-per-sm 2 builds the GEMMs whose tiles fit half an SM two per
// SM (blocks of 256 threads; 160 with --producer-warps 1) and says which; with the default tiles it is
// refused with tiles that fit, and the repro command keeps the flag.
func TestBlocksPerSMFlag(t *testing.T) {
	out := t.TempDir() + "/moe.ptx"
	msg, err := runCLI("build", "--model", "qwen3-30b-a3b", "--precision", "mxfp8", "--target", "sm_90a", "--fc1-tile", "64x128x128",
		"--fc2-tile", "64x128x128", "--stages", "3", "--mma-warps", "4", "--blocks-per-sm", "2", "-o", out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(msg, "--blocks-per-sm 2: 2 blocks per SM: moe_fc1, moe_fc2;") {
		t.Errorf("no note of the kernels two per SM: %q", msg)
	}
	ptx, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(ptx), ".maxntid 256, 1, 1\n.minnctapersm 2\n.maxnreg 128"); n != 2 {
		t.Errorf("%d kernels of 256 threads two per SM, want moe_fc1 and moe_fc2", n)
	}
	// One producer warp: blocks of 160 threads.
	if _, err := runCLI("build", "--model", "qwen3-30b-a3b", "--precision", "mxfp8", "--target", "sm_90a", "--fc1-tile", "64x128x128",
		"--fc2-tile", "64x128x128", "--stages", "3", "--mma-warps", "4", "--blocks-per-sm", "2", "--producer-warps", "1", "-o", out); err != nil {
		t.Fatal(err)
	}
	if ptx, err = os.ReadFile(out); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(ptx), ".maxntid 160, 1, 1\n.minnctapersm 2\n.maxnreg 168"); n != 2 {
		t.Errorf("%d kernels of 160 threads two per SM with --producer-warps 1, want moe_fc1 and moe_fc2", n)
	}
	if _, err := runCLI("build", "--model", "qwen3-30b-a3b", "--target", "sm_90a", "--producer-warps", "1", "-o", out); err == nil || !strings.Contains(err.Error(), "or with two blocks per SM") {
		t.Errorf("--producer-warps 1 without --blocks-per-sm 2: %v", err)
	}
	_, err = runCLI("build", "--model", "qwen3-30b-a3b", "--target", "sm_90a", "--blocks-per-sm", "2", "-o", out)
	if err == nil || !strings.Contains(err.Error(), "--fc1-tile 64x192x64 --fc2-tile 64x192x64 --stages 3") ||
		!strings.Contains(err.Error(), "reproduce: mokc build --model qwen3-30b-a3b --target sm_90a --blocks-per-sm 2") {
		t.Errorf("--blocks-per-sm 2 with the default tiles: %v", err)
	}
	if _, err := runCLI("build", "--model", "qwen3-30b-a3b", "--target", "sm_80", "--blocks-per-sm", "2", "-o", out); err == nil ||
		!strings.Contains(err.Error(), "or 2 on sm_90a") {
		t.Errorf("--blocks-per-sm 2 on sm_80: %v", err)
	}
}
