; error: in function @k
; error: alloca outside the entry block
; error: %a = alloca i32, align 4
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define void @k(i32 %n) {
entry:
  br label %next

next:
  %a = alloca i32, align 4
  store i32 %n, i32* %a
  ret void
}
