; error: in function @k2
; error: call to kernel @k1
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define void @k1() {
entry:
  ret void
}

define void @k2() {
entry:
  call void @k1()
  ret void
}

!nvvm.annotations = !{!0, !1}
!0 = !{void ()* @k1, !"kernel", i32 1}
!1 = !{void ()* @k2, !"kernel", i32 1}
