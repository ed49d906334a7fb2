; Dynamic shared memory used beyond 48 KB: 24576 floats (96 KB) staged
; through `extern .shared`, read back reversed; also a static array so both
; kinds coexist.
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

@dsmem = external addrspace(3) global [0 x i8], align 16
@stat = internal addrspace(3) global [4 x i32] zeroinitializer, align 16

define void @dyn_reverse(float addrspace(1)* %in, float addrspace(1)* %out) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %base = bitcast [0 x i8] addrspace(3)* @dsmem to float addrspace(3)*
  br label %fill

fill:
  %j = phi i32 [ %tid, %entry ], [ %jn, %fill ]
  %src = getelementptr inbounds float, float addrspace(1)* %in, i32 %j
  %v = load float, float addrspace(1)* %src, align 4
  %dst = getelementptr inbounds float, float addrspace(3)* %base, i32 %j
  store float %v, float addrspace(3)* %dst, align 4
  %jn = add nuw nsw i32 %j, 1024
  %more = icmp ult i32 %jn, 24576
  br i1 %more, label %fill, label %sync

sync:
  call void @llvm.nvvm.barrier0()
  %far = getelementptr inbounds i8, i8 addrspace(3)* getelementptr inbounds ([0 x i8], [0 x i8] addrspace(3)* @dsmem, i64 0, i64 0), i64 98300
  %farf = bitcast i8 addrspace(3)* %far to float addrspace(3)*
  %last = load float, float addrspace(3)* %farf, align 4
  %rev = sub i32 24575, %tid
  %rp = getelementptr inbounds float, float addrspace(3)* %base, i32 %rev
  %r = load float, float addrspace(3)* %rp, align 4
  %sum = fadd float %r, %last
  %op = getelementptr inbounds float, float addrspace(1)* %out, i32 %tid
  store float %sum, float addrspace(1)* %op, align 4
  %sp = getelementptr inbounds [4 x i32], [4 x i32] addrspace(3)* @stat, i32 0, i32 1
  store i32 %tid, i32 addrspace(3)* %sp, align 4
  ret void
}

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare void @llvm.nvvm.barrier0()

!nvvm.annotations = !{!0}
!0 = !{void (float addrspace(1)*, float addrspace(1)*)* @dyn_reverse, !"kernel", i32 1, !"maxntidx", i32 1024}
