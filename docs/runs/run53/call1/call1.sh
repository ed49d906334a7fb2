#!/usr/bin/env bash
# run 53 call 1, the session's one call (about 460 s: the device time left after failed starts).
# Run 52's call 1 and call 2 (which found no machine) trimmed to one call, with the shared experts'
# decode tiles added. Carry: `make device-bins` of the tree and `make device-old-cli REV=6ba3c72`
# (the CLI before the persistent kernel per block shape).
# docs/perf.md, "A persistent kernel per block shape" and "The shared experts' GEMMs in the decode
# tiles", and run 51 call 4's not-yet-run changes:
#  1. Bits: the tree's persistent kernels against the tree's per-op kernels (qwen3-30b-a3b:
#     moe_forward_decode at T <= 64, moe_forward_mid at 1600..3200; gpt-oss-120b; deepseek-v3:
#     moe_forward_decode at T <= 128 with the shared experts' split-K in the decode tiles), and
#     against old's persistent kernel where its GEMM kernels are the same (qwen3 T = 300, 4096).
#  2. TestPersistentGPU (the new kernels at 1, 64, 2000, 1100; deepseek-v2-lite and deepseek-v3 E16
#     at T = 1 with the shared decode tiles; graph replays).
#  3. One alternated speed round (old persistent, new persistent, new per-op; deepseek-v3 T = 1
#     also old per-op).
#  4. racecheck at qwen3-30b-a3b T = 64 (moe_forward_decode); TestStoreGatherGPU;
#     TestPersistentBackwardGPU (moe_backward_mid); racecheck at T = 1100 (the bulk rings wrap), as
#     the time left allows.
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
run_json old-pers "$old" qwen3-30b-a3b bf16 300,4096 $P
run_json new-pers "$mokc" gpt-oss-120b bf16 1,4096 $P
run_json new-perop "$mokc" gpt-oss-120b bf16 1,4096
run_json new-pers "$mokc" deepseek-v3 bf16 1,64,128,129 $P
run_json new-perop "$mokc" deepseek-v3 bf16 1,64,128,129
echo "bits done $(($(date +%s) - START)) s" >>"$S"
pkgtest runtime persist-fwd 170 $C/runtime.test -test.v -test.count=1 -test.timeout 165s -test.run 'TestPersistentGPU$'
[ -f "$O/persist-fwd.log" ] && grep -E "^--- |^    --- FAIL|panic|timed out" "$O/persist-fwd.log" | head -20 >>"$S"
echo "test done $(($(date +%s) - START)) s" >>"$S"
BENCH_BUDGET=330
for c in "qwen3-30b-a3b 1 200" "qwen3-30b-a3b 64 100" "qwen3-30b-a3b 2000 30" "gpt-oss-120b 4096 20" "qwen3-30b-a3b 4096 20"; do
	set -- $c
	bench "old-pers-$1-T$2" "$old" $2 --model $1 --iters $3 $P
	bench "new-pers-$1-T$2" "$mokc" $2 --model $1 --iters $3 $P
	bench "new-perop-$1-T$2" "$mokc" $2 --model $1 --iters $3
done
for b in "old-perop $old" "new-perop $mokc" "old-pers $old $P" "new-pers $mokc $P"; do
	set -- $b
	l=$1 bin=$2
	shift 2
	bench "$l-deepseek-v3-T1" "$bin" 1 --model deepseek-v3 --iters 100 "$@"
done
grep -hv "^{" "$O/bench.jsonl" >>"$S"
rm -f "$O/tmp.json"
echo "bench done $(($(date +%s) - START)) s" >>"$S"
SAN_BUDGET=440
san racecheck q3-64 50 --model qwen3-30b-a3b --tokens 64
left 370 && pkgtest runtime store-gather 60 $C/runtime.test -test.v -test.count=1 -test.timeout 55s -test.run 'TestStoreGatherGPU$'
[ -f "$O/store-gather.log" ] && grep -E "^--- |^    --- FAIL|panic|timed out" "$O/store-gather.log" | head -20 >>"$S"
T=$((430 - ($(date +%s) - START)))
[ "$T" -gt 40 ] && pkgtest runtime persist-bwd $T $C/runtime.test -test.v -test.count=1 -test.timeout $((T - 5))s -test.run 'TestPersistentBackwardGPU$'
[ -f "$O/persist-bwd.log" ] && grep -E "^--- |^    --- FAIL|panic|timed out" "$O/persist-bwd.log" | head -20 >>"$S"
san racecheck q3-1100 60 --model qwen3-30b-a3b --tokens 1100
echo "done $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
