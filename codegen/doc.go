// Package codegen builds mokc's kernels as LLVM IR (through package ir) from a
// schedule.Layer and schedule.Schedule. Architecture differences live in one
// MMA engine per target (sm_80: mma.sync, ldmatrix, cp.async; sm_90a: TMA,
// wgmma, mbarrier; sm_100a: TMA, tcgen05, TMEM); routing, dispatch, activation
// epilogues and combine are shared by every target.
package codegen
