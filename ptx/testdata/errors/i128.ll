; error: in function @k
; error: type i128 is not supported
; error: %a = zext i64 %x to i128
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define void @k(i64 %x, i64 addrspace(1)* %o) {
entry:
  %a = zext i64 %x to i128
  %r = add i128 %a, %a
  %t = trunc i128 %r to i64
  store i64 %t, i64 addrspace(1)* %o
  ret void
}
