package schedule

import (
	"fmt"
	"math"
	"strings"
)

// Activation is the gated activation applied between FC1 and FC2 of an
// expert. FC1 produces a gate column g and an up column u per intermediate
// index; the activation maps (g, u) to h. Each constant gives its formula
// and the source that defines it.
type Activation int

const (
	// SwiGLU is h = silu(g) * u, silu(x) = x * sigmoid(x) (Shazeer, "GLU
	// Variants Improve Transformer", arXiv:2002.05202; hidden_act "silu" in
	// the models' config.json files). The zero value.
	SwiGLU Activation = iota
	// ClampedSwiGLU is h = silu(min(g, L)) * clamp(u, -L, L) with L the
	// layer's SwiGLU limit: g is clamped from above only, u on both sides
	// (MoK swiglu_limit, Megatron-LM TransformerConfig
	// activation_func_clamp_value, DeepSeek-V4-Flash config.json
	// swiglu_limit 10).
	ClampedSwiGLU
	// GPTOSS is the gpt-oss activation: g' = min(g, L), u' = clamp(u, -L, L),
	// h = g' * sigmoid(alpha * g') * (u' + 1), with L = 7 and alpha = 1.702 in
	// the released models (openai/gpt-oss gpt_oss/torch/model.py, swiglu).
	GPTOSS
)

var activationNames = []string{"swiglu", "clamped-swiglu", "gpt-oss"}

// String returns the lower-case name used by mokc's command line and errors.
func (a Activation) String() string {
	if a >= 0 && int(a) < len(activationNames) {
		return activationNames[a]
	}
	return fmt.Sprintf("Activation(%d)", int(a))
}

// Precision is the storage precision of the routed experts' weights.
type Precision int

const (
	// BF16 weights: bfloat16, fp32 accumulation. The zero value.
	BF16 Precision = iota
	// MXFP8 weights: E4M3 data with one UE8M0 scale per 32 consecutive
	// elements along the reduction dimension (OCP Microscaling Formats (MX)
	// Specification v1.0, MXFP8 in its table of concrete MX-compliant
	// formats: E4M3 elements, E8M0 scale, block size 32).
	MXFP8
)

var precisionNames = []string{"bf16", "mxfp8"}

// String returns "bf16" or "mxfp8".
func (p Precision) String() string {
	if p >= 0 && int(p) < len(precisionNames) {
		return precisionNames[p]
	}
	return fmt.Sprintf("Precision(%d)", int(p))
}

// RoutingForm is the form in which a caller hands the routing to the layer.
type RoutingForm int

const (
	// RoutingIDs is the fixed-width form: ids [T, K] int32 (-1 = no route)
	// and weights [T, K] float32. The zero value.
	RoutingIDs RoutingForm = iota
	// RoutingMap is the dense form: routing map [T, E] bool and probs
	// [T, E] float32, converted to the fixed-width form (routes in
	// increasing expert order, -1 padding).
	RoutingMap
)

var routingFormNames = []string{"ids", "map"}

// String returns "ids" or "map".
func (r RoutingForm) String() string {
	if r >= 0 && int(r) < len(routingFormNames) {
		return routingFormNames[r]
	}
	return fmt.Sprintf("RoutingForm(%d)", int(r))
}

// WeightStorage is how the caller stores the routed experts' weights on the
// device. mokc never copies them.
type WeightStorage int

const (
	// GroupedWeights is one tensor per FC: FC1 [E, 2I, H], FC2 [E, H, I].
	// The zero value.
	GroupedWeights WeightStorage = iota
	// PerExpertWeights is one allocation per expert and FC (FC1 [2I, H],
	// FC2 [H, I]), reached through a device-side table of pointers.
	PerExpertWeights
)

var weightStorageNames = []string{"grouped", "per-expert"}

// String returns "grouped" or "per-expert".
func (w WeightStorage) String() string {
	if w >= 0 && int(w) < len(weightStorageNames) {
		return weightStorageNames[w]
	}
	return fmt.Sprintf("WeightStorage(%d)", int(w))
}

// GradDType is the dtype of the caller-owned main-grad buffers into which the
// backward pass accumulates weight gradients (Megatron's main_grad).
type GradDType int

const (
	// GradFP32 main-grad buffers hold float32. The zero value.
	GradFP32 GradDType = iota
	// GradBF16 main-grad buffers hold bfloat16; each element is rounded once
	// (round to nearest even) after the weight gradient is added.
	GradBF16
)

var gradDTypeNames = []string{"fp32", "bf16"}

// String returns "fp32" or "bf16".
func (g GradDType) String() string {
	if g >= 0 && int(g) < len(gradDTypeNames) {
		return gradDTypeNames[g]
	}
	return fmt.Sprintf("GradDType(%d)", int(g))
}

