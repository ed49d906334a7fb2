package schedule

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// hfFamilies maps a config.json model_type to its reader. Keys per family
// follow the transformers configuration classes (models/*/configuration_*.py)
// and the released config.json files.
var hfFamilies = map[string]func(c hfConfig) (Layer, error){
	"qwen2_moe":   readQwenMoE(true),
	"qwen3_moe":   readQwenMoE(false),
	"deepseek_v2": readDeepSeek("deepseek_v2"),
	"deepseek_v3": readDeepSeek("deepseek_v3"),
	"deepseek_v4": readDeepSeek("deepseek_v4"),
	"kimi_k2":     readDeepSeek("kimi_k2"),
	"mixtral":     readMixtral,
	"olmoe":       readOLMoE,
	"gpt_oss":     readGPTOSS,
	"llama4":      readLlama4,
	"llama4_text": readLlama4Text,
}

// HFFamilies lists the Hugging Face model_type values ParseHFConfig reads.
func HFFamilies() []string { return slices.Sorted(maps.Keys(hfFamilies)) }

// LoadHFConfig reads a Hugging Face config.json file with ParseHFConfig;
// errors start with the file name. The layer is named by the config's
// _name_or_path, else after the file: its name, or for config.json the
// directory holding it.
func LoadHFConfig(path string) (Layer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Layer{}, err
	}
	l, err := ParseHFConfig(data)
	if err != nil {
		return Layer{}, fmt.Errorf("%s: %w", path, err)
	}
	if l.Name == "" {
		l.Name = hfFileName(path)
	}
	return l, nil
}

// hfFileName names a layer after its config file: the file name without
// extension, or for a file called config.json (a model checkpoint's) the
// directory that holds it ("Qwen3-30B-A3B/config.json" -> "Qwen3-30B-A3B"),
// or in a Hugging Face hub cache the model's name rather than the snapshot
// (".../models--Qwen--Qwen3-30B-A3B/snapshots/<commit>/config.json" ->
// "Qwen3-30B-A3B").
func hfFileName(path string) string {
	base := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	if base == "config" {
		if abs, err := filepath.Abs(path); err == nil {
			dir := filepath.Dir(abs)
			snapshots, repo := filepath.Dir(dir), filepath.Base(filepath.Dir(filepath.Dir(dir)))
			if filepath.Base(snapshots) == "snapshots" && strings.HasPrefix(repo, "models--") {
				repo = strings.TrimPrefix(repo, "models--")
				if _, name, ok := strings.Cut(repo, "--"); ok && name != "" {
					return name
				}
				return repo
			}
			if d := filepath.Base(dir); d != "" && d != "." && d != string(filepath.Separator) {
				return d
			}
		}
	}
	return base
}

