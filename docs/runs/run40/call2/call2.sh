#!/usr/bin/env bash
# run 40 call 2 (about 400 s; after call 1, whose routed perf test says whether the layer's ragged
# token tiles are what the register-fed GEMMs lose to). Carry: .carry/bins.tgz of `make device-bins`.
# mxfp8 v38, 192 token rows per tile with three stages (docs/perf.md, prediction written before it):
#  1. The GEMM cases of 192 token rows (mx_rf_*_t192) against the float64 GEMM.
#  2. The standalone GEMMs, uniform and routed rows: 128 token rows (regfed2), 256 (regfed3), 192
#     (regfed4), bf16.
#  3. The forward with --fc1-tile 192x128x128 --fc2-tile 192x128x128 --stages 3 beside the default
#     (y_sha256: equal at T = 1024 and 4096, both register-fed), memcheck at T = 300.
#  4. Both timed at T = 4096 on four presets and at T = 16384 on qwen3-30b-a3b, alternated twice.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
T192="--fc1-tile 192x128x128 --fc2-tile 192x128x128 --stages 3"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader >>"$S"
pkgtest codegen t192 90 $C/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXGemmGPU/mx_rf_.*_t192'
grep -hE -- "--- (FAIL|PASS)|panic" "$O/t192.log" | head -6 >>"$S"
export MOKC_MXPERF='p_fc[12]_(bf16|regfed2|regfed3|regfed4)$'
for r in uniform routed; do
	[ $r = routed ] && export MOKC_MXPERF_ROUTED=1
	pkgtest codegen perf-$r 80 $C/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXRegFedPerf'
	grep -hE "µs|rows per expert" "$O/perf-$r.log" | sed "s/^ */$r: /" >>"$S"
done
unset MOKC_MXPERF MOKC_MXPERF_ROUTED
for m in qwen3-30b-a3b mixtral-8x7b olmoe-1b-7b gpt-oss-20b; do
	run_json default "$mokc" $m mxfp8 1,1024,4096
	run_json t192 "$mokc" $m mxfp8 1,1024,4096 $T192
done
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 "$mokc" run --model qwen3-30b-a3b --target sm_90a --precision mxfp8 --tokens 300 --repeat 1 $T192 >"$O/memcheck.log" 2>&1
echo "memcheck t192 qwen3-30b-a3b mxfp8 T=300 rc=$? $(grep -E 'ERROR SUMMARY' "$O/memcheck.log")" >>"$S"
BENCH_BUDGET=${BENCH_BUDGET:-380}
for i in 1 2; do
	for m in qwen3-30b-a3b mixtral-8x7b olmoe-1b-7b gpt-oss-20b; do
		bench mx "$mokc" 4096 --model $m --precision mxfp8 --iters 20 --kernels
		bench mx-t192 "$mokc" 4096 --model $m --precision mxfp8 --iters 20 --kernels $T192
	done
	bench mx "$mokc" 16384 --model qwen3-30b-a3b --precision mxfp8 --iters 20 --kernels
	bench mx-t192 "$mokc" 16384 --model qwen3-30b-a3b --precision mxfp8 --iters 20 --kernels $T192
done
bench_kernels
grep -hv "^{" "$O/bench.jsonl" >>"$S"
cat "$S"
