#!/usr/bin/env bash
# run 39 call 2 (about 400 s). Carry: .carry/bins.tgz of `make device-bins`.
#  1. Issue #11's T = 4096 ratio with the queue walk in both precisions: mxfp8 against bf16 defaults on
#     eight presets, alternated twice.
#  2. TestLayerBackward in full under the queue default (run 38 call 4 cut it off).
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader >>"$S"
BENCH_BUDGET=${BENCH_BUDGET:-220}
for i in 1 2; do
	for m in qwen3-30b-a3b mixtral-8x7b deepseek-v2-lite olmoe-1b-7b gpt-oss-20b qwen2-57b-a14b deepseek-v3 gpt-oss-120b; do
		bench bf "$mokc" 4096 --model $m --iters 20 --kernels
		bench mx "$mokc" 4096 --model $m --precision mxfp8 --iters 20 --kernels
	done
done
bench_kernels
grep -hv "^{" "$O/bench.jsonl" >>"$S"
left 260 && pkgtest runtime bwd $((400 - $(date +%s) + START)) $C/runtime.test -test.v -test.count=1 -test.run 'TestLayerBackward$'
grep -hE -- "--- FAIL|^(ok|FAIL|PASS)" "$O/bwd.log" 2>/dev/null | head -8 >>"$S"
cat "$S"
