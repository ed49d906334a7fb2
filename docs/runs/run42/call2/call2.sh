#!/usr/bin/env bash
# run 42 call 2 (53 s, the machine of call 1): issue #11's T = 4096 ratio with the tile of 192
# token rows from 384 rows per expert (--fc2-large-min-rows 384, the default since), bf16 beside
# mxfp8 on six presets, two rounds. Carry: call 1's .carry/bins.tgz (df07a45).
START=$(date +%s); . scripts/device-env.sh; . scripts/device-lib.sh; BENCH_BUDGET=420
for i in 1 2; do for m in qwen3-30b-a3b mixtral-8x7b deepseek-v2-lite olmoe-1b-7b gpt-oss-20b qwen2-57b-a14b; do
	bench bf16 "$mokc" 4096 --model $m --iters 20 --kernels
	bench mx384 "$mokc" 4096 --model $m --precision mxfp8 --iters 20 --kernels --fc2-large-min-rows 384
done; done
bench_kernels; grep -hv "^{" "$O/bench.jsonl" >>"$S"; cat "$S"
