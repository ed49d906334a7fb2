; error: global in address space 0 is not supported
; error: @g = global i32 0
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

@g = global i32 0, align 4

define void @k() {
entry:
  store i32 1, i32* @g
  ret void
}
