; Module-scope variables: an initialized .global array, a .const table of
; floats, a struct with padding, a zero-initialized .global, and a private
; byte string; loads through constant-expression addresses.
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

%rec = type { i8, i32, i16 }

@lut = addrspace(1) global [4 x i32] [i32 1, i32 -1, i32 65536, i32 7], align 16
@coef = internal addrspace(4) constant [3 x float] [float 1.0, float -2.5, float 0x3FB99999A0000000], align 4
@r = internal addrspace(4) constant %rec { i8 -1, i32 305419896, i16 4660 }, align 4
@zeros = internal addrspace(1) global [8 x i64] zeroinitializer, align 8
@msg = private addrspace(4) constant [4 x i8] c"ok!\00", align 1

define void @read_globals(i32 addrspace(1)* %out, i32 %i) {
entry:
  %im = and i32 %i, 3
  %lp = getelementptr inbounds [4 x i32], [4 x i32] addrspace(1)* @lut, i32 0, i32 %im
  %l = load i32, i32 addrspace(1)* %lp, align 4
  %c = load float, float addrspace(4)* getelementptr inbounds ([3 x float], [3 x float] addrspace(4)* @coef, i64 0, i64 2), align 4
  %ci = fptosi float %c to i32
  %r1 = load i32, i32 addrspace(4)* getelementptr inbounds (%rec, %rec addrspace(4)* @r, i32 0, i32 1), align 4
  %r2 = load i16, i16 addrspace(4)* getelementptr inbounds (%rec, %rec addrspace(4)* @r, i32 0, i32 2), align 4
  %r2w = zext i16 %r2 to i32
  %m = load i8, i8 addrspace(4)* getelementptr inbounds ([4 x i8], [4 x i8] addrspace(4)* @msg, i64 0, i64 1), align 1
  %mw = zext i8 %m to i32
  %z = load i64, i64 addrspace(1)* getelementptr inbounds ([8 x i64], [8 x i64] addrspace(1)* @zeros, i64 0, i64 3), align 8
  %zw = trunc i64 %z to i32
  %s0 = add i32 %l, %ci
  %s1 = add i32 %s0, %r1
  %s2 = add i32 %s1, %r2w
  %s3 = add i32 %s2, %mw
  %s4 = add i32 %s3, %zw
  store i32 %s4, i32 addrspace(1)* %out
  ret void
}

!nvvm.annotations = !{!0}
!0 = !{void (i32 addrspace(1)*, i32)* @read_globals, !"kernel", i32 1}
