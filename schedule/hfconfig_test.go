package schedule

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mokc/mokc/target"
)

// sameLayer compares two layers ignoring Name (a router scale of 0 means 1).
func sameLayer(a, b Layer) bool {
	a.Name, b.Name = "", ""
	for _, l := range []*Layer{&a, &b} {
		if l.Router.Scale == 0 {
			l.Router.Scale = 1
		}
	}
	return a == b
}

// TestHFConfigsMatchPresets reads every config in testdata/hf (the MoE keys
// of the released models' config.json files; deepseek-v4-flash.json writes
// DeepSeek-V4-Flash's values with the key names the reader expects) and the
// configs of /work/shared/hf-configs when that directory exists, and checks
// each against the preset of the same name.
func TestHFConfigsMatchPresets(t *testing.T) {
	files, _ := filepath.Glob("testdata/hf/*.json")
	shared, _ := filepath.Glob("/work/shared/hf-configs/*.json")
	files = append(files, shared...)
	if len(files) < 12 {
		t.Fatalf("only %d config files", len(files))
	}
	families := map[string]bool{}
	for _, f := range files {
		l, err := LoadHFConfig(f)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		if l.Name != name {
			t.Errorf("%s: Name = %q", f, l.Name)
		}
		p, err := Preset(name)
		if err != nil {
			t.Errorf("%s: no preset: %v", f, err)
			continue
		}
		if !sameLayer(l, p) {
			t.Errorf("%s:\n parsed %+v\n preset %+v", f, l, p)
		}
		for _, tg := range target.All() {
			if _, err := DefaultSchedule(l, tg); err != nil {
				t.Errorf("%s %v: %v", f, tg, err)
			}
		}
		data, _ := os.ReadFile(f)
		c, _ := parseHFObject(data)
		mt, _ := c.str("model_type")
		families[mt] = true
	}
	for _, f := range []string{"qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3", "deepseek_v4", "kimi_k2", "mixtral", "olmoe", "gpt_oss", "llama4"} {
		if !families[f] {
			t.Errorf("no test config of family %s", f)
		}
	}
}

