#!/usr/bin/env bash
# run 49 call 1 (written after run 48's last device call, not yet run). Carry: `make device-bins` of
# the tree and `make device-old-cli REV=483f48d` (the CLI before the bf16 decode tiles). Every part
# bounded. No prediction beyond PASS and equal bits: the decode tiles' combinations run 48 did not
# finish (docs/device-log.md, run 48 call 4; docs/flags.md, --decode-max-rows).
#  1. The GPU tests whose default schedules take the decode tiles, each with time to finish:
#     graph capture, the saved FC1 output, phase times, the queue walk, clusters (the decode FC2 in
#     CTA pairs at T <= 64), the chain.
#  2. llama4-scout's non-gathering decode FC1 (moe_fc1_decode): its bits against the old CLI and
#     against --decode-max-rows off, and its speed at T = 1, 8.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
old_cli
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
RUN_TIMEOUT=60
run_json new "$mokc" llama4-scout bf16 1,8,16
run_json off "$mokc" llama4-scout bf16 1,8,16 --decode-max-rows off
run_json old "$old" llama4-scout bf16 1,8,16
run_json cluster "$mokc" qwen3-30b-a3b bf16 1,64 --cluster 2 --items fixed
run_json cluster-off "$mokc" qwen3-30b-a3b bf16 1,64 --cluster 2 --items fixed --decode-max-rows off
BENCH_BUDGET=120
for T in 1 8; do
	bench "old-llama4-scout-T$T" "$old" $T --model llama4-scout --iters 30 --kernels
	bench "new-llama4-scout-T$T" "$mokc" $T --model llama4-scout --iters 30 --kernels
done
for t in TestCaptureForward TestLayerSaveFC1 TestPhaseTimesGPU TestItemsQueueGPU TestClusterGPU TestChainGPU; do
	left 420 || { echo "skipped $t" >>"$S"; continue; }
	pkgtest runtime "$t" 170 $C/runtime.test -test.v -test.count=1 -test.timeout 160s -test.run "^$t\$"
	grep -E "^--- |^    --- FAIL|panic|timed out" "$O/$t.log" | head -8 >>"$S"
done
bench_kernels
echo "elapsed $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
