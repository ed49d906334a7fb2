#!/usr/bin/env bash
# run 39 call 1 (about 420 s; the CLI of the call-2 change (moe_quantize with four lanes per block), H200 preferred; say which card ran it). Carry: .carry/bins.tgz of
# `make device-bins`. mxfp8 v37, 256 token rows per tile (docs/perf.md, prediction written before it):
#  1. The GEMM cases of FC1's gate/up halves loaded as pairs (GemmSpec.BHalvesInPairs, never run yet)
#     and the interleaved 256-row cases against the float64 GEMM.
#  2. The forward with --fc1-tile 256x128x128 --fc2-tile 256x128x128 --stages 2 beside the default
#     (y_sha256, rel L2, 2/2 identical) on four mxfp8 presets without shared experts, memcheck once;
#     the bits should match the default's at T = 1024 and 4096 (both register-fed), not at 1 and 64,
#     where the default runs its promoted decode tiles, which the tile flags drop.
#  3. Both timed at T = 4096 (and qwen3-30b-a3b at 1024 and 16384), alternated twice.
#  4. TestSM90MXRegFedPerf's FC1 and FC2 with 128 token rows (regfed2) and 256 (regfed3) beside bf16.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
T256="--fc1-tile 256x128x128 --fc2-tile 256x128x128 --stages 2"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader >>"$S"
pkgtest codegen pairs 70 $C/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXGemmGPU/mx_rf_(swiglu_pairs|gptoss_t256|store_t256)'
grep -hE -- "--- (FAIL|PASS)|panic" "$O/pairs.log" | head -8 >>"$S"
for m in qwen3-30b-a3b mixtral-8x7b olmoe-1b-7b gpt-oss-20b; do
	run_json default "$mokc" $m mxfp8 1,64,1024,4096
	run_json t256 "$mokc" $m mxfp8 1,64,1024,4096 $T256
done
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 "$mokc" run --model qwen3-30b-a3b --target sm_90a --precision mxfp8 --tokens 300 --repeat 1 $T256 >"$O/memcheck.log" 2>&1
echo "memcheck t256 qwen3-30b-a3b mxfp8 T=300 rc=$? $(grep -E 'ERROR SUMMARY' "$O/memcheck.log")" >>"$S"
BENCH_BUDGET=${BENCH_BUDGET:-330}
for i in 1 2; do
	for m in qwen3-30b-a3b mixtral-8x7b olmoe-1b-7b gpt-oss-20b; do
		bench mx "$mokc" 4096 --model $m --precision mxfp8 --iters 20 --kernels
		bench mx-t256 "$mokc" 4096 --model $m --precision mxfp8 --iters 20 --kernels $T256
	done
	for T in 1024 16384; do
		bench mx "$mokc" $T --model qwen3-30b-a3b --precision mxfp8 --iters 20 --kernels
		bench mx-t256 "$mokc" $T --model qwen3-30b-a3b --precision mxfp8 --iters 20 --kernels $T256
	done
	bench bf "$mokc" 4096 --model qwen3-30b-a3b --iters 20 --kernels
done
bench_kernels
grep -hv "^{" "$O/bench.jsonl" >>"$S"
left 340 && MOKC_MXPERF='p_fc[12]_(bf16|regfed2|regfed3)$' pkgtest codegen perf $((420 - $(date +%s) + START)) $C/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXRegFedPerf'
grep -hE "µs|--- (PASS|FAIL)" "$O/perf.log" 2>/dev/null | head -12 >>"$S"
cat "$S"