// RouterScore is the function a model family applies to the router logits
// z = x·Wr before choosing the top-k experts. Routing is an input of the
// layer; the router description only serves GenerateRouting (realistic test
// routing) and documentation.
type RouterScore int

const (
	// ScoreSoftmax: s = softmax(z) over all E experts (Qwen, Mixtral,
	// OLMoE, DeepSeek-V2, gpt-oss). The zero value.
	ScoreSoftmax RouterScore = iota
	// ScoreSigmoid: s = sigmoid(z) (DeepSeek-V3, Kimi-K2, Llama 4).
	ScoreSigmoid
	// ScoreSqrtSoftplus: s = sqrt(softplus(z)) (DeepSeek-V4).
	ScoreSqrtSoftplus
)

var routerScoreNames = []string{"softmax", "sigmoid", "sqrt-softplus"}

// String returns "softmax", "sigmoid" or "sqrt-softplus".
func (r RouterScore) String() string {
	if r >= 0 && int(r) < len(routerScoreNames) {
		return routerScoreNames[r]
	}
	return fmt.Sprintf("RouterScore(%d)", int(r))
}

// Router describes how a model family turns router logits into the routing
// weights of the top-k experts: w = Scale * s_k (or Scale * s_k / sum of the
// chosen s when Normalize). Groups > 0 selects experts only from the
// TopKGroups best groups of E/Groups experts, a group scored by the sum of its
// two best scores (DeepSeek-V3 "noaux_tc"; the score-correction bias is taken
// as zero).
type Router struct {
	Score      RouterScore // function applied to the logits
	Normalize  bool        // renormalise the chosen scores to sum 1 (norm_topk_prob)
	Scale      float64     // routed_scaling_factor; 0 means 1
	Groups     int         // n_group; 0 or 1 = no group limit
	TopKGroups int         // topk_group; groups kept when Groups > 1
}

// Layer says WHAT an MoE layer computes, for T tokens of hidden size H:
//
//	y[t] = shared(x[t]) + sum over k with id[t,k] >= 0 of w[t,k] * FC2_e(act(FC1_e x[t]))
//
// with e = id[t,k]; the package documentation gives the complete
// semantics (biases, the shared-expert gate, a router weight applied to the
// expert input). The zero value is not a valid layer; use a preset,
// ParseHFConfig, or fill the sizes and call Validate.
type Layer struct {
	// Name is a free-form label (the preset name for presets).
	Name string

	Hidden       int // H, hidden size (columns of x and y)
	Intermediate int // I, routed expert intermediate size (FC1 has 2I rows)
	Experts      int // E, number of routed experts
	TopK         int // K, routes per token (width of the fixed-width routing)

	// SharedExperts is the number S of shared experts (0 = none); each has
	// intermediate size SharedIntermediate (I_s, which may differ from I).
	// S shared experts compute the same as one shared expert of
	// intermediate size S*I_s.
	SharedExperts      int
	SharedIntermediate int // I_s, intermediate size of each shared expert
	// SharedGate adds the Qwen2-MoE sigmoid output gate: the shared
	// experts' output is multiplied by sigmoid(x[t]·g), g [H].
	SharedGate bool
	// SharedActivation is the shared experts' activation (SwiGLU or
	// ClampedSwiGLU; it may differ from the routed one, e.g. DeepSeek-V4
	// clamps only the routed experts). SharedSwiGLULimit is its limit.
	SharedActivation  Activation
	SharedSwiGLULimit float64 // clamp limit of a ClampedSwiGLU shared activation; 0 for SwiGLU

	// Activation of the routed experts.
	Activation Activation
	// SwiGLULimit is the clamp limit L of ClampedSwiGLU and GPTOSS (0 for
	// plain SwiGLU).
	SwiGLULimit float64
	// GPTOSSAlpha is alpha of the GPTOSS activation (1.702), 0 otherwise.
	GPTOSSAlpha float64
	// GateUpInterleaved: FC1 rows alternate gate, up (gate = even rows,
	// up = odd rows, gpt-oss) instead of gate rows 0..I-1 then up rows
	// I..2I-1.
	GateUpInterleaved bool
	// Biases: FC1 and FC2 of every routed expert have a bias (FC1 [2I],
	// FC2 [H], gpt-oss).
	Biases bool
	// RouterWeightOnInput: the routing weight scales the expert INPUT
	// instead of its output (Llama 4: routed_in = x * w, and the expert
	// outputs are summed unweighted):
	//   y[t] = shared(x[t]) + sum_k FC2_e(act(FC1_e (w[t,k] * x[t]))).
	RouterWeightOnInput bool

	// Precision of the routed experts' weights; shared experts are BF16.
	Precision Precision
	// Routing is the form of the routing input.
	Routing RoutingForm
	// Storage is how the routed weights are stored on the device.
	Storage WeightStorage
	// MainGrad is the dtype of the main-grad buffers of the backward pass.
	MainGrad GradDType
	// SaveFC1 is the training forward's saved-state policy: false (the
	// default) keeps nothing for the backward, which recomputes the routed
	// FC1 output; true makes the forward keep that output, f32 [T·K, 2I]
	// (bias included, before the activation: 8·I bytes per routed row,
	// 8·K·I per token), for the backward to read instead of recomputing
	// it (one routed GEMM less; the forward writes 2I f32 columns and
	// applies the activation in a kernel of its own). The results are
	// the same either way (moe.Forward, moe.Backward).
	SaveFC1 bool

	// Router describes the family's routing rule (for GenerateRouting).
	Router Router
}

