// Package ptx is mokc's backend: it lowers the LLVM IR subset built by package
// ir (github.com/llir/llvm modules) to PTX text for sm_80, sm_90a and sm_100a.
//
// Anything it does not support is an error naming the instruction and the
// function, never wrong PTX. LLVM's NVPTX backend (llc-19) compiles the same IR
// as a differential check in the tests.
//
// # Use
//
//	res, err := ptx.CompileModule(m, ptx.SM90a) // res.Text, res.Kernels
//	text, err := ptx.Compile(m, ptx.SM100a)
//
// Errors are *Error values: Func is the LLVM function, Inst the LLVM text of
// the offending instruction (or global/parameter), Msg what is wrong. The
// module is not modified.
//
// Output: `.version 8.0` for sm_80 and sm_90a, `.version 8.8` for sm_100a,
// `.address_size 64`. Kernels (functions marked by !nvvm.annotations
// "kernel" = 1, or the ptx_kernel calling convention) are `.visible .entry`;
// other defined functions are `.func` (internal/private linkage) or
// `.visible .func`. Annotations maxntidx/y/z, reqntidx/y/z, minctasm,
// maxnreg, cluster_dim_x/y/z and cluster_max_blocks become .maxntid,
// .reqntid, .minnctapersm, .maxnreg, .explicitcluster + .reqnctapercluster
// and .maxclusterrank (PTX ISA 11.4).
//
// # Passes
//
// A fixed table (passes.go), each pass followed by a checker of its
// invariants: verify (refuse what is outside the subset) → cfg (annotations,
// symbol names, machine CFG) → split-critical-edges (into blocks with phis) →
// phi-elim (one parallel copy per incoming edge; the copies of an edge are
// sequentialized in isel with a temporary for cycles, so swaps across back
// edges and lost copies are handled) → isel (PTX over virtual registers:
// %p .pred, %rs .b16 for i8/i16, %h .b16 for half, %r .b32, %f .f32,
// %rd .b64 for i64 and pointers, %fd .f64; numbered in order of creation,
// so the output is deterministic) → emit.
//
// # IR subset and its PTX
//
// Types: i1, i8, i16, i32, i64, half, float, double, pointers (64-bit, in
// address spaces 0 generic, 1 global, 3 shared, 4 const, 5 local, 101
// param); vectors of those (lane-wise in registers; in memory at most 16
// bytes, power-of-two lane counts); structs and arrays as memory types and
// as the results of cmpxchg, shfl.*p and multi-output inline asm. bf16 and
// fp8 values travel as i16 and i8 and are converted with inline PTX.
//
// Semantics worth knowing:
//   - fadd/fsub/fmul/fdiv are add.rn/sub.rn/mul.rn/div.rn (IEEE, no
//     contraction into fma: the explicit .rn keeps ptxas from fusing, as llc
//     emits without fast-math); half fdiv goes through f32 (exact); fneg is
//     neg.fN; llvm.fma/llvm.fmuladd are fma.rn; llvm.sqrt is sqrt.rn.
//   - fptosi/fptoui are cvt.rzi: out-of-range values saturate and NaN gives
//     0, where LLVM's result is poison (so any result is correct).
//   - Shift amounts are converted to the .u32 PTX wants; amounts >= the width
//     are poison in LLVM and clamp in PTX. i8 values live in .b16 registers
//     with undefined upper bits and are zero- or sign-extended before
//     division, remainder, right shifts, comparisons, conversions, switch and
//     shift amounts.
//   - i1 in memory is a byte 0/1 (ld.u8 + low bit; selp + st.u8); select on
//     i1 is predicate logic (selp has no .pred form).
//   - icmp/fcmp: ordered fcmp predicates map to eq/ne/lt/le/gt/ge, unordered
//     ones to equ/neu/ltu/leu/gtu/geu, ord/uno to num/nan, true/false to
//     constants.
//   - getelementptr: 64-bit arithmetic, indices sign-extended (mul.wide.s32
//     for i32 indices); struct offsets from the NVPTX data layout.
//   - load/store: ld/st with the pointer's state space; volatile is
//     .volatile; vectors as .v2/.v4 pieces of min(align, size) bytes, lanes
//     narrower than 32 bits packed into .b32 words beyond four lanes;
//     under-aligned accesses and vectors over 16 bytes are refused.
//   - Atomics (PTX ISA 9.7.13): atomicrmw xchg/add/sub/and/or/xor/max/min/
//     umax/umin/fadd/fsub and cmpxchg on global, shared and generic
//     pointers. monotonic → .relaxed, acquire/release/acq_rel → the same
//     .sem, seq_cst → fence.sc + .acquire; syncscope "" (system) → .sys,
//     "device" → .gpu, "block" → .cta, "cluster" → .cluster. Write
//     syncscope("device") for the usual device-scope atomics (llc-19 ignores
//     scopes and emits plain atom). Atomic load/store: ld/st.relaxed,
//     .acquire/.release (seq_cst: fence.sc first). fence: fence.acq_rel or
//     fence.sc at the scope. llc-19 cannot select fence nor atomic
//     load/store on NVPTX, so IR meant for the llc differential check should
//     use llvm.nvvm.membar.* or inline PTX there.
//   - alloca: static size, entry block only: a `.local` array; the pointer is
//     generic (cvta.local) unless the alloca's type is addrspace(5).
//   - Kernel parameters: i1/i8 .u8, i16 .u16, half .b16, i32 .u32, float
//     .f32, i64 and pointers .u64, double .f64; a byval pointer parameter is
//     `.param .align A .b8 name[size]` (A = max(align attribute, ABI
//     alignment)). Kernel parameters keep their IR names when those are PTX
//     identifiers that shadow no module symbol, else <kernel>_param_<i>.
//   - Tensor maps: declare `[128 x i8]* byval([128 x i8]) align 64 %tmap`
//     and use the pointer value %tmap as the generic address of the
//     parameter (the backend emits `mov.b64 %rd, tmap; cvta.param.u64`), e.g.
//     `ptrtoint` it to an i64 for inline PTX (cp.async.bulk.tensor,
//     prefetch.tensormap). An addrspacecast of the parameter to addrspace(101)
//     gives its param-space address for ld.param.
//   - .func calls: scalar parameters and results in .param .b32/.b64
//     variables inside a { } call scope; byval, vector and aggregate
//     arguments are refused.
//   - Globals: addrspace(3) without (or with an all-zero) initializer →
//     `.shared .align A .b8 name[size]`; `external addrspace(3) global
//     [0 x T]` → `.extern .shared .align A .b8 name[]` (dynamic shared
//     memory); addrspace(1)/(4) with constant initializers → .global/.const
//     byte arrays (little-endian). Names that are not PTX identifiers are
//     rewritten as LLVM does ('.' → "_$_"); kernel names must already be.
//   - Inline asm: constraints r (.b32), h (.b16), l (.b64), f (.f32),
//     d (.f64), b (.pred), n/i (immediate), outputs =r..., =&r, tied inputs
//     (digits), ~{...} clobbers; $N, ${N}, $$. Several outputs come back as a
//     struct. The text is emitted as written between `// begin inline asm`
//     and `// end inline asm`.
//   - Intrinsics: see intrinsics.go (special registers, barriers, membar,
//     shfl.sync, vote.sync, redux.sync, activemask, math and bit intrinsics,
//     no-op hints). Everything else is inline PTX.
//
// Refused with an error: frem, indirect calls, calls to external functions,
// unknown intrinsics, address spaces other than the above, globals in
// address spaces 0/5/101, i128 and other odd integer widths, bfloat/fp128
// types, dynamic allocas, vector accesses over 16 bytes, non-constant vector
// indices, atomicrmw nand, variadic functions, invoke/landingpad/indirectbr.
//
// llir v0.3.6's text parser types cmpxchg results as { T, i8 } and drops
// the address space of an alloca's result type; the backend gives the
// cmpxchg flag the declared type, and the tests correct the cmpxchg type
// after parsing. Modules built with llir's builder (package ir) are typed
// correctly.
package ptx
