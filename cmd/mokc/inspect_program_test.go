package main

import (
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
		"inout   fc1_grad f32[", "output  dx bf16[1*T+0,", "fc2_dgrad(a:dys, b:fc2, c=dh, offsets:offsets)",
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
	for _, want := range []string{"moe_fc2_dgrad_transpose", "moe_fc2_dgrad ", "moe_act_grad", "moe_fc1_wgrad", "moe_combine_grad"} {
		if !strings.Contains(out, want) {
			t.Errorf("backward kernels lack %q:\n%s", want, out)
		}
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
}
