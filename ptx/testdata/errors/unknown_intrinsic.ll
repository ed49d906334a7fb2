; error: in function @k
; error: unknown intrinsic @llvm.nvvm.wgmma.fence.sync.aligned
; error: call void @llvm.nvvm.wgmma.fence.sync.aligned()
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define void @k() {
entry:
  call void @llvm.nvvm.wgmma.fence.sync.aligned()
  ret void
}

declare void @llvm.nvvm.wgmma.fence.sync.aligned()
