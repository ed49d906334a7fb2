// Package moe writes the MoE layer as a program: typed buffers (name, role,
// dtype, shape as expressions of the token count T) and typed ops over them,
// in execution order. Forward builds the BF16 forward of a schedule.Layer:
//
//	route → count → scan → permute → gather (dispatch)
//	→ grouped GEMM fc1 + activation → grouped GEMM fc2 (routed experts)
//	→ shared-expert fc1 + activation → shared-expert fc2
//	→ combine
//
// Every buffer is declared once, here: the kernel parameters of the IR, the
// launch plan and manifest, and the runtime's bindings are all derived from
// Program.Buffers and each op's Operands. The program says nothing about
// tiles, warps or kernels: how ops become kernels is a lowering policy of
// package codegen (PerOp today: one kernel per op, two for a GEMM whose
// schedule has a GEMM variant for a range of T).
//
// Backward builds the BF16 backward (ops_backward.go adds its ops): the
// dispatch again, FC1 recomputed, dh = dy·FC2 and dxs = dgu·FC1 as GEMMs
// over N-major weights, the activation's backward (ActGrad), the weight
// gradients accumulated into caller-owned main-grad buffers (WeightGrad,
// InOut buffers; with per-expert weight storage the routed experts' main
// grads are per expert too, behind u64 pointer tables like the weights')
// and the per-token gather of dx and the routing-weight gradient
// (CombineGrad). By default it keeps nothing from the forward; with
// schedule.Layer.SaveFC1 the forward's FC1 is a plain GEMM into fc1_out
// followed by an Activate op, and the backward reads fc1_out instead of
// recomputing FC1 (the same values). codegen's PerOp lowering has a kernel
// for each of its ops.
//
// MXFP8 layers (e4m3 routed weights with UE8M0 scales, docs/mxfp8.md): the
// forward quantizes the GEMMs' row operands (Quantize) before e4m3 GEMMs
// that carry both operands' scales; the backward recomputes FC1 the same
// way, runs its data gradients over bf16 copies of the weights
// (Dequantize: exactly the forward's values) and takes the routing-weight
// gradient's dot over the MXFP8 values of h (ActGrad.MX).
//
// Interpret runs a program on the host in float64 with every store rounded
// to its buffer's dtype: the meaning of each op, checked against
// schedule.Forward and schedule.Backward in the tests, and the per-op
// reference for the kernels that lower it. It cannot follow device
// pointers: a program with pointer tables (per-expert storage) is refused.
//
// Data flows one way: schedule → moe → codegen → ir → ptx; the runtime binds
// buffers by the names declared here.
package moe
