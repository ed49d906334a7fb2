; error: in function @k
; error: non-constant element count
; error: %a = alloca i32, i32 %n, align 4
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define void @k(i32 %n) {
entry:
  %a = alloca i32, i32 %n, align 4
  store i32 %n, i32* %a
  ret void
}
