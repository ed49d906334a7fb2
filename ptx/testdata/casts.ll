; Every cast: trunc, zext, sext (from i1 and i8 too), fptrunc, fpext,
; fptosi/fptoui (.rzi) including to i1 and i8, sitofp/uitofp from i1 and i8,
; ptrtoint, inttoptr, bitcast (scalar and vector), addrspacecast both ways
; for global, shared, local and const.
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

@sh = internal addrspace(3) global [4 x i32] undef, align 4
@tbl = internal addrspace(4) constant [4 x i32] [i32 1, i32 -2, i32 3, i32 -4], align 4

define void @casts(i64 addrspace(1)* %o, i8 %b, i16 %h, i32 %w, i64 %q, i1 %c, half %fh, float %f, double %d, i32* %gen) {
entry:
  %t0 = trunc i64 %q to i32
  %t1 = trunc i64 %q to i16
  %t2 = trunc i32 %w to i8
  %t3 = trunc i16 %h to i8
  %t4 = trunc i32 %w to i1
  %t5 = trunc i8 %b to i1
  %z0 = zext i8 %b to i16
  %z1 = zext i8 %b to i32
  %z2 = zext i8 %b to i64
  %z3 = zext i16 %h to i32
  %z4 = zext i16 %h to i64
  %z5 = zext i32 %w to i64
  %z6 = zext i1 %c to i8
  %z7 = zext i1 %c to i64
  %s0 = sext i8 %b to i16
  %s1 = sext i8 %b to i32
  %s2 = sext i8 %b to i64
  %s3 = sext i16 %h to i32
  %s4 = sext i16 %h to i64
  %s5 = sext i32 %w to i64
  %s6 = sext i1 %c to i32
  %s7 = sext i1 %c to i16
  %e0 = fptrunc double %d to float
  %e1 = fptrunc float %f to half
  %e2 = fptrunc double %d to half
  %e3 = fpext float %f to double
  %e4 = fpext half %fh to float
  %e5 = fpext half %fh to double
  %i0 = fptosi float %f to i32
  %i1 = fptoui float %f to i32
  %i2 = fptosi double %d to i64
  %i3 = fptoui double %d to i64
  %i4 = fptosi half %fh to i16
  %i5 = fptoui float %f to i8
  %i6 = fptosi float %f to i1
  %i7 = fptoui double %d to i1
  %u0 = sitofp i32 %w to float
  %u1 = uitofp i32 %w to float
  %u2 = sitofp i64 %q to double
  %u3 = uitofp i64 %q to double
  %u4 = sitofp i8 %b to float
  %u5 = uitofp i8 %b to half
  %u6 = sitofp i1 %c to float
  %u7 = uitofp i1 %c to double
  %u8 = sitofp i16 %h to half
  %p0 = ptrtoint i32* %gen to i64
  %p1 = ptrtoint i32* %gen to i32
  %p2 = inttoptr i64 %q to i8*
  %p3 = inttoptr i32 %w to i8 addrspace(1)*
  %b0 = bitcast float %f to i32
  %b1 = bitcast i32 %w to float
  %b2 = bitcast double %d to i64
  %b3 = bitcast half %fh to i16
  %b4 = bitcast i16 %h to half
  %b5 = bitcast <2 x half> <half 0xH3C00, half 0xHC000> to i32
  %b6 = bitcast i64 %q to <2 x float>
  %b7 = bitcast i32 %w to <4 x i8>
  %b8 = bitcast <4 x i8> %b7 to <2 x i16>
  %b9 = bitcast <2 x i16> %b8 to i32
  %b10 = bitcast i64 %q to <8 x i8>
  %b11 = bitcast <8 x i8> %b10 to double
  %a0 = addrspacecast i32* %gen to i32 addrspace(1)*
  %a1 = addrspacecast i32 addrspace(1)* %a0 to i32*
  %a2 = addrspacecast i32* %gen to i32 addrspace(3)*
  %a3 = addrspacecast i32 addrspace(3)* %a2 to i32*
  %a4 = addrspacecast i32* %gen to i32 addrspace(5)*
  %a5 = addrspacecast i32 addrspace(5)* %a4 to i32*
  %a6 = addrspacecast [4 x i32] addrspace(3)* @sh to [4 x i32]*
  %a7 = addrspacecast [4 x i32] addrspace(4)* @tbl to [4 x i32]*
  %a8 = addrspacecast i32* %gen to i32 addrspace(4)*
  %a8v = load i32, i32 addrspace(4)* %a8
  %a7e = getelementptr [4 x i32], [4 x i32]* %a7, i64 0, i32 %w
  %a7v = load i32, i32* %a7e
  %tblv = getelementptr [4 x i32], [4 x i32] addrspace(4)* @tbl, i64 0, i64 2
  %tblx = load i32, i32 addrspace(4)* %tblv
  ; Fold everything into a few outputs so nothing is dead.
  %x0 = add i32 %t0, %z1
  %x1 = add i32 %x0, %z3
  %x2 = add i32 %x1, %s1
  %x3 = add i32 %x2, %s3
  %x4 = add i32 %x3, %s6
  %x5 = add i32 %x4, %i0
  %x6 = add i32 %x5, %i1
  %x7 = add i32 %x6, %p1
  %x8 = add i32 %x7, %b0
  %x9 = add i32 %x8, %b5
  %x10 = add i32 %x9, %b9
  %x11 = add i32 %x10, %a8v
  %x12 = add i32 %x11, %a7v
  %x13 = add i32 %x12, %tblx
  %y0 = add i64 %z2, %z4
  %y1 = add i64 %y0, %z5
  %y2 = add i64 %y1, %z7
  %y3 = add i64 %y2, %s2
  %y4 = add i64 %y3, %s4
  %y5 = add i64 %y4, %s5
  %y6 = add i64 %y5, %i2
  %y7 = add i64 %y6, %i3
  %y8 = add i64 %y7, %p0
  %y9 = add i64 %y8, %b2
  %pp2 = ptrtoint i8* %p2 to i64
  %pp3 = ptrtoint i8 addrspace(1)* %p3 to i64
  %pa1 = ptrtoint i32* %a1 to i64
  %pa3 = ptrtoint i32* %a3 to i64
  %pa5 = ptrtoint i32* %a5 to i64
  %pa6 = ptrtoint [4 x i32]* %a6 to i64
  %y10 = add i64 %y9, %pp2
  %y11 = add i64 %y10, %pp3
  %y12 = add i64 %y11, %pa1
  %y13 = add i64 %y12, %pa3
  %y14 = add i64 %y13, %pa5
  %y15 = add i64 %y14, %pa6
  %x13w = zext i32 %x13 to i64
  %y16 = add i64 %y15, %x13w
  store i64 %y16, i64 addrspace(1)* %o
  %o16 = bitcast i64 addrspace(1)* %o to i16 addrspace(1)*
  %h0 = add i16 %t1, %z0
  %h1 = add i16 %h0, %s0
  %h2 = add i16 %h1, %s7
  %h3 = add i16 %h2, %i4
  %h4 = add i16 %h3, %b3
  %o16a = getelementptr i16, i16 addrspace(1)* %o16, i64 4
  store i16 %h4, i16 addrspace(1)* %o16a
  %o8 = bitcast i64 addrspace(1)* %o to i8 addrspace(1)*
  %c0 = add i8 %t2, %t3
  %c1 = add i8 %c0, %z6
  %c2 = add i8 %c1, %i5
  %bool0 = and i1 %t4, %t5
  %bool1 = xor i1 %bool0, %i6
  %bool2 = or i1 %bool1, %i7
  %c3 = zext i1 %bool2 to i8
  %c4 = add i8 %c2, %c3
  %o8a = getelementptr i8, i8 addrspace(1)* %o8, i64 16
  store i8 %c4, i8 addrspace(1)* %o8a
  %of = bitcast i64 addrspace(1)* %o to float addrspace(1)*
  %ef0 = fadd float %e0, %e4
  %ef1 = fadd float %ef0, %u0
  %ef2 = fadd float %ef1, %u1
  %ef3 = fadd float %ef2, %u4
  %ef4 = fadd float %ef3, %u6
  %ef5 = fadd float %ef4, %b1
  %b6e = extractelement <2 x float> %b6, i32 1
  %ef6 = fadd float %ef5, %b6e
  %ofa = getelementptr float, float addrspace(1)* %of, i64 5
  store float %ef6, float addrspace(1)* %ofa
  %od = bitcast i64 addrspace(1)* %o to double addrspace(1)*
  %ed0 = fadd double %e3, %e5
  %ed1 = fadd double %ed0, %u2
  %ed2 = fadd double %ed1, %u3
  %ed3 = fadd double %ed2, %u7
  %ed4 = fadd double %ed3, %b11
  %oda = getelementptr double, double addrspace(1)* %od, i64 3
  store double %ed4, double addrspace(1)* %oda
  %oh = bitcast i64 addrspace(1)* %o to half addrspace(1)*
  %eh0 = fadd half %e1, %e2
  %eh1 = fadd half %eh0, %u5
  %eh2 = fadd half %eh1, %u8
  %eh3 = fadd half %eh2, %b4
  %oha = getelementptr half, half addrspace(1)* %oh, i64 16
  store half %eh3, half addrspace(1)* %oha
  ret void
}

!nvvm.annotations = !{!0}
!0 = !{void (i64 addrspace(1)*, i8, i16, i32, i64, i1, half, float, double, i32*)* @casts, !"kernel", i32 1}
