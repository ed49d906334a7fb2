#!/usr/bin/env bash
# run 51 call 2 (written in the session of run 50; not yet run): the same carry as call 1, run on
# the machine call 1 left warm. Speed: old, sep and new (call1.sh names them) alternated at
# T = 4096 on qwen3-30b-a3b and gpt-oss-120b, sep against old at T = 64; memcheck of new at
# qwen3-30b-a3b T = 1100; racecheck of old at qwen3-30b-a3b T = 300 (run 49 call 3's hazard).
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
old_cli
P="--lowering persistent"
N="--gather store-warps"
BENCH_BUDGET=330
for r in 1 2; do
	for m in qwen3-30b-a3b gpt-oss-120b; do
		bench "old-$m-T4096-r$r" "$old" 4096 --model $m --iters 20 $P
		bench "sep-$m-T4096-r$r" "$mokc" 4096 --model $m --iters 20 $P
		bench "new-$m-T4096-r$r" "$mokc" 4096 --model $m --iters 20 $P $N
	done
	bench "old-qwen3-T64-r$r" "$old" 64 --model qwen3-30b-a3b --iters 50 $P
	bench "sep-qwen3-T64-r$r" "$mokc" 64 --model qwen3-30b-a3b --iters 50 $P
done
grep -hv "^{" "$O/bench.jsonl" >>"$S"
SAN_BUDGET=450 san memcheck q3-1100-new 60 --model qwen3-30b-a3b --tokens 1100 $N
if left 480; then
	timeout -k 5 60 compute-sanitizer --tool racecheck --error-exitcode 9 "$old" run --target sm_90a --repeat 1 \
		$P --wait-limit 0 --model qwen3-30b-a3b --tokens 300 >"$O/racecheck-old-q3-300.log" 2>&1
	echo "racecheck old q3-300 rc=$? $(grep -E 'RACECHECK SUMMARY' "$O/racecheck-old-q3-300.log" | tail -1)" >>"$S"
fi
echo "elapsed $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
