#!/usr/bin/env bash
# run 57 call 4 (about 7 minutes): run 56's unrun calls 5, 3 and 2 (docs/runs/run56) in one call,
# for a run whose starts kept failing (each failed start costs 3 minutes of device time). Carry: .carry/bins.tgz holding
# main's CLI (ebcb47a) and three branches' CLIs (`make device-old-cli REV=<branch>`, renamed):
# .carry/mokc-wpe.gz (ws-phase-end), .carry/mokc-l0.gz (ring-lane0), .carry/mokc-cw.gz (cgr-wpe:
# combine-grad-rows on ws-phase-end). ws-epilogue (run 56's call 2) is left for a later call.
#  1. bits: the persistent backward of each branch against main's (qwen3-30b-a3b T = 300 and 4096,
#     gpt-oss-20b T = 200, deepseek-v2-lite T = 200, llama4-scout T = 64), ring-lane0's persistent
#     forward too;
#  2. racecheck of ring-lane0 and cgr-wpe at qwen3-30b-a3b T = 300 (per-hazard report);
#  3. the persistent backward at qwen3-30b-a3b T = 4096 (main, ws-phase-end, cgr-wpe), the persistent
#     forward (main, ring-lane0), cgr-wpe's phases.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
wpe=$(carried wpe)
l0=$(carried l0)
cw=$(carried cw)
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
RUN_TIMEOUT=80
P="--lowering persistent"
for v in main wpe cw l0; do
	bin=$mokc
	[ $v = wpe ] && bin=$wpe
	[ $v = cw ] && bin=$cw
	[ $v = l0 ] && bin=$l0
	run_json "$v-pers" "$bin" qwen3-30b-a3b bf16 300,4096 --backward $P
	[ $v = l0 ] && continue
	run_json "$v-pers" "$bin" gpt-oss-20b bf16 200 --backward $P
	run_json "$v-pers" "$bin" deepseek-v2-lite bf16 200 --backward $P
	run_json "$v-pers" "$bin" llama4-scout bf16 64 --backward $P
done
run_json main-pers-fwd "$mokc" qwen3-30b-a3b bf16 300,4096 $P
run_json l0-pers-fwd "$l0" qwen3-30b-a3b bf16 300,4096 $P
echo "bits done $(($(date +%s) - START)) s" >>"$S"
SAN_BUDGET=300
export SAN_FLAGS="--racecheck-report hazard --print-limit 100"
mokc=$l0 san racecheck l0-q3-300 70 --model qwen3-30b-a3b --tokens 300 --backward
mokc=$cw san racecheck cw-q3-300 70 --model qwen3-30b-a3b --tokens 300 --backward
unset SAN_FLAGS
echo "racecheck done $(($(date +%s) - START)) s" >>"$S"
BENCH_BUDGET=450
B="--model qwen3-30b-a3b --iters 10 --backward $P"
bench main-pers-bwd-T4096 "$mokc" 4096 $B
bench wpe-pers-bwd-T4096 "$wpe" 4096 $B
bench cw-pers-bwd-T4096 "$cw" 4096 $B
bench main-pers-fwd-T4096 "$mokc" 4096 --model qwen3-30b-a3b --iters 20 $P
bench l0-pers-fwd-T4096 "$l0" 4096 --model qwen3-30b-a3b --iters 20 $P
bench cw-phases-T4096 "$cw" 4096 $B --phases
bench main-phases-T4096 "$mokc" 4096 $B --phases
grep -hv "^{" "$O/bench.jsonl" >>"$S"
rm -f "$O/tmp.json"
echo "done $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
