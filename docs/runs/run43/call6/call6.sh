#!/usr/bin/env bash
# run 43 call 6 (BENCH_BUDGET seconds of benches, 170 by default). Carry: .carry/bins.tgz of
# `make device-bins` at a6418c2 (the whole-tile epilogue, FC2Large's band 120..192). Issue #11's
# T = 4096 table with one binary: bf16 and mxfp8 alternated per preset, rounds until the budget.
# docs/perf.md, "Issue #11's table after run 43" (prediction written before this call).
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
BENCH_BUDGET=${BENCH_BUDGET:-170}
for i in 1 2; do
	for m in qwen3-30b-a3b olmoe-1b-7b deepseek-v2-lite gpt-oss-20b mixtral-8x7b qwen2-57b-a14b gpt-oss-120b deepseek-v3; do
		bench bf16 "$mokc" 4096 --model $m --iters 20 --kernels
		bench mx "$mokc" 4096 --model $m --precision mxfp8 --iters 20 --kernels
	done
done
bench_kernels
grep -hv "^{" "$O/bench.jsonl" >>"$S"
pack_logs
cat "$S"
