#!/usr/bin/env bash
# run 51 call 5: call 4 (not started: no machine) trimmed to the device time left, about 300 s.
# Same carry as call 4 (`make device-bins`, `make device-old-cli REV=dd95356`): bits on both
# sides of the store warps' threshold, racecheck where the bulk rings wrap, TestStoreGatherGPU,
# one alternated round at qwen3-30b-a3b T = 4096 and 64.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
old_cli
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
RUN_TIMEOUT=60
P="--lowering persistent"
run_json new "$mokc" qwen3-30b-a3b bf16 300,4095,4096 $P
run_json old "$old" qwen3-30b-a3b bf16 300,4095,4096 $P
run_json new "$mokc" gpt-oss-20b bf16 2048 $P
run_json old "$old" gpt-oss-20b bf16 2048 $P
timeout -k 5 60 compute-sanitizer --tool racecheck --error-exitcode 9 "$mokc" run --target sm_90a --repeat 1 $P \
	--wait-limit 0 --model qwen3-30b-a3b --tokens 1100 >"$O/racecheck-q3-1100.log" 2>&1
echo "racecheck q3-1100 rc=$? $(grep -E 'RACECHECK SUMMARY' "$O/racecheck-q3-1100.log" | tail -1)" >>"$S"
echo "checks done $(($(date +%s) - START)) s" >>"$S"
BENCH_BUDGET=150
bench old-qwen3-T4096 "$old" 4096 --model qwen3-30b-a3b --iters 20 $P
bench new-qwen3-T4096 "$mokc" 4096 --model qwen3-30b-a3b --iters 20 $P
bench old-qwen3-T64 "$old" 64 --model qwen3-30b-a3b --iters 50 $P
bench new-qwen3-T64 "$mokc" 64 --model qwen3-30b-a3b --iters 50 $P
grep -hv "^{" "$O/bench.jsonl" >>"$S"
rm -f "$O/tmp.json"
pkgtest runtime store-gather 120 $C/runtime.test -test.v -test.count=1 -test.timeout 115s -test.run 'TestStoreGatherGPU$'
[ -f "$O/store-gather.log" ] && grep -E "^--- |^    --- FAIL|panic|timed out" "$O/store-gather.log" | head -20 >>"$S"
echo "done $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
