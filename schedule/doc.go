// Package schedule is mokc's description language: Layer says what an MoE
// layer computes (sizes, experts, top-k, shared experts, activation,
// precision, routing form, weight storage) and Schedule says how it runs
// (target, tiles, pipeline stages, warp roles, grid). It validates both,
// carries presets for real models, reads Hugging Face config.json files, and
// holds the float64 CPU reference of the layer, forward and backward.
package schedule
