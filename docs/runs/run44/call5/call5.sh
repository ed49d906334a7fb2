#!/usr/bin/env bash
# run 44 call 5 (LIMIT seconds, 420 by default). Carry: .carry/bins.tgz of `make device-bins` with
# the quantizing warpgroup (sm90Layout.quantWG, quantUnroll 4: "wg"), .carry/mokc-old.gz
# (d713843: moe_quantize_h_rf) and .carry/mokc-pw.gz (the producer's warps 1-3 quantizing, one code
# warp, quantUnroll 4). docs/perf.md, "h quantized by FC1's producer warps", the prediction for
# call 5:
#  1. y_sha256 of wg and pw against old; memcheck of wg.
#  2. The register-fed GEMM cases (wg's build: the *_qprod ones with the quantizing warpgroup).
#  3. Speed, mxfp8 T = 4096: old, pw and wg alternated twice (order reversed), bf16 beside once.
START=$(date +%s)
LIMIT=${LIMIT:-420}
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
for v in old pw; do gunzip -c $C/mokc-$v.gz >$C/mokc-$v && chmod +x $C/mokc-$v; done
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
timeout 40 "$mokc" run --model qwen3-30b-a3b --target sm_90a --precision mxfp8 --tokens 4096 --repeat 1 >"$O/smoke.log" 2>&1
rc=$?
echo "smoke wg qwen3-30b-a3b mxfp8 T=4096 rc=$rc $(grep -E 'PASS|FAIL' "$O/smoke.log" | head -2 | tr '\n' ' ')" >>"$S"
if [ $rc != 0 ]; then
	pkgtest codegen rf 90 $C/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXGemmGPU/mx_rf_.*qprod'
	pack_logs
	cat "$S"
	exit 0
fi
for v in old wg pw; do
	bin=$mokc
	[ $v != wg ] && bin=$C/mokc-$v
	run_json $v "$bin" qwen3-30b-a3b mxfp8 100,300,2048,4095
	run_json $v "$bin" gpt-oss-20b mxfp8 1000,2600
	[ $v = pw ] && continue
	run_json $v "$bin" mixtral-8x7b mxfp8 640,4096
	run_json $v "$bin" olmoe-1b-7b mxfp8 3100
	run_json $v "$bin" qwen2-57b-a14b mxfp8 4096
	run_json $v "$bin" deepseek-v2-lite mxfp8 1400
done
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 "$mokc" run --model qwen3-30b-a3b --target sm_90a --precision mxfp8 --tokens 4095 --repeat 1 >"$O/memcheck.log" 2>&1
echo "memcheck wg qwen3-30b-a3b mxfp8 T=4095 rc=$? $(grep -E 'ERROR SUMMARY' "$O/memcheck.log")" >>"$S"
pkgtest codegen rf 120 $C/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXGemmGPU/mx_rf|TestSM90RoundOddGPU'
BENCH_BUDGET=$((LIMIT - 25))
for i in 1 2; do
	for m in qwen3-30b-a3b olmoe-1b-7b deepseek-v2-lite gpt-oss-20b mixtral-8x7b qwen2-57b-a14b; do
		order="old pw wg"
		[ $i = 2 ] && order="wg pw old"
		for v in $order; do
			bin=$mokc
			[ $v != wg ] && bin=$C/mokc-$v
			bench $v "$bin" 4096 --model $m --precision mxfp8 --iters 20 --kernels
		done
		[ $i = 1 ] && bench bf16 "$mokc" 4096 --model $m --iters 20 --kernels
	done
done
bench_kernels
grep -hv "^{" "$O/bench.jsonl" >>"$S"
pack_logs
grep -v "^kernels" "$S"
