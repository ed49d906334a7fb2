#!/usr/bin/env bash
# Where the forward's time goes, on a GPU machine from the repository root (binaries from
# `make device-bins`; builds nothing). Logs go to $OUT (default ./device-out).
#   1. mokc bench --kernels: each kernel's median time, sm_90a, T = 4096, for MODELS.
#   2. Nsight Compute (ncu, clocks not locked) Speed Of Light + memory workload of the heavy
#      kernels of one forward of each of NCU_MODELS.
#   3. With WGRAD_MODEL set (e.g. mixtral-8x7b): ncu of that model's two routed weight-gradient
#      kernels (fwd+bwd, bf16 main grads, T = 4096, the --wgrad WGRAD kernel, default wgmma) with
#      the warp-stall sampling by source line (WarpStateStats, SourceCounters), to see what their
#      warps wait for (docs/perf.md, backward v5's outcome).
#   4. With MX_MODEL set (e.g. qwen3-30b-a3b): ncu of that model's mxfp8 routed FC1 at T = MX_TOKENS
#      (default 64) with MX_FLAGS (default: the expansion with 64x256 tiles) and the same warp-stall
#      sampling by source line, to see what the converters and consumers wait for (docs/perf.md,
#      mxfp8 v6's closing paragraph); MX_KERNELS (a regex), MX_SKIP and MX_COUNT pick other
#      launches (e.g. '^moe_fc[12]_decode$', 4, 2: both decode GEMMs after two warm-up forwards,
#      kept in the same files; MX_TIMEOUT bounds the ncu run, default 300 s); the report is kept
#      (mx-fc1.ncu-rep) and its source page, per SASS instruction, written as CSV (mx-fc1-sass.csv).
# Usage: [MODELS=... NCU_MODELS=... (empty: skip)] [WGRAD_MODEL=m [WGRAD=wgmma-ws]]
#        [MX_MODEL=m [MX_TOKENS=T] [MX_FLAGS=...] [MX_KERNELS=re MX_SKIP=n MX_COUNT=n]] bash scripts/device-profile.sh
set -u
. "$(dirname "$0")/device-env.sh"
export MOKC_REQUIRE_GPU=1
MODELS=${MODELS-qwen3-30b-a3b gpt-oss-120b deepseek-v3}
NCU_MODELS=${NCU_MODELS-qwen3-30b-a3b deepseek-v3}
TARGET=${TARGET:-sm_90a}
for m in $MODELS; do
	echo "=== bench --kernels $m $TARGET T=4096" >>"$OUT/kernels.log"
	timeout 120 "$mokc" bench --model "$m" --target "$TARGET" --tokens 4096 --kernels >>"$OUT/kernels.log" 2>&1
	echo "rc=$? bench --kernels $m" | tee -a "$OUT/summary.txt"
done
for m in $NCU_MODELS; do
	# The second forward's kernels (the first is warm-up for caches and clocks).
	echo "=== ncu $m $TARGET T=4096" >>"$OUT/ncu.log"
	timeout 200 ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis \
		-k 'regex:moe_(shared_)?(fc1|fc2)|moe_gather|moe_permute|moe_combine' --launch-skip 7 --launch-count 7 \
		"$mokc" bench --model "$m" --target "$TARGET" --tokens 4096 --iters 1 --warmup 2 >>"$OUT/ncu.log" 2>&1
	echo "rc=$? ncu $m" | tee -a "$OUT/summary.txt"
done
if [ -n "${WGRAD_MODEL:-}" ]; then
	echo "=== ncu weight gradients $WGRAD_MODEL --wgrad ${WGRAD:-wgmma}" >>"$OUT/ncu-wgrad.log"
	timeout 300 ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
		--section SourceCounters --section Occupancy -k 'regex:moe_fc._wgrad' --launch-count 2 \
		"$mokc" bench --backward --main-grad bf16 --wgrad "${WGRAD:-wgmma}" --model "$WGRAD_MODEL" --target "$TARGET" \
		--tokens 4096 --iters 1 --warmup 0 >>"$OUT/ncu-wgrad.log" 2>&1
	echo "rc=$? ncu weight gradients $WGRAD_MODEL" | tee -a "$OUT/summary.txt"
fi
if [ -n "${MX_MODEL:-}" ]; then
	flags=${MX_FLAGS---mx-gemm expand --fc1-tile 64x256x128 --fc2-tile 64x256x128 --stages 3 --mma-warps 4} # MX_FLAGS= : the default schedule
	echo "=== ncu mxfp8 FC1 $MX_MODEL T=${MX_TOKENS:-64} $flags" >>"$OUT/ncu-mxfp8.log"
	# shellcheck disable=SC2086 # flags is a list of flags
	timeout "${MX_TIMEOUT:-300}" ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
		--section SourceCounters --section Occupancy -k "regex:${MX_KERNELS:-^moe_fc1(_decode)?\$}" --launch-skip "${MX_SKIP:-2}" --launch-count "${MX_COUNT:-1}" \
		-f -o "$OUT/mx-fc1" "$mokc" bench --precision mxfp8 $flags --model "$MX_MODEL" --target "$TARGET" --tokens "${MX_TOKENS:-64}" \
		--iters 1 --warmup 2 >>"$OUT/ncu-mxfp8.log" 2>&1
	echo "rc=$? ncu mxfp8 FC1 $MX_MODEL" | tee -a "$OUT/summary.txt"
	ncu --import "$OUT/mx-fc1.ncu-rep" >>"$OUT/ncu-mxfp8.log" 2>&1
	# Per SASS instruction: executed count and warp-stall samples by reason (our PTX has no line
	# information, so the SASS view is the finest there is).
	ncu --import "$OUT/mx-fc1.ncu-rep" --page source --print-source sass --csv >"$OUT/mx-fc1-sass.csv" 2>>"$OUT/ncu-mxfp8.log"
	echo "rc=$? ncu source page (SASS) of mxfp8 FC1" | tee -a "$OUT/summary.txt"
fi
[ -f "$OUT/kernels.log" ] && grep -E "^===|moe_|median" "$OUT/kernels.log"
