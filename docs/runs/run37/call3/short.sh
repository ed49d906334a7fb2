# run 37 call 3, short form for a call of about 260 s: the GEMM cases two per SM (v1 *_2sm, v2
# *_2smwg) against the float64 GEMM, then qwen3-30b-a3b T = 4096 alternated twice with kernel
# times: mxfp8 default against v2 (128x128x128, two per SM), bf16 default against v2 (64x192x64,
# and 64x256x64 as two wgmma of 128 a step).
START=$(date +%s); . scripts/device-env.sh; . scripts/device-lib.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader >>"$S"
pkgtest codegen gemm2sm 60 "$PWD/.carry/codegen.test" -test.v -test.count=1 -test.run 'TestSM90GemmGPU/.*_2sm|TestSM90MXGemmGPU/.*_2sm|TestSM90NMajorGPU/.*_2sm'
grep -E -- "--- (PASS|FAIL)|fit an SM" "$O/gemm2sm.log" | head -30 >>"$S"
MX2="--fc1-tile 128x128x128 --fc2-tile 128x128x128 --stages 2 --mma-warps 4"
BF2="--fc1-tile 64x192x64 --fc2-tile 64x192x64 --stages 3 --mma-warps 4"
BF3="--fc1-tile 64x256x64 --fc2-tile 64x256x64 --stages 2 --mma-warps 4"
BENCH_BUDGET=${BENCH_BUDGET:-200}
for i in 1 2; do
bench mx-default "$mokc" 4096 --model qwen3-30b-a3b --precision mxfp8 --iters 20 --kernels
bench mx-v2 "$mokc" 4096 --model qwen3-30b-a3b --precision mxfp8 --iters 20 --kernels $MX2 --blocks-per-sm 2
bench bf-default "$mokc" 4096 --model qwen3-30b-a3b --iters 20 --kernels
bench bf-v2 "$mokc" 4096 --model qwen3-30b-a3b --iters 20 --kernels $BF2 --blocks-per-sm 2
bench bf-v2split "$mokc" 4096 --model qwen3-30b-a3b --iters 20 --kernels $BF3 --blocks-per-sm 2
done
bench_kernels
grep -hv "^{" "$O/bench.jsonl" >>"$S"; cat "$S"
