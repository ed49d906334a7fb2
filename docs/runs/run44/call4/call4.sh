#!/usr/bin/env bash
# run 44 call 4 (LIMIT seconds, 330 by default). Carry: four gzipped CLIs in .carry (no bins.tgz):
# mokc-old (d713843: moe_quantize_h_rf, four producer warps staging the scale codes), mokc-oldcw1
# (d713843 with one code warp for the register-fed GEMMs), mokc-new1 (call 3's build: the producer's
# warps 1-3 quantize h, warp 0 stages the codes), mokc-new2 (warps 0-1 stage the codes, 2-3
# quantize). Call 3 found FC1 6-12% slower with the quantizing warps, more than the kernel they
# replace; this call separates the code warps' share (oldcw1 against old) from the quantization's
# (new1 against oldcw1) and tries two code warps (new2). docs/perf.md, "h quantized by FC1's
# producer warps", outcome of call 3 and the prediction for call 4.
START=$(date +%s)
LIMIT=${LIMIT:-330}
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/nvidia/lib64
export MOKC_CACHE_DIR=off
. scripts/device-lib.sh
C=$PWD/.carry
for v in old oldcw1 new1 new2; do gunzip -c $C/mokc-$v.gz >$C/mokc-$v && chmod +x $C/mokc-$v; done
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
for v in new2 oldcw1; do
	run_json $v $C/mokc-$v qwen3-30b-a3b mxfp8 100,4095
	run_json $v $C/mokc-$v gpt-oss-20b mxfp8 2600
done
BENCH_BUDGET=$((LIMIT - 30))
for i in 1 2; do
	for m in qwen3-30b-a3b gpt-oss-20b mixtral-8x7b olmoe-1b-7b; do
		order="old oldcw1 new1 new2"
		[ $i = 2 ] && order="new2 new1 oldcw1 old"
		for v in $order; do
			bench $v $C/mokc-$v 4096 --model $m --precision mxfp8 --iters 20 --kernels
		done
	done
done
bench_kernels
grep -hv "^{" "$O/bench.jsonl" >>"$S"
pack_logs
grep -v "^kernels" "$S"
