#!/usr/bin/env bash
# run 40 call 1 (at most about 450 s; two planned calls in one, as machine starts were scarce). Carry:
# .carry/bins.tgz of `make device-bins` and .carry/mokc-old.gz of `make device-old-cli REV=29f85a4`
# (the CLI with one thread per block in moe_quantize*).
#  1. The quantize kernels of 8588648 (four lanes per block, addresses straight from the index): the
#     same y_sha256 as 29f85a4's CLI (mxfp8, T = 0, 1, 64, 4096); TestQuantizeGPU, TestGatherMXGPU;
#     memcheck of the mxfp8 forward at T = 64.
#  2. Ragged items (docs/perf.md): the standalone GEMMs with the layer's rows per expert
#     (MOKC_MXPERF_ROUTED) beside uniform rows: bf16, 128 token rows (regfed2), 256 (regfed3) and
#     mxfp8 v38's 192 (regfed4).
#  3. mxfp8 v38 (192 token rows, three stages): its GEMM cases; the forward with the v38 flags beside
#     the default (y_sha256 equal at T = 1024 and 4096), memcheck at T = 300; both timed at T = 4096 on
#     three presets, alternated twice.
#  4. TestLayerBackward's sm_90a cases with the time left.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
T192="--fc1-tile 192x128x128 --fc2-tile 192x128x128 --stages 3"
gunzip -c $C/mokc-old.gz >$C/mokc-old && chmod +x $C/mokc-old
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader >>"$S"
# In order of value, so that a call cut short still returns the first parts.
run_json old "$C/mokc-old" qwen3-30b-a3b mxfp8 0,1,64,4096
run_json new "$mokc" qwen3-30b-a3b mxfp8 0,1,64,4096
pkgtest codegen quant 90 $C/codegen.test -test.v -test.count=1 -test.run 'TestQuantizeGPU|TestGatherMXGPU'
pkgtest codegen t192 90 $C/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXGemmGPU/mx_rf_.*_t192'
grep -hE -- "--- (FAIL|PASS)|panic" "$O/t192.log" | head -6 >>"$S"
export MOKC_MXPERF='p_fc[12]_(bf16|regfed2|regfed3|regfed4)$'
for r in uniform routed; do
	[ $r = routed ] && export MOKC_MXPERF_ROUTED=1
	pkgtest codegen perf-$r 80 $C/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXRegFedPerf'
	grep -hE "µs|rows per expert" "$O/perf-$r.log" | sed "s/^ */$r: /" >>"$S"
done
unset MOKC_MXPERF MOKC_MXPERF_ROUTED
for m in qwen3-30b-a3b olmoe-1b-7b; do
	run_json default "$mokc" $m mxfp8 1,1024,4096
	run_json t192 "$mokc" $m mxfp8 1,1024,4096 $T192
done
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 "$mokc" run --model qwen3-30b-a3b --target sm_90a --precision mxfp8 --tokens 300 --repeat 1 $T192 >"$O/memcheck192.log" 2>&1
echo "memcheck t192 qwen3-30b-a3b mxfp8 T=300 rc=$? $(grep -E 'ERROR SUMMARY' "$O/memcheck192.log")" >>"$S"
BENCH_BUDGET=${BENCH_BUDGET:-300}
for i in 1 2; do
	for m in qwen3-30b-a3b olmoe-1b-7b mixtral-8x7b; do
		bench mx "$mokc" 4096 --model $m --precision mxfp8 --iters 20 --kernels
		bench mx-t192 "$mokc" 4096 --model $m --precision mxfp8 --iters 20 --kernels $T192
	done
done
bench_kernels
grep -hv "^{" "$O/bench.jsonl" >>"$S"
for m in deepseek-v3 gpt-oss-20b deepseek-v2-lite; do
	left 380 || break
	run_json old "$C/mokc-old" $m mxfp8 0,1,64,4096
	run_json new "$mokc" $m mxfp8 0,1,64,4096
done
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 "$mokc" run --model qwen3-30b-a3b --target sm_90a --precision mxfp8 --tokens 64 --repeat 1 >"$O/memcheck.log" 2>&1
echo "memcheck qwen3-30b-a3b mxfp8 T=64 rc=$? $(grep -E 'ERROR SUMMARY' "$O/memcheck.log")" >>"$S"
left 330 && pkgtest runtime bwd $((450 - $(date +%s) + START)) $C/runtime.test -test.v -test.count=1 -test.run 'TestLayerBackward$/.*/sm_90a'
grep -hE -- "--- FAIL|^(ok|FAIL|PASS)" "$O/bwd.log" 2>/dev/null | head -8 >>"$S"
cat "$S"