// FieldError is a validation error: Field (e.g. "Layer.TopK") has Value,
// which breaks Rule. Every error of Layer.Validate and Schedule.Validate is
// a *FieldError (possibly several joined by errors.Join).
type FieldError struct {
	Field string // the field's path, e.g. "Layer.TopK" or "Schedule.FC1.N"
	Value any    // the field's rejected value
	Rule  string // the broken rule, e.g. "must be > 0"
}

// Error formats the error as "FIELD = VALUE: RULE".
func (e *FieldError) Error() string {
	return fmt.Sprintf("%s = %v: %s", e.Field, e.Value, e.Rule)
}

func fieldErr(field string, value any, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Value: value, Rule: fmt.Sprintf(format, args...)}
}

// Validate checks the layer and returns the first broken rule as a
// *FieldError naming the field, its value and the rule; nil if the layer is
// valid. The sizes are checked first against the kernels' limits (MaxHidden,
// MaxIntermediate, MaxExperts, MaxTopK, MaxSharedExperts, and the weights
// against target.MaxMemoryBytes), so a huge layer is refused before anything
// is sized from it. It never panics.
func (l Layer) Validate() error {
	if err := l.validateLimits(); err != nil {
		return err
	}
	if l.TopK > l.Experts {
		return fieldErr("Layer.TopK", l.TopK, "must be <= Layer.Experts (%d)", l.Experts)
	}
	if l.Precision == MXFP8 { // first: 32 is the rule a user of an mxfp8 layer needs
		if l.Hidden%32 != 0 {
			return fieldErr("Layer.Hidden", l.Hidden, "must be a multiple of 32 with mxfp8 weights (one UE8M0 scale per 32 elements along the reduction dimension)")
		}
		if l.Intermediate%32 != 0 {
			return fieldErr("Layer.Intermediate", l.Intermediate, "must be a multiple of 32 with mxfp8 weights (one UE8M0 scale per 32 elements along the reduction dimension)")
		}
	}
	if l.Hidden%8 != 0 {
		return fieldErr("Layer.Hidden", l.Hidden, "must be a multiple of 8 (16-byte aligned bf16 rows for TMA and vector loads)")
	}
	if l.Intermediate%8 != 0 {
		return fieldErr("Layer.Intermediate", l.Intermediate, "must be a multiple of 8 (16-byte aligned bf16 rows for TMA and vector loads)")
	}
	if l.SharedExperts == 0 {
		if l.SharedIntermediate != 0 {
			return fieldErr("Layer.SharedIntermediate", l.SharedIntermediate, "must be 0 when Layer.SharedExperts is 0")
		}
		if l.SharedGate {
			return fieldErr("Layer.SharedGate", l.SharedGate, "needs Layer.SharedExperts > 0")
		}
		if l.SharedActivation != SwiGLU || l.SharedSwiGLULimit != 0 {
			return fieldErr("Layer.SharedActivation", l.SharedActivation, "must be swiglu with limit 0 when Layer.SharedExperts is 0")
		}
	} else {
		if l.SharedIntermediate%8 != 0 {
			return fieldErr("Layer.SharedIntermediate", l.SharedIntermediate, "must be a multiple of 8 (16-byte aligned bf16 rows)")
		}
		switch l.SharedActivation {
		case SwiGLU:
			if l.SharedSwiGLULimit != 0 {
				return fieldErr("Layer.SharedSwiGLULimit", l.SharedSwiGLULimit, "must be 0 with swiglu (use clamped-swiglu for a limit)")
			}
		case ClampedSwiGLU:
			if !(l.SharedSwiGLULimit > 0) || math.IsInf(l.SharedSwiGLULimit, 0) {
				return fieldErr("Layer.SharedSwiGLULimit", l.SharedSwiGLULimit, "must be finite and > 0 with clamped-swiglu")
			}
		default:
			return fieldErr("Layer.SharedActivation", l.SharedActivation, "must be swiglu or clamped-swiglu")
		}
	}
	switch l.Activation {
	case SwiGLU:
		if l.SwiGLULimit != 0 {
			return fieldErr("Layer.SwiGLULimit", l.SwiGLULimit, "must be 0 with swiglu (use clamped-swiglu for a limit)")
		}
	case ClampedSwiGLU, GPTOSS:
		if !(l.SwiGLULimit > 0) || math.IsInf(l.SwiGLULimit, 0) {
			return fieldErr("Layer.SwiGLULimit", l.SwiGLULimit, "must be finite and > 0 with %v", l.Activation)
		}
	default:
		return fieldErr("Layer.Activation", l.Activation, "must be swiglu, clamped-swiglu or gpt-oss")
	}
	if l.Activation == GPTOSS {
		if !(l.GPTOSSAlpha > 0) || math.IsInf(l.GPTOSSAlpha, 0) {
			return fieldErr("Layer.GPTOSSAlpha", l.GPTOSSAlpha, "must be finite and > 0 with gpt-oss")
		}
	} else if l.GPTOSSAlpha != 0 {
		return fieldErr("Layer.GPTOSSAlpha", l.GPTOSSAlpha, "must be 0 unless Layer.Activation is gpt-oss")
	}
	if l.Precision != BF16 && l.Precision != MXFP8 {
		return fieldErr("Layer.Precision", l.Precision, "must be bf16 or mxfp8")
	}
	if l.Routing != RoutingIDs && l.Routing != RoutingMap {
		return fieldErr("Layer.Routing", l.Routing, "must be ids or map")
	}
	if l.Storage != GroupedWeights && l.Storage != PerExpertWeights {
		return fieldErr("Layer.Storage", l.Storage, "must be grouped or per-expert")
	}
	if l.MainGrad != GradFP32 && l.MainGrad != GradBF16 {
		return fieldErr("Layer.MainGrad", l.MainGrad, "must be fp32 or bf16")
	}
	r := l.Router
	if r.Score < ScoreSoftmax || r.Score > ScoreSqrtSoftplus {
		return fieldErr("Layer.Router.Score", r.Score, "must be softmax, sigmoid or sqrt-softplus")
	}
	if r.Scale < 0 || math.IsNaN(r.Scale) || math.IsInf(r.Scale, 0) {
		return fieldErr("Layer.Router.Scale", r.Scale, "must be finite and >= 0 (0 means 1)")
	}
	if r.Groups < 0 {
		return fieldErr("Layer.Router.Groups", r.Groups, "must be >= 0")
	}
	if r.Groups > 1 {
		if l.Experts%r.Groups != 0 {
			return fieldErr("Layer.Router.Groups", r.Groups, "must divide Layer.Experts (%d)", l.Experts)
		}
		if r.TopKGroups < 1 || r.TopKGroups > r.Groups {
			return fieldErr("Layer.Router.TopKGroups", r.TopKGroups, "must be in 1..Layer.Router.Groups (%d)", r.Groups)
		}
		if r.TopKGroups*(l.Experts/r.Groups) < l.TopK {
			return fieldErr("Layer.Router.TopKGroups", r.TopKGroups, "the kept groups hold %d experts, fewer than Layer.TopK (%d)", r.TopKGroups*(l.Experts/r.Groups), l.TopK)
		}
	}
	return nil
}

