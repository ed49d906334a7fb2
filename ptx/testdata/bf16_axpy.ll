; y[i] = bf16(alpha * float(x[i]) + float(y[i])): bf16 carried as i16, converted
; with inline PTX, fma from llvm.fma; launch bounds from annotations.
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define void @bf16_axpy(i16 addrspace(1)* %x, i16 addrspace(1)* %y, float %alpha, i32 %n) {
entry:
  %ctaid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %ntid = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %base = mul i32 %ctaid, %ntid
  %i = add i32 %base, %tid
  %inb = icmp slt i32 %i, %n
  br i1 %inb, label %body, label %exit

body:
  %px = getelementptr inbounds i16, i16 addrspace(1)* %x, i32 %i
  %py = getelementptr inbounds i16, i16 addrspace(1)* %y, i32 %i
  %xb = load i16, i16 addrspace(1)* %px, align 2
  %yb = load i16, i16 addrspace(1)* %py, align 2
  %xf = call float asm "{ .reg .b16 z;\0A\09mov.b16 z, 0;\0A\09mov.b32 $0, {z, $1}; }", "=f,h"(i16 %xb)
  %yf = call float asm "{ .reg .b16 z;\0A\09mov.b16 z, 0;\0A\09mov.b32 $0, {z, $1}; }", "=f,h"(i16 %yb)
  %r = call float @llvm.fma.f32(float %alpha, float %xf, float %yf)
  %rb = call i16 asm "cvt.rn.bf16.f32 $0, $1;", "=h,f"(float %r)
  store i16 %rb, i16 addrspace(1)* %py, align 2
  br label %exit

exit:
  ret void
}

declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare float @llvm.fma.f32(float, float, float)

!nvvm.annotations = !{!0, !1}
!0 = !{void (i16 addrspace(1)*, i16 addrspace(1)*, float, i32)* @bf16_axpy, !"kernel", i32 1}
!1 = !{void (i16 addrspace(1)*, i16 addrspace(1)*, float, i32)* @bf16_axpy, !"maxntidx", i32 256, !"minctasm", i32 2, !"maxnreg", i32 64}
