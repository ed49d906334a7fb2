#!/usr/bin/env bash
# run 48 call 4. Carry: `make device-bins` of e8da255 (the decode tiles). Every part bounded.
# No prediction beyond PASS: the GPU tests whose default schedules now take the bf16 decode tiles
# in combinations not yet run (the chained kernel moe_fc1_fc2_decode_gathered, the decode FC2 in
# CTA pairs, two blocks per SM, the saved FC1 output, graph capture, phase times, the queue walk).
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
for t in TestChainGPU TestClusterGPU TestSharesSMGPU TestLayerSaveFC1 TestCaptureForward TestPhaseTimesGPU TestItemsQueueGPU; do
	left 240 || { echo "skipped $t" >>"$S"; continue; }
	pkgtest runtime "$t" 90 $C/runtime.test -test.v -test.count=1 -test.timeout 80s -test.run "^$t\$"
	grep -E "^--- |^    --- FAIL|panic|timed out" "$O/$t.log" | head -8 >>"$S"
done
echo "elapsed $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
