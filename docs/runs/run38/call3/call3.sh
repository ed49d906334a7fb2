#!/usr/bin/env bash
# run 38 call 3 (about 400 s, H200). Carry: .carry/bins.tgz of `make device-bins` (the register-fed K
# loop with its shared loads two groups ahead, mxfp8 regfed v36 in docs/perf.md) and .carry/old.tgz
# (mokc-old: the CLI of 66d34a7, loads one group ahead).
#  1. The same bits: y_sha256 of old and new on three mxfp8 presets at T = 1, 64, 4096, and the
#     register-fed GEMM cases of each K-loop shape against the float64 GEMM.
#  2. Alternated at T = 4096: old default, new default, new --items queue (qwen3-30b-a3b mxfp8),
#     then --items queue against fixed on the other mxfp8 presets and two bf16 ones, and at T = 64.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
tar -C "$C" -xzf "$C/old.tgz"
old=$C/mokc-old
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader >>"$S"
for m in qwen3-30b-a3b olmoe-1b-7b gpt-oss-20b; do
	run_json old "$old" $m mxfp8 1,64,4096
	run_json new "$mokc" $m mxfp8 1,64,4096
done
pkgtest codegen mxrf 100 $C/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXGemmGPU/mx_rf_(store_t256|gptoss_t256_odd|swiglu64_odd|store_2sm|store64_f32|gptoss256_odd|swiglu_quant_2sm)$'
grep -E -- "--- FAIL|panic" "$O/mxrf.log" | head -10 >>"$S"
BENCH_BUDGET=${BENCH_BUDGET:-390}
for i in 1 2; do
	bench mx-old "$old" 4096 --model qwen3-30b-a3b --precision mxfp8 --iters 20 --kernels
	bench mx-new "$mokc" 4096 --model qwen3-30b-a3b --precision mxfp8 --iters 20 --kernels
	bench mx-newq "$mokc" 4096 --model qwen3-30b-a3b --precision mxfp8 --iters 20 --kernels --items queue
	bench bf-new "$mokc" 4096 --model qwen3-30b-a3b --iters 20 --kernels
done
for i in 1 2; do
	for m in gpt-oss-20b deepseek-v2-lite mixtral-8x7b olmoe-1b-7b; do
		bench mx-old "$old" 4096 --model $m --precision mxfp8 --iters 20 --kernels
		bench mx-new "$mokc" 4096 --model $m --precision mxfp8 --iters 20 --kernels
		bench mx-newq "$mokc" 4096 --model $m --precision mxfp8 --iters 20 --kernels --items queue
	done
	for m in qwen3-30b-a3b olmoe-1b-7b deepseek-v2-lite; do
		bench mx-new "$mokc" 64 --model $m --precision mxfp8 --iters 20
		bench mx-newq "$mokc" 64 --model $m --precision mxfp8 --iters 20 --items queue
	done
	for m in gpt-oss-20b qwen3-30b-a3b; do
		bench bf-new "$mokc" 4096 --model $m --iters 20 --kernels
		bench bf-newq "$mokc" 4096 --model $m --iters 20 --kernels --items queue
	done
done
bench_kernels
grep -hv "^{" "$O/bench.jsonl" >>"$S"
cat "$S"
