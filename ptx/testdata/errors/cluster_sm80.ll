; targets: sm_80
; error: in function @k
; error: cluster_dim annotations need sm_90a or newer
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define void @k() {
entry:
  ret void
}

!nvvm.annotations = !{!0}
!0 = !{void ()* @k, !"kernel", i32 1, !"cluster_dim_x", i32 2}
