; error: in function @k
; error: address space 7 is not supported
; error: %q = addrspacecast i32 addrspace(1)* %p to i32 addrspace(7)*
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define void @k(i32 addrspace(1)* %p, i32 addrspace(1)* %o) {
entry:
  %q = addrspacecast i32 addrspace(1)* %p to i32 addrspace(7)*
  %v = load i32, i32 addrspace(7)* %q
  store i32 %v, i32 addrspace(1)* %o
  ret void
}
