// Package schedule is mokc's description language: Layer says what an MoE
// layer computes (sizes, experts, top-k, shared experts, activation,
// precision, routing form, weight storage) and Schedule says how it runs
// (target, tiles, pipeline stages, warp roles, grid). It validates both,
// carries presets for real models, reads Hugging Face config.json files, and
// holds the float64 CPU reference of the layer, forward and backward.
//
// # Describing a layer
//
//	l, _ := schedule.Preset("qwen3-30b-a3b")       // or schedule.LoadHFConfig("config.json")
//	l.Precision = schedule.MXFP8
//	s, err := schedule.DefaultSchedule(l, target.SM90a)
//
// Layer.Validate and Schedule.Validate return a *FieldError naming the
// field, its value and the broken rule; nothing in the package panics on
// bad input. Sizes beyond what the kernels handle (MaxTopK, MaxExperts,
// MaxHidden, MaxIntermediate, MaxSharedExperts, weights above
// target.MaxMemoryBytes) are refused first, with the reason of the limit;
// Layer.MaxTokens and Schedule.MaxTokens give the largest token count whose
// indices fit the kernels' 32-bit integers. Presets lists one layer per supported model, with the sizes of
// the model's config.json and the router of its modeling code; ParseHFConfig
// reads the qwen2_moe, qwen3_moe, deepseek_v2/v3/v4, kimi_k2, mixtral,
// olmoe, gpt_oss and llama4 (nested text_config) families.
//
// # The reference
//
// Forward, ForwardRows and Backward compute the layer in float64 from
// float32 inputs (bf16 values in practice: the GPU stores bf16; RoundBF16
// makes values representable). Shapes are explicit row-major slices:
// x [T*H], Weights per expert FC1 [2I*H] (gate rows then up rows, or
// interleaved), FC2 [H*I], and Routing either ids/weights [T*K] or a routing
// map/probs [T*E]. Semantics, those of the models' own MoE blocks (the
// transformers modeling files, e.g. modeling_qwen2_moe.py for the shared
// expert's gate and modeling_llama4.py for the weight on the input):
//
//	y[t] = shared(x[t]) + sum over k with id[t,k] >= 0 of w[t,k] * y[t,k]
//	y[t,k] = FC2_e act(FC1_e x[t] + b1_e) + b2_e,  e = id[t,k]
//	shared(x) = [sigmoid(x·g) *] sum over s of FC2_s act_s(FC1_s x)
//
// With Layer.RouterWeightOnInput (Llama 4) the weight scales the expert's
// input instead: y[t,k] = FC2_e act(FC1_e (w[t,k] x[t])) and the slot adds
// y[t,k] unweighted. Sums run in float64 in a fixed order (shared experts,
// then slots in increasing k), so results are identical on any number of
// cores; the work is spread over GOMAXPROCS goroutines.
//
// Edge cases, all tested:
//   - T = 0: empty results, main grads untouched. T = 1 equals the same
//     token in a batch.
//   - A token whose slots are all -1 gets the shared output only (exactly 0
//     without shared experts); a -1 slot reads no weight (NaN there is
//     harmless) and has router-weight gradient 0.
//   - Duplicate expert ids within one token: each slot counts.
//   - An id >= E or < -1 is an error naming the token and slot; a dense
//     routing map with more than K routes in a row is an error.
//   - NaN or Inf in x[t] or in a weight read by token t changes y[t] only
//     (NaN propagates through the clamps, so a NaN stays NaN). In the
//     backward pass it changes dx[t], dw[t,*] and, as the mathematics
//     demands, the weight gradients of the experts token t reaches.
//   - An expert with zero tokens is never read (its weights may be nil) and
//     its main grads are never touched: its gradient is exactly zero.
//
// Backward returns dx and the router-weight gradient dw[t,k] = <dy[t],
// y[t,k]>, computed directly from the unweighted expert output (exact for
// w <= 0, unlike a 1/w rescaling), and accumulates dW of routed and shared
// FC1/FC2, the biases and the shared gate into caller-owned main-grad
// buffers, rounding main + dW once to fp32 or bf16 (Layer.MainGrad).
//
// GenerateRouting produces realistic routing (router logits, the family's
// score function, top-k with group limits, renormalisation and scaling);
// RandomWeights and RandomInput produce bf16-valued test data. All three are
// deterministic given a seed.
package schedule
