#!/usr/bin/env bash
# run 58 call 2 (about 5 minutes): both of call 1's branches together (branch wse-ag4, ws-epilogue-12
# merged with actgrad-rows4), carried as .carry/mokc-both.gz beside main's CLI in .carry/bins.tgz.
#  1. bits: the persistent backward against call 1's main (qwen3-30b-a3b T = 300, 1100, 4096;
#     gpt-oss-20b T = 200; deepseek-v2-lite T = 200; llama4-scout T = 64), main's at T = 1100;
#  2. synccheck of the persistent backward at qwen3-30b-a3b T = 300;
#  3. forward + backward at qwen3-30b-a3b T = 1100, 2400 and 4096: main persistent, both persistent,
#     main per-op (its default --wgrad wgmma), alternated; both's phases at T = 4096.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
both=$(carried both)
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
RUN_TIMEOUT=80
P="--lowering persistent"
run_json both-pers "$both" qwen3-30b-a3b bf16 300,1100,4096 --backward $P
run_json both-pers "$both" gpt-oss-20b bf16 200 --backward $P
run_json both-pers "$both" deepseek-v2-lite bf16 200 --backward $P
run_json both-pers "$both" llama4-scout bf16 64 --backward $P
run_json main-pers "$mokc" qwen3-30b-a3b bf16 1100 --backward $P
echo "bits done $(($(date +%s) - START)) s" >>"$S"
SAN_BUDGET=200
mokc=$both san synccheck both-q3-300 70 --model qwen3-30b-a3b --tokens 300 --backward
BENCH_BUDGET=520
B="--model qwen3-30b-a3b --iters 10 --backward"
for T in 4096 1100 2400; do
	bench "main-pers-T$T" "$mokc" $T $B $P
	bench "both-pers-T$T" "$both" $T $B $P
	bench "main-perop-T$T" "$mokc" $T $B
done
bench both-phases "$both" 4096 $B $P --phases
grep -hv "^{" "$O/bench.jsonl" >>"$S"
rm -f "$O/tmp.json"
echo "done $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
