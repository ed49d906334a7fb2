#!/usr/bin/env bash
# run 41 call 5 (about 300 s). Carry: .carry/bins.tgz of `make device-bins` and .carry/mokc-old.gz of
# `make device-old-cli REV=3d2319a` (FC2Large on layers without shared experts only).
#  1. FC2Large on layers with shared experts (their bf16 GEMMs keep FC2's tile): the old CLI's
#     y_sha256 on qwen2-57b-a14b (T >= 4096), deepseek-v2-lite (T >= 5462) and llama4-scout
#     (T >= 8192), below and above the switch; timed old against new there, alternated twice;
#     memcheck of qwen2-57b-a14b at T = 4100.
#  2. 384 rows per expert (below the switch): the default against `--fc2-tile 192x128x128` on four
#     presets without shared experts, alternated twice, for the threshold.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
gunzip -c $C/mokc-old.gz >$C/mokc-old && chmod +x $C/mokc-old
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader >>"$S"
run_json old "$C/mokc-old" qwen2-57b-a14b mxfp8 4095,4096
run_json new "$mokc" qwen2-57b-a14b mxfp8 4095,4096
run_json old "$C/mokc-old" deepseek-v2-lite mxfp8 5461,6000
run_json new "$mokc" deepseek-v2-lite mxfp8 5461,6000
run_json old "$C/mokc-old" llama4-scout mxfp8 8192
run_json new "$mokc" llama4-scout mxfp8 8192
BENCH_BUDGET=${BENCH_BUDGET:-200}
for i in 1 2; do
	bench mx-old "$C/mokc-old" 4096 --model qwen2-57b-a14b --precision mxfp8 --iters 20 --kernels
	bench mx-new "$mokc" 4096 --model qwen2-57b-a14b --precision mxfp8 --iters 20 --kernels
	bench mx-old "$C/mokc-old" 6144 --model deepseek-v2-lite --precision mxfp8 --iters 20 --kernels
	bench mx-new "$mokc" 6144 --model deepseek-v2-lite --precision mxfp8 --iters 20 --kernels
	bench mx-old "$C/mokc-old" 8192 --model llama4-scout --precision mxfp8 --iters 20 --kernels
	bench mx-new "$mokc" 8192 --model llama4-scout --precision mxfp8 --iters 20 --kernels
done
left 220 && timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 "$mokc" run --model qwen2-57b-a14b --target sm_90a --precision mxfp8 --tokens 4100 --repeat 1 >"$O/memcheck.log" 2>&1
echo "memcheck qwen2-57b-a14b mxfp8 T=4100 rc=$? $(grep -E 'ERROR SUMMARY' "$O/memcheck.log")" >>"$S"
BENCH_BUDGET=300
for i in 1 2; do
	for mt in olmoe-1b-7b:3072 gpt-oss-20b:3072 qwen3-30b-a3b:6144 mixtral-8x7b:1536; do
		bench mx "$mokc" ${mt#*:} --model ${mt%%:*} --precision mxfp8 --iters 20 --kernels
		bench mx-fc2-192 "$mokc" ${mt#*:} --model ${mt%%:*} --precision mxfp8 --iters 20 --kernels --fc2-tile 192x128x128
	done
done
bench_kernels
grep -hv "^{" "$O/bench.jsonl" >>"$S"
cat "$S"
