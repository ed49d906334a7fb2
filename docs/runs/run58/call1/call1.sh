#!/usr/bin/env bash
# run 58 call 1 (about 5 minutes; written in run 57, whose device time ran out before ws-epilogue ran).
# Carry: .carry/bins.tgz holding main's CLI (after run 57's merges), and two branches' CLIs, each
# `make device-old-cli REV=<branch>` renamed: .carry/mokc-wse.gz (ws-epilogue-12: wgmma-ws's
# epilogue with 12 main-grad pairs' loads in flight, not 8; 16, the branch before, spilled 84 bytes in
# the persistent kernel) and .carry/mokc-ag4.gz (actgrad-rows4: the persistent act_grad with four
# rows per group where they fit the phase's registers).
#  1. bits: each branch's persistent backward against main's (qwen3-30b-a3b T = 300, 301 (an odd T:
#     combine_grad's second token of the last virtual block past T), 4096;
#     gpt-oss-20b T = 200; deepseek-v2-lite T = 200, its shared experts' act_grad; llama4-scout
#     T = 64, FC1·x), ws-epilogue's per-op --wgrad wgmma-ws too;
#  2. racecheck of each branch's persistent backward (qwen3-30b-a3b T = 300);
#  3. the persistent backward at qwen3-30b-a3b T = 4096, main and both branches alternated, two
#     rounds; per-op --wgrad wgmma-ws, main and ws-epilogue; each branch's phases.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
wse=$(carried wse)
ag4=$(carried ag4)
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
RUN_TIMEOUT=80
P="--lowering persistent"
for v in main wse ag4; do
	bin=$mokc
	[ $v = wse ] && bin=$wse
	[ $v = ag4 ] && bin=$ag4
	run_json "$v-pers" "$bin" qwen3-30b-a3b bf16 300,301,4096 --backward $P
	run_json "$v-pers" "$bin" gpt-oss-20b bf16 200 --backward $P
	run_json "$v-pers" "$bin" deepseek-v2-lite bf16 200 --backward $P
	run_json "$v-pers" "$bin" llama4-scout bf16 64 --backward $P
done
run_json main-perop-ws "$mokc" qwen3-30b-a3b bf16 300 --backward --wgrad wgmma-ws
# combine_grad's shared gate chunk loaded once per step for every token (run 57, after its calls):
# qwen2-57b-a14b's shared expert and gate, per-op against persistent (one token per virtual block
# there, combineGradTokens), and qwen3-30b-a3b --wgrad wgmma (one token in the 512-thread kernel)
run_json main-perop "$mokc" qwen2-57b-a14b bf16 200 --backward
run_json main-pers "$mokc" qwen2-57b-a14b bf16 200 --backward $P
run_json main-perop-wgmma "$mokc" qwen3-30b-a3b bf16 1600,2000 --backward --wgrad wgmma
run_json main-pers-wgmma "$mokc" qwen3-30b-a3b bf16 1600,2000 --backward --wgrad wgmma $P
run_json wse-perop-ws "$wse" qwen3-30b-a3b bf16 300 --backward --wgrad wgmma-ws
echo "bits done $(($(date +%s) - START)) s" >>"$S"
SAN_BUDGET=300
mokc=$wse san racecheck wse-q3-300 70 --model qwen3-30b-a3b --tokens 300 --backward
mokc=$ag4 san racecheck ag4-q3-300 70 --model qwen3-30b-a3b --tokens 300 --backward
BENCH_BUDGET=520
B="--model qwen3-30b-a3b --iters 10 --backward"
for r in 1 2; do
	bench "main-pers-r$r" "$mokc" 4096 $B $P
	bench "wse-pers-r$r" "$wse" 4096 $B $P
	bench "ag4-pers-r$r" "$ag4" 4096 $B $P
done
bench main-perop-ws "$mokc" 4096 $B --wgrad wgmma-ws
bench wse-perop-ws "$wse" 4096 $B --wgrad wgmma-ws
bench wse-phases "$wse" 4096 $B $P --phases
bench ag4-phases "$ag4" 4096 $B $P --phases
grep -hv "^{" "$O/bench.jsonl" >>"$S"
rm -f "$O/tmp.json"
echo "done $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
