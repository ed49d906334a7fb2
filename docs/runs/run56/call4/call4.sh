#!/usr/bin/env bash
# run 56 call 4 (about 1.5 minutes; the carry of call 3): call 3 cut to what run 56's failed
# starts left of its device time (about 240 s): ring-lane0's racecheck of the persistent backward
# at qwen3-30b-a3b T = 300 once (each hazard's threads, blocks, addresses), and its bits against
# main's (the persistent forward and backward at T = 300).
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
l0=$(carried l0)
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
SAN_FLAGS="--racecheck-report hazard --print-limit 100" mokc=$l0 san racecheck l0-300 70 --model qwen3-30b-a3b --tokens 300 --backward
RUN_TIMEOUT=40
for v in main l0; do
	bin=$mokc
	[ $v = l0 ] && bin=$l0
	run_json "$v-pers-fwd" "$bin" qwen3-30b-a3b bf16 300 --lowering persistent
	run_json "$v-pers-bwd" "$bin" qwen3-30b-a3b bf16 300 --backward --lowering persistent
done
echo "done $(($(date +%s) - START)) s" >>"$S"
cat "$S"; grep -v "^mokc" "$O"/racecheck-l0-300.log | head -c 3000
pack_logs
