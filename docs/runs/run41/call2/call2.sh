#!/usr/bin/env bash
# run 41 call 2 (about 480 s, right after call 1 on the same machine). Carry: as call 1.
#  1. Issue #11's T = 4096 ratio: the mxfp8 default against bf16 on eight presets, alternated twice,
#     and mxfp8 with FC2 of 192 token rows (`--fc2-tile 192x128x128`) on the presets of 384 and more
#     rows per expert (T·K/E at T = 4096: olmoe-1b-7b, gpt-oss-20b, qwen2-57b-a14b 512,
#     mixtral-8x7b 1024, deepseek-v2-lite 384).
#  2. The bits of FC2-192 against the default on the two presets call 1 does not check.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
F192="--fc2-tile 192x128x128"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader >>"$S"
for m in qwen2-57b-a14b deepseek-v2-lite; do
	run_json default "$mokc" $m mxfp8 1024,4096
	run_json fc2-192 "$mokc" $m mxfp8 1024,4096 $F192
done
BENCH_BUDGET=${BENCH_BUDGET:-470}
for i in 1 2; do
	for m in qwen3-30b-a3b mixtral-8x7b deepseek-v2-lite olmoe-1b-7b gpt-oss-20b qwen2-57b-a14b deepseek-v3 gpt-oss-120b; do
		bench bf "$mokc" 4096 --model $m --iters 20 --kernels
		bench mx "$mokc" 4096 --model $m --precision mxfp8 --iters 20 --kernels
		case $m in
		mixtral-8x7b | deepseek-v2-lite | olmoe-1b-7b | gpt-oss-20b | qwen2-57b-a14b)
			bench mx-fc2-192 "$mokc" 4096 --model $m --precision mxfp8 --iters 20 --kernels $F192
			;;
		esac
	done
done
bench_kernels
grep -hv "^{" "$O/bench.jsonl" >>"$S"
cat "$S"
