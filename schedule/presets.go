package schedule

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// presets holds one MoE layer per supported model. Sizes come from the
// models' config.json files; router rules from their modeling code
// (transformers models/*/modeling_*.py, deepseek-ai/DeepSeek-V3
// inference/model.py, openai/gpt-oss gpt_oss/torch/model.py).
var presets = map[string]Layer{
	// DeepSeek-V3: sigmoid router with 8 groups, top-4 groups, w = 2.5*s/sum(s).
	"deepseek-v3": {Hidden: 7168, Intermediate: 2048, Experts: 256, TopK: 8,
		SharedExperts: 1, SharedIntermediate: 2048,
		Router: Router{Score: ScoreSigmoid, Normalize: true, Scale: 2.5, Groups: 8, TopKGroups: 4}},
	// DeepSeek-V2-Lite: softmax, no renormalisation, 2 shared experts.
	"deepseek-v2-lite": {Hidden: 2048, Intermediate: 1408, Experts: 64, TopK: 6,
		SharedExperts: 2, SharedIntermediate: 1408,
		Router: Router{Score: ScoreSoftmax}},
	// DeepSeek-V4-Flash: clamped SwiGLU (limit 10) on the routed experts,
	// w = 1.5*s/sum(s) with s = sqrt(softplus(z)).
	"deepseek-v4-flash": {Hidden: 4096, Intermediate: 2048, Experts: 256, TopK: 6,
		SharedExperts: 1, SharedIntermediate: 2048,
		Activation: ClampedSwiGLU, SwiGLULimit: 10,
		Router: Router{Score: ScoreSqrtSoftplus, Normalize: true, Scale: 1.5}},
	// MoK's DeepSeek-V4-Pro-sized test shape. Its clamp limit and router are
	// not from a published configuration: both are assumed equal to
	// DeepSeek-V4-Flash's (limit 10, sqrt(softplus) scores, scale 1.5).
	"dsv4-pro-proxy": {Hidden: 7168, Intermediate: 3072, Experts: 384, TopK: 6,
		SharedExperts: 1, SharedIntermediate: 3072,
		Activation: ClampedSwiGLU, SwiGLULimit: 10,
		Router: Router{Score: ScoreSqrtSoftplus, Normalize: true, Scale: 1.5}},
	// Kimi-K2: DeepSeek-V3 architecture, sigmoid router, factor 2.827, 1 group.
	"kimi-k2": {Hidden: 7168, Intermediate: 2048, Experts: 384, TopK: 8,
		SharedExperts: 1, SharedIntermediate: 2048,
		Router: Router{Score: ScoreSigmoid, Normalize: true, Scale: 2.827}},
	// Qwen3 MoE: softmax, top-k renormalised (norm_topk_prob true), no shared.
	"qwen3-30b-a3b": {Hidden: 2048, Intermediate: 768, Experts: 128, TopK: 8,
		Router: Router{Score: ScoreSoftmax, Normalize: true}},
	"qwen3-235b-a22b": {Hidden: 4096, Intermediate: 1536, Experts: 128, TopK: 8,
		Router: Router{Score: ScoreSoftmax, Normalize: true}},
	// Qwen2-57B-A14B: one shared expert of 20480 with a sigmoid output gate;
	// softmax without renormalisation (norm_topk_prob false).
	"qwen2-57b-a14b": {Hidden: 3584, Intermediate: 2560, Experts: 64, TopK: 8,
		SharedExperts: 1, SharedIntermediate: 20480, SharedGate: true,
		Router: Router{Score: ScoreSoftmax}},
	// Mixtral: softmax over the top-2 logits (= softmax then renormalise).
	"mixtral-8x7b": {Hidden: 4096, Intermediate: 14336, Experts: 8, TopK: 2,
		Router: Router{Score: ScoreSoftmax, Normalize: true}},
	// OLMoE: softmax, no renormalisation.
	"olmoe-1b-7b": {Hidden: 2048, Intermediate: 1024, Experts: 64, TopK: 8,
		Router: Router{Score: ScoreSoftmax}},
	// gpt-oss: softmax over the top-k logits, GPT-OSS activation (limit 7,
	// alpha 1.702), FC1/FC2 biases, interleaved gate/up.
	"gpt-oss-120b": gptOSS(128),
	"gpt-oss-20b":  gptOSS(32),
	// Llama 4 Scout: top-1, sigmoid of the chosen logit scales the expert
	// input; one shared expert of intermediate_size.
	"llama4-scout": {Hidden: 5120, Intermediate: 8192, Experts: 16, TopK: 1,
		SharedExperts: 1, SharedIntermediate: 8192, RouterWeightOnInput: true,
		Router: Router{Score: ScoreSigmoid}},
}

func gptOSS(experts int) Layer {
	return Layer{Hidden: 2880, Intermediate: 2880, Experts: experts, TopK: 4,
		Activation: GPTOSS, SwiGLULimit: 7, GPTOSSAlpha: 1.702,
		GateUpInterleaved: true, Biases: true,
		Router: Router{Score: ScoreSoftmax, Normalize: true}}
}

// Presets lists the preset names, sorted: one per supported model
// (lower-case, e.g. "qwen3-30b-a3b").
func Presets() []string { return slices.Sorted(maps.Keys(presets)) }

// Preset returns the MoE layer of a real model (BF16 weights, fixed-width
// routing, grouped storage, fp32 main grad; change those fields as needed).
// The name is matched case-insensitively; an unknown name is an error that
// lists the presets.
func Preset(name string) (Layer, error) {
	key := strings.ToLower(strings.TrimSpace(name))
	l, ok := presets[key]
	if !ok {
		return Layer{}, fmt.Errorf("unknown preset %q (presets: %s)", name, strings.Join(Presets(), ", "))
	}
	l.Name = key
	return l, nil
}
