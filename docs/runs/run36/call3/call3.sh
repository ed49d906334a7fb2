#!/usr/bin/env bash
# run 36 call 3 (cluster v2): clusterbench (medians, --cluster 2 against the default); the cluster
# phase on three presets (y_sha256 across flag sets, TestClusterGPU, backward, sanitizers); ncu of
# the clustered and default moe_fc1 (qwen3-30b-a3b bf16 T = 4096: stalls, L2 bytes); then chain v1
# and items v3 timed against the default, alternated, in what time is left.
START=$(date +%s)
BUDGET=160 bash scripts/device-verify.sh clusterbench
CL_MODELS="qwen3-30b-a3b mixtral-8x7b olmoe-1b-7b" CL_TOKENS=1,64,300,4096 BUDGET=240 bash scripts/device-verify.sh cluster
. scripts/device-env.sh
. scripts/device-lib.sh
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
M=gpu__time_duration.sum,lts__t_bytes.sum,lts__t_sectors_srcunit_tex_op_read.sum,sm__cycles_active.avg,dram__bytes_read.sum
for f in "--cluster 2" ""; do
	echo "=== moe_fc1 $f" >>"$O/ncu.log"
	timeout 60 "$NCU" --kernel-name moe_fc1 --launch-skip 3 --launch-count 1 --section SpeedOfLight --section WarpStateStats --metrics $M \
		"$mokc" bench --model qwen3-30b-a3b --target sm_90a --tokens 4096 --iters 3 --warmup 2 $f >>"$O/ncu.log" 2>&1
done
BENCH_BUDGET=490
for i in 1 2; do
	for m in qwen3-30b-a3b mixtral-8x7b gpt-oss-20b olmoe-1b-7b; do
		bench default "$mokc" 4096 --model $m --iters 20 --kernels
		bench chain "$mokc" 4096 --model $m --iters 20 --kernels --chain fc1-fc2
	done
	for m in qwen3-30b-a3b olmoe-1b-7b; do
		bench mx-default "$mokc" 4096 --model $m --precision mxfp8 --iters 20 --kernels
		bench mx-queue "$mokc" 4096 --model $m --precision mxfp8 --iters 20 --kernels --items queue
	done
	for T in 300 64; do
		bench default "$mokc" $T --model qwen3-30b-a3b --iters 20
		bench chain "$mokc" $T --model qwen3-30b-a3b --iters 20 --chain fc1-fc2
	done
done
grep -hv "^{" "$O/bench.jsonl" >>"$S"
grep -E "^=== |gpu__time|lts__t|stalled|Warp Cycles Per Issued" "$O/ncu.log" >>"$S"
cat "$S"
