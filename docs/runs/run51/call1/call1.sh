#!/usr/bin/env bash
# run 51 call 1 (written in the session of run 50, whose sixteen tries found no machine; not yet
# run). Carry: `make device-bins` of the tree and `make device-old-cli REV=3386d3c` (the CLI before
# FC2's counters). Every part bounded. docs/perf.md, "FC2's counters alone, and the gather beside
# FC1 v1": three forms of the persistent forward,
#   old      the CLI of 3386d3c: grid barriers between all phases;
#   sep      the tree's default (--gather fc1): FC2 waits for FC1's row tiles, the gather phase kept;
#   new      the tree's with --gather store-warps: FC1's store warps gather its rows (no gather
#            phase at T > 256 on qwen3-30b-a3b).
#  1. Bits: new, sep and old, the same y_sha256 (decode sizes, where FC1 gathers itself, and past).
#  2. Phases at qwen3-30b-a3b T = 4096 (old, sep, new).
#  3. TestStoreGatherGPU and TestPersistentGPU (per-op bits, graph replays).
#  4. (also call 2's first round, and its memcheck, so that one call gives the verdict)
#     The three alternated at T = 4096 (qwen3-30b-a3b, gpt-oss-120b) and sep against old at T = 64;
#     memcheck of new at qwen3-30b-a3b T = 1100, racecheck of old at T = 300 (run 49's hazard).
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
old_cli
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
RUN_TIMEOUT=60
P="--lowering persistent"
N="--gather store-warps"
run_json new "$mokc" qwen3-30b-a3b bf16 1,64,300,1100 $P $N
run_json sep "$mokc" qwen3-30b-a3b bf16 1,64,300,1100 $P
run_json old "$old" qwen3-30b-a3b bf16 1,64,300,1100 $P
run_json new "$mokc" gpt-oss-20b bf16 1,300 $P $N
run_json old "$old" gpt-oss-20b bf16 1,300 $P
run_json new "$mokc" deepseek-v3 bf16 40,300 $P --experts 16 $N
run_json old "$old" deepseek-v3 bf16 40,300 $P --experts 16
echo "bits done $(($(date +%s) - START)) s" >>"$S"
BENCH_BUDGET=150
bench old-phases "$old" 4096 --model qwen3-30b-a3b --iters 20 $P --phases
bench sep-phases "$mokc" 4096 --model qwen3-30b-a3b --iters 20 $P --phases
bench new-phases "$mokc" 4096 --model qwen3-30b-a3b --iters 20 $P --phases $N
BENCH_BUDGET=200
for m in qwen3-30b-a3b gpt-oss-120b; do
	bench "old-$m-T4096-r1" "$old" 4096 --model $m --iters 20 $P
	bench "sep-$m-T4096-r1" "$mokc" 4096 --model $m --iters 20 $P
	bench "new-$m-T4096-r1" "$mokc" 4096 --model $m --iters 20 $P $N
done
bench "old-qwen3-T64-r1" "$old" 64 --model qwen3-30b-a3b --iters 50 $P
bench "sep-qwen3-T64-r1" "$mokc" 64 --model qwen3-30b-a3b --iters 50 $P
grep -hv "^{" "$O/bench.jsonl" >>"$S"
echo "benches done $(($(date +%s) - START)) s" >>"$S"
pkgtest runtime store-gather 120 $C/runtime.test -test.v -test.count=1 -test.timeout 115s -test.run 'TestStoreGatherGPU$'
[ -f "$O/store-gather.log" ] && grep -E "^--- |^    --- FAIL|panic|timed out|wait" "$O/store-gather.log" | head -20 >>"$S"
SAN_BUDGET=400 san memcheck q3-1100-new 60 --model qwen3-30b-a3b --tokens 1100 $N
left 360 && pkgtest runtime persist-fwd 185 $C/runtime.test -test.v -test.count=1 -test.timeout 180s -test.run 'TestPersistentGPU$'
[ -f "$O/persist-fwd.log" ] && grep -E "^--- |^    --- FAIL|panic|timed out|wait" "$O/persist-fwd.log" | head -20 >>"$S"
echo "tests done $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
