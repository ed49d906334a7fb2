#!/usr/bin/env bash
# One device call: the GPU checks of the forward, built here with `make device-bins` and run on a
# GPU machine from the repository root. Logs go to $OUT (default ./device-out); the summary is
# printed last. Builds nothing. Usage: bash scripts/device-verify.sh [quick]
set -u
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/nvidia/lib64
export MOKC_REQUIRE_GPU=1 MOKC_CACHE_DIR=off PYTHONUNBUFFERED=1
root=$PWD
summary=$OUT/summary.txt
: >"$summary"
step() { # name timeout log command...
	local name=$1 limit=$2 log=$3
	shift 3
	local t0=$SECONDS
	echo "=== $name: $*" >>"$log"
	timeout "$limit" "$@" >>"$log" 2>&1
	local rc=$?
	printf '%-44s rc=%-3d %4ds\n' "$name" "$rc" "$((SECONDS - t0))" | tee -a "$summary"
}
mokc=$root/.carry/mokc
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv >>"$summary"

(cd runtime && step "runtime: driver API + Layer tests" 150 "$OUT/tests.log" ../.carry/runtime.test -test.v -test.count=1)
(cd codegen/selftest && step "selftest kernels (ours vs llc-19)" 60 "$OUT/tests.log" ../../.carry/codegen_selftest.test -test.v -test.count=1)
[[ ${1:-} == quick ]] && { cat "$summary"; exit 0; }

# Every preset x {sm_80, sm_90a} x T in {0, 1, 64, 4096}, 10 bitwise-compared runs each: one JSON line per
# (model, target, T) on stdout, progress and the verdict on stderr (expected: 1-2 minutes on 16 cores).
step "run every preset sm_80,sm_90a T=0,1,64,4096" 480 "$OUT/run.log" "$mokc" run --model all --target sm_80,sm_90a --tokens 0,1,64,4096 --repeat 10 --json
for m in qwen3-30b-a3b gpt-oss-120b deepseek-v3; do
	step "bench $m sm_90a T=4096" 120 "$OUT/bench.log" "$mokc" bench --model $m --target sm_90a --tokens 4096 --json
done
step "bench qwen3-30b-a3b sm_80 T=4096" 90 "$OUT/bench.log" "$mokc" bench --model qwen3-30b-a3b --target sm_80 --tokens 4096 --json
step "torch baseline T=4096" 150 "$OUT/torch.log" python3 bench/torch_moe.py --models qwen3-30b-a3b,gpt-oss-120b,deepseek-v3 --tokens 4096 --json "$OUT/torch.json"
step "memcheck qwen3-30b-a3b sm_90a T=64" 150 "$OUT/memcheck.log" compute-sanitizer --tool memcheck --error-exitcode 9 "$mokc" run --model qwen3-30b-a3b --target sm_90a --tokens 64
step "memcheck gpt-oss-120b sm_90a T=64" 200 "$OUT/memcheck.log" compute-sanitizer --tool memcheck --error-exitcode 9 "$mokc" run --model gpt-oss-120b --target sm_90a --tokens 64
grep -E "^(--- FAIL|FAIL|ok|PASS)" "$OUT/tests.log" | tail -20
grep -E "rel|error|FAIL" "$OUT/run.log" | tail -30
cat "$summary"
