; The NVVM and LLVM intrinsics the backend lowers: special registers,
; barriers, membar, vote, shuffles with predicate, math and bit intrinsics.
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define void @intrinsics(i32 addrspace(1)* %oi, i64 addrspace(1)* %ol, float addrspace(1)* %of, double addrspace(1)* %od, i32 %x, i64 %y, float %f, double %d, half %h) {
entry:
  %tid.y = call i32 @llvm.nvvm.read.ptx.sreg.tid.y()
  %tid.z = call i32 @llvm.nvvm.read.ptx.sreg.tid.z()
  %nctaid.x = call i32 @llvm.nvvm.read.ptx.sreg.nctaid.x()
  %lane = call i32 @llvm.nvvm.read.ptx.sreg.laneid()
  %warp = call i32 @llvm.nvvm.read.ptx.sreg.warpid()
  %clk = call i64 @llvm.nvvm.read.ptx.sreg.clock64()
  %gt = call i64 @llvm.nvvm.read.ptx.sreg.globaltimer()
  call void @llvm.nvvm.barrier.sync(i32 1)
  call void @llvm.nvvm.barrier.sync.cnt(i32 2, i32 64)
  call void @llvm.nvvm.bar.warp.sync(i32 -1)
  call void @llvm.nvvm.membar.cta()
  call void @llvm.nvvm.membar.gl()
  call void @llvm.nvvm.membar.sys()
  %odd = icmp ne i32 %lane, 0
  %ballot = call i32 @llvm.nvvm.vote.ballot.sync(i32 -1, i1 %odd)
  %all = call i1 @llvm.nvvm.vote.all.sync(i32 -1, i1 %odd)
  %sp = call { i32, i1 } @llvm.nvvm.shfl.sync.idx.i32p(i32 -1, i32 %x, i32 3, i32 31)
  %spv = extractvalue { i32, i1 } %sp, 0
  %spp = extractvalue { i32, i1 } %sp, 1
  %up = call i32 @llvm.nvvm.shfl.sync.up.i32(i32 -1, i32 %x, i32 1, i32 0)
  %smax = call i32 @llvm.smax.i32(i32 %x, i32 %ballot)
  %umin = call i32 @llvm.umin.i32(i32 %smax, i32 %up)
  %abs = call i32 @llvm.abs.i32(i32 %umin, i1 false)
  %clz = call i32 @llvm.ctlz.i32(i32 %abs, i1 false)
  %pop = call i32 @llvm.ctpop.i32(i32 %clz)
  %ctz = call i32 @llvm.cttz.i32(i32 %pop, i1 false)
  %rev = call i32 @llvm.bitreverse.i32(i32 %ctz)
  %fsl = call i32 @llvm.fshl.i32(i32 %rev, i32 %x, i32 5)
  %fsr = call i32 @llvm.fshr.i32(i32 %fsl, i32 %x, i32 %lane)
  %sw = call i32 @llvm.bswap.i32(i32 %fsr)
  %mh = call i32 @llvm.nvvm.mulhi.i(i32 %sw, i32 %x)
  %clz64 = call i64 @llvm.ctlz.i64(i64 %y, i1 false)
  %pop64 = call i64 @llvm.ctpop.i64(i64 %clz64)
  %umax64 = call i64 @llvm.umax.i64(i64 %pop64, i64 %clk)
  %allz = zext i1 %all to i32
  %sppz = zext i1 %spp to i32
  %i0 = add i32 %mh, %allz
  %i1 = add i32 %i0, %sppz
  %i2 = add i32 %i1, %spv
  %i3 = add i32 %i2, %tid.y
  %i4 = add i32 %i3, %tid.z
  %i5 = add i32 %i4, %nctaid.x
  %i6 = add i32 %i5, %warp
  store i32 %i6, i32 addrspace(1)* %oi
  %l0 = add i64 %umax64, %gt
  store i64 %l0, i64 addrspace(1)* %ol
  %fa = call float @llvm.fma.f32(float %f, float %f, float 1.0)
  %fb = call float @llvm.maxnum.f32(float %fa, float %f)
  %fc = call float @llvm.minnum.f32(float %fb, float 2.0)
  %fd = call float @llvm.fabs.f32(float %fc)
  %fe = call float @llvm.sqrt.f32(float %fd)
  %ff = call float @llvm.nvvm.ex2.approx.f(float %fe)
  %fg = call float @llvm.nvvm.ex2.approx.ftz.f(float %ff)
  %fh = call float @llvm.nvvm.rcp.rn.f(float %fg)
  %fi = call float @llvm.floor.f32(float %fh)
  %fj = call float @llvm.copysign.f32(float %fi, float %f)
  %fk = call float @llvm.nvvm.lg2.approx.f(float %fj)
  %fl = call float @llvm.nvvm.rsqrt.approx.f(float %fk)
  %fm = call float @llvm.maximum.f32(float %fl, float %f)
  %fn = call float @llvm.nvvm.fmax.f(float %fm, float %fa)
  %hh = call half @llvm.fma.f16(half %h, half %h, half %h)
  %hx = fpext half %hh to float
  %fo = fadd float %fn, %hx
  store float %fo, float addrspace(1)* %of
  %da = call double @llvm.fma.f64(double %d, double %d, double %d)
  %db = call double @llvm.sqrt.f64(double %da)
  %dc = call double @llvm.fabs.f64(double %db)
  %dd = call double @llvm.nvvm.rcp.rn.d(double %dc)
  store double %dd, double addrspace(1)* %od
  ret void
}

