; error: in function @f
; error: byval parameters are supported on kernels only
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define internal void @f([16 x i8]* byval([16 x i8]) align 8 %b) {
entry:
  ret void
}

define void @k([16 x i8]* byval([16 x i8]) align 8 %b) {
entry:
  call void @f([16 x i8]* byval([16 x i8]) align 8 %b)
  ret void
}

!nvvm.annotations = !{!0}
!0 = !{void ([16 x i8]*)* @k, !"kernel", i32 1}
