#!/usr/bin/env bash
# run 57 call 2 (run 56 call 3, not run there; about 3 minutes; carry: .carry/bins.tgz holding main's CLI alone, mokc of
# `make device-old-cli REV=main` (ebcb47a), and branch ring-lane0's CLI as .carry/mokc-l0.gz,
# `make device-old-cli REV=ring-lane0` renamed). Call 1's racecheck of the persistent backward
# (qwen3-30b-a3b T = 300) reported 4 hazards between the item ring's store of an entry
# (moe_backward+0x21a80, STS [+0x24038]) and the consumers' load of it (+0x22db0). Branch
# ring-lane0 (lane 0 of a consumer warp alone loads the entry and shuffles it to the warp):
# racecheck at T = 300 twice (each hazard's threads, blocks, addresses), its bits against main's
# (the persistent forward and backward at T = 300 and 4096), and the persistent forward at T = 4096
# timed against main's. Cut to fit the device time that run 56's failed starts left.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
l0=$(carried l0)
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
SAN_BUDGET=200
export SAN_FLAGS="--racecheck-report hazard --print-limit 100"
mokc=$l0 san racecheck l0-300a 70 --model qwen3-30b-a3b --tokens 300 --backward
mokc=$l0 san racecheck l0-300b 70 --model qwen3-30b-a3b --tokens 300 --backward
unset SAN_FLAGS
echo "racecheck done $(($(date +%s) - START)) s" >>"$S"
RUN_TIMEOUT=60
for v in main l0; do
	bin=$mokc
	[ $v = l0 ] && bin=$l0
	run_json "$v-pers-fwd" "$bin" qwen3-30b-a3b bf16 300,4096 --lowering persistent
	run_json "$v-pers-bwd" "$bin" qwen3-30b-a3b bf16 300,4096 --backward --lowering persistent
done
BENCH_BUDGET=560
bench main-pers-fwd "$mokc" 4096 --model qwen3-30b-a3b --iters 20 --lowering persistent
bench l0-pers-fwd "$l0" 4096 --model qwen3-30b-a3b --iters 20 --lowering persistent
grep -hv "^{" "$O/bench.jsonl" >>"$S"
rm -f "$O/tmp.json"
echo "done $(($(date +%s) - START)) s" >>"$S"
cat "$S"; grep -v "^mokc" "$O"/racecheck-l0-300a.log | head -c 3000
pack_logs
