// Package codegen builds mokc's kernels as LLVM IR (through package ir) from a
// schedule.Layer and schedule.Schedule. Architecture differences live in one
// MMA engine per target (sm_80: mma.sync, ldmatrix, cp.async; sm_90a: TMA,
// wgmma, mbarrier; sm_100a: TMA, tcgen05, TMEM); routing, dispatch, activation
// epilogues and combine are shared by every target.
//
// Build returns a Program: one module with every kernel of the BF16 forward
// and its launch plan (kernels in order with parameters, grids and shared
// memory as functions of the token count T, and the buffers they use):
//
//	moe_init → [moe_route] → moe_count → moe_scan → moe_permute → moe_gather
//	→ moe_fc1 → moe_fc2 → [moe_shared_fc1 → moe_shared_fc2] → moe_combine
//
// No launch depends on a value read back on the host: grids are upper bounds
// (surplus blocks exit), the tile list and row offsets stay on the device.
// Every kernel is bitwise deterministic: integer atomics only for counts and
// the error word, stable ranks for the permutation, and fixed fp32 orders for
// every sum.
//
// Engines implement the Engine interface (engine.go) for grouped GEMMs over
// the tile list and share the Epilogue (epilogue.go), so bias, activation
// and bf16 rounding are the same on every target.
//
// Every kernel is built with a Builder (builder.go): package ir's kernel
// builder with mokc's byte-addressing, control-flow and bf16 conventions
// and the inline PTX of the sm_90a and sm_100a engines on top.
package codegen
