#!/usr/bin/env bash
# run 49 call 2. Carry: `make device-bins` of the tree and `make device-old-cli REV=3386d3c` (the CLI
# before the phases' counters). Every part bounded. Prediction: docs/perf.md, "phase counters v1".
#  1. TestPersistentGPU: the persistent forward's bits against per-op's (its cases at 300 and 1100+
#     run the gather phase and FC1 through the counters; every case FC1 and FC2 through them).
#  2. The CLI: new persistent against old persistent and per-op, same y_sha256 (qwen3-30b-a3b,
#     mixtral-8x7b, deepseek-v3 of 16 experts, gpt-oss-20b).
#  3. Speed at T = 4096, old persistent and new alternated, two rounds; qwen3-30b-a3b's phases.
#  4. memcheck and racecheck of the new persistent forward (qwen3-30b-a3b T = 300), as time allows.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
old_cli
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
pkgtest runtime persist-fwd 200 $C/runtime.test -test.v -test.count=1 -test.timeout 190s -test.run 'TestPersistentGPU$'
grep -E "^--- |^    --- FAIL|panic|timed out|wait" "$O/persist-fwd.log" | head -20 >>"$S"
RUN_TIMEOUT=60
run_json new-pers "$mokc" qwen3-30b-a3b bf16 300,1100 --lowering persistent
run_json old-pers "$old" qwen3-30b-a3b bf16 300,1100 --lowering persistent
run_json new-perop "$mokc" qwen3-30b-a3b bf16 300,1100 --decode-max-rows off
for m in mixtral-8x7b gpt-oss-20b; do
	run_json new-pers "$mokc" $m bf16 300 --lowering persistent
	run_json old-pers "$old" $m bf16 300 --lowering persistent
done
run_json new-pers "$mokc" deepseek-v3 bf16 300 --lowering persistent --experts 16
run_json old-pers "$old" deepseek-v3 bf16 300 --lowering persistent --experts 16
BENCH_BUDGET=400
for r in 1 2; do
	for m in qwen3-30b-a3b mixtral-8x7b gpt-oss-120b; do
		bench "old-pers-$m-T4096-r$r" "$old" 4096 --model $m --iters 20 --lowering persistent
		bench "new-pers-$m-T4096-r$r" "$mokc" 4096 --model $m --iters 20 --lowering persistent
	done
done
bench old-pers-phases-T4096 "$old" 4096 --model qwen3-30b-a3b --iters 20 --lowering persistent --phases
bench new-pers-phases-T4096 "$mokc" 4096 --model qwen3-30b-a3b --iters 20 --lowering persistent --phases
grep -hv "^{" "$O/bench.jsonl" >>"$S"
SAN_BUDGET=560 san memcheck q3-300 80 --model qwen3-30b-a3b --tokens 300
SAN_BUDGET=575 san racecheck q3-300 70 --model qwen3-30b-a3b --tokens 300
echo "elapsed $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
