; Inline PTX: multiple outputs returned as a struct, a tied operand, an
; immediate (n), 16/64-bit and f32 operands, a memory clobber, $$ for a
; literal dollar, and a value whose type differs from the constraint class.
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define void @asm_ops(i32 addrspace(1)* %out, i32 %a, i32 %b, i64 %c, float %f) {
entry:
  %pair = call { i32, i32 } asm sideeffect "add.cc.u32 $0, $2, $3;\0A\09addc.u32 $1, 0, 0;", "=r,=r,r,r"(i32 %a, i32 %b)
  %lo = extractvalue { i32, i32 } %pair, 0
  %hi = extractvalue { i32, i32 } %pair, 1
  %acc = call i32 asm "mad.lo.s32 $0, $1, $2, $0;", "=r,r,n,0"(i32 %lo, i32 7, i32 %hi)
  %w = call i64 asm "mul.wide.u32 $0, $1, $2;", "=l,r,r"(i32 %acc, i32 %b)
  %sum = add i64 %w, %c
  %half = call i16 asm "cvt.rn.f16.f32 $0, $1;", "=h,f"(float %f)
  %hw = zext i16 %half to i32
  %asf = call float asm "mov.b32 $0, $1;", "=f,r"(i32 %hw)
  %ai = call i32 asm "mov.b32 $0, $1;", "=r,f"(float %asf)
  call void asm sideeffect "{\0A\09.reg .b32 t$$0;\0A\09mov.b32 t$$0, ${0};\0A\09st.global.u32 [$1], t$$0;\0A\09}", "r,l,~{memory}"(i32 %ai, i32 addrspace(1)* %out)
  %lo64 = trunc i64 %sum to i32
  %p1 = getelementptr i32, i32 addrspace(1)* %out, i64 1
  store i32 %lo64, i32 addrspace(1)* %p1
  ret void
}

!nvvm.annotations = !{!0}
!0 = !{void (i32 addrspace(1)*, i32, i32, i64, float)* @asm_ops, !"kernel", i32 1}
