; Vector memory access: .v2/.v4 of b32 and f32, 16-byte <8 x half> and
; <16 x i8> (as v4.b32 words), v4.u8, an under-aligned <4 x float> split into
; scalars, <2 x double>; lane operations (extract/insert/shuffle) and
; elementwise vector arithmetic, compare and select.
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define void @vectors(<4 x float> addrspace(1)* %a, <2 x i32> addrspace(1)* %b, <8 x half> addrspace(1)* %c, <16 x i8> addrspace(1)* %d, <4 x i8> addrspace(1)* %e, <4 x float> addrspace(1)* %u, <2 x double> addrspace(3)* %s, <4 x i16>* %g) {
entry:
  %va = load <4 x float>, <4 x float> addrspace(1)* %a, align 16
  %vb = load <2 x i32>, <2 x i32> addrspace(1)* %b, align 8
  %vc = load <8 x half>, <8 x half> addrspace(1)* %c, align 16
  %vd = load <16 x i8>, <16 x i8> addrspace(1)* %d, align 16
  %ve = load <4 x i8>, <4 x i8> addrspace(1)* %e, align 4
  %vu = load <4 x float>, <4 x float> addrspace(1)* %u, align 4
  %vs = load <2 x double>, <2 x double> addrspace(3)* %s, align 16
  %vg = load <4 x i16>, <4 x i16>* %g, align 8
  %sum = fadd <4 x float> %va, %vu
  %neg = fneg <4 x float> %sum
  %big = fcmp ogt <4 x float> %sum, zeroinitializer
  %sel = select <4 x i1> %big, <4 x float> %sum, <4 x float> %neg
  store <4 x float> %sel, <4 x float> addrspace(1)* %a, align 16
  %x0 = extractelement <2 x i32> %vb, i32 0
  %x1 = extractelement <2 x i32> %vb, i32 1
  %sw0 = insertelement <2 x i32> undef, i32 %x1, i32 0
  %sw1 = insertelement <2 x i32> %sw0, i32 %x0, i32 1
  %sh = shufflevector <2 x i32> %sw1, <2 x i32> %vb, <4 x i32> <i32 0, i32 3, i32 1, i32 2>
  %shl = shl <2 x i32> %sw1, <i32 1, i32 2>
  store <2 x i32> %shl, <2 x i32> addrspace(1)* %b, align 8
  %hc = fmul <8 x half> %vc, %vc
  store <8 x half> %hc, <8 x half> addrspace(1)* %c, align 16
  %dd = add <16 x i8> %vd, %vd
  store <16 x i8> %dd, <16 x i8> addrspace(1)* %d, align 16
  %ee = xor <4 x i8> %ve, <i8 1, i8 2, i8 3, i8 -1>
  store <4 x i8> %ee, <4 x i8> addrspace(1)* %e, align 4
  %ub = bitcast <4 x float> addrspace(1)* %u to <4 x i32> addrspace(1)*
  store <4 x i32> %sh, <4 x i32> addrspace(1)* %ub, align 8
  %s2 = fadd <2 x double> %vs, %vs
  store <2 x double> %s2, <2 x double> addrspace(3)* %s, align 16
  %g2 = sub <4 x i16> %vg, <i16 1, i16 1, i16 1, i16 1>
  store <4 x i16> %g2, <4 x i16>* %g, align 8
  ret void
}

!nvvm.annotations = !{!0}
!0 = !{void (<4 x float> addrspace(1)*, <2 x i32> addrspace(1)*, <8 x half> addrspace(1)*, <16 x i8> addrspace(1)*, <4 x i8> addrspace(1)*, <4 x float> addrspace(1)*, <2 x double> addrspace(3)*, <4 x i16>*)* @vectors, !"kernel", i32 1}
