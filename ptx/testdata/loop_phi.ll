; Loops with phis: a swap across the back edge (a, b = b, a + b), a phi used
; after the loop (lost-copy shape: the back edge is critical), a critical
; edge from a conditional branch into a join with phis, an i1 phi, and a
; phi fed by a constant on one edge.
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define void @fib_swap(i32 addrspace(1)* %out, i32 %n, i32 %sel) {
entry:
  %pos = icmp sgt i32 %n, 0
  br i1 %pos, label %loop, label %done

loop:
  %i = phi i32 [ 0, %entry ], [ %i.next, %loop ]
  %a = phi i32 [ 0, %entry ], [ %b, %loop ]
  %b = phi i32 [ 1, %entry ], [ %ab, %loop ]
  %flip = phi i1 [ false, %entry ], [ %nflip, %loop ]
  %ab = add i32 %a, %b
  %nflip = xor i1 %flip, true
  %i.next = add nuw nsw i32 %i, 1
  %again = icmp slt i32 %i.next, %n
  br i1 %again, label %loop, label %done

done:
  %fa = phi i32 [ -1, %entry ], [ %a, %loop ]
  %fb = phi i32 [ -1, %entry ], [ %b, %loop ]
  %fi = phi i32 [ 0, %entry ], [ %i, %loop ]
  %ff = phi i1 [ true, %entry ], [ %flip, %loop ]
  store i32 %fa, i32 addrspace(1)* %out, align 4
  %o1 = getelementptr inbounds i32, i32 addrspace(1)* %out, i64 1
  store i32 %fb, i32 addrspace(1)* %o1, align 4
  %o2 = getelementptr inbounds i32, i32 addrspace(1)* %out, i64 2
  store i32 %fi, i32 addrspace(1)* %o2, align 4
  %fz = zext i1 %ff to i32
  %o3 = getelementptr inbounds i32, i32 addrspace(1)* %out, i64 3
  store i32 %fz, i32 addrspace(1)* %o3, align 4
  %c = icmp eq i32 %sel, 7
  br i1 %c, label %join, label %side

side:
  %sx = mul i32 %fa, 3
  %c2 = icmp ugt i32 %sx, 100
  br i1 %c2, label %join, label %tail

tail:
  %j2 = add i32 %fa, 1
  br label %join

join:
  %j = phi i32 [ 10, %done ], [ %sx, %side ], [ 30, %tail ]
  %k = phi i32 [ %fb, %done ], [ %fa, %side ], [ %j2, %tail ]
  %o4 = getelementptr inbounds i32, i32 addrspace(1)* %out, i64 4
  store i32 %j, i32 addrspace(1)* %o4, align 4
  %o5 = getelementptr inbounds i32, i32 addrspace(1)* %out, i64 5
  store i32 %k, i32 addrspace(1)* %o5, align 4
  ret void
}

!nvvm.annotations = !{!0}
!0 = !{void (i32 addrspace(1)*, i32, i32)* @fib_swap, !"kernel", i32 1}