// ParseHFConfig returns the MoE layer described by a Hugging Face
// config.json of one of the families of HFFamilies: qwen2_moe, qwen3_moe,
// deepseek_v2/v3/v4, kimi_k2, mixtral, olmoe, gpt_oss, llama4 (its nested
// text_config) and llama4_text. Per family:
//   - routed intermediate size: moe_intermediate_size for Qwen and
//     DeepSeek/Kimi (their intermediate_size is the dense MLP's and is never
//     used); intermediate_size for Mixtral, OLMoE, gpt-oss and Llama 4 (whose
//     dense MLP is intermediate_size_mlp).
//   - experts: num_experts (Qwen, OLMoE), n_routed_experts (DeepSeek, Kimi),
//     num_local_experts (Mixtral, gpt-oss, Llama 4); top-k:
//     num_experts_per_tok (gpt-oss also experts_per_token).
//   - shared experts: Qwen2-MoE one of shared_expert_intermediate_size with
//     the sigmoid gate; DeepSeek/Kimi n_shared_experts of
//     moe_intermediate_size; Llama 4 one of intermediate_size.
//   - activation: swiglu_limit makes DeepSeek-V4's routed experts clamped
//     SwiGLU and sets gpt-oss's limit (default 7, alpha 1.702).
//   - router: scoring_func, norm_topk_prob, routed_scaling_factor,
//     topk_method, n_group and topk_group (DeepSeek, Kimi); keys a config
//     leaves out take its configuration class's defaults (deepSeekFamilies),
//     n_shared_experts included; DeepSeek-V4 requires n_shared_experts.
//
// The result has BF16 weights, fixed-width routing, grouped storage and an
// fp32 main grad, and is validated. Errors say what is wrong: malformed
// JSON, a model_type that is not an MoE family mokc reads, a missing key
// (named), a key of the wrong type (named), a model without experts, or a
// layer that fails Layer.Validate.
func ParseHFConfig(data []byte) (Layer, error) {
	c, err := parseHFObject(data)
	if err != nil {
		return Layer{}, err
	}
	mt, err := c.str("model_type")
	if err != nil {
		return Layer{}, err
	}
	read, ok := hfFamilies[mt]
	if !ok {
		return Layer{}, fmt.Errorf("model_type %q is not an MoE family mokc reads (supported: %s)", mt, strings.Join(HFFamilies(), ", "))
	}
	l, err := read(c)
	if err != nil {
		return Layer{}, fmt.Errorf("%s config: %w", mt, err)
	}
	if err := checkHiddenAct(c); err != nil {
		return Layer{}, fmt.Errorf("%s config: %w", mt, err)
	}
	if name, ok := c.m["_name_or_path"].(string); ok && name != "" {
		l.Name = name
	}
	if err := l.Validate(); err != nil {
		var fe *FieldError
		if errors.As(err, &fe) && c.keys[fe.Field] != "" {
			return Layer{}, fmt.Errorf("%s config describes an invalid layer: key %q = %v: %s", mt, c.keys[fe.Field], fe.Value, fe.Rule)
		}
		return Layer{}, fmt.Errorf("%s config describes an invalid layer: %w", mt, err)
	}
	return l, nil
}

// checkHiddenAct refuses a hidden_act (top level or in text_config) other
// than silu/swish: every family mokc reads gates its experts with SiLU
// (GPT-OSS's own gate included, whose configs also say "silu"), and a layer
// built as SwiGLU from a config that asks for another activation would be a
// silent wrong answer.
func checkHiddenAct(c hfConfig) error {
	objs := []struct {
		m    map[string]any
		path string
	}{{c.m, ""}}
	if tc, ok := c.m["text_config"].(map[string]any); ok {
		objs = append(objs, struct {
			m    map[string]any
			path string
		}{tc, "text_config."})
	}
	for _, o := range objs {
		v, ok := o.m["hidden_act"]
		if !ok {
			continue
		}
		a, ok := v.(string)
		if !ok {
			return fmt.Errorf("%shidden_act is %s, want a string", o.path, jsonKind(v))
		}
		if a != "silu" && a != "swish" {
			return fmt.Errorf("%shidden_act %q: mokc builds SiLU-gated experts only (silu, swish)", o.path, a)
		}
	}
	return nil
}

// hfConfig is one JSON object of a config.json (the top level or a nested
// text_config).
type hfConfig struct {
	m    map[string]any
	path string // "" at the top level, "text_config." inside it
	// keys maps the Layer fields read so far ("Layer.Experts", as
	// FieldError spells them) to the key they came from
	// ("text_config.num_local_experts"), so a refusal names the key.
	keys map[string]string
}

func parseHFObject(data []byte) (hfConfig, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return hfConfig{}, fmt.Errorf("malformed config.json: %v", err)
	}
	if d.More() {
		return hfConfig{}, fmt.Errorf("malformed config.json: data after the top-level object")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return hfConfig{}, fmt.Errorf("malformed config.json: the top level is %s, want an object", jsonKind(v))
	}
	return hfConfig{m: m, keys: map[string]string{}}, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// has reports whether key is present and not null.
func (c hfConfig) has(key string) bool {
	v, ok := c.m[key]
	return ok && v != nil
}