func TestHFConfigErrors(t *testing.T) {
	qwen3 := `"model_type": "qwen3_moe", "hidden_size": 2048, "intermediate_size": 6144, "num_experts": 128, "num_experts_per_tok": 8`
	cases := []struct {
		name, json, want string
	}{
		{"not json", `{"model_type": "qwen3_moe",`, "malformed config.json"},
		{"array", `[1, 2]`, "top level is an array"},
		{"trailing", `{"model_type": "mixtral"} {}`, "malformed config.json: data after"},
		{"no model_type", `{"hidden_size": 4096}`, `missing key "model_type"`},
		{"model_type number", `{"model_type": 7}`, `key "model_type" is a number, want a string`},
		{"dense model", `{"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336}`, `model_type "llama" is not an MoE family`},
		// The trap: a dense intermediate_size is present, the expert size is not.
		{"qwen3 without moe_intermediate_size", `{` + qwen3 + `}`, `missing key "moe_intermediate_size"`},
		{"qwen3 zero experts", `{"model_type": "qwen3_moe", "num_experts": 0}`, `not an MoE model: "num_experts" is 0`},
		{"deepseek dense", `{"model_type": "deepseek_v3", "n_routed_experts": null, "hidden_size": 7168}`, `not an MoE model: "n_routed_experts" is null`},
		{"mixtral missing experts", `{"model_type": "mixtral", "hidden_size": 4096}`, `not an MoE model: missing key "num_local_experts"`},
		{"string size", `{"model_type": "mixtral", "num_local_experts": 8, "hidden_size": "4096", "intermediate_size": 14336, "num_experts_per_tok": 2}`, `key "hidden_size" is a string, want an integer`},
		{"fractional size", `{"model_type": "mixtral", "num_local_experts": 8, "hidden_size": 4096.5, "intermediate_size": 14336, "num_experts_per_tok": 2}`, `key "hidden_size" is 4096.5, want an integer`},
		{"negative top-k", `{"model_type": "olmoe", "num_experts": 64, "hidden_size": 2048, "intermediate_size": 1024, "num_experts_per_tok": -2}`, `key "num_experts_per_tok" is -2`},
		{"top-k above experts", `{"model_type": "mixtral", "num_local_experts": 8, "hidden_size": 4096, "intermediate_size": 14336, "num_experts_per_tok": 9}`, `key "num_experts_per_tok" = 9: must be <= Layer.Experts (8)`},
		{"a million experts", `{"model_type": "qwen3_moe", "num_experts": 1000000, "hidden_size": 2048, "moe_intermediate_size": 768, "num_experts_per_tok": 1000000}`,
			`key "num_experts" = 1000000: must be <= 65536 (one dispatch block`},
		{"llama4 top-k", `{"model_type": "llama4", "text_config": {"num_local_experts": 16, "hidden_size": 5120, "intermediate_size": 8192, "num_experts_per_tok": 64}}`,
			`key "text_config.num_experts_per_tok" = 64: must be <= 32`},
		{"shared experts", `{"model_type": "deepseek_v3", "n_routed_experts": 256, "hidden_size": 7168, "moe_intermediate_size": 2048, "num_experts_per_tok": 8, "n_shared_experts": 65}`,
			`key "n_shared_experts" = 65: must be in 0..64`},
		{"weights too large", `{"model_type": "deepseek_v3", "n_routed_experts": 4096, "hidden_size": 16384, "moe_intermediate_size": 16384, "num_experts_per_tok": 8}`,
			`key "n_routed_experts" = 4096: the weights take`},
		{"bool of wrong type", `{"model_type": "olmoe", "num_experts": 64, "hidden_size": 2048, "intermediate_size": 1024, "num_experts_per_tok": 8, "norm_topk_prob": "yes"}`, `key "norm_topk_prob" is a string, want a boolean`},
		{"llama4 without text_config", `{"model_type": "llama4", "hidden_size": 5120}`, `missing key "text_config"`},
		{"llama4 text_config not object", `{"model_type": "llama4", "text_config": [1]}`, `key "text_config" is an array`},
		{"llama4 text without experts", `{"model_type": "llama4", "text_config": {"hidden_size": 5120}}`, `missing key "text_config.num_local_experts"`},
		{"bad scoring", `{"model_type": "deepseek_v3", "n_routed_experts": 256, "hidden_size": 7168, "moe_intermediate_size": 2048, "num_experts_per_tok": 8, "scoring_func": "relu"}`, `"scoring_func" is "relu"`},
		{"groups without topk_group", `{"model_type": "deepseek_v2", "n_routed_experts": 160, "hidden_size": 5120, "moe_intermediate_size": 1536, "num_experts_per_tok": 6, "topk_method": "group_limited_greedy", "n_group": 8}`, `missing key "topk_group"`},
		{"deepseek_v4 without shared count", `{"model_type": "deepseek_v4", "n_routed_experts": 256, "hidden_size": 4096, "moe_intermediate_size": 2048, "num_experts_per_tok": 6}`, `missing key "n_shared_experts"`},
		{"limit string", `{"model_type": "gpt_oss", "num_local_experts": 32, "hidden_size": 2880, "intermediate_size": 2880, "num_experts_per_tok": 4, "swiglu_limit": "seven"}`, `key "swiglu_limit" is a string, want a number`},
		{"H not aligned", `{"model_type": "mixtral", "num_local_experts": 8, "hidden_size": 4095, "intermediate_size": 14336, "num_experts_per_tok": 2}`, `key "hidden_size" = 4095: must be a multiple of 8`},
		{"qwen2 without shared size", `{"model_type": "qwen2_moe", "num_experts": 64, "hidden_size": 3584, "moe_intermediate_size": 2560, "num_experts_per_tok": 8}`, `missing key "shared_expert_intermediate_size"`},
	}
	for _, c := range cases {
		_, err := ParseHFConfig([]byte(c.json))
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %q lacks %q", c.name, err, c.want)
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error spans lines: %q", c.name, err)
		}
	}
	if _, err := LoadHFConfig("testdata/hf/no-such-file.json"); err == nil {
		t.Error("missing file: want an error")
	}
	// File errors name the file.
	dir := t.TempDir()
	bad := filepath.Join(dir, "broken.json")
	os.WriteFile(bad, []byte(`{"model_type": "qwen3_moe", "num_experts": 8}`), 0o644)
	if _, err := LoadHFConfig(bad); err == nil || !strings.Contains(err.Error(), "broken.json") || !strings.Contains(err.Error(), `missing key "hidden_size"`) {
		t.Errorf("broken file: %v", err)
	}
}

