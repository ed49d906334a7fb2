#!/usr/bin/env bash
# run 55 call 7 (about 1 minute; carry: `make device-bins` of 8dbf411): the hazards racecheck reports
# in act_grad's 384-thread virtual blocks (calls 4-6) one by one (--racecheck-report hazard: the
# threads, blocks and shared addresses of each), qwen3-30b-a3b T = 300, persistent backward.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
timeout -k 10 90 compute-sanitizer --tool racecheck --racecheck-report hazard --print-limit 200 "$mokc" run --target sm_90a --repeat 1 \
	--lowering persistent --wait-limit 0 --model qwen3-30b-a3b --tokens 300 --backward >"$O/hazards.log" 2>&1
echo "racecheck rc=$? $(grep -c 'Race reported\|hazard' "$O/hazards.log") lines" >>"$S"
grep -v "^mokc" "$O/hazards.log" | head -c 20000 >"$O/hazards-head.log"
rm -f "$O/hazards.log"
echo "done $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"; head -c 5000 "$O/hazards-head.log"
