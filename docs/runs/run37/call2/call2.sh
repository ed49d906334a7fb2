#!/usr/bin/env bash
# run 37 call 2 (two blocks per SM, v1 and v2), ordered by need, for a call of about 480 s. Carry:
# .carry/bins.tgz of `make device-bins` (codegen.test, driver.test, runtime.test, mokc: 19 MB).
# v1: --producer-warps 1 (one producer warp, 168 registers, no setmaxnreg); v2: the default
# --producer-warps 4 (a producer warpgroup, .maxnreg 128, consumers 200-216 after setmaxnreg).
#  1. GPU correctness: the driver's occupancy query, the GEMM cases *_2sm (v1) and *_2smwg (v2),
#     each checking that two blocks fit an SM, round-to-odd bits, and the layers (TestSharesSMGPU:
#     the bits of the same tiles one per SM, graph replays, both forms).
#  2. Standalone speed: TestSM90MXRegFedPerf (qwen3-30b-a3b's routed GEMMs at T = 4096: bf16, the
#     two-warpgroup regfed, v1 and v2 two per SM, the 128-token-row regfed one per SM).
#  3. Layer speed alternated (qwen3-30b-a3b T = 4096): default, v1, v2, and v2's tiles one per SM;
#     bf16 v2 also with B tiles of 256 rows (two wgmma of 128 a step: WGMMAMainloop.OffBHi).
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader >>"$S"
pkgtest driver driver 40 $C/driver.test -test.v -test.count=1 -test.run 'TestDynamicShared100K'
pkgtest codegen gemm 60 $C/codegen.test -test.v -test.count=1 -test.run 'TestSM90GemmGPU|TestSM90NMajorGPU'
pkgtest codegen mx 90 $C/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXGemmGPU|TestSM90RoundOddGPU'
grep -hE "^\s+--- FAIL|fit an SM|want" "$O/gemm.log" "$O/mx.log" | head -20 >>"$S"
left 300 && MOKC_MXPERF='_bf16$|regfed2$|_2sm|_t128' pkgtest codegen perf 120 $C/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXRegFedPerf'
grep -E "µs, .* TFLOP/s|FAIL" "$O/perf.log" >>"$S"
pkgtest runtime shares 130 $C/runtime.test -test.v -test.count=1 -test.run 'TestSharesSMGPU'
grep -hE "^\s+--- FAIL|differ|want" "$O/shares.log" | head -10 >>"$S"
BF1="--fc1-tile 64x256x64 --fc2-tile 64x192x64 --stages 2 --mma-warps 4"
BF2="--fc1-tile 64x192x64 --fc2-tile 64x192x64 --stages 3 --mma-warps 4"
BF3="--fc1-tile 64x256x64 --fc2-tile 64x256x64 --stages 2 --mma-warps 4"
MX1="--fc1-tile 64x128x128 --fc2-tile 64x128x128 --stages 3 --mma-warps 4"
MX2="--fc1-tile 128x128x128 --fc2-tile 128x128x128 --stages 2 --mma-warps 4"
BENCH_BUDGET=${BENCH_BUDGET:-470}
m=qwen3-30b-a3b
for i in 1 2; do
	bench default "$mokc" 4096 --model $m --iters 20 --kernels
	bench bf-v1 "$mokc" 4096 --model $m --iters 20 --kernels $BF1 --blocks-per-sm 2 --producer-warps 1
	bench bf-v2 "$mokc" 4096 --model $m --iters 20 --kernels $BF2 --blocks-per-sm 2
	bench bf-v2tiles "$mokc" 4096 --model $m --iters 20 --kernels $BF2
	bench bf-v2split "$mokc" 4096 --model $m --iters 20 --kernels $BF3 --blocks-per-sm 2
	bench mx-default "$mokc" 4096 --model $m --precision mxfp8 --iters 20 --kernels
	bench mx-v1 "$mokc" 4096 --model $m --precision mxfp8 --iters 20 --kernels $MX1 --blocks-per-sm 2 --producer-warps 1
	bench mx-v2 "$mokc" 4096 --model $m --precision mxfp8 --iters 20 --kernels $MX2 --blocks-per-sm 2
	bench mx-v2tiles "$mokc" 4096 --model $m --precision mxfp8 --iters 20 --kernels $MX2
done
grep -hv "^{" "$O/bench.jsonl" >>"$S"
cat "$S"
