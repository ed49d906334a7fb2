#!/usr/bin/env bash
# run 39 call 3 (about 200 s). Carry: .carry/mokc-{old,a,b}.gz: 29f85a4's CLI (one thread per block in
# moe_quantize*), and two with four lanes per block in moe_quantize* and moe_gather_rf's stores as
# in 29f85a4 (four 4-byte pairs per lane): (a) the quantize's register-fed stores the same, (b) those
# stores transposed among the four lanes (storeRegisterFed: one 16-byte store per lane).
# The same y_sha256 for all three, then the three alternated (quantize_h_rf's and gather_rf's times).
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
for v in old a b; do gunzip -c $C/mokc-$v.gz >$C/mokc-$v && chmod +x $C/mokc-$v; done
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader >>"$S"
for m in qwen3-30b-a3b mixtral-8x7b; do
	for v in old a b; do run_json $v "$C/mokc-$v" $m mxfp8 64,4096; done
done
BENCH_BUDGET=${BENCH_BUDGET:-200}
for i in 1 2 3; do
	for m in qwen3-30b-a3b mixtral-8x7b olmoe-1b-7b; do
		for v in old a b; do bench $v "$C/mokc-$v" 4096 --model $m --precision mxfp8 --iters 20 --kernels; done
	done
done
bench_kernels
grep -hv "^{" "$O/bench.jsonl" >>"$S"
cat "$S"
