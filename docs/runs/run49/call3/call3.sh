#!/usr/bin/env bash
# run 49 call 3. Carry: `make device-bins` of the tree and `make device-old-cli REV=3386d3c` (the CLI
# before the phases' counters). Every part bounded. Prediction: docs/perf.md, "phase counters v2".
#  1. racecheck of the new persistent forward (qwen3-30b-a3b T = 300: the gather phase's counters).
#  2. The CLI: new persistent against old persistent (whose bits are per-op's), same y_sha256
#     (qwen3-30b-a3b, deepseek-v3 of 16 experts, gpt-oss-20b, mixtral-8x7b).
#  3. Speed at T = 4096: qwen3-30b-a3b's phases, then old persistent and new alternated.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
old_cli
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
SAN_BUDGET=200 san racecheck q3-300 70 --model qwen3-30b-a3b --tokens 300
RUN_TIMEOUT=60
run_json new-pers "$mokc" qwen3-30b-a3b bf16 300,1100 --lowering persistent
run_json old-pers "$old" qwen3-30b-a3b bf16 300,1100 --lowering persistent
run_json new-pers "$mokc" deepseek-v3 bf16 40,300 --lowering persistent --experts 16
run_json old-pers "$old" deepseek-v3 bf16 40,300 --lowering persistent --experts 16
for m in gpt-oss-20b mixtral-8x7b; do
	run_json new-pers "$mokc" $m bf16 300 --lowering persistent
	run_json old-pers "$old" $m bf16 300 --lowering persistent
done
BENCH_BUDGET=300
bench old-pers-phases-T4096 "$old" 4096 --model qwen3-30b-a3b --iters 20 --lowering persistent --phases
bench new-pers-phases-T4096 "$mokc" 4096 --model qwen3-30b-a3b --iters 20 --lowering persistent --phases
for r in 1 2; do
	for m in qwen3-30b-a3b gpt-oss-120b; do
		bench "old-pers-$m-T4096-r$r" "$old" 4096 --model $m --iters 20 --lowering persistent
		bench "new-pers-$m-T4096-r$r" "$mokc" 4096 --model $m --iters 20 --lowering persistent
	done
done
grep -hv "^{" "$O/bench.jsonl" >>"$S"
echo "elapsed $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
