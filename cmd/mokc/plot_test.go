package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPlotRoofline: bench results of a T sweep, forward and backward, drawn
// as an SVG with a line per direction and the T labels; results against
// another peak drawn under a second roof; refusals.
func TestPlotRoofline(t *testing.T) {
	dir := t.TempDir()
	var lines []string
	for i, T := range []int{64, 1024, 4096} {
		for _, bwd := range []bool{false, true} {
			r := benchReport{Model: "qwen3-30b-a3b", Target: "sm_90a", Device: "NVIDIA H200", Tokens: T, Backward: bwd,
				FLOPs: float64(T) * 1e8, Bytes: 3e9, MedianMs: float64(i+1) * 0.3, PeakTFLOPs: 750, PeakGBs: 4200}
			if bwd {
				r.MainGrad, r.WGrad, r.FLOPs = "bf16", "wgmma", 3*r.FLOPs
			}
			b, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			lines = append(lines, string(b))
		}
	}
	sweep := filepath.Join(dir, "sweep.jsonl")
	if err := os.WriteFile(sweep, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	svg := filepath.Join(dir, "roof.svg")
	out, err := runCLI("plot", "roofline", "-o", svg, sweep)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "(6 results on 2 lines)") {
		t.Errorf("output: %s", out)
	}
	b, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"NVIDIA H200", "qwen3-30b-a3b sm_90a forward", "forward+backward, bf16 main grads, wgmma weight gradients", "T=1024"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the plot lacks %q", want)
		}
	}
	other := filepath.Join(dir, "other.jsonl")
	r := benchReport{Model: "m", Tokens: 1, FLOPs: 1, Bytes: 1, MedianMs: 1, PeakTFLOPs: 989, PeakGBs: 3350}
	b, _ = json.Marshal(r)
	if err := os.WriteFile(other, b, 0o644); err != nil {
		t.Fatal(err)
	}
	// Results against another peak (e.g. mxfp8's) get a roof of their own.
	if out, err := runCLI("plot", "roofline", "-o", svg, sweep, other); err != nil || !strings.Contains(out, "(7 results on 3 lines)") {
		t.Errorf("two roofs: %v, %s", err, out)
	}
	if b, _ := os.ReadFile(svg); !strings.Contains(string(b), "roof: 750 TFLOP/s, 4200 GB/s") || !strings.Contains(string(b), "roof: 989 TFLOP/s, 3350 GB/s") {
		t.Error("the plot lacks one of the two roofs")
	}
	bad, notJSON := filepath.Join(dir, "bad.jsonl"), filepath.Join(dir, "notjson.jsonl")
	if err := os.WriteFile(bad, []byte(`{"foo":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(notJSON, []byte(`[1,2]`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"plot", "roofline"}, "give one or more files"},
		{[]string{"plot", "roofline", "-o", filepath.Join(dir, "x.jpg"), sweep}, "want a .svg, .png or .pdf file"},
		{[]string{"plot", "roofline", "-o", svg, filepath.Join(dir, "missing.jsonl")}, "no such file"},
		{[]string{"plot", "roofline", "-o", svg, "--width", "0", sweep}, "at least 1 inch"},
		{[]string{"plot", "roofline", "-o", svg, bad}, "not a `mokc bench --json` result"},
		{[]string{"plot", "roofline", "-o", svg, notJSON}, "not a `mokc bench --json` result"},
	} {
		if _, err := runCLI(c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
}
