#!/usr/bin/env bash
# run 56 call 4 (about 1.5 minutes; the carry of call 3): call 3 cut to what run 56's failed
# starts left of its device time (about 240 s): ring-lane0's racecheck of the persistent backward
# at qwen3-30b-a3b T = 300 once (each hazard's threads, blocks, addresses), and its bits against
# main's (the persistent forward and backward at T = 300).
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
gunzip -c .carry/mokc-l0.gz >.carry/mokc-l0 && chmod +x .carry/mokc-l0
l0=$PWD/.carry/mokc-l0
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
timeout -k 10 70 compute-sanitizer --tool racecheck --racecheck-report hazard --print-limit 100 "$l0" run --target sm_90a --repeat 1 \
	--lowering persistent --wait-limit 0 --model qwen3-30b-a3b --tokens 300 --backward >"$O/hazards-l0-300.log" 2>&1
echo "racecheck l0 T=300 rc=$? $(grep 'RACECHECK SUMMARY' "$O/hazards-l0-300.log")" >>"$S"
grep -v "^mokc" "$O/hazards-l0-300.log" | head -c 12000 >"$O/hazards-l0-300-head.log"
rm -f "$O/hazards-l0-300.log"
RUN_TIMEOUT=40
for v in main l0; do
	bin=$mokc
	[ $v = l0 ] && bin=$l0
	run_json "$v-pers-fwd" "$bin" qwen3-30b-a3b bf16 300 --lowering persistent
	run_json "$v-pers-bwd" "$bin" qwen3-30b-a3b bf16 300 --backward --lowering persistent
done
echo "done $(($(date +%s) - START)) s" >>"$S"
cat "$S"; head -c 3000 "$O"/hazards-l0-300-head.log
pack_logs
