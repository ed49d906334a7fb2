; Every icmp predicate on i1, i8, i16, i32, i64 and pointers and every fcmp
; predicate on half, float and double; results stored as bytes.
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define void @compares(i8 addrspace(1)* %out, i1 %a1, i1 %b1, i8 %a8, i8 %b8, i16 %a16, i16 %b16, i32 %a32, i32 %b32, i64 %a64, i64 %b64, float addrspace(1)* %pa, float addrspace(1)* %pb, half %ah, half %bh, float %af, float %bf, double %ad, double %bd) {
entry:
  %s8 = add i8 %a8, %b8
  %ic_eq_i1 = icmp eq i1 %a1, %b1
  %p0 = getelementptr i8, i8 addrspace(1)* %out, i64 0
  %z0 = zext i1 %ic_eq_i1 to i8
  store i8 %z0, i8 addrspace(1)* %p0
  %ic_ne_i1 = icmp ne i1 %a1, %b1
  %p1 = getelementptr i8, i8 addrspace(1)* %out, i64 1
  %z1 = zext i1 %ic_ne_i1 to i8
  store i8 %z1, i8 addrspace(1)* %p1
  %ic_ugt_i1 = icmp ugt i1 %a1, %b1
  %p2 = getelementptr i8, i8 addrspace(1)* %out, i64 2
  %z2 = zext i1 %ic_ugt_i1 to i8
  store i8 %z2, i8 addrspace(1)* %p2
  %ic_uge_i1 = icmp uge i1 %a1, %b1
  %p3 = getelementptr i8, i8 addrspace(1)* %out, i64 3
  %z3 = zext i1 %ic_uge_i1 to i8
  store i8 %z3, i8 addrspace(1)* %p3
  %ic_ult_i1 = icmp ult i1 %a1, %b1
  %p4 = getelementptr i8, i8 addrspace(1)* %out, i64 4
  %z4 = zext i1 %ic_ult_i1 to i8
  store i8 %z4, i8 addrspace(1)* %p4
  %ic_ule_i1 = icmp ule i1 %a1, %b1
  %p5 = getelementptr i8, i8 addrspace(1)* %out, i64 5
  %z5 = zext i1 %ic_ule_i1 to i8
  store i8 %z5, i8 addrspace(1)* %p5
  %ic_sgt_i1 = icmp sgt i1 %a1, %b1
  %p6 = getelementptr i8, i8 addrspace(1)* %out, i64 6
  %z6 = zext i1 %ic_sgt_i1 to i8
  store i8 %z6, i8 addrspace(1)* %p6
  %ic_sge_i1 = icmp sge i1 %a1, %b1
  %p7 = getelementptr i8, i8 addrspace(1)* %out, i64 7
  %z7 = zext i1 %ic_sge_i1 to i8
  store i8 %z7, i8 addrspace(1)* %p7
  %ic_slt_i1 = icmp slt i1 %a1, %b1
  %p8 = getelementptr i8, i8 addrspace(1)* %out, i64 8
  %z8 = zext i1 %ic_slt_i1 to i8
  store i8 %z8, i8 addrspace(1)* %p8
  %ic_sle_i1 = icmp sle i1 %a1, %b1
  %p9 = getelementptr i8, i8 addrspace(1)* %out, i64 9
  %z9 = zext i1 %ic_sle_i1 to i8
  store i8 %z9, i8 addrspace(1)* %p9
  %ic_eq_i8 = icmp eq i8 %s8, %b8
  %p10 = getelementptr i8, i8 addrspace(1)* %out, i64 10
  %z10 = zext i1 %ic_eq_i8 to i8
  store i8 %z10, i8 addrspace(1)* %p10
  %ic_ne_i8 = icmp ne i8 %s8, %b8
  %p11 = getelementptr i8, i8 addrspace(1)* %out, i64 11
  %z11 = zext i1 %ic_ne_i8 to i8
  store i8 %z11, i8 addrspace(1)* %p11
  %ic_ugt_i8 = icmp ugt i8 %s8, %b8
  %p12 = getelementptr i8, i8 addrspace(1)* %out, i64 12
  %z12 = zext i1 %ic_ugt_i8 to i8
  store i8 %z12, i8 addrspace(1)* %p12
  %ic_uge_i8 = icmp uge i8 %s8, %b8
  %p13 = getelementptr i8, i8 addrspace(1)* %out, i64 13
  %z13 = zext i1 %ic_uge_i8 to i8
  store i8 %z13, i8 addrspace(1)* %p13
  %ic_ult_i8 = icmp ult i8 %s8, %b8
  %p14 = getelementptr i8, i8 addrspace(1)* %out, i64 14
  %z14 = zext i1 %ic_ult_i8 to i8
  store i8 %z14, i8 addrspace(1)* %p14
  %ic_ule_i8 = icmp ule i8 %s8, %b8
  %p15 = getelementptr i8, i8 addrspace(1)* %out, i64 15
  %z15 = zext i1 %ic_ule_i8 to i8
  store i8 %z15, i8 addrspace(1)* %p15
  %ic_sgt_i8 = icmp sgt i8 %s8, %b8
  %p16 = getelementptr i8, i8 addrspace(1)* %out, i64 16
  %z16 = zext i1 %ic_sgt_i8 to i8
  store i8 %z16, i8 addrspace(1)* %p16
  %ic_sge_i8 = icmp sge i8 %s8, %b8
  %p17 = getelementptr i8, i8 addrspace(1)* %out, i64 17
  %z17 = zext i1 %ic_sge_i8 to i8
  store i8 %z17, i8 addrspace(1)* %p17
  %ic_slt_i8 = icmp slt i8 %s8, %b8
  %p18 = getelementptr i8, i8 addrspace(1)* %out, i64 18
  %z18 = zext i1 %ic_slt_i8 to i8
  store i8 %z18, i8 addrspace(1)* %p18
  %ic_sle_i8 = icmp sle i8 %s8, %b8
  %p19 = getelementptr i8, i8 addrspace(1)* %out, i64 19
  %z19 = zext i1 %ic_sle_i8 to i8
  store i8 %z19, i8 addrspace(1)* %p19
  %ic_eq_i16 = icmp eq i16 %a16, %b16
  %p20 = getelementptr i8, i8 addrspace(1)* %out, i64 20
  %z20 = zext i1 %ic_eq_i16 to i8
  store i8 %z20, i8 addrspace(1)* %p20
  %ic_ne_i16 = icmp ne i16 %a16, %b16
  %p21 = getelementptr i8, i8 addrspace(1)* %out, i64 21
  %z21 = zext i1 %ic_ne_i16 to i8
  store i8 %z21, i8 addrspace(1)* %p21
  %ic_ugt_i16 = icmp ugt i16 %a16, %b16
  %p22 = getelementptr i8, i8 addrspace(1)* %out, i64 22
  %z22 = zext i1 %ic_ugt_i16 to i8
  store i8 %z22, i8 addrspace(1)* %p22
  %ic_uge_i16 = icmp uge i16 %a16, %b16
  %p23 = getelementptr i8, i8 addrspace(1)* %out, i64 23
  %z23 = zext i1 %ic_uge_i16 to i8
  store i8 %z23, i8 addrspace(1)* %p23
  %ic_ult_i16 = icmp ult i16 %a16, %b16
  %p24 = getelementptr i8, i8 addrspace(1)* %out, i64 24
  %z24 = zext i1 %ic_ult_i16 to i8
  store i8 %z24, i8 addrspace(1)* %p24
  %ic_ule_i16 = icmp ule i16 %a16, %b16
  %p25 = getelementptr i8, i8 addrspace(1)* %out, i64 25
  %z25 = zext i1 %ic_ule_i16 to i8
  store i8 %z25, i8 addrspace(1)* %p25
  %ic_sgt_i16 = icmp sgt i16 %a16, %b16
  %p26 = getelementptr i8, i8 addrspace(1)* %out, i64 26
  %z26 = zext i1 %ic_sgt_i16 to i8
  store i8 %z26, i8 addrspace(1)* %p26
  %ic_sge_i16 = icmp sge i16 %a16, %b16
  %p27 = getelementptr i8, i8 addrspace(1)* %out, i64 27
  %z27 = zext i1 %ic_sge_i16 to i8
  store i8 %z27, i8 addrspace(1)* %p27
  %ic_slt_i16 = icmp slt i16 %a16, %b16
  %p28 = getelementptr i8, i8 addrspace(1)* %out, i64 28
  %z28 = zext i1 %ic_slt_i16 to i8
  store i8 %z28, i8 addrspace(1)* %p28
  %ic_sle_i16 = icmp sle i16 %a16, %b16
  %p29 = getelementptr i8, i8 addrspace(1)* %out, i64 29
  %z29 = zext i1 %ic_sle_i16 to i8
  store i8 %z29, i8 addrspace(1)* %p29
  %ic_eq_i32 = icmp eq i32 %a32, %b32
  %p30 = getelementptr i8, i8 addrspace(1)* %out, i64 30
  %z30 = zext i1 %ic_eq_i32 to i8
  store i8 %z30, i8 addrspace(1)* %p30
  %ic_ne_i32 = icmp ne i32 %a32, %b32
  %p31 = getelementptr i8, i8 addrspace(1)* %out, i64 31
  %z31 = zext i1 %ic_ne_i32 to i8
  store i8 %z31, i8 addrspace(1)* %p31
  %ic_ugt_i32 = icmp ugt i32 %a32, %b32
  %p32 = getelementptr i8, i8 addrspace(1)* %out, i64 32
  %z32 = zext i1 %ic_ugt_i32 to i8
  store i8 %z32, i8 addrspace(1)* %p32
  %ic_uge_i32 = icmp uge i32 %a32, %b32
  %p33 = getelementptr i8, i8 addrspace(1)* %out, i64 33
  %z33 = zext i1 %ic_uge_i32 to i8
  store i8 %z33, i8 addrspace(1)* %p33
  %ic_ult_i32 = icmp ult i32 %a32, %b32
  %p34 = getelementptr i8, i8 addrspace(1)* %out, i64 34
  %z34 = zext i1 %ic_ult_i32 to i8
  store i8 %z34, i8 addrspace(1)* %p34
  %ic_ule_i32 = icmp ule i32 %a32, %b32
  %p35 = getelementptr i8, i8 addrspace(1)* %out, i64 35
  %z35 = zext i1 %ic_ule_i32 to i8
  store i8 %z35, i8 addrspace(1)* %p35
  %ic_sgt_i32 = icmp sgt i32 %a32, %b32
  %p36 = getelementptr i8, i8 addrspace(1)* %out, i64 36
  %z36 = zext i1 %ic_sgt_i32 to i8
  store i8 %z36, i8 addrspace(1)* %p36
  %ic_sge_i32 = icmp sge i32 %a32, %b32
  %p37 = getelementptr i8, i8 addrspace(1)* %out, i64 37
  %z37 = zext i1 %ic_sge_i32 to i8
  store i8 %z37, i8 addrspace(1)* %p37
  %ic_slt_i32 = icmp slt i32 %a32, %b32
  %p38 = getelementptr i8, i8 addrspace(1)* %out, i64 38
  %z38 = zext i1 %ic_slt_i32 to i8
  store i8 %z38, i8 addrspace(1)* %p38
  %ic_sle_i32 = icmp sle i32 %a32, %b32
  %p39 = getelementptr i8, i8 addrspace(1)* %out, i64 39
  %z39 = zext i1 %ic_sle_i32 to i8
  store i8 %z39, i8 addrspace(1)* %p39
  %ic_eq_i64 = icmp eq i64 %a64, %b64
  %p40 = getelementptr i8, i8 addrspace(1)* %out, i64 40
  %z40 = zext i1 %ic_eq_i64 to i8
  store i8 %z40, i8 addrspace(1)* %p40
  %ic_ne_i64 = icmp ne i64 %a64, %b64
  %p41 = getelementptr i8, i8 addrspace(1)* %out, i64 41
  %z41 = zext i1 %ic_ne_i64 to i8
  store i8 %z41, i8 addrspace(1)* %p41
  %ic_ugt_i64 = icmp ugt i64 %a64, %b64
  %p42 = getelementptr i8, i8 addrspace(1)* %out, i64 42
  %z42 = zext i1 %ic_ugt_i64 to i8
  store i8 %z42, i8 addrspace(1)* %p42
  %ic_uge_i64 = icmp uge i64 %a64, %b64
  %p43 = getelementptr i8, i8 addrspace(1)* %out, i64 43
  %z43 = zext i1 %ic_uge_i64 to i8
  store i8 %z43, i8 addrspace(1)* %p43
  %ic_ult_i64 = icmp ult i64 %a64, %b64
  %p44 = getelementptr i8, i8 addrspace(1)* %out, i64 44
  %z44 = zext i1 %ic_ult_i64 to i8
  store i8 %z44, i8 addrspace(1)* %p44
  %ic_ule_i64 = icmp ule i64 %a64, %b64
  %p45 = getelementptr i8, i8 addrspace(1)* %out, i64 45
  %z45 = zext i1 %ic_ule_i64 to i8
  store i8 %z45, i8 addrspace(1)* %p45
  %ic_sgt_i64 = icmp sgt i64 %a64, %b64
  %p46 = getelementptr i8, i8 addrspace(1)* %out, i64 46
  %z46 = zext i1 %ic_sgt_i64 to i8
  store i8 %z46, i8 addrspace(1)* %p46
  %ic_sge_i64 = icmp sge i64 %a64, %b64
  %p47 = getelementptr i8, i8 addrspace(1)* %out, i64 47
  %z47 = zext i1 %ic_sge_i64 to i8
  store i8 %z47, i8 addrspace(1)* %p47
  %ic_slt_i64 = icmp slt i64 %a64, %b64
  %p48 = getelementptr i8, i8 addrspace(1)* %out, i64 48
  %z48 = zext i1 %ic_slt_i64 to i8
  store i8 %z48, i8 addrspace(1)* %p48
  %ic_sle_i64 = icmp sle i64 %a64, %b64
  %p49 = getelementptr i8, i8 addrspace(1)* %out, i64 49
  %z49 = zext i1 %ic_sle_i64 to i8
  store i8 %z49, i8 addrspace(1)* %p49
  %ic_eq_float = icmp eq float addrspace(1)* %pa, %pb
  %p50 = getelementptr i8, i8 addrspace(1)* %out, i64 50
  %z50 = zext i1 %ic_eq_float to i8
  store i8 %z50, i8 addrspace(1)* %p50
  %ic_ne_float = icmp ne float addrspace(1)* %pa, %pb
  %p51 = getelementptr i8, i8 addrspace(1)* %out, i64 51
  %z51 = zext i1 %ic_ne_float to i8
  store i8 %z51, i8 addrspace(1)* %p51
  %ic_ugt_float = icmp ugt float addrspace(1)* %pa, %pb
  %p52 = getelementptr i8, i8 addrspace(1)* %out, i64 52
  %z52 = zext i1 %ic_ugt_float to i8
  store i8 %z52, i8 addrspace(1)* %p52
  %ic_uge_float = icmp uge float addrspace(1)* %pa, %pb
  %p53 = getelementptr i8, i8 addrspace(1)* %out, i64 53
  %z53 = zext i1 %ic_uge_float to i8
  store i8 %z53, i8 addrspace(1)* %p53
  %ic_ult_float = icmp ult float addrspace(1)* %pa, %pb
  %p54 = getelementptr i8, i8 addrspace(1)* %out, i64 54
  %z54 = zext i1 %ic_ult_float to i8
  store i8 %z54, i8 addrspace(1)* %p54
  %ic_ule_float = icmp ule float addrspace(1)* %pa, %pb
  %p55 = getelementptr i8, i8 addrspace(1)* %out, i64 55
  %z55 = zext i1 %ic_ule_float to i8
  store i8 %z55, i8 addrspace(1)* %p55
  %ic_sgt_float = icmp sgt float addrspace(1)* %pa, %pb
  %p56 = getelementptr i8, i8 addrspace(1)* %out, i64 56
  %z56 = zext i1 %ic_sgt_float to i8
  store i8 %z56, i8 addrspace(1)* %p56
  %ic_sge_float = icmp sge float addrspace(1)* %pa, %pb
  %p57 = getelementptr i8, i8 addrspace(1)* %out, i64 57
  %z57 = zext i1 %ic_sge_float to i8
  store i8 %z57, i8 addrspace(1)* %p57
  %ic_slt_float = icmp slt float addrspace(1)* %pa, %pb
  %p58 = getelementptr i8, i8 addrspace(1)* %out, i64 58
  %z58 = zext i1 %ic_slt_float to i8
  store i8 %z58, i8 addrspace(1)* %p58
  %ic_sle_float = icmp sle float addrspace(1)* %pa, %pb
  %p59 = getelementptr i8, i8 addrspace(1)* %out, i64 59
  %z59 = zext i1 %ic_sle_float to i8
  store i8 %z59, i8 addrspace(1)* %p59
  %ic_imm = icmp slt i32 %a32, -5
  %p60 = getelementptr i8, i8 addrspace(1)* %out, i64 60
  %z60 = zext i1 %ic_imm to i8
  store i8 %z60, i8 addrspace(1)* %p60
  %ic_imm8 = icmp ugt i8 %s8, 200
  %p61 = getelementptr i8, i8 addrspace(1)* %out, i64 61
  %z61 = zext i1 %ic_imm8 to i8
  store i8 %z61, i8 addrspace(1)* %p61
  %fc_false_half = fcmp false half %ah, %bh
  %p62 = getelementptr i8, i8 addrspace(1)* %out, i64 62
  %z62 = zext i1 %fc_false_half to i8
  store i8 %z62, i8 addrspace(1)* %p62
  %fc_oeq_half = fcmp oeq half %ah, %bh
  %p63 = getelementptr i8, i8 addrspace(1)* %out, i64 63
  %z63 = zext i1 %fc_oeq_half to i8
  store i8 %z63, i8 addrspace(1)* %p63
  %fc_ogt_half = fcmp ogt half %ah, %bh
  %p64 = getelementptr i8, i8 addrspace(1)* %out, i64 64
  %z64 = zext i1 %fc_ogt_half to i8
  store i8 %z64, i8 addrspace(1)* %p64
  %fc_oge_half = fcmp oge half %ah, %bh
  %p65 = getelementptr i8, i8 addrspace(1)* %out, i64 65
  %z65 = zext i1 %fc_oge_half to i8
  store i8 %z65, i8 addrspace(1)* %p65
  %fc_olt_half = fcmp olt half %ah, %bh
  %p66 = getelementptr i8, i8 addrspace(1)* %out, i64 66
  %z66 = zext i1 %fc_olt_half to i8
  store i8 %z66, i8 addrspace(1)* %p66
  %fc_ole_half = fcmp ole half %ah, %bh
  %p67 = getelementptr i8, i8 addrspace(1)* %out, i64 67
  %z67 = zext i1 %fc_ole_half to i8
  store i8 %z67, i8 addrspace(1)* %p67
  %fc_one_half = fcmp one half %ah, %bh
  %p68 = getelementptr i8, i8 addrspace(1)* %out, i64 68
  %z68 = zext i1 %fc_one_half to i8
  store i8 %z68, i8 addrspace(1)* %p68
  %fc_ord_half = fcmp ord half %ah, %bh
  %p69 = getelementptr i8, i8 addrspace(1)* %out, i64 69
  %z69 = zext i1 %fc_ord_half to i8
  store i8 %z69, i8 addrspace(1)* %p69
  %fc_ueq_half = fcmp ueq half %ah, %bh
  %p70 = getelementptr i8, i8 addrspace(1)* %out, i64 70
  %z70 = zext i1 %fc_ueq_half to i8
  store i8 %z70, i8 addrspace(1)* %p70
  %fc_ugt_half = fcmp ugt half %ah, %bh
  %p71 = getelementptr i8, i8 addrspace(1)* %out, i64 71
  %z71 = zext i1 %fc_ugt_half to i8
  store i8 %z71, i8 addrspace(1)* %p71
  %fc_uge_half = fcmp uge half %ah, %bh
  %p72 = getelementptr i8, i8 addrspace(1)* %out, i64 72
  %z72 = zext i1 %fc_uge_half to i8
  store i8 %z72, i8 addrspace(1)* %p72
  %fc_ult_half = fcmp ult half %ah, %bh
  %p73 = getelementptr i8, i8 addrspace(1)* %out, i64 73
  %z73 = zext i1 %fc_ult_half to i8
  store i8 %z73, i8 addrspace(1)* %p73
  %fc_ule_half = fcmp ule half %ah, %bh
  %p74 = getelementptr i8, i8 addrspace(1)* %out, i64 74
  %z74 = zext i1 %fc_ule_half to i8
  store i8 %z74, i8 addrspace(1)* %p74
  %fc_une_half = fcmp une half %ah, %bh
  %p75 = getelementptr i8, i8 addrspace(1)* %out, i64 75
  %z75 = zext i1 %fc_une_half to i8
  store i8 %z75, i8 addrspace(1)* %p75
  %fc_uno_half = fcmp uno half %ah, %bh
  %p76 = getelementptr i8, i8 addrspace(1)* %out, i64 76
  %z76 = zext i1 %fc_uno_half to i8
  store i8 %z76, i8 addrspace(1)* %p76
  %fc_true_half = fcmp true half %ah, %bh
  %p77 = getelementptr i8, i8 addrspace(1)* %out, i64 77
  %z77 = zext i1 %fc_true_half to i8
  store i8 %z77, i8 addrspace(1)* %p77
  %fc_false_float = fcmp false float %af, %bf
  %p78 = getelementptr i8, i8 addrspace(1)* %out, i64 78
  %z78 = zext i1 %fc_false_float to i8
  store i8 %z78, i8 addrspace(1)* %p78
  %fc_oeq_float = fcmp oeq float %af, %bf
  %p79 = getelementptr i8, i8 addrspace(1)* %out, i64 79
  %z79 = zext i1 %fc_oeq_float to i8
  store i8 %z79, i8 addrspace(1)* %p79
  %fc_ogt_float = fcmp ogt float %af, %bf
  %p80 = getelementptr i8, i8 addrspace(1)* %out, i64 80
  %z80 = zext i1 %fc_ogt_float to i8
  store i8 %z80, i8 addrspace(1)* %p80
  %fc_oge_float = fcmp oge float %af, %bf
  %p81 = getelementptr i8, i8 addrspace(1)* %out, i64 81
  %z81 = zext i1 %fc_oge_float to i8
  store i8 %z81, i8 addrspace(1)* %p81
  %fc_olt_float = fcmp olt float %af, %bf
  %p82 = getelementptr i8, i8 addrspace(1)* %out, i64 82
  %z82 = zext i1 %fc_olt_float to i8
  store i8 %z82, i8 addrspace(1)* %p82
  %fc_ole_float = fcmp ole float %af, %bf
  %p83 = getelementptr i8, i8 addrspace(1)* %out, i64 83
  %z83 = zext i1 %fc_ole_float to i8
  store i8 %z83, i8 addrspace(1)* %p83
  %fc_one_float = fcmp one float %af, %bf
  %p84 = getelementptr i8, i8 addrspace(1)* %out, i64 84
  %z84 = zext i1 %fc_one_float to i8
  store i8 %z84, i8 addrspace(1)* %p84
  %fc_ord_float = fcmp ord float %af, %bf
  %p85 = getelementptr i8, i8 addrspace(1)* %out, i64 85
  %z85 = zext i1 %fc_ord_float to i8
  store i8 %z85, i8 addrspace(1)* %p85
  %fc_ueq_float = fcmp ueq float %af, %bf
  %p86 = getelementptr i8, i8 addrspace(1)* %out, i64 86
  %z86 = zext i1 %fc_ueq_float to i8
  store i8 %z86, i8 addrspace(1)* %p86
  %fc_ugt_float = fcmp ugt float %af, %bf
  %p87 = getelementptr i8, i8 addrspace(1)* %out, i64 87
  %z87 = zext i1 %fc_ugt_float to i8
  store i8 %z87, i8 addrspace(1)* %p87
  %fc_uge_float = fcmp uge float %af, %bf
  %p88 = getelementptr i8, i8 addrspace(1)* %out, i64 88
  %z88 = zext i1 %fc_uge_float to i8
  store i8 %z88, i8 addrspace(1)* %p88
  %fc_ult_float = fcmp ult float %af, %bf
  %p89 = getelementptr i8, i8 addrspace(1)* %out, i64 89
  %z89 = zext i1 %fc_ult_float to i8
  store i8 %z89, i8 addrspace(1)* %p89
  %fc_ule_float = fcmp ule float %af, %bf
  %p90 = getelementptr i8, i8 addrspace(1)* %out, i64 90
  %z90 = zext i1 %fc_ule_float to i8
  store i8 %z90, i8 addrspace(1)* %p90
  %fc_une_float = fcmp une float %af, %bf
  %p91 = getelementptr i8, i8 addrspace(1)* %out, i64 91
  %z91 = zext i1 %fc_une_float to i8
  store i8 %z91, i8 addrspace(1)* %p91
  %fc_uno_float = fcmp uno float %af, %bf
  %p92 = getelementptr i8, i8 addrspace(1)* %out, i64 92
  %z92 = zext i1 %fc_uno_float to i8
  store i8 %z92, i8 addrspace(1)* %p92
  %fc_true_float = fcmp true float %af, %bf
  %p93 = getelementptr i8, i8 addrspace(1)* %out, i64 93
  %z93 = zext i1 %fc_true_float to i8
  store i8 %z93, i8 addrspace(1)* %p93
  %fc_false_double = fcmp false double %ad, %bd
  %p94 = getelementptr i8, i8 addrspace(1)* %out, i64 94
  %z94 = zext i1 %fc_false_double to i8
  store i8 %z94, i8 addrspace(1)* %p94
  %fc_oeq_double = fcmp oeq double %ad, %bd
  %p95 = getelementptr i8, i8 addrspace(1)* %out, i64 95
  %z95 = zext i1 %fc_oeq_double to i8
  store i8 %z95, i8 addrspace(1)* %p95
  %fc_ogt_double = fcmp ogt double %ad, %bd
  %p96 = getelementptr i8, i8 addrspace(1)* %out, i64 96
  %z96 = zext i1 %fc_ogt_double to i8
  store i8 %z96, i8 addrspace(1)* %p96
  %fc_oge_double = fcmp oge double %ad, %bd
  %p97 = getelementptr i8, i8 addrspace(1)* %out, i64 97
  %z97 = zext i1 %fc_oge_double to i8
  store i8 %z97, i8 addrspace(1)* %p97
  %fc_olt_double = fcmp olt double %ad, %bd
  %p98 = getelementptr i8, i8 addrspace(1)* %out, i64 98
  %z98 = zext i1 %fc_olt_double to i8
  store i8 %z98, i8 addrspace(1)* %p98
  %fc_ole_double = fcmp ole double %ad, %bd
  %p99 = getelementptr i8, i8 addrspace(1)* %out, i64 99
  %z99 = zext i1 %fc_ole_double to i8
  store i8 %z99, i8 addrspace(1)* %p99
  %fc_one_double = fcmp one double %ad, %bd
  %p100 = getelementptr i8, i8 addrspace(1)* %out, i64 100
  %z100 = zext i1 %fc_one_double to i8
  store i8 %z100, i8 addrspace(1)* %p100
  %fc_ord_double = fcmp ord double %ad, %bd
  %p101 = getelementptr i8, i8 addrspace(1)* %out, i64 101
  %z101 = zext i1 %fc_ord_double to i8
  store i8 %z101, i8 addrspace(1)* %p101
  %fc_ueq_double = fcmp ueq double %ad, %bd
  %p102 = getelementptr i8, i8 addrspace(1)* %out, i64 102
  %z102 = zext i1 %fc_ueq_double to i8
  store i8 %z102, i8 addrspace(1)* %p102
  %fc_ugt_double = fcmp ugt double %ad, %bd
  %p103 = getelementptr i8, i8 addrspace(1)* %out, i64 103
  %z103 = zext i1 %fc_ugt_double to i8
  store i8 %z103, i8 addrspace(1)* %p103
  %fc_uge_double = fcmp uge double %ad, %bd
  %p104 = getelementptr i8, i8 addrspace(1)* %out, i64 104
  %z104 = zext i1 %fc_uge_double to i8
  store i8 %z104, i8 addrspace(1)* %p104
  %fc_ult_double = fcmp ult double %ad, %bd
  %p105 = getelementptr i8, i8 addrspace(1)* %out, i64 105
  %z105 = zext i1 %fc_ult_double to i8
  store i8 %z105, i8 addrspace(1)* %p105
  %fc_ule_double = fcmp ule double %ad, %bd
  %p106 = getelementptr i8, i8 addrspace(1)* %out, i64 106
  %z106 = zext i1 %fc_ule_double to i8
  store i8 %z106, i8 addrspace(1)* %p106
  %fc_une_double = fcmp une double %ad, %bd
  %p107 = getelementptr i8, i8 addrspace(1)* %out, i64 107
  %z107 = zext i1 %fc_une_double to i8
  store i8 %z107, i8 addrspace(1)* %p107
  %fc_uno_double = fcmp uno double %ad, %bd
  %p108 = getelementptr i8, i8 addrspace(1)* %out, i64 108
  %z108 = zext i1 %fc_uno_double to i8
  store i8 %z108, i8 addrspace(1)* %p108
  %fc_true_double = fcmp true double %ad, %bd
  %p109 = getelementptr i8, i8 addrspace(1)* %out, i64 109
  %z109 = zext i1 %fc_true_double to i8
  store i8 %z109, i8 addrspace(1)* %p109
  %fc_imm = fcmp ult float %af, 2.0
  %p110 = getelementptr i8, i8 addrspace(1)* %out, i64 110
  %z110 = zext i1 %fc_imm to i8
  store i8 %z110, i8 addrspace(1)* %p110
  ret void
}

!nvvm.annotations = !{!0}
!0 = !{void (i8 addrspace(1)*, i1, i1, i8, i8, i16, i16, i32, i32, i64, i64, float addrspace(1)*, float addrspace(1)*, half, half, float, float, double, double)* @compares, !"kernel", i32 1}
