// Package target is the one table of the GPU architectures mokc compiles
// for: sm_80 (Ampere), sm_90a (Hopper) and sm_100a (Blackwell). Each row
// gives the PTX name and `.version`, the compute capability that runs it,
// the reference part's SM count, the shared memory of one CTA, registers,
// tensor memory and the instruction families the GEMM engines use.
//
// schedule (budgets and validation), codegen (engines, persistent grids),
// ptx (`.target` and `.version`), layouts (tile rules) and runtime (can this
// device run it) all read these facts from here and nowhere else. Sources:
// CUDA C Programming Guide, "Compute Capabilities" (shared memory,
// registers, threads); PTX ISA "Target ISA notes" and release notes
// (architecture-specific targets, versions); NVIDIA's A100, H100/H200 and
// B200 datasheets (SM counts).
package target
