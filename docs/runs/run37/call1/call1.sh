#!/usr/bin/env bash
# run 37 call 1 (cluster v2; written as run 36 call 3, which found no machine), ordered by need, for a call of about 420 s: clusterbench (medians,
# --cluster 2 against the default); y_sha256 of the default, --cluster 2 and --cluster 2 --chain
# fc1-fc2 on four (preset, precision); racecheck and synccheck of the clustered forward; ncu of the
# clustered and default moe_fc1 (qwen3-30b-a3b bf16 T = 4096: stalls, L2 bytes); then chain v1 and
# items v3 timed against the default, alternated, in what time is left.
START=$(date +%s)
BUDGET=150 bash scripts/device-verify.sh clusterbench
. scripts/device-env.sh
. scripts/device-lib.sh
for mp in "qwen3-30b-a3b bf16" "mixtral-8x7b bf16" "qwen3-30b-a3b mxfp8" "olmoe-1b-7b mxfp8"; do
	read -r m p <<<"$mp"
	run_json default "$mokc" $m $p 1,64,300,4096
	run_json cluster "$mokc" $m $p 1,64,300,4096 --cluster 2
	run_json chaincl "$mokc" $m $p 1,64,300,4096 --cluster 2 --chain fc1-fc2
done
for tool in racecheck synccheck; do
	timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 "$mokc" run --cluster 2 --model qwen3-30b-a3b --target sm_90a --tokens 300 --repeat 1 >"$O/$tool.log" 2>&1
	echo "$tool --cluster 2 qwen3-30b-a3b T=300 rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$O/$tool.log" | tr '\n' ' ')" >>"$S"
done
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
M=gpu__time_duration.sum,lts__t_bytes.sum,lts__t_sectors_srcunit_tex_op_read.sum,sm__cycles_active.avg,dram__bytes_read.sum
for f in "--cluster 2" ""; do
	echo "=== moe_fc1 $f" >>"$O/ncu.log"
	timeout 60 "$NCU" --kernel-name moe_fc1 --launch-skip 3 --launch-count 1 --section SpeedOfLight --section WarpStateStats --metrics $M \
		"$mokc" bench --model qwen3-30b-a3b --target sm_90a --tokens 4096 --iters 3 --warmup 2 $f >>"$O/ncu.log" 2>&1
done
grep -E "^=== |gpu__time|lts__t|stalled|Warp Cycles Per Issued" "$O/ncu.log" >>"$S"
BENCH_BUDGET=${BENCH_BUDGET:-380}
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
cat "$S"
