; targets: sm_90a sm_100a
; Hopper-style TMA load: tensor map byval parameter whose generic address
; feeds cp.async.bulk.tensor, an mbarrier in static shared memory, cluster
; special registers and cluster launch annotations (all inline PTX except
; the registers and annotations).
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

@tile = internal addrspace(3) global [4096 x i8] undef, align 128
@bar = internal addrspace(3) global i64 undef, align 8

define void @tma_load(float addrspace(1)* %out, [128 x i8]* byval([128 x i8]) align 64 %tmap, i32 %x, i32 %y) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %rank = call i32 @llvm.nvvm.read.ptx.sreg.cluster.ctarank()
  %cx = call i32 @llvm.nvvm.read.ptx.sreg.clusterid.x()
  %tm = ptrtoint [128 x i8]* %tmap to i64
  %barp = ptrtoint i64 addrspace(3)* @bar to i64
  %bar32 = trunc i64 %barp to i32
  %tilep = ptrtoint [4096 x i8] addrspace(3)* @tile to i64
  %tile32 = trunc i64 %tilep to i32
  %first = icmp eq i32 %tid, 0
  br i1 %first, label %issue, label %wait

issue:
  call void asm sideeffect "prefetch.tensormap [$0];", "l"(i64 %tm)
  call void asm sideeffect "mbarrier.init.shared::cta.b64 [$0], 1;", "r"(i32 %bar32)
  call void asm sideeffect "fence.proxy.async.shared::cta;", "~{memory}"()
  call void asm sideeffect "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], 4096;", "r,~{memory}"(i32 %bar32)
  call void asm sideeffect "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [$0], [$1, {$2, $3}], [$4];", "r,l,r,r,r,~{memory}"(i32 %tile32, i64 %tm, i32 %x, i32 %y, i32 %bar32)
  br label %wait

wait:
  %done = call i32 asm sideeffect "{\0A\09.reg .pred p;\0A\09mbarrier.try_wait.parity.shared::cta.b64 p, [$1], 0;\0A\09selp.u32 $0, 1, 0, p;\0A\09}", "=r,r,~{memory}"(i32 %bar32)
  %ok = icmp ne i32 %done, 0
  br i1 %ok, label %read, label %wait

read:
  %idx = and i32 %tid, 1023
  %base = bitcast [4096 x i8] addrspace(3)* @tile to float addrspace(3)*
  %sp = getelementptr inbounds float, float addrspace(3)* %base, i32 %idx
  %v = load float, float addrspace(3)* %sp, align 4
  %k = add i32 %rank, %cx
  %kf = uitofp i32 %k to float
  %r = fadd float %v, %kf
  %op = getelementptr inbounds float, float addrspace(1)* %out, i32 %tid
  store float %r, float addrspace(1)* %op, align 4
  ret void
}

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.cluster.ctarank()
declare i32 @llvm.nvvm.read.ptx.sreg.clusterid.x()

!nvvm.annotations = !{!0}
!0 = !{void (float addrspace(1)*, [128 x i8]*, i32, i32)* @tma_load, !"kernel", i32 1, !"maxntidx", i32 128, !"cluster_dim_x", i32 2, !"cluster_dim_y", i32 1, !"cluster_dim_z", i32 1}
