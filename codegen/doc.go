// Package codegen builds mokc's kernels as LLVM IR (through package ir) from a
// schedule.Layer and schedule.Schedule. Architecture differences live in one
// GEMM atom per target (sm_80: mma.sync, ldmatrix, cp.async; sm_90a: TMA,
// wgmma, mbarrier; sm_100a: TMA, tcgen05, TMEM); routing, dispatch, the
// grouped-GEMM task, activation epilogues and combine are shared by every
// target.
//
// Lower turns a moe.Program (ops over typed buffers) into a Program: one
// module with every kernel and its launch plan (kernels in order with
// parameters, grids and shared memory as functions of the token count T,
// and the buffers they use). How ops become kernels is a Lowering policy;
// PerOp gives one kernel per op (lower_gemm.go: a grouped GEMM becomes two
// kernels split by token range when the schedule has a GEMM variant for a
// range of T; dispatch_small.go: with the ids form of the routing, init,
// count, scan and permute also run as one block, moe_dispatch_small, for
// T·K up to 2048, and, dispatch_queue.go, past T·K = 8192 as moe_dispatch,
// whose blocks take numbered work items from a queue in global memory):
//
//	[moe_dispatch_small | moe_dispatch |] moe_init → [moe_route] → moe_count → moe_scan → moe_permute → moe_gather
//	→ moe_fc1 [moe_fc1_mid | moe_fc1_decode] → moe_fc2 [moe_fc2_mid | moe_fc2_decode]
//	→ [moe_shared_fc1 → moe_shared_fc2] → moe_combine
//
// The backward (moe.Backward) lowers the same way: its GEMMs on the
// engines (a GEMM over N-major weights is read as it is stored where the
// engine says so, Engine.ReadsNMajorB: sm_90a's wgmma with imm-trans-b
// over grouped weights, sm_80's ldmatrix .trans; elsewhere a transpose
// kernel first copies the weights K-major, lower_gemm.go; an f32 C makes the sm_90a atom store directly), its
// row-wise ops (the activation's backward, the per-token gather of dx and
// the routing-weight gradient, the shared gate, the dense dprobs) in
// kernels_backward.go, and its weight gradients as a GEMM that reduces over
// each expert's rows on the tensor cores (Schedule.WGrad: wgmma over
// MN-major tiles on sm_90a, kernels_wgrad_wgmma.go; mma.sync over
// ldmatrix.trans on every target, kernels_wgrad_mma.go) into the main
// grads, with an fp32 CUDA-core kernel for an f32 operand
// (kernels_wgrad.go). With
// per-expert weight storage the GEMMs read the weights through their
// pointer tables (so does the transpose of an N-major B, emitTranspose) and
// the weight gradients add to main grads behind pointer tables
// (mainGradBase).
//
// Kernel parameters are the ops' operands (named by role, bound to the
// program's buffers, declared once in package moe); the lowering adds only
// its own scratch, the GEMM work lists and transposed weights. Build is
// moe.Forward then Lower with PerOp.
//
// No launch depends on a value read back on the host: grids are upper bounds
// (surplus blocks exit), the tile list and row offsets stay on the device.
// Every kernel is bitwise deterministic: integer atomics only for counts and
// the error word, stable ranks for the permutation, and fixed fp32 orders for
// every sum.
//
// Grouped GEMMs are one architecture-neutral task over a per-target atom.
// The task (gemm_spec.go, gemm_task.go, engine.go, epilogue.go) is written
// once: the GemmSpec (rows from the tile list or a dense A, weights grouped
// or one allocation per expert, plain or gated with the B tile's gate/up
// layout layouts.GateUp), the work list (workList: tile x column block,
// walked by every role of a persistent block in a fixed order or, with
// GemmSpec.QueueItems, taken from a queue by the producer and handed to
// the other roles through a ring in shared memory), the (stage, phase) ring and
// its mbarriers (mbarRing, ringNext), and the Epilogue, so bias, activation
// and bf16 rounding are the same on every target. An atom is what one
// target adds, in one file (and its epilogue side):
//
//	atom_sm80.go   cp.async ring of PaddedTiles, ldmatrix + mma.sync m16n8k16
//	               (atom_sm80_mma.go), accumulators in registers; one block per
//	               work item
//	atom_sm90.go   TMA ring (tma_ring.go, tma_producer.go) of 128B-swizzled
//	               SmemTiles, wgmma (wgmma.go) from a consumer warpgroup per 64
//	               rows, the staged epilogue (atom_sm90_epilogue.go); persistent
//	atom_sm100.go  the same TMA ring, tcgen05.mma by one thread into TMEM,
//	               epilogue warps reading TMEM (atom_sm100_epilogue.go); persistent
//
// Each atom's plan takes its shared-memory layout from
// layouts.PlanGemmSmem (the operand tiles as layouts values, stage bytes,
// barrier and staging offsets, TMEM columns), the computation
// schedule.Schedule.Validate and `mokc inspect layout --model` use too, so
// the budget the schedule checks is the one the kernel allocates. One
// Engine (engine.go: validate the spec, plan the atom, build) serves every
// target; registerAtom adds a target.
//
// Every kernel is built with a Builder (builder.go): package ir's kernel
// builder with mokc's byte-addressing, control-flow and bf16 conventions
// and the inline PTX of the sm_90a and sm_100a atoms on top (sm90_ops.go:
// mbarrier, TMA, cp.async; wgmma.go; sm100_ops.go: tcgen05, TMEM).
package codegen
