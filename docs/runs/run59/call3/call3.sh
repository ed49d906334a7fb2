#!/usr/bin/env bash
# run 59 call 3 (about 3 minutes): branch agb-n128 (actgrad-bulk with ws-n128's 128 x 128
# wgmma-ws tiles), the candidate for main: its persistent backward's bits on the layers of calls
# 1-2 against main's; forward + backward at qwen3-30b-a3b T = 2400 (main persistent, agbn
# persistent, main per-op); racecheck of agbn at deepseek-v2-lite T = 200.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
agbn=$(carried agbn)
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
RUN_TIMEOUT=80
P="--lowering persistent"
run_json agbn-pers "$agbn" qwen3-30b-a3b bf16 1,301,1100 --backward $P
run_json agbn-pers "$agbn" gpt-oss-20b bf16 200 --backward $P
run_json agbn-pers "$agbn" deepseek-v2-lite bf16 200 --backward $P
run_json agbn-pers "$agbn" qwen2-57b-a14b bf16 200 --backward $P
run_json agbn-pers "$agbn" llama4-scout bf16 64 --backward $P
run_json agbn-pers "$agbn" olmoe-1b-7b bf16 200 --backward $P
echo "bits done $(($(date +%s) - START)) s" >>"$S"
BENCH_BUDGET=200
B="--model qwen3-30b-a3b --iters 10 --backward"
bench main-pers-T2400 "$mokc" 2400 $B $P
bench agbn-pers-T2400 "$agbn" 2400 $B $P
bench main-perop-T2400 "$mokc" 2400 $B
grep -hv "^{" "$O/bench.jsonl" >>"$S"
SAN_BUDGET=300
mokc=$agbn san racecheck agbn-dsv2-200 70 --model deepseek-v2-lite --tokens 200 --backward
rm -f "$O/tmp.json"
echo "done $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
