; error: shared memory cannot have a non-zero initializer
; error: @s = internal addrspace(3) global i32 5
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

@s = internal addrspace(3) global i32 5, align 4

define void @k(i32 addrspace(1)* %o) {
entry:
  %v = load i32, i32 addrspace(3)* @s
  store i32 %v, i32 addrspace(1)* %o
  ret void
}
