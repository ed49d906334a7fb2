; Calls to internal .func functions: scalar parameters of every class, return
; values (i1, i8, float, double, i64, pointer), a void function, a call
; before the callee's definition and a chain of calls.
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define void @caller(float addrspace(1)* %out, i32 %n, double %d, i1 %c, i8 %b, i16 %h, half %x) {
entry:
  %f = call float @scale(float addrspace(1)* %out, i32 %n, double %d)
  %flag = call i1 @pick(i1 %c, i8 %b, i16 %h, half %x)
  %g = select i1 %flag, float %f, float 1.0
  %p = call float addrspace(1)* @advance(float addrspace(1)* %out, i64 4)
  store float %g, float addrspace(1)* %p, align 4
  %q = call i64 @twice(i64 5)
  %r = call double @dbl(double %d)
  %s = call i8 @inc8(i8 %b)
  call void @sink(float addrspace(1)* %out, i64 %q, double %r, i8 %s)
  ret void
}

define internal float @scale(float addrspace(1)* %p, i32 %i, double %k) {
entry:
  %e = getelementptr float, float addrspace(1)* %p, i32 %i
  %v = load float, float addrspace(1)* %e, align 4
  %kf = fptrunc double %k to float
  %r = fmul float %v, %kf
  ret float %r
}

define internal i1 @pick(i1 %c, i8 %b, i16 %h, half %x) {
entry:
  %bz = zext i8 %b to i16
  %gt = icmp ugt i16 %bz, %h
  %xz = fcmp oeq half %x, 0xH0000
  %t = xor i1 %gt, %xz
  %r = and i1 %t, %c
  ret i1 %r
}

define internal float addrspace(1)* @advance(float addrspace(1)* %p, i64 %k) {
entry:
  %q = getelementptr float, float addrspace(1)* %p, i64 %k
  ret float addrspace(1)* %q
}

define internal i64 @twice(i64 %x) {
entry:
  %y = shl i64 %x, 1
  ret i64 %y
}

define internal double @dbl(double %x) {
entry:
  %y = fadd double %x, %x
  ret double %y
}

define internal i8 @inc8(i8 %x) {
entry:
  %y = add i8 %x, 1
  ret i8 %y
}

define internal void @sink(float addrspace(1)* %out, i64 %q, double %r, i8 %s) {
entry:
  %o = bitcast float addrspace(1)* %out to i64 addrspace(1)*
  %o1 = getelementptr i64, i64 addrspace(1)* %o, i64 2
  store i64 %q, i64 addrspace(1)* %o1, align 8
  %od = bitcast float addrspace(1)* %out to double addrspace(1)*
  %o2 = getelementptr double, double addrspace(1)* %od, i64 3
  store double %r, double addrspace(1)* %o2, align 8
  %ob = bitcast float addrspace(1)* %out to i8 addrspace(1)*
  %o3 = getelementptr i8, i8 addrspace(1)* %ob, i64 40
  store i8 %s, i8 addrspace(1)* %o3
  %t = call i64 @twice(i64 %q)
  %o4 = getelementptr i64, i64 addrspace(1)* %o, i64 6
  store i64 %t, i64 addrspace(1)* %o4, align 8
  ret void
}

!nvvm.annotations = !{!0}
!0 = !{void (float addrspace(1)*, i32, double, i1, i8, i16, half)* @caller, !"kernel", i32 1}
