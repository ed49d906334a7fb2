#!/usr/bin/env bash
# run 45 call 7 (the session's last device time; every part bounded): the persistent lowering as
# committed (the shared experts' GEMMs unsplit under it, after call 6): 1. y_sha256 per-op against
# persistent on the same kernels (base tiles, --split-k off on both); 2. the persistent backward
# against the float64 reference (mokc run --backward); 3. memcheck of persistent forwards.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
nvidia-smi --query-gpu=name --format=csv,noheader >>"$S"
B="--fc1-tile 128x256x64 --fc2-tile 128x256x64 --split-k off"
for low in per-op persistent; do
	run_json $low "$mokc" deepseek-v2-lite bf16 1,64,300,2000,4096 --lowering $low $B
	run_json $low "$mokc" gpt-oss-20b bf16 1,64,300,2000 --lowering $low $B
	run_json $low "$mokc" qwen3-30b-a3b mxfp8 1,64,1100,4096 --lowering $low --fc1-tile 128x256x128 --fc2-tile 128x256x128
done
for m in qwen3-30b-a3b:64,1100 gpt-oss-20b:300 deepseek-v2-lite:64,2000; do
	left 230 || break
	timeout 60 "$mokc" run --backward --model ${m%%:*} --target sm_90a --tokens ${m#*:} --repeat 2 --lowering persistent --wait-limit 5s >"$O/bwd-${m%%:*}.log" 2>&1
	echo "backward persistent $m rc=$? $(grep -E 'PASS:|FAIL' "$O/bwd-${m%%:*}.log" | tail -2 | tr '\n' ' ' | cut -c1-240)" >>"$S"
done
for m in qwen3-30b-a3b:300 deepseek-v2-lite:64; do
	left 270 || break
	timeout 60 compute-sanitizer --tool memcheck "$mokc" run --model ${m%%:*} --target sm_90a --tokens ${m#*:} --repeat 1 --lowering persistent --wait-limit 30s >"$O/memcheck-${m%%:*}.log" 2>&1
	echo "memcheck persistent $m rc=$? $(grep -E 'ERROR SUMMARY' "$O/memcheck-${m%%:*}.log")" >>"$S"
done
pack_logs
cat "$S"
