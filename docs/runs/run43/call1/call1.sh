#!/usr/bin/env bash
# run 43 call 1 (LIMIT seconds, 560 by default: give the call at least that; what run 42's call 5
# did not reach). Carry: .carry/bins.tgz of `make device-bins` (FC2Large from 320 rows per expert,
# ffce64e or later). docs/perf.md, "FC2Large from 320 rows, and issue #11's table" (prediction
# written before run 42, call 5):
#  1. Issue #11's T = 4096 table, bf16 and mxfp8 on eight presets, two rounds (until BENCH_BUDGET
#     seconds have passed, 200 by default).
#  2. 128 rows per expert (deepseek-v3, gpt-oss-120b T = 4096): --fc2-large-min-rows 100 against
#     the default, two rounds (until TRIAL_BUDGET, 260 by default).
#  3. TestCaptureForward and TestLayerForward until LIMIT (TestChainGPU passed in run 42), when at
#     least 230 s are left for them.
START=$(date +%s)
LIMIT=${LIMIT:-560}
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
BENCH_BUDGET=${BENCH_BUDGET:-200}
for i in 1 2; do
	for m in qwen3-30b-a3b mixtral-8x7b deepseek-v2-lite olmoe-1b-7b gpt-oss-20b qwen2-57b-a14b deepseek-v3 gpt-oss-120b; do
		bench bf16 "$mokc" 4096 --model $m --iters 20 --kernels
		bench mx "$mokc" 4096 --model $m --precision mxfp8 --iters 20 --kernels
	done
done
BENCH_BUDGET=${TRIAL_BUDGET:-260}
for i in 1 2; do
	for m in gpt-oss-120b deepseek-v3; do
		bench mx-100 "$mokc" 4096 --model $m --precision mxfp8 --iters 20 --kernels --fc2-large-min-rows 100
		bench mx "$mokc" 4096 --model $m --precision mxfp8 --iters 20 --kernels
	done
done
bench_kernels
grep -hv "^{" "$O/bench.jsonl" >>"$S"
if left $((LIMIT - 230)); then
	pkgtest runtime rt $((LIMIT - 10 - $(date +%s) + START)) $C/runtime.test -test.v -test.count=1 -test.run 'TestCaptureForward|TestLayerForward$'
else
	echo "skipped rt: $(($(date +%s) - START)) s of $LIMIT gone" >>"$S"
fi
pack_logs
cat "$S"
