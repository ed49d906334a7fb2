#!/usr/bin/env bash
# run 57 call 8 (about 3 minutes; carry as call 7's): call 4 timed the persistent backward once per
# CLI; two more alternated rounds at qwen3-30b-a3b T = 4096 (main, ws-phase-end, cgr-wpe), then
# main's per-op backward, the gap the persistent lowering closes.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
cw=$(carried cw)
wpe=$(carried wpe)
BENCH_BUDGET=230
B="--model qwen3-30b-a3b --iters 10 --backward"
for r in 1 2; do
	bench "main-pers-r$r" "$mokc" 4096 $B --lowering persistent
	bench "wpe-pers-r$r" "$wpe" 4096 $B --lowering persistent
	bench "cw-pers-r$r" "$cw" 4096 $B --lowering persistent
done
bench main-perop "$mokc" 4096 $B
grep -hv "^{" "$O/bench.jsonl" >>"$S"
rm -f "$O/tmp.json"
echo "done $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
