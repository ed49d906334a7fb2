; Block sum of 256 floats: warp shuffles (bfly), a static shared array of 8
; partial sums, bar.sync, and a global fadd atomic by thread 0.
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

@partials = internal addrspace(3) global [8 x float] undef, align 4
@flag = internal addrspace(3) global i32 0, align 4

define void @block_sum(float addrspace(1)* %in, float addrspace(1)* %out) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %ctaid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %blk = shl i32 %ctaid, 8
  %i = add i32 %blk, %tid
  %p = getelementptr inbounds float, float addrspace(1)* %in, i32 %i
  %v0 = load float, float addrspace(1)* %p, align 4
  %s1 = call float @llvm.nvvm.shfl.sync.bfly.f32(i32 -1, float %v0, i32 16, i32 31)
  %v1 = fadd float %v0, %s1
  %s2 = call float @llvm.nvvm.shfl.sync.bfly.f32(i32 -1, float %v1, i32 8, i32 31)
  %v2 = fadd float %v1, %s2
  %s3 = call float @llvm.nvvm.shfl.sync.bfly.f32(i32 -1, float %v2, i32 4, i32 31)
  %v3 = fadd float %v2, %s3
  %s4 = call float @llvm.nvvm.shfl.sync.bfly.f32(i32 -1, float %v3, i32 2, i32 31)
  %v4 = fadd float %v3, %s4
  %s5 = call float @llvm.nvvm.shfl.sync.bfly.f32(i32 -1, float %v4, i32 1, i32 31)
  %v5 = fadd float %v4, %s5
  %lane = and i32 %tid, 31
  %warp = lshr i32 %tid, 5
  %lane0 = icmp eq i32 %lane, 0
  br i1 %lane0, label %write, label %sync

write:
  %slot = getelementptr inbounds [8 x float], [8 x float] addrspace(3)* @partials, i32 0, i32 %warp
  store float %v5, float addrspace(3)* %slot, align 4
  br label %sync

sync:
  call void @llvm.nvvm.barrier0()
  %w0 = icmp ult i32 %tid, 32
  br i1 %w0, label %second, label %exit

second:
  %inr = icmp ult i32 %tid, 8
  %slot2 = getelementptr inbounds [8 x float], [8 x float] addrspace(3)* @partials, i32 0, i32 %lane
  br i1 %inr, label %ld, label %red

ld:
  %pv = load float, float addrspace(3)* %slot2, align 4
  br label %red

red:
  %x0 = phi float [ %pv, %ld ], [ 0.0, %second ]
  %t1 = call float @llvm.nvvm.shfl.sync.down.f32(i32 -1, float %x0, i32 4, i32 31)
  %x1 = fadd float %x0, %t1
  %t2 = call float @llvm.nvvm.shfl.sync.down.f32(i32 -1, float %x1, i32 2, i32 31)
  %x2 = fadd float %x1, %t2
  %t3 = call float @llvm.nvvm.shfl.sync.down.f32(i32 -1, float %x2, i32 1, i32 31)
  %x3 = fadd float %x2, %t3
  %t0 = icmp eq i32 %tid, 0
  br i1 %t0, label %atomic, label %exit

atomic:
  %old = atomicrmw fadd float addrspace(1)* %out, float %x3 syncscope("device") monotonic
  store volatile i32 1, i32 addrspace(3)* @flag, align 4
  br label %exit

exit:
  ret void
}

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare float @llvm.nvvm.shfl.sync.bfly.f32(i32, float, i32, i32)
declare float @llvm.nvvm.shfl.sync.down.f32(i32, float, i32, i32)
declare void @llvm.nvvm.barrier0()

!nvvm.annotations = !{!0}
!0 = !{void (float addrspace(1)*, float addrspace(1)*)* @block_sum, !"kernel", i32 1, !"maxntidx", i32 256}
