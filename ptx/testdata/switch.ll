; switch on i32 (with cases sharing targets and a phi fed by several cases),
; on i8 (normalized before comparing), and on i1.
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define void @switches(i32 addrspace(1)* %out, i32 %x, i8 %y, i1 %z) {
entry:
  switch i32 %x, label %def [
    i32 0, label %zero
    i32 1, label %one
    i32 -5, label %one
    i32 100000, label %join
  ]

zero:
  br label %join

one:
  %t = mul i32 %x, 3
  br label %join

def:
  br label %join

join:
  %v = phi i32 [ 10, %zero ], [ %t, %one ], [ 20, %def ], [ 30, %entry ]
  %y2 = add i8 %y, 1
  switch i8 %y2, label %d2 [
    i8 -1, label %m1
    i8 7, label %s7
  ]

m1:
  br label %j2

s7:
  br label %j2

d2:
  br label %j2

j2:
  %w = phi i32 [ 1, %m1 ], [ 2, %s7 ], [ 3, %d2 ]
  switch i1 %z, label %f [
    i1 true, label %tt
  ]

tt:
  br label %f

f:
  %u = phi i32 [ 100, %tt ], [ 200, %j2 ]
  %s = add i32 %v, %w
  %s2 = add i32 %s, %u
  store i32 %s2, i32 addrspace(1)* %out
  ret void
}

!nvvm.annotations = !{!0}
!0 = !{void (i32 addrspace(1)*, i32, i8, i1)* @switches, !"kernel", i32 1}
