# run 37 call 3, short form for a call of about 140 s: the GEMM cases two per SM (v1 *_2sm, v2
# *_2smwg) against the float64 GEMM, then qwen3-30b-a3b mxfp8 T = 4096, the default against v2
# (128x128x128, two per SM), alternated twice, with kernel times.
START=$(date +%s); . scripts/device-env.sh; . scripts/device-lib.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader >>"$S"
(cd codegen && timeout 60 ../.carry/codegen.test -test.v -test.count=1 -test.run 'TestSM90GemmGPU/.*_2sm|TestSM90MXGemmGPU/.*_2sm') >"$O/gemm2sm.log" 2>&1
echo "gemm2sm rc=$?" >>"$S"; grep -E -- "--- (PASS|FAIL)|fit an SM" "$O/gemm2sm.log" | head -30 >>"$S"
MX2="--fc1-tile 128x128x128 --fc2-tile 128x128x128 --stages 2 --mma-warps 4"
BENCH_BUDGET=120
for i in 1 2; do
bench mx-default "$mokc" 4096 --model qwen3-30b-a3b --precision mxfp8 --iters 20 --kernels
bench mx-v2 "$mokc" 4096 --model qwen3-30b-a3b --precision mxfp8 --iters 20 --kernels $MX2 --blocks-per-sm 2
done
python3 - "$O/bench.jsonl" >>"$S" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    if line.startswith("{"):
        d = json.loads(line)
        print("kernels", d["label"], round(d["median_ms"], 4), " ".join("%s=%.1f" % (k["name"][4:], 1000 * k["median_ms"]) for k in d.get("kernel_times", [])))
PY
grep -hv "^{" "$O/bench.jsonl" >>"$S"; cat "$S"