declare i32 @llvm.nvvm.read.ptx.sreg.tid.y()
declare i32 @llvm.nvvm.read.ptx.sreg.tid.z()
declare i32 @llvm.nvvm.read.ptx.sreg.nctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.laneid()
declare i32 @llvm.nvvm.read.ptx.sreg.warpid()
declare i64 @llvm.nvvm.read.ptx.sreg.clock64()
declare i64 @llvm.nvvm.read.ptx.sreg.globaltimer()
declare void @llvm.nvvm.barrier.sync(i32)
declare void @llvm.nvvm.barrier.sync.cnt(i32, i32)
declare void @llvm.nvvm.bar.warp.sync(i32)
declare void @llvm.nvvm.membar.cta()
declare void @llvm.nvvm.membar.gl()
declare void @llvm.nvvm.membar.sys()
declare i32 @llvm.nvvm.vote.ballot.sync(i32, i1)
declare i1 @llvm.nvvm.vote.all.sync(i32, i1)
declare { i32, i1 } @llvm.nvvm.shfl.sync.idx.i32p(i32, i32, i32, i32)
declare i32 @llvm.nvvm.shfl.sync.up.i32(i32, i32, i32, i32)
declare i32 @llvm.smax.i32(i32, i32)
declare i32 @llvm.umin.i32(i32, i32)
declare i32 @llvm.abs.i32(i32, i1)
declare i32 @llvm.ctlz.i32(i32, i1)
declare i32 @llvm.ctpop.i32(i32)
declare i32 @llvm.cttz.i32(i32, i1)
declare i32 @llvm.bitreverse.i32(i32)
declare i32 @llvm.fshl.i32(i32, i32, i32)
declare i32 @llvm.fshr.i32(i32, i32, i32)
declare i32 @llvm.bswap.i32(i32)
declare i32 @llvm.nvvm.mulhi.i(i32, i32)
declare i64 @llvm.ctlz.i64(i64, i1)
declare i64 @llvm.ctpop.i64(i64)
declare i64 @llvm.umax.i64(i64, i64)
declare float @llvm.fma.f32(float, float, float)
declare float @llvm.maxnum.f32(float, float)
declare float @llvm.minnum.f32(float, float)
declare float @llvm.fabs.f32(float)
declare float @llvm.sqrt.f32(float)
declare float @llvm.nvvm.ex2.approx.f(float)
declare float @llvm.nvvm.ex2.approx.ftz.f(float)
declare float @llvm.nvvm.rcp.rn.f(float)
declare float @llvm.floor.f32(float)
declare float @llvm.copysign.f32(float, float)
declare float @llvm.nvvm.lg2.approx.f(float)
declare float @llvm.nvvm.rsqrt.approx.f(float)
declare float @llvm.maximum.f32(float, float)
declare float @llvm.nvvm.fmax.f(float, float)
declare half @llvm.fma.f16(half, half, half)
declare double @llvm.fma.f64(double, double, double)
declare double @llvm.sqrt.f64(double)
declare double @llvm.fabs.f64(double)
declare double @llvm.nvvm.rcp.rn.d(double)

!nvvm.annotations = !{!0}
!0 = !{void (i32 addrspace(1)*, i64 addrspace(1)*, float addrspace(1)*, double addrspace(1)*, i32, i64, float, double, half)* @intrinsics, !"kernel", i32 1}
