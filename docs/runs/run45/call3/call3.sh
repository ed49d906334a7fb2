#!/usr/bin/env bash
# run 45 call 3: deepseek-v2-lite's persistent forward does not finish at T = 2000 (calls 1-2):
# synccheck and memcheck of that run (their reports are written as they go), then the same run
# at other T, each bounded.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
r() { # LABEL TIMEOUT ARGS...: one bounded run, its verdict line
	local label=$1 t=$2
	shift 2
	timeout "$t" "$@" >"$O/$label.log" 2>&1
	echo "$label rc=$? $(grep -E 'ERROR SUMMARY|PASS:|FAIL|error' "$O/$label.log" | grep -v note: | tail -2 | tr '\n' ' ' | cut -c1-300)" >>"$S"
}
P="--model deepseek-v2-lite --target sm_90a --repeat 1 --lowering persistent"
r sane 30 "$mokc" run --model qwen3-30b-a3b --target sm_90a --tokens 1 --repeat 1 --lowering persistent
r synccheck 100 compute-sanitizer --tool synccheck "$mokc" run $P --tokens 2000 --wait-limit 60s
r memcheck 100 compute-sanitizer --tool memcheck "$mokc" run $P --tokens 2000 --wait-limit 60s
r sane2 30 "$mokc" run --model qwen3-30b-a3b --target sm_90a --tokens 1 --repeat 1 --lowering persistent
r ds300 30 "$mokc" run $P --tokens 300 --wait-limit 2s
r nosplit2000 30 "$mokc" run $P --tokens 2000 --wait-limit 2s --split-k off
pack_logs
cat "$S"
