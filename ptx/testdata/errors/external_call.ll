; error: in function @k
; error: call to external function @expf
; error: %r = call float @expf(float %a)
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define void @k(float addrspace(1)* %o, float %a) {
entry:
  %r = call float @expf(float %a)
  store float %r, float addrspace(1)* %o
  ret void
}

declare float @expf(float)
