; error: in function @k
; error: vector access of 32 bytes
; error: %v = load <8 x float>, <8 x float> addrspace(1)* %p, align 32
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define void @k(<8 x float> addrspace(1)* %p) {
entry:
  %v = load <8 x float>, <8 x float> addrspace(1)* %p, align 32
  %w = fadd <8 x float> %v, %v
  ret void
}
