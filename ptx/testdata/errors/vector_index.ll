; error: in function @k
; error: vector index must be a constant
; error: %e = extractelement <4 x i32> %v, i32 %i
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define void @k(<4 x i32> addrspace(1)* %p, i32 addrspace(1)* %o, i32 %i) {
entry:
  %v = load <4 x i32>, <4 x i32> addrspace(1)* %p, align 16
  %e = extractelement <4 x i32> %v, i32 %i
  store i32 %e, i32 addrspace(1)* %o
  ret void
}
