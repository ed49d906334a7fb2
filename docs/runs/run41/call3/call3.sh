#!/usr/bin/env bash
# run 41 call 3 (about 350 s). Carry: .carry/bins.tgz of `make device-bins` and .carry/mokc-old.gz of
# `make device-old-cli REV=ef10e08` (the CLI before Schedule.FC2Large). The default register-fed
# mxfp8 FC2 of 192 token rows from 512 mean rows per expert on (moe_fc2_large; docs/perf.md,
# "FC2 of 192 token rows by rows per expert", prediction written before this call):
#  1. The old CLI's y_sha256 at T around the switch (below and above it) on four presets, and bf16
#     olmoe-1b-7b unchanged; memcheck of olmoe-1b-7b mxfp8 at T = 4100 (moe_fc2_large, ragged).
#  2. Old against new timed where the large tile runs (T = 4096 on olmoe-1b-7b, gpt-oss-20b,
#     mixtral-8x7b; mixtral-8x7b T = 2048; qwen3-30b-a3b T = 8192 and 16384), bf16 beside them at
#     T = 4096, alternated twice.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
gunzip -c $C/mokc-old.gz >$C/mokc-old && chmod +x $C/mokc-old
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader >>"$S"
run_json old "$C/mokc-old" olmoe-1b-7b mxfp8 1,4095,4096,5000
run_json new "$mokc" olmoe-1b-7b mxfp8 1,4095,4096,5000
run_json old "$C/mokc-old" mixtral-8x7b mxfp8 2047,2048,4096
run_json new "$mokc" mixtral-8x7b mxfp8 2047,2048,4096
run_json old "$C/mokc-old" gpt-oss-20b mxfp8 4096
run_json new "$mokc" gpt-oss-20b mxfp8 4096
run_json old "$C/mokc-old" qwen3-30b-a3b mxfp8 8192
run_json new "$mokc" qwen3-30b-a3b mxfp8 8192
run_json new-bf16 "$mokc" olmoe-1b-7b bf16 4096
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 "$mokc" run --model olmoe-1b-7b --target sm_90a --precision mxfp8 --tokens 4100 --repeat 1 >"$O/memcheck.log" 2>&1
echo "memcheck olmoe-1b-7b mxfp8 T=4100 rc=$? $(grep -E 'ERROR SUMMARY' "$O/memcheck.log")" >>"$S"
BENCH_BUDGET=${BENCH_BUDGET:-500}
for i in 1 2; do
	for m in olmoe-1b-7b gpt-oss-20b mixtral-8x7b; do
		bench bf "$mokc" 4096 --model $m --iters 20 --kernels
		bench mx-old "$C/mokc-old" 4096 --model $m --precision mxfp8 --iters 20 --kernels
		bench mx-new "$mokc" 4096 --model $m --precision mxfp8 --iters 20 --kernels
	done
	bench mx-old "$C/mokc-old" 2048 --model mixtral-8x7b --precision mxfp8 --iters 20 --kernels
	bench mx-new "$mokc" 2048 --model mixtral-8x7b --precision mxfp8 --iters 20 --kernels
	for T in 8192 16384; do
		bench mx-old "$C/mokc-old" $T --model qwen3-30b-a3b --precision mxfp8 --iters 20 --kernels
		bench mx-new "$mokc" $T --model qwen3-30b-a3b --precision mxfp8 --iters 20 --kernels
	done
done
bench_kernels
grep -hv "^{" "$O/bench.jsonl" >>"$S"
cat "$S"
