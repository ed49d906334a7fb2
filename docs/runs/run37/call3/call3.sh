#!/usr/bin/env bash
# run 37 call 3: call 2's checks in the order of need for a call of about 380 s (the session's
# device time having gone to failed starts). Carry: .carry/bins.tgz of `make device-bins`.
#  1. The GEMM cases two per SM only (*_2sm: one producer warp; *_2smwg: a producer warpgroup).
#  2. Standalone speed (TestSM90MXRegFedPerf: qwen3-30b-a3b's routed GEMMs at T = 4096).
#  3. Layer speed alternated (qwen3-30b-a3b T = 4096): default, v1, v2 (and mxfp8 v2's tiles one
#     per SM; bf16 v2 with 256-row B tiles too), two rounds while time is left.
#  4. TestSharesSMGPU (layer bits two per SM against the same tiles one per SM) in what is left.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader >>"$S"
pkgtest codegen gemm2sm 70 $C/codegen.test -test.v -test.count=1 -test.run 'TestSM90GemmGPU/.*_2sm|TestSM90MXGemmGPU/.*_2sm|TestSM90NMajorGPU/.*_2sm'
grep -hE "^\s+--- FAIL|fit an SM|want" "$O/gemm2sm.log" | head -10 >>"$S"
MOKC_MXPERF=${MXPERF:-'_bf16$|regfed2$|_2sm|_t128'} pkgtest codegen perf 100 $C/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXRegFedPerf'
grep -E "µs, .* TFLOP/s|FAIL" "$O/perf.log" >>"$S"
BF1="--fc1-tile 64x256x64 --fc2-tile 64x192x64 --stages 2 --mma-warps 4"
BF2="--fc1-tile 64x192x64 --fc2-tile 64x192x64 --stages 3 --mma-warps 4"
BF3="--fc1-tile 64x256x64 --fc2-tile 64x256x64 --stages 2 --mma-warps 4"
MX1="--fc1-tile 64x128x128 --fc2-tile 64x128x128 --stages 3 --mma-warps 4"
MX2="--fc1-tile 128x128x128 --fc2-tile 128x128x128 --stages 2 --mma-warps 4"
BENCH_BUDGET=${BENCH_BUDGET:-300}
m=qwen3-30b-a3b
for i in 1 2; do
	bench mx-default "$mokc" 4096 --model $m --precision mxfp8 --iters 20 --kernels
	bench mx-v2 "$mokc" 4096 --model $m --precision mxfp8 --iters 20 --kernels $MX2 --blocks-per-sm 2
	bench mx-v1 "$mokc" 4096 --model $m --precision mxfp8 --iters 20 --kernels $MX1 --blocks-per-sm 2 --producer-warps 1
	bench mx-v2tiles "$mokc" 4096 --model $m --precision mxfp8 --iters 20 --kernels $MX2
	bench default "$mokc" 4096 --model $m --iters 20 --kernels
	bench bf-v2 "$mokc" 4096 --model $m --iters 20 --kernels $BF2 --blocks-per-sm 2
	bench bf-v2split "$mokc" 4096 --model $m --iters 20 --kernels $BF3 --blocks-per-sm 2
	bench bf-v1 "$mokc" 4096 --model $m --iters 20 --kernels $BF1 --blocks-per-sm 2 --producer-warps 1
done
bench_kernels
grep -hv "^{" "$O/bench.jsonl" >>"$S"
left 340 && pkgtest runtime shares $((370 - $(date +%s) + START)) $C/runtime.test -test.v -test.count=1 -test.run 'TestSharesSMGPU'
grep -hE "^\s+--- (FAIL|PASS)|differ" "$O/shares.log" | head -12 >>"$S"
cat "$S"
