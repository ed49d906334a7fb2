#!/usr/bin/env bash
# run 46 call 2 (every part bounded). Carry: as call 1. docs/perf.md, "persistent v2":
#  1. TestPersistentGPU (deepseek-v2-lite and the mxfp8 forward among its cases) and
#     TestPersistentBackwardGPU (first run; shared experts among its layers) of runtime.test, each
#     with -test.timeout (a stack dump on timeout).
#  2. The persistent backward from the CLI against the float64 reference.
#  3. compute-sanitizer memcheck, synccheck and racecheck of persistent forwards and a backward.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
pkgtest runtime persist-fwd 200 $C/runtime.test -test.v -test.count=1 -test.timeout 180s -test.run 'TestPersistentGPU$'
grep -E "^\s*--- (FAIL|PASS)|panic|timed out" "$O/persist-fwd.log" | head -20 >>"$S"
pkgtest runtime persist-bwd 170 $C/runtime.test -test.v -test.count=1 -test.timeout 150s -test.run 'TestPersistentBackwardGPU$'
grep -E "^\s*--- (FAIL|PASS)|panic|timed out" "$O/persist-bwd.log" | head -40 >>"$S"
for m in qwen3-30b-a3b:64,1100 deepseek-v2-lite:1,64,2000 gpt-oss-20b:300; do
	left 400 || break
	timeout -s QUIT -k 10 50 "$mokc" run --backward --model ${m%%:*} --target sm_90a --tokens ${m#*:} --repeat 2 --lowering persistent --wait-limit 3s >"$O/bwd-${m%%:*}.log" 2>&1
	echo "backward persistent $m rc=$? $(grep -E 'PASS:|FAIL' "$O/bwd-${m%%:*}.log" | tail -2 | tr '\n' ' ' | cut -c1-240)" >>"$S"
done
san() { # TOOL LABEL SECONDS ARGS...: one compute-sanitizer run, its summary line
	local tool=$1 label=$2 t=$3
	shift 3
	left $((560 - t)) || { echo "skipped $tool $label" >>"$S"; return; }
	timeout -k 10 $t compute-sanitizer --tool $tool --error-exitcode 9 "$mokc" run --target sm_90a --repeat 1 --lowering persistent --wait-limit 0 "$@" >"$O/$tool-$label.log" 2>&1
	echo "$tool $label rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$O/$tool-$label.log" | tail -1)" >>"$S"
}
san memcheck qwen3-300 60 --model qwen3-30b-a3b --tokens 300
san memcheck ds2-64 60 --model deepseek-v2-lite --tokens 64
san memcheck ds2-2000 60 --model deepseek-v2-lite --tokens 2000
san synccheck ds2-64 60 --model deepseek-v2-lite --tokens 64
san memcheck ds2-bwd-64 80 --model deepseek-v2-lite --tokens 64 --backward
san racecheck qwen3-64 90 --model qwen3-30b-a3b --tokens 64
echo "elapsed $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
