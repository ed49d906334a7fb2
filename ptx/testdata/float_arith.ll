; Floating-point arithmetic on half, float and double: IEEE round-to-nearest
; forms (.rn) as llc emits them, fneg, half division through f32, and float
; constants (including NaN, infinity and negative zero).
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define void @float_arith(half addrspace(1)* %oh, float addrspace(1)* %of, double addrspace(1)* %od, half %ah, half %bh, float %af, float %bf, double %ad, double %bd) {
entry:
  %h0 = fadd half %ah, %bh
  %h1 = fsub half %h0, 0xH3C00
  %h2 = fmul half %h1, %bh
  %h3 = fdiv half %h2, %ah
  %h4 = fneg half %h3
  store half %h4, half addrspace(1)* %oh, align 2
  %f0 = fadd float %af, %bf
  %f1 = fsub float %f0, 1.5
  %f2 = fmul float %f1, %bf
  %f3 = fdiv float %f2, %af
  %f4 = fneg float %f3
  %f5 = fadd float %f4, 0x7FF8000000000000
  %f6 = fmul float %f4, 0x7FF0000000000000
  %f7 = fadd float %f4, -0.0
  %f8 = fmul fast float %f2, %af
  %f9 = fadd contract float %f8, %f1
  store float %f4, float addrspace(1)* %of, align 4
  %of1 = getelementptr float, float addrspace(1)* %of, i32 1
  store float %f5, float addrspace(1)* %of1, align 4
  %of2 = getelementptr float, float addrspace(1)* %of, i32 2
  store float %f6, float addrspace(1)* %of2, align 4
  %of3 = getelementptr float, float addrspace(1)* %of, i32 3
  store float %f7, float addrspace(1)* %of3, align 4
  %of4 = getelementptr float, float addrspace(1)* %of, i32 4
  store float %f9, float addrspace(1)* %of4, align 4
  %d0 = fadd double %ad, %bd
  %d1 = fsub double %d0, 0x3FB999999999999A
  %d2 = fmul double %d1, %bd
  %d3 = fdiv double %d2, %ad
  %d4 = fneg double %d3
  store double %d4, double addrspace(1)* %od, align 8
  ret void
}

!nvvm.annotations = !{!0}
!0 = !{void (half addrspace(1)*, float addrspace(1)*, double addrspace(1)*, half, half, float, float, double, double)* @float_arith, !"kernel", i32 1}
