// Package ir holds the helpers codegen uses to build NVPTX kernels as LLVM IR
// with github.com/llir/llvm: address spaces, special registers, barriers,
// warp shuffles, atomics, inline PTX with operand constraints, kernel
// annotations (max threads, dynamic shared memory), and the checker for the IR
// subset that the ptx backend accepts. The checker runs after every stage.
//
// # Building
//
// NewModule makes a module with the NVPTX triple and data layout; Kernel adds
// a kernel (DeviceFunc an internal function) and returns its builder, a *Func
// (embedded in *Kernel) whose helpers append instructions to the current
// block and return llir values:
//
//	m := ir.NewModule("scale")
//	k := m.Kernel("scale", ir.P("x", ir.GlobalPtr(ir.I16)), ir.P("n", ir.I32))
//	k.MaxThreads(256)
//	i := k.GlobalThreadIdx()
//	k.If(k.ICmp(enum.IPredSLT, i, k.Param("n")), func() {
//		p := k.Index(k.Param("x"), i)
//		k.Store(k.F32ToBF16(k.FMul(k.BF16ToF32(k.Load(p)), ir.Float32(2))), p)
//	})
//	mod, err := m.Finish() // builder errors, else Check
//	text, err := ir.LLVM19Text(mod) // for llc-19
//
// Structured control flow (If, IfElse, IfElseValues, For, ForCarry, Loop)
// creates the blocks and the phis (induction variables, loop-carried values,
// values merged after an if/else). Bad input never panics: the helper
// records an error naming the function and returns undef of the expected
// type; Module.Finish returns the errors, else the result of Check.
//
// bf16 and fp8 values travel as i16 and i8; conversions to them are inline
// PTX cvt (F32ToBF16, F32x2ToBF16x2, F32x2ToE4M3x2, E4M3x2ToF32x2) and
// BF16ToF32 is a shift. Anything PTX has and the intrinsics below lack
// (wgmma, mma.sync, ldmatrix, cp.async, cp.async.bulk.tensor, mbarrier,
// tcgen05, setmaxnreg, elect.sync, stmatrix, ld.acquire, red.release, ...)
// is inline PTX through AsmCall/AsmCallN/Asm, which always mark the asm
// sideeffect and append a ~{memory} clobber (AsmCallNoMemory leaves the
// clobber out, for register-only PTX such as cvt, ex2 or mma.sync).
//
// Memory is addressed with typed pointers (GEP, Index, Load/Store and their
// Align/Volatile forms, LoadVolatileAlign) or, for code that keeps byte
// pointers, with ByteOffset (`getelementptr i8` by a byte count, not
// inbounds) and Cast to the element type before a load or store.
//
// # The subset (what Check accepts and the ptx backend lowers)
//
// Module. Target triple "nvptx64-nvidia-cuda", data layout
// "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"; 64-bit pointers in every
// address space. No named (identified) struct types, module asm, aliases,
// ifuncs, comdats, attribute groups or use-list orders. The only named
// metadata is !nvvm.annotations; no metadata attachments on functions,
// globals or instructions.
//
// Kernels. A kernel is a defined function returning void, listed once in
// !nvvm.annotations by a node
//
//	!{void (...)* @name, !"kernel", i32 1, key, value, ...}
//
// whose further pairs are `!"maxntidx", i32 N` (.maxntid N, 1, 1; also
// "maxntidy"/"maxntidz" and "reqntidx/y/z" in 1..1024),
// `!"minctasm", i32 N` (.minnctapersm N, 1..32), `!"maxnreg", i32 N`
// (.maxnreg N, 16..255) and `!"grid_constant", !{i32 i, ...}` (1-based
// indices of the byval tensor-map parameters; see below). Kernels are never
// called. Every other defined function is a .func called with `call`;
// linkage is none, external, internal or private; definition order is free.
//
// Parameters. i8, i16, i32, i64, half, float, double, pointers in address
// spaces 0, 1, 3, 4, 5, and the tensor-map byval parameter. The attributes
// noalias, nocapture, readonly, writeonly, readnone, nofree, noundef,
// nonnull, align N and dereferenceable(N) are accepted and may be ignored.
// Return types: void or one of the parameter types (not i1).
//
// Tensor maps (CUtensorMap, 128 bytes). The parameter is
//
//	[128 x i8]* byval([128 x i8]) align 64 %tmap
//
// on a kernel, and its 1-based index is listed under "grid_constant" in the
// kernel's annotation node (a byval parameter not listed there is an
// error; byval of any other type, or on a .func, is an error). PTX:
// `.param .align 64 .b8 name[128]`. The IR uses the pointer %tmap directly
// as the GENERIC address of the parameter, typically
//
//	%a = ptrtoint [128 x i8]* %tmap to i64
//	call void asm sideeffect "prefetch.tensormap [$0];", "l,~{memory}"(i64 %a)
//
// (or %tmap itself as an "l" operand, a GEP on it, or a load through it).
// The backend materialises the address as `mov.b64 %rd, name;
// cvta.param.u64 %rd, %rd;` — which is what llc-19 emits for grid_constant
// parameters.
//
// Address spaces. 0 generic, 1 global, 3 shared, 4 const, 5 local; any other
// (101 param included) is refused. addrspacecast only between generic and
// one of 1, 3, 4, 5 (cvta / cvta.to).
//
// Globals. Shared (3): `@s = internal addrspace(3) global T zeroinitializer,
// align A` (or undef) → `.shared .align A .b8 s[sizeof T];`, and dynamic
// shared memory `@d = external addrspace(3) global [0 x i8], align A` →
// `.extern .shared .align A .b8 d[];`. Global (1) and const (4):
// initialised with zeroinitializer, undef, an integer (i8..i64) or an array
// of integers (e.g. `internal addrspace(4) constant [8 x i32] [...]`);
// declarations without initialiser are refused. No other address space, no
// thread-locals, sections, comdats or externally_initialized.
//
// Types. i1 only as the result of icmp/fcmp, the condition of select and
// br, an operand of and/or/xor/zext/sext/uitofp/sitofp, the result of
// trunc, a phi or select value, and the i1 argument of llvm.ctlz / vote.ballot.sync (never
// loaded, stored or passed); i8, i16, i32, i64, half, float, double,
// pointers, and vectors <2 x T> / <4 x T> of i8, i16, i32, half, float of at
// most 16 bytes (vectors are loaded, stored, bitcast, extracted from and
// inserted into; no vector arithmetic). Arrays and literal structs only as
// alloca, global and GEP element types, as the {T, i1} result of cmpxchg,
// and as the result of inline asm with several outputs (read with
// extractvalue).
//
// Instructions.
//   - add sub mul udiv sdiv urem srem shl lshr ashr on scalar i8/i16/i32/i64
//     of one type, and and or xor also on i1 (nsw/nuw/exact ignored);
//   - fadd fsub fmul fdiv fneg on half/float/double (fast-math flags
//     ignored); not frem;
//   - icmp (all predicates; integers or pointers of one type), fcmp (all
//     predicates); select on scalars and pointers (i1 condition);
//   - trunc zext sext fptrunc fpext fptoui fptosi uitofp sitofp,
//     ptrtoint/inttoptr to and from i64, bitcast (pointer to pointer in one
//     address space, or between non-aggregate types of one bit size, e.g.
//     i32 ↔ float ↔ <2 x i16>), addrspacecast as above;
//   - getelementptr (inbounds or not) on a scalar pointer whose element type
//     is the source element type, with i32/i64 indices, constant i32 for
//     struct fields; no GEP into vectors;
//   - load and store, optionally volatile, never atomic, of i8..i64, floats,
//     pointers and the vectors above, in address spaces 0, 1, 3, 4 (load
//     only) and 5; alignment absent (natural) or a power of two at least
//     the access size, so a 16-byte vector access is one ld.v4/st.v4;
//   - alloca of a sized type with an optional constant count, in the entry
//     block, generic result (→ .local depot);
//   - extractelement/insertelement with a constant index in range;
//     extractvalue/insertvalue with one index on literal structs;
//   - atomicrmw xchg add sub and or xor max min umax umin on i32/i64 and
//     fadd on float/double, and cmpxchg on i32/i64, in address spaces 0, 1,
//     3, ordering monotonic only, default sync scope (PTX atom, relaxed).
//     llc-19 ignores stronger orderings, so they are refused: acquire and
//     release are written as inline PTX (LoadAcquire, StoreRelease,
//     RedAddRelease, AtomicAddAcqRel with a Scope);
//   - no `fence` instruction (llc-19 cannot select it for NVPTX): use the
//     membar intrinsics or FenceAcqRel/FenceSC (inline fence.acq_rel.scope /
//     fence.sc.scope);
//   - phi at the start of its block, one incoming value per predecessor
//     (a predecessor reached by several edges may repeat with the same
//     value), none from other blocks;
//   - terminators br, conditional br, switch (scalar integer, distinct
//     constant cases), ret, unreachable. The entry block has no
//     predecessors.
//
// Calls. Direct calls to defined non-kernel functions of the module with
// matching argument types; calls to the intrinsics listed by Intrinsics(),
// declared with exactly the signatures IntrinsicSignature gives (all named
// as llc-19 knows them — note llvm.nvvm.ex2.approx.f and
// llvm.nvvm.ex2.approx.ftz.f, not .f32):
//   - llvm.nvvm.read.ptx.sreg.{tid,ntid,ctaid,nctaid}.{x,y,z},
//     .laneid .warpid .smid .nsmid (i32), .clock64 .globaltimer (i64);
//   - llvm.nvvm.barrier0, llvm.nvvm.barrier.sync(i32),
//     llvm.nvvm.barrier.sync.cnt(i32, i32), llvm.nvvm.bar.warp.sync(i32),
//     llvm.nvvm.membar.{cta,gl,sys};
//   - llvm.nvvm.shfl.sync.{bfly,down,up,idx}.{i32,f32}(mask, value, b, c),
//     llvm.nvvm.vote.ballot.sync(i32, i1);
//   - llvm.fma.f32/.f64, llvm.maxnum.f32, llvm.minnum.f32, llvm.fabs.f32,
//     llvm.sqrt.f32, llvm.nvvm.ex2.approx.f, llvm.nvvm.ex2.approx.ftz.f,
//     llvm.nvvm.rcp.rn.f, llvm.nvvm.fmax.f, llvm.nvvm.fmin.f,
//     llvm.{smax,smin,umax,umin}.{i32,i64}, llvm.ctlz.i32(i32, i1),
//     llvm.ctpop.i32;
//
// and inline asm: `call T asm [sideeffect] "text", "constraints"(args)` with
// the constraints h (i16), r (i32), l (i64 or a pointer), f (float),
// d (double), n (integer constant); outputs "=X" or "=&X" first, then inputs
// (a digit k ties an input to output k), then "~{memory}", the only clobber;
// several outputs come back as a literal struct of memory types; "$k" in the
// text names operand k (outputs first) and "$$" is a literal "$". No
// indirect calls, calls to external functions, varargs, calling
// conventions, operand bundles, argument attributes, alignstack or
// inteldialect asm.
//
// Structure. Every block ends in a terminator whose targets are blocks of
// the function; every use of an instruction result is dominated by its
// definition (a phi operand at the end of its incoming block); parameters
// and results never cross functions; operand and result types agree with
// the rules above; constants are integers, floats, null, undef, poison,
// zeroinitializer and vectors of integer/float constants — no constant
// expressions (write the instruction instead).
package ir
