package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
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
