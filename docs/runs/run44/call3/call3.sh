#!/usr/bin/env bash
# run 44 call 3 (LIMIT seconds, 570 by default). Carry: .carry/bins.tgz of `make device-bins` with
# the quantization of h by FC1's producer warps (GemmSpec.QuantizeCByProducer: no moe_quantize_h_rf
# in the register-fed range) and .carry/mokc-old.gz of `make device-old-cli REV=d713843` (the
# separate kernel). docs/perf.md, "h quantized by FC1's producer warps" (prediction written before
# this call):
#  1. The old CLI's y_sha256 against the new one's: gate/up halves and interleaved rows (gpt-oss),
#     ragged and whole tiles, shared experts, the decode variant's edge; memcheck.
#  2. The register-fed GEMM cases (the new *_qprod ones among them) and TestSM90RoundOddGPU.
#  3. Speed, old against new, mxfp8 T = 4096, alternated twice (order swapped), bf16 beside once.
#  4. TestCaptureForward and TestLayerForward with the time left.
START=$(date +%s)
LIMIT=${LIMIT:-570}
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
gunzip -c $C/mokc-old.gz >$C/mokc-old && chmod +x $C/mokc-old
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
# A smoke run first: a barrier protocol gone wrong would hang every later step.
timeout 40 "$mokc" run --model qwen3-30b-a3b --target sm_90a --precision mxfp8 --tokens 4096 --repeat 1 >"$O/smoke.log" 2>&1
rc=$?
echo "smoke qwen3-30b-a3b mxfp8 T=4096 rc=$rc $(grep -E 'rel|PASS|FAIL' "$O/smoke.log" | head -3 | tr '\n' ' ')" >>"$S"
if [ $rc != 0 ]; then
	pkgtest codegen rf 90 $C/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXGemmGPU/mx_rf_.*qprod'
	pack_logs
	cat "$S"
	exit 0
fi
for b in old new; do
	bin=$mokc
	[ $b = old ] && bin=$C/mokc-old
	run_json $b "$bin" qwen3-30b-a3b mxfp8 1,64,100,300,2048,4095,4096
	run_json $b "$bin" gpt-oss-20b mxfp8 64,1000,2600,4096
	run_json $b "$bin" mixtral-8x7b mxfp8 640,4096
	run_json $b "$bin" olmoe-1b-7b mxfp8 3100
	run_json $b "$bin" qwen2-57b-a14b mxfp8 4096
	run_json $b "$bin" deepseek-v2-lite mxfp8 1400
done
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 "$mokc" run --model qwen3-30b-a3b --target sm_90a --precision mxfp8 --tokens 4095 --repeat 1 >"$O/memcheck.log" 2>&1
echo "memcheck qwen3-30b-a3b mxfp8 T=4095 rc=$? $(grep -E 'ERROR SUMMARY' "$O/memcheck.log")" >>"$S"
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 "$mokc" run --model gpt-oss-20b --target sm_90a --precision mxfp8 --tokens 2600 --repeat 1 >"$O/memcheck2.log" 2>&1
echo "memcheck gpt-oss-20b mxfp8 T=2600 rc=$? $(grep -E 'ERROR SUMMARY' "$O/memcheck2.log")" >>"$S"
pkgtest codegen rf 150 $C/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXGemmGPU/mx_rf|TestSM90RoundOddGPU'
BENCH_BUDGET=$((LIMIT - 130))
for i in 1 2; do
	for m in qwen3-30b-a3b gpt-oss-20b olmoe-1b-7b deepseek-v2-lite mixtral-8x7b qwen2-57b-a14b; do
		if [ $i = 1 ]; then
			bench old "$C/mokc-old" 4096 --model $m --precision mxfp8 --iters 20 --kernels
			bench new "$mokc" 4096 --model $m --precision mxfp8 --iters 20 --kernels
			bench bf16 "$mokc" 4096 --model $m --iters 20 --kernels
		else
			bench new "$mokc" 4096 --model $m --precision mxfp8 --iters 20 --kernels
			bench old "$C/mokc-old" 4096 --model $m --precision mxfp8 --iters 20 --kernels
		fi
	done
done
bench_kernels
grep -hv "^{" "$O/bench.jsonl" >>"$S"
if left $((LIMIT - 100)); then
	pkgtest runtime rt $((LIMIT - 10 - $(date +%s) + START)) $C/runtime.test -test.v -test.count=1 -test.run 'TestCaptureForward|TestLayerForward$'
else
	echo "skipped rt: $(($(date +%s) - START)) s of $LIMIT gone" >>"$S"
fi
pack_logs
grep -v "^kernels" "$S"