// SharedWidth is the total shared intermediate size S*I_s (0 without shared
// experts).
func (l Layer) SharedWidth() int { return l.SharedExperts * l.SharedIntermediate }

// String is a one-line summary of the layer.
func (l Layer) String() string {
	var b strings.Builder
	name := l.Name
	if name == "" {
		name = "layer"
	}
	fmt.Fprintf(&b, "%s: H=%d I=%d E=%d K=%d", name, l.Hidden, l.Intermediate, l.Experts, l.TopK)
	if l.SharedExperts > 0 {
		fmt.Fprintf(&b, " shared=%dx%d", l.SharedExperts, l.SharedIntermediate)
		if l.SharedGate {
			b.WriteString("+sigmoid-gate")
		}
		if l.SharedActivation != SwiGLU {
			fmt.Fprintf(&b, "(%v L=%g)", l.SharedActivation, l.SharedSwiGLULimit)
		}
	}
	fmt.Fprintf(&b, " act=%v", l.Activation)
	if l.Activation != SwiGLU {
		fmt.Fprintf(&b, "(L=%g", l.SwiGLULimit)
		if l.Activation == GPTOSS {
			fmt.Fprintf(&b, " alpha=%g", l.GPTOSSAlpha)
		}
		b.WriteString(")")
	}
	if l.GateUpInterleaved {
		b.WriteString(" interleaved")
	}
	if l.Biases {
		b.WriteString(" biases")
	}
	if l.RouterWeightOnInput {
		b.WriteString(" weight-on-input")
	}
	fmt.Fprintf(&b, " %v routing=%v storage=%v main-grad=%v", l.Precision, l.Routing, l.Storage, l.MainGrad)
	return b.String()
}
