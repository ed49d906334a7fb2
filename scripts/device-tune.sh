#!/usr/bin/env bash
# Schedule sweep on a GPU machine from the repository root (binaries from `make device-bins`; builds
# nothing): for each schedule in CONFIGS and each of MODELS, check the forward against the float64
# reference (mokc run, T = 1, 64, 4096, 3 bitwise-compared runs) and time it (mokc bench --json,
# T = 4096). Logs go to $OUT (default ./device-out): tune-run.log, tune-bench.jsonl, summary.txt.
# Usage: bash scripts/device-tune.sh
set -u
. "$(dirname "$0")/device-env.sh"
export MOKC_REQUIRE_GPU=1
TARGET=${TARGET:-sm_90a}
MODELS=${MODELS:-qwen3-30b-a3b gpt-oss-120b deepseek-v3}
CONFIGS=(
	""
	"--fc1-tile 192x192x64 --fc2-tile 192x192x64 --mma-warps 12 --stages 3"
	"--fc1-tile 192x128x64 --fc2-tile 192x192x64 --mma-warps 12 --stages 3"
	"--fc1-tile 128x256x64 --fc2-tile 128x192x64 --stages 4"
)
for cfg in "${CONFIGS[@]}"; do
	for m in $MODELS; do
		name="$m ${cfg:-default}"
		echo "=== run $name" >>"$OUT/tune-run.log"
		# shellcheck disable=SC2086
		timeout 120 "$mokc" run --model "$m" --target "$TARGET" --tokens 1,64,4096 --repeat 3 $cfg >>"$OUT/tune-run.log" 2>&1
		echo "rc=$? run $name" | tee -a "$OUT/summary.txt"
		# shellcheck disable=SC2086
		timeout 120 "$mokc" bench --model "$m" --target "$TARGET" --tokens 4096 --json $cfg >>"$OUT/tune-bench.jsonl" 2>>"$OUT/tune-run.log"
		echo "rc=$? bench $name" | tee -a "$OUT/summary.txt"
	done
done
python3 - "$OUT/tune-bench.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    if line.startswith("{"):
        r = json.loads(line)
        print(f"{r['model']:16} {r['median_ms']:8.4f} ms  {r['roofline_fraction']*100:5.1f}%  {r['schedule']}")
PY
