#!/usr/bin/env bash
# run 55 call 8 (about 2.5 minutes; carry: `make device-bins` of the tree): act_grad's persistent
# blocks bounded at 256 threads again (two groups of 96 at I = 768, call 3's shape, racecheck-clean
# there) with the weight gradients on wgmma-ws (the persistent default since call 4): racecheck at
# qwen3-30b-a3b T = 300 and 1100 (each hazard's threads and address if any), the reference checks
# and grads_sha256 at T = 300 and 4096 against call 3's per-op digests, one timed round at T = 4096.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
for T in 300 1100; do
	timeout -k 10 80 compute-sanitizer --tool racecheck --racecheck-report hazard --print-limit 20 --error-exitcode 9 "$mokc" run \
		--target sm_90a --repeat 1 --lowering persistent --wait-limit 0 --model qwen3-30b-a3b --tokens $T --backward >"$O/racecheck-$T.log" 2>&1
	echo "racecheck T=$T rc=$? $(grep -E 'RACECHECK SUMMARY' "$O/racecheck-$T.log" | tail -1)" >>"$S"
done
RUN_TIMEOUT=80
run_json pers-bwd "$mokc" qwen3-30b-a3b bf16 300,4096 --backward --lowering persistent
BENCH_BUDGET=200
B="--model qwen3-30b-a3b --iters 10 --backward"
bench perop-T4096 "$mokc" 4096 $B
bench pers-T4096 "$mokc" 4096 $B --lowering persistent
bench pers-phases-T4096 "$mokc" 4096 $B --lowering persistent --phases
grep -hv "^{" "$O/bench.jsonl" >>"$S"
rm -f "$O/tmp.json"
echo "done $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
