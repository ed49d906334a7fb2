; Local arrays (alloca): a generic-space array indexed dynamically, a struct
; accessed through its local-space (addrspace 5) address, and an i1 slot.
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

%pair = type { i8, double }

define void @locals(float addrspace(1)* %out, i32 %k, i1 %c) {
entry:
  %arr = alloca [16 x float], align 4
  %prg = alloca %pair, align 8
  %flag = alloca i1, align 1
  br label %fill

fill:
  %i = phi i32 [ 0, %entry ], [ %in, %fill ]
  %fi = sitofp i32 %i to float
  %slot = getelementptr inbounds [16 x float], [16 x float]* %arr, i32 0, i32 %i
  store float %fi, float* %slot, align 4
  %in = add i32 %i, 1
  %more = icmp ult i32 %in, 16
  br i1 %more, label %fill, label %use

use:
  %km = and i32 %k, 15
  %pr = addrspacecast %pair* %prg to %pair addrspace(5)*
  %rd = getelementptr inbounds [16 x float], [16 x float]* %arr, i32 0, i32 %km
  %v = load float, float* %rd, align 4
  %pd = getelementptr inbounds %pair, %pair addrspace(5)* %pr, i32 0, i32 1
  %pb = getelementptr inbounds %pair, %pair addrspace(5)* %pr, i32 0, i32 0
  store i8 3, i8 addrspace(5)* %pb, align 1
  %vd = fpext float %v to double
  store double %vd, double addrspace(5)* %pd, align 8
  %back = load double, double addrspace(5)* %pd, align 8
  store i1 %c, i1* %flag
  %fl = load i1, i1* %flag
  %bf = fptrunc double %back to float
  %r = select i1 %fl, float %bf, float 0.0
  store float %r, float addrspace(1)* %out, align 4
  ret void
}

!nvvm.annotations = !{!0}
!0 = !{void (float addrspace(1)*, i32, i1)* @locals, !"kernel", i32 1}
