// Package codegen builds mokc's kernels as LLVM IR (through package ir) from a
// schedule.Layer and schedule.Schedule. Architecture differences live in one
// MMA engine per target (sm_80: mma.sync, ldmatrix, cp.async; sm_90a: TMA,
// wgmma, mbarrier; sm_100a: TMA, tcgen05, TMEM); routing, dispatch, activation
// epilogues and combine are shared by every target.
//
// Lower turns a moe.Program (ops over typed buffers) into a Program: one
// module with every kernel and its launch plan (kernels in order with
// parameters, grids and shared memory as functions of the token count T,
// and the buffers they use). How ops become kernels is a Lowering policy;
// PerOp gives one kernel per op (lower_gemm.go: a grouped GEMM becomes two
// kernels split by token range when the schedule has a small-T variant):
//
//	moe_init → [moe_route] → moe_count → moe_scan → moe_permute → moe_gather
//	→ moe_fc1 [moe_fc1_mid] → moe_fc2 [moe_fc2_mid]
//	→ [moe_shared_fc1 → moe_shared_fc2] → moe_combine
//
// Kernel parameters are the ops' operands (named by role, bound to the
// program's buffers, declared once in package moe); the lowering adds only
// its own scratch, the GEMM work lists. Build is moe.Forward then Lower
// with PerOp.
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
