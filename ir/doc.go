// Package ir holds the helpers codegen uses to build NVPTX kernels as LLVM IR
// with github.com/llir/llvm: address spaces, special registers, barriers,
// warp shuffles, atomics, inline PTX with operand constraints, kernel
// annotations (max threads, dynamic shared memory), and the checker for the IR
// subset that the ptx backend accepts. The checker runs after every stage.
//
// bf16 and fp8 values travel as i16 and i8 and are converted with cvt (inline
// PTX). Address spaces follow LLVM's NVPTX numbering: 0 generic, 1 global,
// 3 shared, 4 const, 5 local, 101 param.
package ir
