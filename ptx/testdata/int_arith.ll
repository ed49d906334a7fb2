; Integer arithmetic on i1, i8, i16, i32, i64: every binary operator,
; including division/remainder signedness, shifts by variable amounts
; (i8 amounts must be normalized), and i8 values whose upper register bits
; are undefined.
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define void @int_arith(i8 addrspace(1)* %o8, i16 addrspace(1)* %o16, i32 addrspace(1)* %o32, i64 addrspace(1)* %o64, i8 addrspace(1)* %o1, i8 %a8, i8 %b8, i16 %a16, i16 %b16, i32 %a32, i32 %b32, i64 %a64, i64 %b64, i1 %a1, i1 %b1) {
entry:
  %x8 = add i8 %a8, %b8
  %i8_add = add i8 %x8, 100
  %i8_sub = sub i8 %a8, %b8
  %i8_mul = mul i8 %a8, %b8
  %i8_udiv = udiv i8 %x8, %b8
  %i8_sdiv = sdiv i8 %x8, %b8
  %i8_urem = urem i8 %x8, %b8
  %i8_srem = srem i8 %x8, -7
  %i8_shl = shl i8 %x8, %b8
  %i8_lshr = lshr i8 %x8, %b8
  %i8_ashr = ashr i8 %x8, %b8
  %i8_ashr3 = ashr i8 %x8, 3
  %i8_and = and i8 %a8, %b8
  %i8_or = or i8 %a8, -128
  %i8_xor = xor i8 %a8, %b8
  %p8_0 = getelementptr i8, i8 addrspace(1)* %o8, i64 0
  store i8 %i8_add, i8 addrspace(1)* %p8_0
  %p8_1 = getelementptr i8, i8 addrspace(1)* %o8, i64 1
  store i8 %i8_sub, i8 addrspace(1)* %p8_1
  %p8_2 = getelementptr i8, i8 addrspace(1)* %o8, i64 2
  store i8 %i8_mul, i8 addrspace(1)* %p8_2
  %p8_3 = getelementptr i8, i8 addrspace(1)* %o8, i64 3
  store i8 %i8_udiv, i8 addrspace(1)* %p8_3
  %p8_4 = getelementptr i8, i8 addrspace(1)* %o8, i64 4
  store i8 %i8_sdiv, i8 addrspace(1)* %p8_4
  %p8_5 = getelementptr i8, i8 addrspace(1)* %o8, i64 5
  store i8 %i8_urem, i8 addrspace(1)* %p8_5
  %p8_6 = getelementptr i8, i8 addrspace(1)* %o8, i64 6
  store i8 %i8_srem, i8 addrspace(1)* %p8_6
  %p8_7 = getelementptr i8, i8 addrspace(1)* %o8, i64 7
  store i8 %i8_shl, i8 addrspace(1)* %p8_7
  %p8_8 = getelementptr i8, i8 addrspace(1)* %o8, i64 8
  store i8 %i8_lshr, i8 addrspace(1)* %p8_8
  %p8_9 = getelementptr i8, i8 addrspace(1)* %o8, i64 9
  store i8 %i8_ashr, i8 addrspace(1)* %p8_9
  %p8_10 = getelementptr i8, i8 addrspace(1)* %o8, i64 10
  store i8 %i8_ashr3, i8 addrspace(1)* %p8_10
  %p8_11 = getelementptr i8, i8 addrspace(1)* %o8, i64 11
  store i8 %i8_and, i8 addrspace(1)* %p8_11
  %p8_12 = getelementptr i8, i8 addrspace(1)* %o8, i64 12
  store i8 %i8_or, i8 addrspace(1)* %p8_12
  %p8_13 = getelementptr i8, i8 addrspace(1)* %o8, i64 13
  store i8 %i8_xor, i8 addrspace(1)* %p8_13

  %i16_add = add i16 %a16, %b16
  %i16_mul = mul i16 %a16, 3
  %i16_udiv = udiv i16 %a16, %b16
  %i16_sdiv = sdiv i16 %a16, %b16
  %i16_srem = srem i16 %a16, %b16
  %i16_shl = shl i16 %a16, %b16
  %i16_ashr = ashr i16 %a16, %b16
  %i16_lshr = lshr i16 %a16, 15
  %q0 = getelementptr i16, i16 addrspace(1)* %o16, i64 0
  store i16 %i16_add, i16 addrspace(1)* %q0
  %q1 = getelementptr i16, i16 addrspace(1)* %o16, i64 1
  store i16 %i16_mul, i16 addrspace(1)* %q1
  %q2 = getelementptr i16, i16 addrspace(1)* %o16, i64 2
  store i16 %i16_udiv, i16 addrspace(1)* %q2
  %q3 = getelementptr i16, i16 addrspace(1)* %o16, i64 3
  store i16 %i16_sdiv, i16 addrspace(1)* %q3
  %q4 = getelementptr i16, i16 addrspace(1)* %o16, i64 4
  store i16 %i16_srem, i16 addrspace(1)* %q4
  %q5 = getelementptr i16, i16 addrspace(1)* %o16, i64 5
  store i16 %i16_shl, i16 addrspace(1)* %q5
  %q6 = getelementptr i16, i16 addrspace(1)* %o16, i64 6
  store i16 %i16_ashr, i16 addrspace(1)* %q6
  %q7 = getelementptr i16, i16 addrspace(1)* %o16, i64 7
  store i16 %i16_lshr, i16 addrspace(1)* %q7

  %i32_sub = sub i32 %a32, %b32
  %i32_mul = mul nsw i32 %a32, %b32
  %i32_udiv = udiv i32 %a32, %b32
  %i32_sdiv = sdiv exact i32 %a32, %b32
  %i32_urem = urem i32 %a32, 10
  %i32_srem = srem i32 %a32, %b32
  %i32_shl = shl nuw i32 %a32, %b32
  %i32_lshr = lshr i32 %a32, %b32
  %i32_ashr = ashr i32 %a32, 31
  %i32_xor = xor i32 %a32, -1
  %r0 = getelementptr i32, i32 addrspace(1)* %o32, i64 0
  store i32 %i32_sub, i32 addrspace(1)* %r0
  %r1 = getelementptr i32, i32 addrspace(1)* %o32, i64 1
  store i32 %i32_mul, i32 addrspace(1)* %r1
  %r2 = getelementptr i32, i32 addrspace(1)* %o32, i64 2
  store i32 %i32_udiv, i32 addrspace(1)* %r2
  %r3 = getelementptr i32, i32 addrspace(1)* %o32, i64 3
  store i32 %i32_sdiv, i32 addrspace(1)* %r3
  %r4 = getelementptr i32, i32 addrspace(1)* %o32, i64 4
  store i32 %i32_urem, i32 addrspace(1)* %r4
  %r5 = getelementptr i32, i32 addrspace(1)* %o32, i64 5
  store i32 %i32_srem, i32 addrspace(1)* %r5
  %r6 = getelementptr i32, i32 addrspace(1)* %o32, i64 6
  store i32 %i32_shl, i32 addrspace(1)* %r6
  %r7 = getelementptr i32, i32 addrspace(1)* %o32, i64 7
  store i32 %i32_lshr, i32 addrspace(1)* %r7
  %r8x = getelementptr i32, i32 addrspace(1)* %o32, i64 8
  store i32 %i32_ashr, i32 addrspace(1)* %r8x
  %r9 = getelementptr i32, i32 addrspace(1)* %o32, i64 9
  store i32 %i32_xor, i32 addrspace(1)* %r9

  %i64_add = add i64 %a64, 1099511627776
  %i64_mul = mul i64 %a64, %b64
  %i64_udiv = udiv i64 %a64, %b64
  %i64_sdiv = sdiv i64 %a64, %b64
  %i64_urem = urem i64 %a64, %b64
  %i64_srem = srem i64 %a64, %b64
  %i64_shl = shl i64 %a64, %b64
  %i64_lshr = lshr i64 %a64, %b64
  %i64_ashr = ashr i64 %a64, %b64
  %i64_or = or i64 %a64, %b64
  %s0 = getelementptr i64, i64 addrspace(1)* %o64, i64 0
  store i64 %i64_add, i64 addrspace(1)* %s0
  %s1 = getelementptr i64, i64 addrspace(1)* %o64, i64 1
  store i64 %i64_mul, i64 addrspace(1)* %s1
  %s2 = getelementptr i64, i64 addrspace(1)* %o64, i64 2
  store i64 %i64_udiv, i64 addrspace(1)* %s2
  %s3 = getelementptr i64, i64 addrspace(1)* %o64, i64 3
  store i64 %i64_sdiv, i64 addrspace(1)* %s3
  %s4 = getelementptr i64, i64 addrspace(1)* %o64, i64 4
  store i64 %i64_urem, i64 addrspace(1)* %s4
  %s5 = getelementptr i64, i64 addrspace(1)* %o64, i64 5
  store i64 %i64_srem, i64 addrspace(1)* %s5
  %s6 = getelementptr i64, i64 addrspace(1)* %o64, i64 6
  store i64 %i64_shl, i64 addrspace(1)* %s6
  %s7 = getelementptr i64, i64 addrspace(1)* %o64, i64 7
  store i64 %i64_lshr, i64 addrspace(1)* %s7
  %s8 = getelementptr i64, i64 addrspace(1)* %o64, i64 8
  store i64 %i64_ashr, i64 addrspace(1)* %s8
  %s9 = getelementptr i64, i64 addrspace(1)* %o64, i64 9
  store i64 %i64_or, i64 addrspace(1)* %s9

  %i1_add = add i1 %a1, %b1
  %i1_and = and i1 %a1, %b1
  %i1_or = or i1 %a1, %b1
  %i1_xor = xor i1 %a1, true
  %i1_mul = mul i1 %a1, %b1
  %t0 = getelementptr i8, i8 addrspace(1)* %o1, i64 0
  %t1 = getelementptr i8, i8 addrspace(1)* %o1, i64 1
  %t2 = getelementptr i8, i8 addrspace(1)* %o1, i64 2
  %t3 = getelementptr i8, i8 addrspace(1)* %o1, i64 3
  %t4 = getelementptr i8, i8 addrspace(1)* %o1, i64 4
  %c0 = bitcast i8 addrspace(1)* %t0 to i1 addrspace(1)*
  %c1 = bitcast i8 addrspace(1)* %t1 to i1 addrspace(1)*
  %c2 = bitcast i8 addrspace(1)* %t2 to i1 addrspace(1)*
  %c3 = bitcast i8 addrspace(1)* %t3 to i1 addrspace(1)*
  %c4 = bitcast i8 addrspace(1)* %t4 to i1 addrspace(1)*
  store i1 %i1_add, i1 addrspace(1)* %c0
  store i1 %i1_and, i1 addrspace(1)* %c1
  store i1 %i1_or, i1 addrspace(1)* %c2
  store i1 %i1_xor, i1 addrspace(1)* %c3
  %back = load i1, i1 addrspace(1)* %c0
  %mix = and i1 %back, %i1_mul
  store i1 %mix, i1 addrspace(1)* %c4
  ret void
}

!nvvm.annotations = !{!0}
!0 = !{void (i8 addrspace(1)*, i16 addrspace(1)*, i32 addrspace(1)*, i64 addrspace(1)*, i8 addrspace(1)*, i8, i8, i16, i16, i32, i32, i64, i64, i1, i1)* @int_arith, !"kernel", i32 1}
