; llc: skip llc-19 cannot select fence or atomic load/store on NVPTX
; fence and atomic load/store with orderings and sync scopes.
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define void @fences(i32 addrspace(1)* %p, i64* %q) {
entry:
  %a = load atomic i32, i32 addrspace(1)* %p monotonic, align 4
  %b = load atomic i32, i32 addrspace(1)* %p syncscope("device") acquire, align 4
  %c = load atomic i64, i64* %q seq_cst, align 8
  fence syncscope("block") acq_rel
  fence release
  fence syncscope("device") seq_cst
  %s = add i32 %a, %b
  store atomic i32 %s, i32 addrspace(1)* %p syncscope("device") release, align 4
  store atomic i64 %c, i64* %q monotonic, align 8
  store atomic i32 %a, i32 addrspace(1)* %p seq_cst, align 4
  ret void
}

!nvvm.annotations = !{!0}
!0 = !{void (i32 addrspace(1)*, i64*)* @fences, !"kernel", i32 1}
