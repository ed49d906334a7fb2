; atomicrmw (xchg add sub and or xor max min umax umin fadd fsub) and cmpxchg
; in global, shared and generic memory, with orderings and sync scopes.
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

@counter = internal addrspace(3) global i32 0, align 4
@acc = internal addrspace(3) global float 0.0, align 4

define void @atomics(i32 addrspace(1)* %g32, i64 addrspace(1)* %g64, float addrspace(1)* %gf, double addrspace(1)* %gd, i32* %gen, i32 %v, i64 %w, float %f) {
entry:
  %a0 = atomicrmw add i32 addrspace(1)* %g32, i32 %v monotonic
  %a1 = atomicrmw sub i32 addrspace(1)* %g32, i32 %a0 syncscope("device") monotonic
  %a2 = atomicrmw max i32 addrspace(1)* %g32, i32 %a1 acq_rel
  %a3 = atomicrmw min i32 addrspace(1)* %g32, i32 %a2 acquire
  %a4 = atomicrmw umax i32 addrspace(1)* %g32, i32 %a3 release
  %a5 = atomicrmw umin i32 addrspace(1)* %g32, i32 %a4 seq_cst
  %a6 = atomicrmw xchg i32 addrspace(1)* %g32, i32 %a5 syncscope("block") monotonic
  %a7 = atomicrmw and i32 addrspace(1)* %g32, i32 %a6 monotonic
  %a8 = atomicrmw or i32 addrspace(1)* %g32, i32 7 monotonic
  %a9 = atomicrmw xor i32 addrspace(1)* %g32, i32 %a8 monotonic
  %q0 = atomicrmw add i64 addrspace(1)* %g64, i64 %w monotonic
  %q1 = atomicrmw max i64 addrspace(1)* %g64, i64 %q0 monotonic
  %q2 = atomicrmw xchg i64 addrspace(1)* %g64, i64 %q1 monotonic
  %f0 = atomicrmw fadd float addrspace(1)* %gf, float %f monotonic
  %f1 = atomicrmw fsub float addrspace(1)* %gf, float %f0 monotonic
  %f2 = atomicrmw xchg float addrspace(1)* %gf, float %f1 monotonic
  %d0 = atomicrmw fadd double addrspace(1)* %gd, double 1.0 monotonic
  %s0 = atomicrmw add i32 addrspace(3)* @counter, i32 1 syncscope("block") monotonic
  %s1 = atomicrmw max i32 addrspace(3)* @counter, i32 %s0 syncscope("block") monotonic
  %s2 = atomicrmw fadd float addrspace(3)* @acc, float %f syncscope("block") monotonic
  %n0 = atomicrmw add i32* %gen, i32 %a9 syncscope("device") monotonic
  %c0 = cmpxchg i32 addrspace(1)* %g32, i32 %n0, i32 %s1 monotonic monotonic
  %c0v = extractvalue { i32, i1 } %c0, 0
  %c0ok = extractvalue { i32, i1 } %c0, 1
  %c1 = cmpxchg i32 addrspace(3)* @counter, i32 %c0v, i32 0 syncscope("block") acq_rel acquire
  %c1v = extractvalue { i32, i1 } %c1, 0
  %c2 = cmpxchg weak i64 addrspace(1)* %g64, i64 %q2, i64 %w seq_cst seq_cst
  %c2v = extractvalue { i64, i1 } %c2, 0
  %c3 = cmpxchg i32* %gen, i32 %c1v, i32 1 syncscope("device") monotonic monotonic
  %c3ok = extractvalue { i32, i1 } %c3, 1
  %both = and i1 %c0ok, %c3ok
  %r = select i1 %both, i64 %c2v, i64 %w
  store i64 %r, i64 addrspace(1)* %g64
  %fs = fadd float %f2, %s2
  %fd = fpext float %fs to double
  %dd = fadd double %fd, %d0
  store double %dd, double addrspace(1)* %gd
  ret void
}

!nvvm.annotations = !{!0}
!0 = !{void (i32 addrspace(1)*, i64 addrspace(1)*, float addrspace(1)*, double addrspace(1)*, i32*, i32, i64, float)* @atomics, !"kernel", i32 1}
