#!/usr/bin/env bash
# run 43 call 4 (LIMIT seconds, 400 by default). Carry: .carry/bins.tgz of `make device-bins` at
# 72c4a8d or later (FC2Large from 320 rows per expert; `--fc2-large-min-rows` moves it). Where does
# FC2's 192-row tile beat the 128-row one below 320 mean rows per expert? docs/perf.md, "FC2Large
# for 100..200 rows per expert" (prediction written before this call): `--fc2-large-min-rows 64`
# (the large tile at every T below) against the default (128-row tiles there), mxfp8, two
# alternated rounds, at 96..224 mean rows per expert on four presets (T = rows·E/K), and the same
# y_sha256 with and without the flag at two of them.
START=$(date +%s)
LIMIT=${LIMIT:-400}
. scripts/device-env.sh
. scripts/device-lib.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
run_json def "$mokc" qwen3-30b-a3b mxfp8 2048,2560
run_json l64 "$mokc" qwen3-30b-a3b mxfp8 2048,2560 --fc2-large-min-rows 64
run_json def "$mokc" mixtral-8x7b mxfp8 640
run_json l64 "$mokc" mixtral-8x7b mxfp8 640 --fc2-large-min-rows 64
BENCH_BUDGET=$((LIMIT - 15))
points="qwen3-30b-a3b:1536 qwen3-30b-a3b:1792 qwen3-30b-a3b:2048 qwen3-30b-a3b:2560 qwen3-30b-a3b:3072 qwen3-30b-a3b:3584
gpt-oss-120b:3072 gpt-oss-120b:5120 gpt-oss-120b:6144 olmoe-1b-7b:768 olmoe-1b-7b:1024 olmoe-1b-7b:1280 olmoe-1b-7b:1536
mixtral-8x7b:384 mixtral-8x7b:512 mixtral-8x7b:640 mixtral-8x7b:768"
for i in 1 2; do
	for p in $points; do
		m=${p%:*} t=${p#*:}
		if [ $i = 1 ]; then
			bench def "$mokc" $t --model $m --precision mxfp8 --iters 20 --kernels
			bench l64 "$mokc" $t --model $m --precision mxfp8 --iters 20 --kernels --fc2-large-min-rows 64
		else
			bench l64 "$mokc" $t --model $m --precision mxfp8 --iters 20 --kernels --fc2-large-min-rows 64
			bench def "$mokc" $t --model $m --precision mxfp8 --iters 20 --kernels
		fi
	done
done
bench_kernels
grep -hv "^{" "$O/bench.jsonl" >>"$S"
pack_logs
cat "$S"
