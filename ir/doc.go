// Package ir holds the helpers codegen uses to build NVPTX kernels as LLVM IR
// with github.com/llir/llvm: address spaces, special registers, barriers,
// warp shuffles, atomics, inline PTX with operand constraints, kernel
// annotations (max threads, dynamic shared memory), and the checker for the IR
// subset that the ptx backend accepts. The checker runs after every stage.
//
// # Building
//
// NewModule makes a module with the NVPTX triple and data layout; Kernel adds
// a kernel and returns its builder (a *Func embedded in *Kernel); the
// builder's helpers append instructions to the current block and return
// values (llir value.Value). Structured control flow (If, IfElse,
// IfElseValues, For, ForCarry, Loop) creates the blocks and phis. Bad input
// never panics: the builder records an error and Module.Finish returns it,
// else the result of Check. LLVM19Text prints the module for llc-19.
//
// bf16 and fp8 values travel as i16 and i8 and are converted with cvt (inline
// PTX). Address spaces follow LLVM's NVPTX numbering: 0 generic, 1 global,
// 3 shared, 4 const, 5 local.
//
// # The subset (what Check accepts and the ptx backend lowers)
//
// Module. Target triple "nvptx64-nvidia-cuda", data layout
// "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"; 64-bit pointers. No named
// (identified) struct types, module asm, aliases, ifuncs, comdats or
// attribute groups. The only named metadata is !nvvm.annotations.
//
// Kernels. A kernel is a defined function returning void, listed in
// !nvvm.annotations by a node `!{<fn> @name, !"kernel", i32 1, key, value...}`
// whose further pairs are `!"maxntidx", i32 N` (.maxntid N, 1, 1),
// `!"maxntidy"`/`!"maxntidz"` (the other .maxntid dimensions),
// `!"minctasm", i32 N` (.minnctapersm N), `!"maxnreg", i32 N` (.maxnreg N)
// and `!"grid_constant", !{i32 i, ...}` (1-based indices of byval
// parameters; see tensor maps below). One node per kernel. Every other
// defined function is a .func, called with `call` (internal or private
// linkage; definition order is free).
//
// Parameters. iN (N = 8, 16, 32, 64), half, float, double, pointers in any
// allowed address space, and the tensor-map byval parameter. Harmless
// attributes (noalias, nocapture, readonly, writeonly, noundef, nonnull,
// align N, dereferenceable(N)) are accepted and may be ignored.
//
// Tensor maps (CUtensorMap, 128 bytes). The parameter is
//
//	[128 x i8]* byval([128 x i8]) align 64 %tmap
//
// on a kernel, and its index (1-based) is listed under "grid_constant" in the
// kernel's annotation node. PTX: `.param .align 64 .b8 tmap[128]`. The IR
// uses the pointer %tmap directly as the GENERIC address of the parameter
// (typically `%a = ptrtoint [128 x i8]* %tmap to i64` fed to inline asm with
// an "l" constraint, e.g. `cp.async.bulk.tensor... [$0, {...}]` or
// `prefetch.tensormap [$0]`); the backend materialises it as
// `mov.b64 %rd, tmap; cvta.param.u64 %rd, %rd;` — exactly what llc-19 does
// for grid_constant parameters. Loads through %tmap (generic ld) are also
// allowed. Byval parameters of other types are refused.
//
// Address spaces. 0 generic, 1 global, 3 shared, 4 const, 5 local; any other
// (e.g. 101 param) is refused. addrspacecast only between generic and one of
// 1, 3, 4, 5 (cvta / cvta.to).
//
// Globals. Shared (3): `@s = internal addrspace(3) global T zeroinitializer,
// align A` (or undef) → `.shared .align A .b8 s[sizeof T];` and dynamic
// shared memory `@d = external addrspace(3) global [0 x i8], align A` →
// `.extern .shared .align A .b8 d[];`. Global (1) and const (4): initialised
// with zeroinitializer, undef, an integer constant or an array of integer
// constants (i8/i16/i32/i64). No other address spaces, no thread-locals,
// sections or externally_initialized.
//
// Types. i1 (only as compare/select/branch values and and/or/xor operands),
// i8, i16, i32, i64, half, float, double, pointers, vectors <2 x T> and
// <4 x T> of i8, i16, i32, half, float (at most 16 bytes); arrays and
// literal structs only as alloca, global and GEP element types, as the
// {T, i1} result of cmpxchg and as the result of inline asm with several
// outputs (read with extractvalue).
//
// Instructions. add sub mul udiv sdiv urem srem shl lshr ashr and or xor on
// scalar integers of one type (flags nsw/nuw/exact ignored); fadd fsub fmul
// fdiv fneg on half/float/double (fast-math flags ignored); not frem. icmp
// (all predicates; integers or pointers), fcmp (all predicates); select;
// trunc zext sext fptrunc fpext fptoui fptosi uitofp sitofp ptrtoint
// inttoptr (to/from i64) bitcast (pointer to pointer in one address space,
// or between scalar/vector types of one size) addrspacecast; getelementptr
// (inbounds or not; constant or variable i32/i64 indices; struct field
// indices constant); load and store (optionally volatile, not atomic) of
// scalars, pointers and the vectors above in address spaces 0, 1, 3, 4
// (load only), 5, with a power-of-two alignment — a vector access must be
// aligned to its full size (or carry no align, meaning its natural size);
// alloca of a sized type in the entry block (→ .local); extractelement and
// insertelement with a constant index; extractvalue/insertvalue on literal
// structs; atomicrmw xchg add sub and or xor max min umax umin on i32/i64
// and fadd on float/double, cmpxchg on i32/i64, in address spaces 0, 1, 3,
// orderings monotonic acquire release acq_rel seq_cst, default (system)
// sync scope; fence acquire/release/acq_rel/seq_cst (default scope); phi
// (only at the start of a block; one incoming per predecessor, no others);
// br, conditional br, switch, ret, unreachable.
//
// Calls. Direct calls to defined non-kernel functions of the module with
// matching argument types, calls to the intrinsics listed by Intrinsics
// (declared with exactly their signatures), and inline asm:
// `call T asm sideeffect "text", "constraints"(args)` with the constraints
// h (i16), r (i32), l (i64 or a pointer), f (float), d (double),
// n (integer constant), outputs =X (or =&X) first, inputs tied to an
// output by its index, and ~{memory} as the only clobber; several outputs
// come back as a literal struct. $N in the text names operand N. No
// indirect calls, no calls to external functions, no varargs, no
// alignstack/inteldialect asm.
//
// Structure. Every block ends in a terminator; phis sit at the start of
// their block and name each predecessor exactly once; every use of an
// instruction is dominated by its definition (for a phi operand: the end of
// the incoming block); operand types agree; values never cross functions;
// no constant expressions as instruction operands (use instructions);
// no metadata attachments.
package ir
