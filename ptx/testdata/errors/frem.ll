; error: in function @k
; error: frem is not supported
; error: %r = frem float %a, %b
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define void @k(float addrspace(1)* %o, float %a, float %b) {
entry:
  %r = frem float %a, %b
  store float %r, float addrspace(1)* %o
  ret void
}
