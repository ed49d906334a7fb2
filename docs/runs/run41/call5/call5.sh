#!/usr/bin/env bash
# run 41 call 5 (not run in run 41: no machine; about 300 s). Carry: .carry/bins.tgz of `make
# device-bins` (a CLI with --fc2-large-min-rows, 6cbc2f3 or later).
#  1. FC2Large on layers with shared experts (opt-in there: --fc2-large-min-rows 512; their bf16
#     GEMMs keep FC2's tile): the default's y_sha256 on qwen2-57b-a14b (T >= 4096),
#     deepseek-v2-lite (T >= 5462) and llama4-scout (T >= 8192), below and above the switch; timed
#     against the default there, alternated twice; memcheck of qwen2-57b-a14b at T = 4100.
#  2. 384 rows per expert (below the default switch): the default against --fc2-large-min-rows 384
#     on four presets without shared experts, alternated twice, for the threshold.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
L512="--fc2-large-min-rows 512"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader >>"$S"
run_json default "$mokc" qwen2-57b-a14b mxfp8 4095,4096
run_json large "$mokc" qwen2-57b-a14b mxfp8 4095,4096 $L512
run_json default "$mokc" deepseek-v2-lite mxfp8 5461,6000
run_json large "$mokc" deepseek-v2-lite mxfp8 5461,6000 $L512
run_json default "$mokc" llama4-scout mxfp8 8192
run_json large "$mokc" llama4-scout mxfp8 8192 $L512
BENCH_BUDGET=${BENCH_BUDGET:-200}
for i in 1 2; do
	for mt in qwen2-57b-a14b:4096 deepseek-v2-lite:6144 llama4-scout:8192; do
		bench mx "$mokc" ${mt#*:} --model ${mt%%:*} --precision mxfp8 --iters 20 --kernels
		bench mx-large "$mokc" ${mt#*:} --model ${mt%%:*} --precision mxfp8 --iters 20 --kernels $L512
	done
done
left 220 && timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 "$mokc" run --model qwen2-57b-a14b --target sm_90a --precision mxfp8 --tokens 4100 --repeat 1 $L512 >"$O/memcheck.log" 2>&1
echo "memcheck qwen2-57b-a14b mxfp8 $L512 T=4100 rc=$? $(grep -E 'ERROR SUMMARY' "$O/memcheck.log")" >>"$S"
BENCH_BUDGET=300
for i in 1 2; do
	for mt in olmoe-1b-7b:3072 gpt-oss-20b:3072 qwen3-30b-a3b:6144 mixtral-8x7b:1536; do
		bench mx "$mokc" ${mt#*:} --model ${mt%%:*} --precision mxfp8 --iters 20 --kernels
		bench mx-384 "$mokc" ${mt#*:} --model ${mt%%:*} --precision mxfp8 --iters 20 --kernels --fc2-large-min-rows 384
	done
done
bench_kernels
grep -hv "^{" "$O/bench.jsonl" >>"$S"
cat "$S"
