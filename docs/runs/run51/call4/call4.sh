#!/usr/bin/env bash
# run 51 call 4. Carry: `make device-bins` of the tree and `make device-old-cli REV=dd95356` (the
# CLI before this call's changes: its default is calls 1-3's sep). docs/perf.md, "The gather beside
# FC1 by default from 256 rows per expert; every consumer thread releases the bulk rings":
#  1. Bits of the tree's default persistent forward (store warps gather from 256 mean rows per
#     expert) against old's, on both sides of the threshold.
#  2. racecheck at qwen3-30b-a3b T = 1100 (the bulk rings wrap), default and --gather store-warps.
#  3. Speed, alternated: qwen3-30b-a3b T = 4096 and 64, gpt-oss-120b T = 4096.
#  4. TestStoreGatherGPU, TestPersistentGPU.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
old_cli
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
RUN_TIMEOUT=90
P="--lowering persistent"
run_json new "$mokc" qwen3-30b-a3b bf16 1,300,4095,4096,5000 $P
run_json old "$old" qwen3-30b-a3b bf16 1,300,4095,4096,5000 $P
run_json new "$mokc" gpt-oss-20b bf16 300,2048 $P
run_json old "$old" gpt-oss-20b bf16 300,2048 $P
echo "bits done $(($(date +%s) - START)) s" >>"$S"
for g in fc1 store-warps; do
	timeout -k 5 90 compute-sanitizer --tool racecheck --error-exitcode 9 "$mokc" run --target sm_90a --repeat 1 $P \
		--gather $g --wait-limit 0 --model qwen3-30b-a3b --tokens 1100 >"$O/racecheck-$g-q3-1100.log" 2>&1
	echo "racecheck $g q3-1100 rc=$? $(grep -E 'RACECHECK SUMMARY' "$O/racecheck-$g-q3-1100.log" | tail -1)" >>"$S"
done
echo "racecheck done $(($(date +%s) - START)) s" >>"$S"
BENCH_BUDGET=300
for r in 1 2; do
	for m in qwen3-30b-a3b gpt-oss-120b; do
		bench "old-$m-T4096-r$r" "$old" 4096 --model $m --iters 20 $P
		bench "new-$m-T4096-r$r" "$mokc" 4096 --model $m --iters 20 $P
	done
	bench "old-qwen3-T64-r$r" "$old" 64 --model qwen3-30b-a3b --iters 50 $P
	bench "new-qwen3-T64-r$r" "$mokc" 64 --model qwen3-30b-a3b --iters 50 $P
done
bench new-phases "$mokc" 4096 --model qwen3-30b-a3b --iters 20 $P --phases
grep -hv "^{" "$O/bench.jsonl" >>"$S"
rm -f "$O/tmp.json" # the device returns at most 8 files
echo "benches done $(($(date +%s) - START)) s" >>"$S"
pkgtest runtime store-gather 120 $C/runtime.test -test.v -test.count=1 -test.timeout 115s -test.run 'TestStoreGatherGPU$'
[ -f "$O/store-gather.log" ] && grep -E "^--- |^    --- FAIL|panic|timed out" "$O/store-gather.log" | head -20 >>"$S"
left 300 && pkgtest runtime persist-fwd 185 $C/runtime.test -test.v -test.count=1 -test.timeout 180s -test.run 'TestPersistentGPU$'
[ -f "$O/persist-fwd.log" ] && grep -E "^--- |^    --- FAIL|panic|timed out" "$O/persist-fwd.log" | head -20 >>"$S"
echo "tests done $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
