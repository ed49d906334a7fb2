#!/usr/bin/env bash
# run 54 call 1 (about 450 s). Carry: `make device-bins` of the tree and `make device-old-cli REV=ed69b2d`
# (the CLI whose deepseek-v3 shared FC2 split over two 64-row tiles at T = 65..128; run 53 ran it).
# What run 53 did not reach, and the split's new end (docs/perf.md, "The shared experts' GEMMs in the
# decode tiles", after run 53):
#  1. Bits: deepseek-v3 at T = 65, 96, 128 (the shared FC2 whole in the decode tiles,
#     moe_shared_fc2_decode) persistent against per-op; kimi-k2 at T = 1, 192 (FC1 split over three
#     row tiles).
#  2. TestPersistentBackwardGPU (moe_backward_mid at 150 mean rows per expert), with time for its
#     float64 references (run 53 stopped it after the small layers).
#  3. racecheck at qwen3-30b-a3b T = 1100 (the bulk rings' release by every consumer thread).
#  4. Speed, alternated: deepseek-v3 T = 128 old per-op / new per-op / new persistent; qwen3-30b-a3b
#     T = 4096 persistent against per-op, three rounds (run 53's one round had per-op 2.2% ahead);
#     then both at T = 4096 with --phases in the same call (FC1's time per lowering side by side).
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
old_cli
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
RUN_TIMEOUT=90
P="--lowering persistent"
run_json new-pers "$mokc" deepseek-v3 bf16 65,96,128 $P
run_json new-perop "$mokc" deepseek-v3 bf16 65,96,128
run_json new-pers "$mokc" kimi-k2 bf16 1,192 $P
run_json new-perop "$mokc" kimi-k2 bf16 1,192
echo "bits done $(($(date +%s) - START)) s" >>"$S"
pkgtest runtime persist-bwd 240 $C/runtime.test -test.v -test.count=1 -test.timeout 235s -test.run 'TestPersistentBackwardGPU$'
grep -E "^\s*--- |panic|timed out|^\s+\S+_test\.go:[0-9]+: .*(want|differ|mismatch|FAIL|error [^0-9])" "$O/persist-bwd.log" | head -20 >>"$S"
echo "test done $(($(date +%s) - START)) s" >>"$S"
SAN_BUDGET=400
san racecheck q3-1100 60 --model qwen3-30b-a3b --tokens 1100
BENCH_BUDGET=430
for r in 1 2 3; do
	bench "old-perop-deepseek-v3-T128-r$r" "$old" 128 --model deepseek-v3 --iters 50
	bench "new-perop-deepseek-v3-T128-r$r" "$mokc" 128 --model deepseek-v3 --iters 50
	bench "new-pers-deepseek-v3-T128-r$r" "$mokc" 128 --model deepseek-v3 --iters 50 $P
	bench "new-pers-qwen3-30b-a3b-T4096-r$r" "$mokc" 4096 --model qwen3-30b-a3b --iters 20 $P
	bench "new-perop-qwen3-30b-a3b-T4096-r$r" "$mokc" 4096 --model qwen3-30b-a3b --iters 20
done
BENCH_BUDGET=480
bench "new-pers-qwen3-30b-a3b-T4096-phases" "$mokc" 4096 --model qwen3-30b-a3b --iters 20 $P --phases
bench "new-perop-qwen3-30b-a3b-T4096-phases" "$mokc" 4096 --model qwen3-30b-a3b --iters 20 --phases
grep -hv "^{" "$O/bench.jsonl" >>"$S"
rm -f "$O/tmp.json"
echo "done $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
