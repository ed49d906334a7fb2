#!/usr/bin/env bash
# run 51 call 3 (on the machine calls 1 and 2 left warm; the same carry): where the gather beside
# FC1 wins and loses (gpt-oss-120b T = 4096 phases, qwen3-30b-a3b T = 16384), and racecheck of the
# tree's default (sep) at qwen3-30b-a3b T = 300 and of --gather store-warps at T = 1100.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
P="--lowering persistent"
N="--gather store-warps"
BENCH_BUDGET=100
bench sep-g120-ph "$mokc" 4096 --model gpt-oss-120b --iters 10 $P --phases
bench new-g120-ph "$mokc" 4096 --model gpt-oss-120b --iters 10 $P --phases $N
bench sep-q3-16k "$mokc" 16384 --model qwen3-30b-a3b --iters 10 $P
bench new-q3-16k "$mokc" 16384 --model qwen3-30b-a3b --iters 10 $P $N
bench sep-q3-16k-r2 "$mokc" 16384 --model qwen3-30b-a3b --iters 10 $P
bench new-q3-16k-r2 "$mokc" 16384 --model qwen3-30b-a3b --iters 10 $P $N
grep -hv "^{" "$O/bench.jsonl" >>"$S"
timeout -k 5 60 compute-sanitizer --tool racecheck --error-exitcode 9 "$mokc" run --target sm_90a --repeat 1 $P \
	--wait-limit 0 --model qwen3-30b-a3b --tokens 300 >"$O/rc-sep.log" 2>&1
echo "racecheck sep q3-300 rc=$? $(grep -E 'RACECHECK SUMMARY' $O/rc-sep.log)" >>"$S"
timeout -k 5 60 compute-sanitizer --tool racecheck --error-exitcode 9 "$mokc" run --target sm_90a --repeat 1 $P $N \
	--wait-limit 0 --model qwen3-30b-a3b --tokens 1100 >"$O/rc-new.log" 2>&1
echo "racecheck new q3-1100 rc=$? $(grep -E 'RACECHECK SUMMARY' $O/rc-new.log)" >>"$S"
echo "elapsed $(($(date +%s) - START))" >>"$S"
pack_logs
cat "$S"