func TestHFConfigDetails(t *testing.T) {
	// llama4_text at the top level, and gpt-oss with only experts_per_token.
	l, err := ParseHFConfig([]byte(`{"model_type": "llama4_text", "hidden_size": 5120, "intermediate_size": 8192, "intermediate_size_mlp": 16384, "num_local_experts": 128, "num_experts_per_tok": 1}`))
	if err != nil || l.Intermediate != 8192 || l.SharedIntermediate != 8192 || l.Experts != 128 || !l.RouterWeightOnInput {
		t.Errorf("llama4_text: %+v %v", l, err)
	}
	g, err := ParseHFConfig([]byte(`{"model_type": "gpt_oss", "hidden_size": 2880, "intermediate_size": 2880, "num_local_experts": 32, "experts_per_token": 4}`))
	if err != nil || g.TopK != 4 || g.SwiGLULimit != 7 {
		t.Errorf("gpt_oss: %+v %v", g, err)
	}
	// A DeepSeek-V3 config stripped to its sizes reads as DeepseekV3Config's
	// defaults: one shared expert, sigmoid scores, 8 groups top-4, scale 2.5.
	v3, err := ParseHFConfig([]byte(`{"model_type": "deepseek_v3", "n_routed_experts": 256, "hidden_size": 7168, "moe_intermediate_size": 2048, "num_experts_per_tok": 8}`))
	want := Router{Score: ScoreSigmoid, Normalize: true, Scale: 2.5, Groups: 8, TopKGroups: 4}
	if err != nil || v3.SharedExperts != 1 || v3.SharedIntermediate != 2048 || v3.Router != want {
		t.Errorf("deepseek_v3 defaults: %+v %v", v3, err)
	}
	// Its preset agrees with the stripped config on everything the defaults set.
	if p, _ := Preset("deepseek-v3"); p.Router != v3.Router || p.SharedExperts != v3.SharedExperts {
		t.Errorf("deepseek-v3 preset %+v, defaults %+v", p.Router, v3.Router)
	}
	// A DeepSeek-V2 config without routing keys: softmax, no groups, no shared expert.
	v2, err := ParseHFConfig([]byte(`{"model_type": "deepseek_v2", "n_routed_experts": 64, "hidden_size": 2048, "moe_intermediate_size": 1408, "num_experts_per_tok": 6}`))
	if err != nil || v2.SharedExperts != 0 || v2.Router != (Router{Score: ScoreSoftmax, Scale: 1}) {
		t.Errorf("deepseek_v2 defaults: %+v %v", v2, err)
	}
	// DeepSeek-V2 group-limited routing, and _name_or_path as the name.
	d, err := ParseHFConfig([]byte(`{"_name_or_path": "deepseek-ai/DeepSeek-V2", "model_type": "deepseek_v2", "hidden_size": 5120, "moe_intermediate_size": 1536, "n_routed_experts": 160, "n_shared_experts": 2, "num_experts_per_tok": 6, "topk_method": "group_limited_greedy", "n_group": 8, "topk_group": 3, "routed_scaling_factor": 16.0}`))
	if err != nil || d.Router.Groups != 8 || d.Router.TopKGroups != 3 || d.Router.Scale != 16 || d.Name != "deepseek-ai/DeepSeek-V2" || d.SharedWidth() != 3072 {
		t.Errorf("deepseek_v2: %+v %v", d, err)
	}
	if fams := HFFamilies(); len(fams) != 11 {
		t.Errorf("HFFamilies() = %v", fams)
	}
}

func TestHFConfigHiddenAct(t *testing.T) {
	base := `{"model_type": "qwen3_moe", "hidden_size": 2048, "moe_intermediate_size": 768, "num_experts": 128, "num_experts_per_tok": 8, "norm_topk_prob": true, "hidden_act": %q}`
	for _, act := range []string{"silu", "swish"} {
		if _, err := ParseHFConfig([]byte(fmt.Sprintf(base, act))); err != nil {
			t.Errorf("hidden_act %q: %v", act, err)
		}
	}
	for _, act := range []string{"gelu", "relu"} {
		_, err := ParseHFConfig([]byte(fmt.Sprintf(base, act)))
		if err == nil || !strings.Contains(err.Error(), "hidden_act") || !strings.Contains(err.Error(), act) {
			t.Errorf("hidden_act %q: got %v, want an error naming hidden_act", act, err)
		}
	}
}

func TestHFFileName(t *testing.T) {
	for path, want := range map[string]string{
		"models/Qwen3-30B-A3B/config.json": "Qwen3-30B-A3B",
		"qwen3-30b-a3b.json":               "qwen3-30b-a3b",
		"/tmp/x/deepseek.v3.json":          "deepseek.v3",
		"/root/.cache/huggingface/hub/models--Qwen--Qwen3-30B-A3B/snapshots/ad44e777/config.json": "Qwen3-30B-A3B",
		"hub/models--gpt2/snapshots/0123/config.json":                                             "gpt2",
		"x/snapshots/0123/config.json":                                                            "0123",
	} {
		if got := hfFileName(path); got != want {
			t.Errorf("hfFileName(%q) = %q, want %q", path, got, want)
		}
	}
}
