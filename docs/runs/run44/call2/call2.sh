#!/usr/bin/env bash
# run 44 call 2 (LIMIT seconds, 480 by default). The carry of call 1 (main with exp/predicated-epilogue
# merged, and the CLI of b1ded00 as mokc-old). Call 1 gave the same y_sha256 at 16 points and mixed
# speed, old always timed before new; this call times the two in four rounds, the order swapped
# each round, mxfp8 T = 4096, --kernels.
START=$(date +%s)
LIMIT=${LIMIT:-480}
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
gunzip -c $C/mokc-old.gz >$C/mokc-old && chmod +x $C/mokc-old
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
BENCH_BUDGET=$((LIMIT - 30))
for i in 1 2 3 4; do
	for m in qwen3-30b-a3b gpt-oss-20b mixtral-8x7b qwen2-57b-a14b olmoe-1b-7b deepseek-v2-lite; do
		if [ $((i % 2)) = 1 ]; then
			bench new "$mokc" 4096 --model $m --precision mxfp8 --iters 30 --kernels
			bench old "$C/mokc-old" 4096 --model $m --precision mxfp8 --iters 30 --kernels
		else
			bench old "$C/mokc-old" 4096 --model $m --precision mxfp8 --iters 30 --kernels
			bench new "$mokc" 4096 --model $m --precision mxfp8 --iters 30 --kernels
		fi
	done
done
bench_kernels
grep -hv "^{" "$O/bench.jsonl" >>"$S"
pack_logs
grep -v "^kernels" "$S"