func (c hfConfig) missing(key string) error {
	if _, ok := c.m[key]; ok {
		return fmt.Errorf("key %q is null", c.path+key)
	}
	return fmt.Errorf("missing key %q", c.path+key)
}

// int reads a required non-negative integer.
func (c hfConfig) int(key string) (int, error) {
	if !c.has(key) {
		return 0, c.missing(key)
	}
	return c.intValue(key)
}

func (c hfConfig) intValue(key string) (int, error) {
	v := c.m[key]
	n, ok := v.(json.Number)
	if !ok {
		return 0, fmt.Errorf("key %q is %s, want an integer", c.path+key, jsonKind(v))
	}
	i, err := n.Int64()
	if err != nil {
		f, ferr := n.Float64()
		if ferr != nil || f != math.Trunc(f) || math.Abs(f) > 1<<40 {
			return 0, fmt.Errorf("key %q is %s, want an integer", c.path+key, n)
		}
		i = int64(f)
	}
	if i < 0 || i > 1<<40 {
		return 0, fmt.Errorf("key %q is %d, want a non-negative integer", c.path+key, i)
	}
	return int(i), nil
}

// intOr reads an optional integer; absent or null gives def.
func (c hfConfig) intOr(key string, def int) (int, error) {
	if !c.has(key) {
		return def, nil
	}
	return c.intValue(key)
}

// floatOr reads an optional finite number; absent or null gives def.
func (c hfConfig) floatOr(key string, def float64) (float64, error) {
	if !c.has(key) {
		return def, nil
	}
	v := c.m[key]
	n, ok := v.(json.Number)
	if !ok {
		return 0, fmt.Errorf("key %q is %s, want a number", c.path+key, jsonKind(v))
	}
	f, err := n.Float64()
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("key %q is %s, want a finite number", c.path+key, n)
	}
	return f, nil
}

// boolOr reads an optional boolean; absent or null gives def.
func (c hfConfig) boolOr(key string, def bool) (bool, error) {
	if !c.has(key) {
		return def, nil
	}
	b, ok := c.m[key].(bool)
	if !ok {
		return false, fmt.Errorf("key %q is %s, want a boolean", c.path+key, jsonKind(c.m[key]))
	}
	return b, nil
}

// str reads a required string.
func (c hfConfig) str(key string) (string, error) {
	if !c.has(key) {
		return "", c.missing(key)
	}
	s, ok := c.m[key].(string)
	if !ok {
		return "", fmt.Errorf("key %q is %s, want a string", c.path+key, jsonKind(c.m[key]))
	}
	return s, nil
}

// strOr reads an optional string.
func (c hfConfig) strOr(key, def string) (string, error) {
	if !c.has(key) {
		return def, nil
	}
	return c.str(key)
}

