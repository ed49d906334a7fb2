#!/usr/bin/env bash
# run 38 call 1 (about 420 s, H200), by need after run 37 (two blocks per SM timed on an H100:
# docs/perf.md, two blocks per SM v2, outcome). Carry: .carry/bins.tgz of `make device-bins`.
#  1. ncu of the default mxfp8 forward's moe_fc1 and moe_fc2 (qwen3-30b-a3b T = 4096, the third
#     forward's) with warp-stall sampling per SASS instruction (scripts/device-profile.sh's MX_*
#     part): where the register-fed K loop's time goes, the GEMMs at 45-46% of their bounds on
#     the H100 against bf16's 64-73%.
#  2. The register-fed GEMM cases of 128 token rows two per SM against the float64 GEMM (run 37's
#     harness stopped before them), then TestSharesSMGPU (the layers' bits two per SM against the
#     same tiles one per SM).
#  3. On the H200, alternated: mxfp8 default against v2 (128x128x128, quantize_h_rf as built now),
#     bf16 default against v2 with 256-row B tiles.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader >>"$S"
MODELS= NCU_MODELS= MX_MODEL=qwen3-30b-a3b MX_TOKENS=4096 MX_FLAGS= MX_KERNELS='^moe_fc[12]$' MX_SKIP=4 MX_COUNT=2 MX_TIMEOUT=150 \
	bash scripts/device-profile.sh >>"$O/profile.log" 2>&1
grep -E "rc=|Duration|Compute \(SM\) Throughput|Memory Throughput|Issue Slots Busy|Warp Cycles Per Issued" "$OUT/ncu-mxfp8.log" | head -30 >>"$S"
pkgtest codegen mxt128 80 $C/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXGemmGPU/.*(t128|2smwg)'
grep -E -- "--- FAIL|panic" "$O/mxt128.log" | head -10 >>"$S"
MX2="--fc1-tile 128x128x128 --fc2-tile 128x128x128 --stages 2 --mma-warps 4"
BF3="--fc1-tile 64x256x64 --fc2-tile 64x256x64 --stages 2 --mma-warps 4"
BENCH_BUDGET=${BENCH_BUDGET:-300}
for i in 1 2; do
	bench mx-default "$mokc" 4096 --model qwen3-30b-a3b --precision mxfp8 --iters 20 --kernels
	bench mx-v2 "$mokc" 4096 --model qwen3-30b-a3b --precision mxfp8 --iters 20 --kernels $MX2 --blocks-per-sm 2
	bench bf-default "$mokc" 4096 --model qwen3-30b-a3b --iters 20 --kernels
	bench bf-v2split "$mokc" 4096 --model qwen3-30b-a3b --iters 20 --kernels $BF3 --blocks-per-sm 2
done
bench_kernels
grep -hv "^{" "$O/bench.jsonl" >>"$S"
left 330 && pkgtest runtime shares $((410 - $(date +%s) + START)) $C/runtime.test -test.v -test.count=1 -test.run 'TestSharesSMGPU'
grep -hE "^\s+--- (FAIL|PASS)|differ" "$O/shares.log" | head -12 >>"$S"
cat "$S"
