#!/usr/bin/env bash
# run 59 call 2 (about 7 minutes): branch actgrad-bulk (on main bc1c6eb): the persistent
# backward's act_grad in a bulk-copy form (codegen/actgrad_bulk.go: a producer warp streams
# stages of 8 rows, or 4, 2, 1 where 8 leave fewer than two stages, into shared memory; a consumer
# warp per row in the row-wise kernel's order of the dot, so main's bits); and branch agb-n128, the
# same with ws-n128's 128 x 128 wgmma-ws tiles. Carry: .carry/bins.tgz holding main's CLI,
# .carry/mokc-agb.gz and .carry/mokc-agbn.gz (`make device-old-cli REV=<branch>`, renamed).
#  1. bits against main's: the persistent backward of agb at qwen3-30b-a3b T = 1, 300, 301, 1100,
#     4096 (8 rows a stage), gpt-oss-20b T = 200 (2880 columns: fewer rows a stage),
#     deepseek-v2-lite T = 200 and qwen2-57b-a14b T = 200 (shared experts' dense rows),
#     llama4-scout T = 64 (its routed act_grad stays row-wise); main's persistent at T = 1 and
#     olmoe-1b-7b T = 200 in this call; agbn's at qwen3-30b-a3b T = 300 and 4096;
#  2. forward + backward at qwen3-30b-a3b T = 4096 (main, agb, agbn persistent, two rounds), agb's
#     and agbn's phases, T = 1100 (main, agb, agbn), per-op at both;
#  3. memcheck (gpt-oss-20b T = 200), racecheck (qwen3-30b-a3b T = 300 and deepseek-v2-lite
#     T = 200) and synccheck (qwen3-30b-a3b T = 300) of agb's persistent backward, as time allows.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
agb=$(carried agb)
agbn=$(carried agbn)
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
RUN_TIMEOUT=80
P="--lowering persistent"
run_json agb-pers "$agb" qwen3-30b-a3b bf16 1,300,301,1100,4096 --backward $P
run_json main-pers "$mokc" qwen3-30b-a3b bf16 1 --backward $P
run_json agb-pers "$agb" gpt-oss-20b bf16 200 --backward $P
run_json agb-pers "$agb" deepseek-v2-lite bf16 200 --backward $P
run_json agb-pers "$agb" qwen2-57b-a14b bf16 200 --backward $P
run_json agb-pers "$agb" llama4-scout bf16 64 --backward $P
run_json agb-pers "$agb" olmoe-1b-7b bf16 200 --backward $P
run_json main-pers "$mokc" olmoe-1b-7b bf16 200 --backward $P
run_json agbn-pers "$agbn" qwen3-30b-a3b bf16 300,4096 --backward $P
echo "bits done $(($(date +%s) - START)) s" >>"$S"
BENCH_BUDGET=400
B="--model qwen3-30b-a3b --iters 10 --backward"
for r in 1 2; do
	bench "main-pers-r$r" "$mokc" 4096 $B $P
	bench "agb-pers-r$r" "$agb" 4096 $B $P
	bench "agbn-pers-r$r" "$agbn" 4096 $B $P
done
bench agb-phases "$agb" 4096 $B $P --phases
bench agbn-phases "$agbn" 4096 $B $P --phases
bench main-perop "$mokc" 4096 $B
bench main-pers-T1100 "$mokc" 1100 $B $P
bench agb-pers-T1100 "$agb" 1100 $B $P
bench agbn-pers-T1100 "$agbn" 1100 $B $P
bench agb-phases-T1100 "$agb" 1100 $B $P --phases
bench main-perop-T1100 "$mokc" 1100 $B
grep -hv "^{" "$O/bench.jsonl" >>"$S"
SAN_BUDGET=590
mokc=$agb san memcheck agb-oss-200 70 --model gpt-oss-20b --tokens 200 --backward
mokc=$agb san racecheck agb-q3-300 70 --model qwen3-30b-a3b --tokens 300 --backward
mokc=$agb san racecheck agb-dsv2-200 70 --model deepseek-v2-lite --tokens 200 --backward
mokc=$agb san synccheck agb-q3-300 60 --model qwen3-30b-a3b --tokens 300 --backward
rm -f "$O/tmp.json"
echo "done $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