// ints reads several required integers in order, stopping at the first error.
func (c hfConfig) ints(keys ...string) ([]int, error) {
	out := make([]int, len(keys))
	for i, k := range keys {
		v, err := c.int(k)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// experts reads the expert count, reporting a config without experts as
// not an MoE model.
func (c hfConfig) experts(key string) (int, error) {
	if !c.has(key) {
		if _, ok := c.m[key]; ok {
			return 0, fmt.Errorf("not an MoE model: %q is null", c.path+key)
		}
		return 0, fmt.Errorf("not an MoE model: missing key %q (the number of routed experts)", c.path+key)
	}
	e, err := c.intValue(key)
	if err != nil {
		return 0, err
	}
	if e == 0 {
		return 0, fmt.Errorf("not an MoE model: %q is 0", c.path+key)
	}
	return e, nil
}

// sizes reads the sizes every family has: the expert count (key experts),
// hidden_size, the experts' intermediate size (key intermediate) and the
// top-k (key topK), in that order, stopping at the first error.
func (c hfConfig) sizes(experts, intermediate, topK string) (Layer, error) {
	E, err := c.experts(experts)
	if err != nil {
		return Layer{}, err
	}
	v, err := c.ints("hidden_size", intermediate, topK)
	if err != nil {
		return Layer{}, err
	}
	for f, k := range map[string]string{"Layer.Experts": experts, "Layer.Hidden": "hidden_size", "Layer.Intermediate": intermediate, "Layer.TopK": topK} {
		c.keys[f] = c.path + k
	}
	return Layer{Hidden: v[0], Intermediate: v[1], Experts: E, TopK: v[2]}, nil
}

// softmaxSizes reads sizes and a softmax router renormalised as
// norm_topk_prob says (default false: Qwen2-MoE, Qwen3-MoE, OLMoE).
func (c hfConfig) softmaxSizes(experts, intermediate string) (Layer, error) {
	l, err := c.sizes(experts, intermediate, "num_experts_per_tok")
	if err != nil {
		return Layer{}, err
	}
	norm, err := c.boolOr("norm_topk_prob", false)
	l.Router = Router{Score: ScoreSoftmax, Normalize: norm}
	return l, err
}

func readQwenMoE(shared bool) func(c hfConfig) (Layer, error) {
	return func(c hfConfig) (Layer, error) {
		l, err := c.softmaxSizes("num_experts", "moe_intermediate_size")
		if err != nil {
			return Layer{}, err
		}
		if shared {
			is, err := c.int("shared_expert_intermediate_size")
			if err != nil {
				return Layer{}, err
			}
			c.keys["Layer.SharedIntermediate"] = c.path + "shared_expert_intermediate_size"
			if is > 0 {
				l.SharedExperts, l.SharedIntermediate, l.SharedGate = 1, is, true
			}
		}
		return l, nil
	}
}

// deepSeekDefaults are the values a DeepSeek-family configuration class
// gives the router and shared-expert keys a config.json leaves out, so a
// config reads as the model's own code would read it.
type deepSeekDefaults struct {
	score  string  // scoring_func
	norm   bool    // norm_topk_prob
	scale  float64 // routed_scaling_factor
	shared int     // n_shared_experts; -1: no default, the key is required
	method string  // topk_method
	groups int     // n_group (1: no group-limited routing)
	topK   int     // topk_group; 0: required when groups > 1
}

// deepSeekFamilies holds the defaults per model_type. Sources:
// transformers DeepseekV2Config (scoring_func "softmax", norm_topk_prob
// false, routed_scaling_factor 1.0, n_shared_experts/n_group/topk_group
// None, topk_method "greedy") and DeepseekV3Config (sigmoid scoring,
// norm_topk_prob true, routed_scaling_factor 2.5, n_shared_experts 1,
// topk_method "noaux_tc", n_group 8, topk_group 4), which Kimi K2's config
// class reuses. DeepSeek-V4 (deepseek-ai/DeepSeek-V4-Flash config.json:
// scoring_func "sqrtsoftplus", routed_scaling_factor 1.5, norm_topk_prob
// true) has no published configuration class here, so its shared expert
// count is required rather than guessed.
var deepSeekFamilies = map[string]deepSeekDefaults{
	"deepseek_v2": {score: "softmax", norm: false, scale: 1.0, shared: 0, method: "greedy", groups: 1},
	"deepseek_v3": {score: "sigmoid", norm: true, scale: 2.5, shared: 1, method: "noaux_tc", groups: 8, topK: 4},
	"kimi_k2":     {score: "sigmoid", norm: true, scale: 2.5, shared: 1, method: "noaux_tc", groups: 8, topK: 4},
	"deepseek_v4": {score: "sqrtsoftplus", norm: true, scale: 1.5, shared: -1, method: "", groups: 1},
}

func readDeepSeek(family string) func(c hfConfig) (Layer, error) {
	def, ok := deepSeekFamilies[family]
	if !ok {
		panic("schedule: no DeepSeek defaults for " + family)
	}
	return func(c hfConfig) (Layer, error) {
		l, err := c.sizes("n_routed_experts", "moe_intermediate_size", "num_experts_per_tok")
		if err != nil {
			return Layer{}, err
		}
		var S int
		if def.shared < 0 {
			S, err = c.int("n_shared_experts")
		} else {
			S, err = c.intOr("n_shared_experts", def.shared)
		}
		if err != nil {
			return Layer{}, err
		}
		if S > 0 {
			l.SharedExperts, l.SharedIntermediate = S, l.Intermediate
			c.keys["Layer.SharedExperts"] = c.path + "n_shared_experts"
		}
		score, err := c.strOr("scoring_func", def.score)
		if err != nil {
			return Layer{}, err
		}
		switch strings.ReplaceAll(strings.ReplaceAll(strings.ToLower(score), "_", ""), "-", "") {
		case "softmax":
			l.Router.Score = ScoreSoftmax
		case "sigmoid":
			l.Router.Score = ScoreSigmoid
		case "sqrtsoftplus":
			l.Router.Score = ScoreSqrtSoftplus
		default:
			return Layer{}, fmt.Errorf("key %q is %q, want softmax, sigmoid or sqrtsoftplus", "scoring_func", score)
		}
		if l.Router.Normalize, err = c.boolOr("norm_topk_prob", def.norm); err != nil {
			return Layer{}, err
		}
		if l.Router.Scale, err = c.floatOr("routed_scaling_factor", def.scale); err != nil {
			return Layer{}, err
		}
		method, err := c.strOr("topk_method", def.method)
		if err != nil {
			return Layer{}, err
		}
		if method == "group_limited_greedy" || method == "noaux_tc" {
			g, err := c.intOr("n_group", def.groups)
			if err != nil {
				return Layer{}, err
			}
			if g > 1 {
				var tg int
				if def.topK == 0 {
					tg, err = c.int("topk_group")
				} else {
					tg, err = c.intOr("topk_group", def.topK)
				}
				if err != nil {
					return Layer{}, err
				}
				l.Router.Groups, l.Router.TopKGroups = g, tg
			}
		}
		lim, err := c.floatOr("swiglu_limit", 0)
		if err != nil {
			return Layer{}, err
		}
		if lim > 0 {
			// DeepSeek-V4 clamps the routed experts only.
			l.Activation, l.SwiGLULimit = ClampedSwiGLU, lim
		}
		return l, nil
	}
}

func readMixtral(c hfConfig) (Layer, error) {
	l, err := c.sizes("num_local_experts", "intermediate_size", "num_experts_per_tok")
	l.Router = Router{Score: ScoreSoftmax, Normalize: true}
	return l, err
}

func readOLMoE(c hfConfig) (Layer, error) { return c.softmaxSizes("num_experts", "intermediate_size") }

func readGPTOSS(c hfConfig) (Layer, error) {
	kKey := "num_experts_per_tok"
	if !c.has(kKey) && c.has("experts_per_token") {
		kKey = "experts_per_token"
	}
	v, err := c.sizes("num_local_experts", "intermediate_size", kKey)
	if err != nil {
		return Layer{}, err
	}
	lim, err := c.floatOr("swiglu_limit", 7)
	if err != nil {
		return Layer{}, err
	}
	l := gptOSS(v.Experts)
	l.Hidden, l.Intermediate, l.TopK, l.SwiGLULimit = v.Hidden, v.Intermediate, v.TopK, lim
	return l, nil
}

func readLlama4(c hfConfig) (Layer, error) {
	if !c.has("text_config") {
		return Layer{}, c.missing("text_config")
	}
	m, ok := c.m["text_config"].(map[string]any)
	if !ok {
		return Layer{}, fmt.Errorf("key %q is %s, want an object", "text_config", jsonKind(c.m["text_config"]))
	}
	return readLlama4Text(hfConfig{m: m, path: "text_config.", keys: c.keys})
}

func readLlama4Text(c hfConfig) (Layer, error) {
	// intermediate_size is the experts' (routed and shared); the dense
	// layers use intermediate_size_mlp.
	l, err := c.sizes("num_local_experts", "intermediate_size", "num_experts_per_tok")
	l.SharedExperts, l.SharedIntermediate, l.RouterWeightOnInput = 1, l.Intermediate, true
	l.Router = Router{Score: ScoreSigmoid}
	return l, err
}
