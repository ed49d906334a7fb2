#!/usr/bin/env bash
# run 39 call 2 (about 520 s). Carry: .carry/bins.tgz of `make device-bins` and .carry/mokc-old.gz
# (29f85a4's CLI: one thread per 32-element block in moe_quantize*).
#  1. The quantize kernels with four lanes per block and the register-fed stores transposed by
#     shfl (storeRegisterFed): the same y_sha256 as 29f85a4's CLI on four mxfp8 presets at
#     T = 1, 64, 4096; TestQuantizeGPU and TestGatherMXGPU (every byte against layouts.Quantize).
#  2. Issue #11's T = 4096 ratio with the queue walk in both precisions: mxfp8 against bf16 defaults on
#     eight presets, alternated twice, and the old CLI's mxfp8 qwen3-30b-a3b beside them.
#  3. TestLayerBackward in full under the queue default (run 38 call 4 cut it off).
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
gunzip -c $C/mokc-old.gz >$C/mokc-old && chmod +x $C/mokc-old
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader >>"$S"
for m in qwen3-30b-a3b olmoe-1b-7b gpt-oss-20b deepseek-v3; do
	run_json old "$C/mokc-old" $m mxfp8 1,64,4096
	run_json new "$mokc" $m mxfp8 1,64,4096
done
pkgtest codegen quant 90 $C/codegen.test -test.v -test.count=1 -test.run 'TestQuantizeGPU|TestGatherMXGPU'
BENCH_BUDGET=${BENCH_BUDGET:-330}
for i in 1 2; do
	bench mx-old "$C/mokc-old" 4096 --model qwen3-30b-a3b --precision mxfp8 --iters 20 --kernels
	for m in qwen3-30b-a3b mixtral-8x7b deepseek-v2-lite olmoe-1b-7b gpt-oss-20b qwen2-57b-a14b deepseek-v3 gpt-oss-120b; do
		bench bf "$mokc" 4096 --model $m --iters 20 --kernels
		bench mx "$mokc" 4096 --model $m --precision mxfp8 --iters 20 --kernels
	done
done
bench_kernels
grep -hv "^{" "$O/bench.jsonl" >>"$S"
left 400 && pkgtest runtime bwd $((540 - $(date +%s) + START)) $C/runtime.test -test.v -test.count=1 -test.run 'TestLayerBackward$'
grep -hE -- "--- FAIL|^(ok|FAIL|PASS)" "$O/bwd.log" 2>/dev/null | head -8 >>"$S"
cat "$S"
