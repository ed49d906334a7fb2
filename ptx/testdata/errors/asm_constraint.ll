; error: in function @k
; error: inline asm constraint "*m" is not supported
; error: call void asm sideeffect "st.u32 $0, 1;", "*m"(i32* %p)
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define void @k(i32* %p) {
entry:
  call void asm sideeffect "st.u32 $0, 1;", "*m"(i32* %p)
  ret void
}
