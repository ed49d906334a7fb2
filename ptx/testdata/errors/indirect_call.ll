; error: in function @k
; error: indirect call
; error: call void %fp(i32 1)
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define void @k(void (i32)* %fp) {
entry:
  call void %fp(i32 1)
  ret void
}
