#!/usr/bin/env bash
# run 52 call 1. Carry: `make device-bins` of the tree and `make device-old-cli REV=6ba3c72` (the CLI
# before the persistent kernel per block shape; its default has the store warps' gather from 256 rows
# per expert and the bulk rings released by every consumer thread, which no GPU has run yet).
# docs/perf.md, "A persistent kernel per block shape", and the not-yet-run changes of run 51 call 4:
#  1. Bits: the tree's persistent kernels (moe_forward_decode at T <= 64, moe_forward_mid at
#     1600..3200 on qwen3-30b-a3b; at 3200..6400 on gpt-oss-120b) against the tree's per-op
#     kernels, and against old's persistent kernel where its GEMM kernels are the same.
#  2. TestPersistentGPU (the new kernels at 1, 64, 2000 and 1100; graph replays), TestStoreGatherGPU
#     (the default's store-gathering form at 4095/4096/5000).
#  3. racecheck at qwen3-30b-a3b T = 1100 (the bulk rings wrap) and T = 64 (moe_forward_decode).
#  4. One alternated round of call2.sh's speed comparison, as the time left allows (about 520 s in
#     all; call2.sh is the full comparison, two rounds and the phases).
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
old_cli
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
RUN_TIMEOUT=90
P="--lowering persistent"
run_json new-pers "$mokc" qwen3-30b-a3b bf16 1,64,300,2000,4095,4096 $P
run_json new-perop "$mokc" qwen3-30b-a3b bf16 1,64,300,2000,4095,4096
run_json old-pers "$old" qwen3-30b-a3b bf16 300,4095,4096 $P
run_json new-pers "$mokc" gpt-oss-120b bf16 1,4096 $P
run_json new-perop "$mokc" gpt-oss-120b bf16 1,4096
echo "bits done $(($(date +%s) - START)) s" >>"$S"
pkgtest runtime persist-fwd 200 $C/runtime.test -test.v -test.count=1 -test.timeout 195s -test.run 'TestPersistentGPU$'
[ -f "$O/persist-fwd.log" ] && grep -E "^--- |^    --- FAIL|panic|timed out" "$O/persist-fwd.log" | head -20 >>"$S"
left 400 && pkgtest runtime store-gather 120 $C/runtime.test -test.v -test.count=1 -test.timeout 115s -test.run 'TestStoreGatherGPU$'
[ -f "$O/store-gather.log" ] && grep -E "^--- |^    --- FAIL|panic|timed out" "$O/store-gather.log" | head -20 >>"$S"
echo "tests done $(($(date +%s) - START)) s" >>"$S"
for T in 1100 64; do
	left 420 || break
	timeout -k 5 60 compute-sanitizer --tool racecheck --error-exitcode 9 "$mokc" run --target sm_90a --repeat 1 $P \
		--wait-limit 0 --model qwen3-30b-a3b --tokens $T >"$O/racecheck-q3-$T.log" 2>&1
	echo "racecheck q3-$T rc=$? $(grep -E 'RACECHECK SUMMARY' "$O/racecheck-q3-$T.log" | tail -1)" >>"$S"
done
echo "racecheck done $(($(date +%s) - START)) s" >>"$S"
BENCH_BUDGET=520
for c in "qwen3-30b-a3b 1 200" "qwen3-30b-a3b 64 100" "qwen3-30b-a3b 2000 30" "gpt-oss-120b 4096 20" "qwen3-30b-a3b 4096 20"; do
	set -- $c
	bench "old-pers-$1-T$2" "$old" $2 --model $1 --iters $3 $P
	bench "new-pers-$1-T$2" "$mokc" $2 --model $1 --iters $3 $P
	bench "new-perop-$1-T$2" "$mokc" $2 --model $1 --iters $3
done
grep -hv "^{" "$O/bench.jsonl" >>"$S"
rm -f "$O/tmp.json"
echo "done $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
