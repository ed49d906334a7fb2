; A kernel with parameters of every scalar class, pointers in several address
; spaces, and a 128-byte TMA tensor map passed byval with 64-byte alignment:
; its generic address (mov.b64 + cvta.param) is taken with ptrtoint and
; handed to inline PTX, its bytes read through the generic pointer and
; through the param space (addrspacecast to 101).
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define void @many_params(i8 %a, i16 %b, i32 %c, i64 %d, float %e, double %f, half %g, i1 %h, i8 addrspace(1)* %gp, float* %genp, i32 addrspace(3)* %sp, [128 x i8]* byval([128 x i8]) align 64 %tmap, i32 %last) {
entry:
  %taddr = ptrtoint [128 x i8]* %tmap to i64
  call void asm sideeffect "// tensor map at $0", "l"(i64 %taddr)
  %b0p = getelementptr [128 x i8], [128 x i8]* %tmap, i64 0, i64 8
  %b0 = load i8, i8* %b0p, align 8
  %pp = addrspacecast [128 x i8]* %tmap to [128 x i8] addrspace(101)*
  %w0p = bitcast [128 x i8] addrspace(101)* %pp to i64 addrspace(101)*
  %w0 = load i64, i64 addrspace(101)* %w0p, align 64
  %a32 = zext i8 %a to i32
  %b32 = sext i16 %b to i32
  %s0 = add i32 %a32, %b32
  %s1 = add i32 %s0, %c
  %s2 = add i32 %s1, %last
  %h32 = zext i1 %h to i32
  %s3 = add i32 %s2, %h32
  %b032 = zext i8 %b0 to i32
  %s4 = add i32 %s3, %b032
  %s5 = sext i32 %s4 to i64
  %s6 = add i64 %s5, %d
  %s7 = add i64 %s6, %w0
  %gf = fpext half %g to float
  %ef = fadd float %e, %gf
  %ed = fpext float %ef to double
  %fd = fadd double %ed, %f
  %sf = sitofp i64 %s7 to double
  %r = fadd double %fd, %sf
  %o = bitcast i8 addrspace(1)* %gp to double addrspace(1)*
  store double %r, double addrspace(1)* %o, align 8
  store float %ef, float* %genp, align 4
  store i32 %s4, i32 addrspace(3)* %sp, align 4
  ret void
}

!nvvm.annotations = !{!0}
!0 = !{void (i8, i16, i32, i64, float, double, half, i1, i8 addrspace(1)*, float*, i32 addrspace(3)*, [128 x i8]*, i32)* @many_params, !"kernel", i32 1}
