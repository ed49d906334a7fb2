#!/usr/bin/env bash
# run 39 call 1 (about 420 s, H200 preferred; say which card ran it). Carry: .carry/bins.tgz of
# `make device-bins` (items v4: the queue walk of GEMM items as the sm_90a default).
#  1. Issue #11's T = 4096 ratio with the queue in both precisions: mxfp8 against bf16 defaults on
#     eight presets, alternated twice.
#  2. The 256-token-row lever measured before it is built into the layer: TestSM90MXRegFedPerf's FC2
#     with 128 token rows (regfed2) and 256 (regfed3), beside bf16 (docs/mxfp8.md, "Next: 256 token
#     rows per tile").
#  3. TestLayerBackward in full under the queue default (run 38 call 4 cut it off).
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader >>"$S"
BENCH_BUDGET=${BENCH_BUDGET:-200}
for i in 1 2; do
	for m in qwen3-30b-a3b mixtral-8x7b deepseek-v2-lite olmoe-1b-7b gpt-oss-20b qwen2-57b-a14b deepseek-v3 gpt-oss-120b; do
		bench bf "$mokc" 4096 --model $m --iters 20 --kernels
		bench mx "$mokc" 4096 --model $m --precision mxfp8 --iters 20 --kernels
	done
done
bench_kernels
grep -hv "^{" "$O/bench.jsonl" >>"$S"
MOKC_MXPERF='p_fc2_(bf16|regfed2|regfed3)$' pkgtest codegen perf 80 $C/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXRegFedPerf'
grep -hE "µs|us |TFLOP|--- (PASS|FAIL)" "$O/perf.log" | head -12 >>"$S"
left 300 && pkgtest runtime bwd $((420 - $(date +%s) + START)) $C/runtime.test -test.v -test.count=1 -test.run 'TestLayerBackward$'
grep -hE -- "--- FAIL|^(ok|FAIL|PASS)" "$O/bwd.log" 2>/dev/null | head -8 >>"$S"
cat "$S"
