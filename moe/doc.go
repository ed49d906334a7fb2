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
// schedule has a small-T variant).
//
// Data flows one way: schedule → moe → codegen → ir → ptx; the runtime binds
// buffers by the names declared here.
package moe
