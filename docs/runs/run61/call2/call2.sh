#!/usr/bin/env bash
# run 61 call 2 (about 4 minutes; written in run 60): branch wgrad-bias-rows (on main):
# the bias gradients (emitWeightGradBias: gpt-oss's fc1_wgrad_bias and fc2_wgrad_bias) load 32 rows
# of A before they add them in row order, two columns a thread, where each thread waited on one
# load a row (run 60: 1237 + 667 µs of gpt-oss-20b's persistent backward at T = 4096, as virtual
# blocks one at a time per SM). Carry: .carry/bins.tgz (main's CLI), .carry/mokc-bias.gz
# (`make device-old-cli REV=wgrad-bias-rows`, renamed).
#  1. bits against main's in this call: gpt-oss-20b T = 1, 200, 4096 and gpt-oss-120b T = 200, per-op
#     and persistent (the CLI's checks take in the bias gradients of two experts);
#  2. gpt-oss-20b T = 4096 forward + backward, main and bias alternated twice (persistent), bias's
#     phases, per-op's kernels of both; gpt-oss-120b T = 4096 persistent, both;
#  3. memcheck of bias (persistent, gpt-oss-20b T = 200).
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
bias=$(carried bias)
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
RUN_TIMEOUT=90
P="--lowering persistent"
for bin in main bias; do
	b=$mokc
	[ $bin = bias ] && b=$bias
	run_json "$bin-perop" "$b" gpt-oss-20b bf16 1,200,4096 --backward
	run_json "$bin-pers" "$b" gpt-oss-20b bf16 1,200,4096 --backward $P
	run_json "$bin-perop" "$b" gpt-oss-120b bf16 200 --backward
	run_json "$bin-pers" "$b" gpt-oss-120b bf16 200 --backward $P
done
echo "bits done $(($(date +%s) - START)) s" >>"$S"
BENCH_BUDGET=400
B="--model gpt-oss-20b --iters 10 --backward"
for r in 1 2; do
	bench "main-pers-r$r" "$mokc" 4096 $B $P
	bench "bias-pers-r$r" "$bias" 4096 $B $P
done
bench bias-phases "$bias" 4096 $B $P --phases
bench main-perop-kernels "$mokc" 4096 $B --kernels
bench bias-perop-kernels "$bias" 4096 $B --kernels
bench main-pers-120b "$mokc" 4096 --model gpt-oss-120b --iters 10 --backward $P
bench bias-pers-120b "$bias" 4096 --model gpt-oss-120b --iters 10 --backward $P
grep -hv "^{" "$O/bench.jsonl" >>"$S"
bench_kernels
SAN_BUDGET=540
mokc=$bias san memcheck bias-oss-200 80 --model gpt-oss-20b --tokens 200 --backward
rm -f "$O/tmp.json"
echo "done $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
