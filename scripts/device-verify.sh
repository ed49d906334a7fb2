#!/usr/bin/env bash
# The GPU checks (forward, backward, MXFP8), built here with `make device-bins` and run on a GPU machine from the
# repository root. Builds nothing. Logs go to $OUT (default ./device-out) as logs.tgz beside summary.txt;
# the summary is printed last.
#
# Usage: [BUDGET=seconds] bash scripts/device-verify.sh [PHASE...]   (default: tests run perf)
#   tests  the driver API tests, the runtime Layer tests, the self-test kernels (ours vs llc-19) and
#          codegen's GPU tests (engine GEMM cases, the sm_80 forward)
#   run    every preset x {sm_80, sm_90a} x T in TOKENS (default 0,1,64,4096), 10 bitwise-compared runs, one
#          `mokc run` per preset so that one failure or hang costs only that preset; MODELS="a b" narrows it
#   perf   mokc bench vs the PyTorch grouped pipeline at T = 4096, and compute-sanitizer memcheck at T = 64
#   bwdtests  the backward's GPU tests only (codegen's per-op and whole-backward tests, the data
#          gradients' N-major GEMMs, runtime's Layer.Backward training steps)
#   bwdrun every preset x {sm_80, sm_90a} x T in TOKENS, `mokc run --backward --repeat 10`, and one preset
#          with a routing map, in three memory-bounded lanes side by side; WGRAD="--wgrad mma" selects the
#          mma.sync weight-gradient kernel on sm_90a too (wgmma is its default); TARGETS=sm_90a with
#          WGRAD="--wgrad wgmma-ws" (sm_90a only)
#   mxfp8  MXFP8 on sm_90a: the quantize kernel and GEMM cases (both --mx-gemm ways), `mokc run --precision
#          mxfp8` on four presets (both ways),
#          memcheck, the backward's per-op test and `mokc run --backward --precision mxfp8` on three presets
#          (and memcheck), and bench beside bf16 at T = 64 and 4096
#   sweep  mokc bench over T = 64..16384 (forward; forward + backward at 1024 and 4096) for qwen3-30b-a3b and
#          deepseek-v3, drawn by `mokc plot roofline` into $OUT/roofline.svg
#   new    the kernels built but not yet run (--mx-gemm expand, the mxfp8 backward, --wgrad wgmma-ws,
#          --group-m): their GPU tests, a run of each, first timings beside what they would replace
#   raster the persistent GEMMs' work-item order (--group-m 8, 16 against 0): checked with mokc run, then
#          timed forward and forward + backward at T = 4096 on mixtral-8x7b, deepseek-v3, qwen3-30b-a3b; RASTER=check: the correctness runs only
#   mxfp8run  every preset with --precision mxfp8 on sm_90a, forward and backward, T in TOKENS, 10 runs each;
#          MX_LANES="a b|c|d e" sets the lanes' presets (kimi-k2's backward needs the GPU alone), MX_DIRS="bwd"
#          one direction, MX_ARGS="--sample 32" more flags
#   mxdecode  the default mxfp8 schedule's decode variant (64x128x128 tiles, 6 stages, one consumer warpgroup,
#          at most 16 mean rows per expert): mokc run at T = 0, 1, 64, 256, 4096 on three presets (forward
#          and one backward), then timed beside bf16 and the 128x128 tiles without the variant at T = 64, 256
#          (EXPAND_MODELS)
#   expand the MXFP8 expansion (--mx-gemm expand): the widening and GEMM tests, three presets with the
#          default and the decode tiles, memcheck, timed beside bf16 and promote (and at T = 64 promote's
#          64x128 decode tile) at T = 64 and 4096 with three tile shapes (EXPAND_MODELS)
#   mxstages  mxfp8 promote with 4, 5 and 6 stages: checked at 6, timed beside bf16 at T = 64 and 4096
#   mxswap  the operand swap of the decode variant (32-row tiles): the MX GEMM, quantizing-gather, quantize and rows
#          tests, mokc run --precision mxfp8 at T = 0, 1, 64, 256 on four presets (RUN_MODELS) and the backward on
#          one, memcheck, bench beside bf16 and, with OLD_MOKC=path, the previous binary's mxfp8 at T = 64 and 256
#          (SWAP_MODELS)
#   mxab   a candidate build (AB_DIR: its codegen.test and mokc) beside this one: its MX GEMM tests and mxfp8 runs
#          (T = 0, 1, 64, 10 runs), then bf16 and both builds' mxfp8 timed at T = 64
#   mxcodes  the promote GEMM with the scale codes copied ahead by cp.async (docs/perf.md, mxfp8 v7): the MX
#          GEMM and rows tests, mokc run --precision mxfp8 forward (four presets) and backward (two), memcheck,
#          then bench beside bf16 and, with OLD_MOKC=path, the previous binary's bf16 and promote at T = 64 and 4096
#   sanitize  compute-sanitizer memcheck and racecheck of run --backward at T = 64 (qwen3-30b-a3b, gpt-oss-120b)
#   megakernel  --items fixed and --chain fc1-fc2 beside the default (the queue walk of work items) in one
#          binary: their runtime GPU tests, mokc run's y_sha256 compared per (preset, precision, T) across the
#          flag sets (MK_MODELS, MK_TOKENS), the backward of both walks, memcheck and racecheck of moe_fc1_fc2
#   megabench  the same flag sets timed, alternated, at T = 4096, 300 and 64 (bf16), 4096 and 64 (mxfp8)
#   cluster  --cluster 2 (the bf16 routed GEMMs in CTA pairs sharing A by TMA multicast): TestClusterGPU, mokc run's
#          y_sha256 with and without per (preset, T) (CL_MODELS, CL_TOKENS), the backward, memcheck, racecheck and
#          synccheck
#   clusterbench  --cluster 2's medians alternated with the default at T = 4096 (four presets; three in mxfp8), 16384
#          and 64, in CL_ROUNDS rounds (default 2)
#   train  the runtime's training tests alone (TestLayerSaveFC1, TestLayerBackward's three steps)
#   speed  issue #10's four presets at T = 4096: forward --group-m 0 vs 8, forward + backward default vs
#          --save-fc1 --group-m 8 (bf16 main grads), beside PyTorch's autograd pipeline
#   savefc1  --save-fc1 (the forward keeps FC1's output for the backward): the runtime tests beside
#          mokc run --backward --save-fc1 on four layer forms, then forward + backward timed with and without
#          it beside PyTorch's autograd pipeline
#   backward  forward + backward timed (mokc bench --backward --kernels, fp32 and bf16 main grads, the
#          three weight-gradient kernels) beside
#          PyTorch's autograd pipeline, then compute-sanitizer memcheck and racecheck of Layer.Backward
set -u
. "$(dirname "$0")/device-env.sh"
export MOKC_REQUIRE_GPU=1 PYTHONUNBUFFERED=1
root=$PWD
summary=$OUT/summary.txt
touch "$summary"
# OLD_MOKC may come unpacked from a .gz, which keeps the archive's mode (without x).
if [ -n "${OLD_MOKC:-}" ] && [ -f "$OLD_MOKC" ]; then chmod +x "$OLD_MOKC"; fi
# BUDGET (seconds, optional): every step is cut at that deadline and later ones are skipped, so
# that one invocation under an outer time limit ends with its logs written.
END=$((SECONDS + ${BUDGET:-86400}))
step() { # name timeout log command...
	local name=$1 limit=$2 log=$3
	shift 3
	local left=$((END - SECONDS))
	[ "$left" -lt "$limit" ] && limit=$left
	if [ "$limit" -le 5 ]; then
		printf '%-48s skipped (BUDGET)\n' "$name" | tee -a "$summary"
		return
	fi
	local t0=$SECONDS
	echo "=== $name: $*" >>"$log"
	timeout "$limit" "$@" >>"$log" 2>&1
	local rc=$?
	last_rc=$rc
	printf '%-48s rc=%-3d %4ds\n' "$name" "$rc" "$((SECONDS - t0))" | tee -a "$summary"
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv >>"$summary"
# sha_compare FILE N WHAT: from mokc run --json lines labelled by flag set ("label"), the (model,
# precision, T) whose labelled runs (at least N) share one y_sha256, those that do not, and the failed runs.
sha_compare() {
	python3 - "$1" "$2" "$3" <<'PY' | tee -a "$summary"
import collections, json, sys
sha = collections.defaultdict(dict)
bad = 0
for line in open(sys.argv[1]):
    d = json.loads(line)
    if "tokens" not in d:
        continue
    sha[(d["model"], d.get("precision", ""), d["tokens"])][d["label"]] = d.get("y_sha256", "")
    bad += not d["pass"]
n = int(sys.argv[2])
ok = lambda v: len(set(v.values())) == 1 and len(v) >= n
same = sum(ok(v) for v in sha.values())
print("sha_compare: %d (model, precision, T) with one y_sha256 %s, %d not, %d runs failed" % (same, sys.argv[3], len(sha) - same, bad))
for k, v in sorted(sha.items()):
    if not ok(v):
        print("  differ", k, {l: h[:16] for l, h in v.items()})
PY
}
# bench_step PREFIX ITERS T flags...: mokc bench of T tokens on sm_90a with --kernels, its JSON appended
# to $OUT/PREFIX-bench.jsonl (bench_summary reads it), its log to $OUT/PREFIX-bench.log.
bench_step() {
	local prefix=$1 iters=$2 T=$3
	shift 3
	step "bench T=$T $*" 90 "$OUT/$prefix-bench.log" bash -c "\"$mokc\" bench --target sm_90a --tokens $T --iters $iters --kernels --json $* >>\"$OUT/$prefix-bench.jsonl\""
}
# bench_summary FILE: one line per mokc bench --json report in FILE: the preset, precision, T, the
# flags its schedule names (chain, cluster; fixed: an sm_90a schedule without the default queue walk of
# GEMM items, --items fixed's or per-expert weights'), the median, the routed GEMM kernels' medians
# (--kernels) and the inner phases (--phases), in microseconds, and the blocks of the kernels in clusters.
bench_summary() {
	python3 - "$1" <<'PY' | tee -a "$summary"
import json, sys
dec = json.JSONDecoder()
text, i = open(sys.argv[1]).read(), 0
while True:
    while i < len(text) and text[i] in " \n\t":
        i += 1
    if i >= len(text):
        break
    d, i = dec.raw_decode(text, i)
    sched = d.get("schedule", "")
    # The sm_90a default walks its GEMM items from a queue: a schedule without it (but for the chain's and
    # the clusters', which take the fixed walk) is --items fixed's (or per-expert weights').
    flags = [f for f, mark in (("chain", "chain fc1-fc2"), ("cluster", "cluster=2")) if mark in sched]
    if not flags and "sm_90a" in sched and "from a queue" not in sched:
        flags = ["fixed"]
    flags = flags or ["default"]
    ks = " ".join("%s=%.1f" % (k["name"], 1000 * k["median_ms"]) for k in d.get("kernel_times", []) if k["name"].startswith("moe_fc"))
    ph = " ".join("%s@%.1f+%.1f" % (p["name"][4:], 1000 * p["start_ms"], 1000 * p["ms"]) for p in d.get("phases", []))
    cg = " ".join("%s:%d" % kv for kv in sorted(d.get("cluster_grids", {}).items()))
    print("bench", d.get("model"), d.get("precision", ""), "T=%s" % d.get("tokens"), "+".join(flags), "median %.4f ms" % d.get("median_ms", 0), ks, ph, cg)
PY
}
# sanitize_backward: compute-sanitizer memcheck and racecheck of the forward + backward (issue #10's check)
# on qwen3-30b-a3b and gpt-oss-120b at T = 64, sm_90a, with the default schedule.
sanitize_backward() {
	for tool in memcheck racecheck; do
		for m in qwen3-30b-a3b gpt-oss-120b; do
			step "$tool run --backward $m sm_90a T=64" 300 "$OUT/sanitize-backward.log" \
				compute-sanitizer --tool $tool --error-exitcode 9 "$mokc" run --backward --model $m --target sm_90a --tokens 64 --repeat 1
		done
	done
}
phases=${*:-tests run perf}
TOKENS=${TOKENS:-0,1,64,4096}

for phase in $phases; do
	case $phase in
	tests)
		(cd driver && step "driver: CUDA driver API tests" 60 "$OUT/tests.log" ../.carry/driver.test -test.v -test.count=1)
		(cd runtime && step "runtime: Layer tests (forward, backward)" 400 "$OUT/tests.log" ../.carry/runtime.test -test.v -test.count=1)
		(cd codegen/selftest && step "selftest kernels (ours vs llc-19)" 60 "$OUT/tests.log" ../../.carry/codegen_selftest.test -test.v -test.count=1)
		(cd codegen && step "codegen: engine GEMMs + forward on the GPU" 150 "$OUT/tests.log" ../.carry/codegen.test -test.v -test.count=1 \
			-test.run 'TestForwardSM80|TestSM90GemmGPU|TestSM90NMajorGPU|TestSM80NMajorGPU|TestSM90GemmPerf|TestSM100GemmGPU|TestForwardTimingSM80|TestBackwardPerOpsGPU|TestBackwardGPU')
		grep -E "^(--- FAIL|FAIL|ok|PASS)" "$OUT/tests.log" | tail -20
		;;
	run)
		# Small layers first; one JSON line per (model, target, T) goes to run.jsonl, progress to run.log.
		models=${MODELS:-$("$mokc" inspect --list | awk '{print $1}')}
		for m in $models; do
			step "run $m sm_80,sm_90a T=$TOKENS x10" 200 "$OUT/run.log" \
				bash -c "\"$mokc\" run --model $m --target sm_80,sm_90a --tokens $TOKENS --repeat 10 --json >>\"$OUT/run.jsonl\""
		done
		grep -E "rel|error|FAIL|verdict" "$OUT/run.log" | tail -40
		;;
	perf)
		for m in qwen3-30b-a3b gpt-oss-120b deepseek-v3; do
			step "bench $m sm_90a T=4096" 120 "$OUT/bench.log" "$mokc" bench --model $m --target sm_90a --tokens 4096 --kernels --json
		done
		step "bench qwen3-30b-a3b sm_80 T=4096" 90 "$OUT/bench.log" "$mokc" bench --model qwen3-30b-a3b --target sm_80 --tokens 4096 --json
		step "torch baseline T=4096" 150 "$OUT/torch.log" python3 bench/torch_moe.py --models qwen3-30b-a3b,gpt-oss-120b,deepseek-v3 --tokens 4096 --json "$OUT/torch.json"
		step "triton fused-MoE peer T=64,4096" 150 "$OUT/triton.log" python3 bench/triton_moe.py --models qwen3-30b-a3b,gpt-oss-120b,deepseek-v3 --tokens 64,4096 --large 128x256x64x8x3 --json "$OUT/triton.json"
		step "memcheck qwen3-30b-a3b sm_90a T=64" 150 "$OUT/memcheck.log" compute-sanitizer --tool memcheck --error-exitcode 9 "$mokc" run --model qwen3-30b-a3b --target sm_90a --tokens 64
		step "memcheck gpt-oss-120b sm_90a T=64" 200 "$OUT/memcheck.log" compute-sanitizer --tool memcheck --error-exitcode 9 "$mokc" run --model gpt-oss-120b --target sm_90a --tokens 64
		;;
	bwdtests)
		(cd codegen && step "codegen: backward per-op + whole backward on the GPU" 200 "$OUT/tests.log" ../.carry/codegen.test -test.v -test.count=1 \
			-test.run 'TestBackwardPerOpsGPU|TestBackwardGPU|TestSM90NMajorGPU|TestSM80NMajorGPU')
		(cd runtime && step "runtime: Layer.Backward training steps" 300 "$OUT/tests.log" ../.carry/runtime.test -test.v -test.count=1 -test.run 'TestLayerBackward')
		grep -E "^(--- FAIL|FAIL|ok|PASS)" "$OUT/tests.log" | tail -20
		;;
	bwdrun)
		# Three lanes of presets side by side (the float64 references and weight generation are CPU-bound; the
		# machine has 16 cores). GPU memory (139 GiB): weights + fp32 main grads are 101 GB for kimi-k2 (run with
		# bf16 main grads: 67 GB), 68 GB deepseek-v3, 39 GB deepseek-v4-flash, 152 GB dsv4-pro-proxy (bf16:
		# 101 GB, last), at most 19 GB for every other preset, so the big ones share one lane. MODELS is ignored.
		run1() { step "run --backward $1 $2 ${WGRAD:-}" "$3" "$OUT/run-backward-$1$4.log" bash -c "\"$mokc\" run --backward ${WGRAD:-} --model $1 $2 --target ${TARGETS:-sm_80,sm_90a} --tokens $TOKENS --repeat 10 --json >>\"$OUT/run-backward-$1$4.jsonl\""; }
		(run1 kimi-k2 "--main-grad bf16" 300 ""; run1 deepseek-v3 "" 300 ""; run1 deepseek-v4-flash "" 240 ""; run1 dsv4-pro-proxy "--main-grad bf16" 300 "") &
		(run1 mixtral-8x7b "" 300 ""; run1 llama4-scout "" 240 ""; run1 qwen2-57b-a14b "" 240 ""; run1 qwen3-235b-a22b "" 240 "") &
		(run1 olmoe-1b-7b "" 120 ""; run1 qwen3-30b-a3b "" 120 ""; run1 gpt-oss-20b "" 180 ""; run1 gpt-oss-20b "--routing map" 180 "-map"
			run1 deepseek-v2-lite "" 180 ""; run1 gpt-oss-120b "" 240 "") &
		wait
		cat "$OUT"/run-backward-*.jsonl >"$OUT/run-backward.jsonl" 2>/dev/null
		grep -hE "FAIL|error" "$OUT"/run-backward-*.log | tail -40
		;;
	backward)
		# Forward + backward timed beside PyTorch's autograd pipeline (whose weight grads are bf16, accumulating),
		# then the backward's kernels under the sanitizers (runtime's GPU test of three training steps).
		for m in qwen3-30b-a3b gpt-oss-120b deepseek-v3 mixtral-8x7b; do
			for g in fp32 bf16; do
				for w in mma wgmma wgmma-ws; do
					step "bench --backward $m sm_90a T=4096 $g --wgrad $w" 150 "$OUT/bench-backward.log" "$mokc" bench --backward --wgrad $w --main-grad $g --model $m --target sm_90a --tokens 4096 --iters 10 --warmup 2 --kernels --json
				done
			done
		done
		step "torch baseline --backward T=4096" 200 "$OUT/torch-backward.log" python3 bench/torch_moe.py --backward --models qwen3-30b-a3b,gpt-oss-120b,deepseek-v3,mixtral-8x7b --tokens 4096 --json "$OUT/torch-backward.json"
		sanitize_backward
		;;
	mxfp8)
		# The MXFP8 forward (sm_90a): the quantize kernel byte for byte, the whole forward against the float64
		# reference of the quantized values, memcheck, and its speed beside the bf16 forward.
		(cd codegen && step "codegen: MXFP8 quantize kernel and GEMMs" 90 "$OUT/tests.log" ../.carry/codegen.test -test.v -test.count=1 -test.run 'TestQuantizeGPU|TestSM90MXGemmGPU')
		for m in qwen3-30b-a3b gpt-oss-120b deepseek-v2-lite llama4-scout; do
			for g in promote expand; do
				step "run --precision mxfp8 --mx-gemm $g $m sm_90a T=$TOKENS x10" 240 "$OUT/run-mxfp8.log" \
					bash -c "\"$mokc\" run --precision mxfp8 --mx-gemm $g --model $m --target sm_90a --tokens $TOKENS --repeat 10 --json >>\"$OUT/run-mxfp8.jsonl\""
			done
		done
		step "memcheck run --precision mxfp8 qwen3-30b-a3b T=64" 150 "$OUT/memcheck.log" compute-sanitizer --tool memcheck --error-exitcode 9 "$mokc" run --precision mxfp8 --model qwen3-30b-a3b --target sm_90a --tokens 64
		# The MXFP8 backward: its own ops, then whole layers (clamped with biases, weight on the input).
		(cd codegen && step "codegen: backward per-op (mxfp8 layers on sm_90a)" 200 "$OUT/tests.log" ../.carry/codegen.test -test.v -test.count=1 -test.run 'TestBackwardPerOpsGPU')
		(cd runtime && step "runtime: mxfp8 rows per expert 1..255, H = I = 2880" 200 "$OUT/tests.log" ../.carry/runtime.test -test.v -test.count=1 -test.run 'TestLayerMXFP8Rows')
		for m in qwen3-30b-a3b gpt-oss-120b llama4-scout; do
			step "run --backward --precision mxfp8 $m sm_90a T=$TOKENS x10" 240 "$OUT/run-mxfp8.log" \
				bash -c "\"$mokc\" run --backward --precision mxfp8 --model $m --target sm_90a --tokens $TOKENS --repeat 10 --json >>\"$OUT/run-mxfp8-backward.jsonl\""
		done
		step "memcheck run --backward --precision mxfp8 qwen3-30b-a3b T=64" 200 "$OUT/memcheck.log" compute-sanitizer --tool memcheck --error-exitcode 9 "$mokc" run --backward --precision mxfp8 --model qwen3-30b-a3b --target sm_90a --tokens 64 --repeat 1
		for m in qwen3-30b-a3b deepseek-v3; do
			for T in 64 4096; do
				step "bench $m sm_90a T=$T bf16" 120 "$OUT/bench-mxfp8.log" "$mokc" bench --model $m --target sm_90a --tokens $T --json
				for g in promote expand; do
					step "bench $m sm_90a T=$T mxfp8 $g" 120 "$OUT/bench-mxfp8.log" "$mokc" bench --precision mxfp8 --mx-gemm $g --model $m --target sm_90a --tokens $T --json
				done
			done
		done
		;;
	expand)
		# The MXFP8 expansion (--mx-gemm expand: e4m3 tiles by TMA, widened to bf16 by converter warps, the
		# bf16 wgmma loop): the widening bit for bit, the GEMM cases, whole layers with the default tiles and
		# the decode tiles, memcheck, then timed beside bf16 and promote with three tile shapes (EXPAND_MODELS).
		last_rc=0
		cd codegen && step "codegen: e4m3 widening, MX GEMMs both ways" 150 "$OUT/tests.log" ../.carry/codegen.test -test.v -test.count=1 -test.run 'TestWidenE4M3GPU|TestSM90MXGemmGPU'
		cd "$root"
		if [ "$last_rc" != 0 ]; then # a failing or hanging GEMM would make every layer step time out
			echo "expand: the GEMM tests failed (rc=$last_rc); the layer steps are skipped" | tee -a "$summary"
			continue
		fi
		decode="--fc1-tile 64x256x128 --fc2-tile 64x256x128 --stages 3 --mma-warps 4"
		for m in qwen3-30b-a3b gpt-oss-120b deepseek-v2-lite; do
			# The default tiles and the decode tiles have two converter warpgroups; 128x256 only the
			# producer's three converter warps (setmaxnreg).
			for tiles in "" "$decode" "--fc1-tile 128x256x128 --fc2-tile 128x256x128 --stages 3"; do
				step "run --precision mxfp8 --mx-gemm expand $tiles $m T=$TOKENS x3" 150 "$OUT/run-expand.log" \
					bash -c "\"$mokc\" run --precision mxfp8 --mx-gemm expand $tiles --model $m --target sm_90a --tokens $TOKENS --repeat 3 --json >>\"$OUT/run-expand.jsonl\""
			done
		done
		step "run --precision mxfp8 promote 64x128x128 6 stages qwen3-30b-a3b T=1,64 x3" 100 "$OUT/run-expand.log" \
			bash -c "\"$mokc\" run --precision mxfp8 --fc1-tile 64x128x128 --fc2-tile 64x128x128 --stages 6 --mma-warps 4 --model qwen3-30b-a3b --target sm_90a --tokens 1,64 --repeat 3 --json >>\"$OUT/run-expand.jsonl\""
		step "run --backward --precision mxfp8 --mx-gemm expand qwen3-30b-a3b T=$TOKENS x3" 200 "$OUT/run-expand.log" \
			bash -c "\"$mokc\" run --backward --precision mxfp8 --mx-gemm expand --model qwen3-30b-a3b --target sm_90a --tokens $TOKENS --repeat 3 --json >>\"$OUT/run-expand.jsonl\""
		step "memcheck run --precision mxfp8 --mx-gemm expand (decode tiles) qwen3-30b-a3b T=64" 150 "$OUT/memcheck.log" \
			compute-sanitizer --tool memcheck --error-exitcode 9 "$mokc" run --precision mxfp8 --mx-gemm expand $decode --model qwen3-30b-a3b --target sm_90a --tokens 64
		for m in ${EXPAND_MODELS:-qwen3-30b-a3b deepseek-v3 gpt-oss-120b}; do
			for T in 64 4096; do
				step "bench $m T=$T bf16" 90 "$OUT/bench-expand.log" bash -c "\"$mokc\" bench --model $m --target sm_90a --tokens $T --kernels --json >>\"$OUT/bench-expand.jsonl\""
				step "bench $m T=$T mxfp8 promote (default schedule)" 90 "$OUT/bench-expand.log" bash -c "\"$mokc\" bench --precision mxfp8 --model $m --target sm_90a --tokens $T --kernels --json >>\"$OUT/bench-expand.jsonl\""
				if [ "$T" = 64 ]; then # promote with one consumer warpgroup and a deeper ring (decode)
					step "bench $m T=$T mxfp8 promote 64x128x128 6 stages" 90 "$OUT/bench-expand.log" bash -c "\"$mokc\" bench --precision mxfp8 --fc1-tile 64x128x128 --fc2-tile 64x128x128 --stages 6 --mma-warps 4 --model $m --target sm_90a --tokens $T --kernels --json >>\"$OUT/bench-expand.jsonl\""
				fi
				for tiles in "" "$decode" "--fc1-tile 128x192x128 --fc2-tile 128x192x128 --stages 3"; do
					step "bench $m T=$T mxfp8 expand $tiles" 90 "$OUT/bench-expand.log" bash -c "\"$mokc\" bench --precision mxfp8 --mx-gemm expand $tiles --model $m --target sm_90a --tokens $T --kernels --json >>\"$OUT/bench-expand.jsonl\""
				done
			done
		done
		grep -hE "FAIL|error" "$OUT"/run-expand.log | tail -20
		;;
	mxdecode)
		# The decode variant (moe_fc1_decode/moe_fc2_decode for T*K/E <= 16): checked inside its token range
		# and past it (qwen3-30b-a3b's range ends at T = 256 exactly), then timed against the 128x128 tiles
		# alone (the tile flags drop the variant).
		for m in qwen3-30b-a3b gpt-oss-120b deepseek-v2-lite; do
			step "run --precision mxfp8 $m T=0,1,64,256,4096 x3" 150 "$OUT/run-mxdecode.log" \
				bash -c "\"$mokc\" run --precision mxfp8 --model $m --target sm_90a --tokens 0,1,64,256,4096 --repeat 3 --json >>\"$OUT/run-mxdecode.jsonl\""
		done
		step "run --backward --precision mxfp8 qwen3-30b-a3b T=1,64,256 x3" 150 "$OUT/run-mxdecode.log" \
			bash -c "\"$mokc\" run --backward --precision mxfp8 --model qwen3-30b-a3b --target sm_90a --tokens 1,64,256 --repeat 3 --json >>\"$OUT/run-mxdecode.jsonl\""
		for m in ${EXPAND_MODELS:-qwen3-30b-a3b gpt-oss-120b deepseek-v3}; do
			for T in 64 256; do
				step "bench $m T=$T bf16" 90 "$OUT/bench-mxdecode.log" bash -c "\"$mokc\" bench --model $m --target sm_90a --tokens $T --kernels --json >>\"$OUT/bench-mxdecode.jsonl\""
				step "bench $m T=$T mxfp8 (decode variant)" 90 "$OUT/bench-mxdecode.log" bash -c "\"$mokc\" bench --precision mxfp8 --model $m --target sm_90a --tokens $T --kernels --json >>\"$OUT/bench-mxdecode.jsonl\""
				step "bench $m T=$T mxfp8 128x128 tiles" 90 "$OUT/bench-mxdecode.log" bash -c "\"$mokc\" bench --precision mxfp8 --fc1-tile 128x128x128 --fc2-tile 128x128x128 --model $m --target sm_90a --tokens $T --kernels --json >>\"$OUT/bench-mxdecode.jsonl\""
			done
		done
		grep -hE "FAIL|error" "$OUT"/run-mxdecode.log | tail -20
		;;
	mxswap)
		# The operand swap (docs/perf.md, mxfp8 v13: the decode variant's 32-row tiles): the MX GEMM tests (its
		# cases), the rows test (32-row tiles too, gate/up interleaved and in halves), runs inside and past the
		# variant's token range, the backward's FC1 recompute, memcheck, then timed beside bf16 and, with OLD_MOKC=path, the
		# previous binary's mxfp8 at T = 64 and 256. RUN_MODELS replaces the four presets run.
		(cd codegen && step "codegen: MX GEMMs (swap cases), quantizing gather, quantize" 200 "$OUT/tests.log" ../.carry/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXGemmGPU|TestGatherMXGPU|TestQuantizeGPU')
		(cd runtime && step "runtime: mxfp8 rows per expert 1..255, H = I = 2880" 200 "$OUT/tests.log" ../.carry/runtime.test -test.v -test.count=1 -test.run 'TestLayerMXFP8Rows')
		for m in ${RUN_MODELS:-qwen3-30b-a3b deepseek-v2-lite mixtral-8x7b gpt-oss-120b}; do
			step "run --precision mxfp8 $m T=0,1,64,256 x3" 150 "$OUT/run-mxswap.log" \
				bash -c "\"$mokc\" run --precision mxfp8 --model $m --target sm_90a --tokens 0,1,64,256 --repeat 3 --json >>\"$OUT/run-mxswap.jsonl\""
		done
		step "run --backward --precision mxfp8 qwen3-30b-a3b T=1,64,256 x3" 150 "$OUT/run-mxswap.log" \
			bash -c "\"$mokc\" run --backward --precision mxfp8 --model qwen3-30b-a3b --target sm_90a --tokens 1,64,256 --repeat 3 --json >>\"$OUT/run-mxswap.jsonl\""
		step "memcheck --precision mxfp8 qwen3-30b-a3b T=64" 150 "$OUT/memcheck.log" compute-sanitizer --tool memcheck --error-exitcode 9 "$mokc" run --precision mxfp8 --model qwen3-30b-a3b --target sm_90a --tokens 64
		for m in ${SWAP_MODELS:-qwen3-30b-a3b deepseek-v3 mixtral-8x7b}; do
			for T in 64 256; do
				step "bench $m T=$T bf16" 90 "$OUT/bench-mxswap.log" bash -c "\"$mokc\" bench --model $m --target sm_90a --tokens $T --kernels --json >>\"$OUT/bench-mxswap.jsonl\""
				step "bench $m T=$T mxfp8" 90 "$OUT/bench-mxswap.log" bash -c "\"$mokc\" bench --precision mxfp8 --model $m --target sm_90a --tokens $T --kernels --json >>\"$OUT/bench-mxswap.jsonl\""
				if [ -n "${OLD_MOKC:-}" ]; then
					step "bench $m T=$T mxfp8 (OLD_MOKC)" 90 "$OUT/bench-mxswap.log" bash -c "\"$OLD_MOKC\" bench --precision mxfp8 --model $m --target sm_90a --tokens $T --kernels --json >>\"$OUT/bench-mxswap-old.jsonl\""
				fi
			done
		done
		grep -hE "FAIL|error" "$OUT/run-mxswap.log" | tail -20
		;;
	mxab)
		# A candidate build beside this one (AB_DIR: a folder holding its codegen.test and mokc): the candidate's
		# MX GEMM tests, its runs (forward on three presets or AB_MODELS, backward on one, T = 0, 1, 64, 10 runs each), then
		# bf16 and both builds' mxfp8 timed at T = 64 (SWAP_MODELS).
		if [ -z "${AB_DIR:-}" ]; then
			echo "mxab skipped: it needs AB_DIR (a folder holding the candidate's codegen.test and mokc)" | tee -a "$summary"
			continue
		fi
		ab=$root/$AB_DIR
		(cd codegen && step "candidate codegen: MX GEMMs" 200 "$OUT/tests-ab.log" "$ab/codegen.test" -test.v -test.count=1 -test.run 'TestSM90MXGemmGPU')
		for m in ${AB_MODELS:-qwen3-30b-a3b deepseek-v2-lite mixtral-8x7b}; do
			step "candidate run --precision mxfp8 $m T=0,1,64 x10" 100 "$OUT/run-ab.log" \
				bash -c "\"$ab/mokc\" run --precision mxfp8 --model $m --target sm_90a --tokens 0,1,64 --repeat 10 --json >>\"$OUT/run-ab.jsonl\""
		done
		step "candidate run --backward --precision mxfp8 qwen3-30b-a3b T=0,1,64 x10" 100 "$OUT/run-ab.log" \
			bash -c "\"$ab/mokc\" run --backward --precision mxfp8 --model qwen3-30b-a3b --target sm_90a --tokens 0,1,64 --repeat 10 --json >>\"$OUT/run-ab.jsonl\""
		for m in ${SWAP_MODELS:-qwen3-30b-a3b deepseek-v3 mixtral-8x7b}; do
			step "bench $m T=64 bf16" 90 "$OUT/bench-ab.log" bash -c "\"$mokc\" bench --model $m --target sm_90a --tokens 64 --kernels --json >>\"$OUT/bench-ab.jsonl\""
			step "bench $m T=64 mxfp8" 90 "$OUT/bench-ab.log" bash -c "\"$mokc\" bench --precision mxfp8 --model $m --target sm_90a --tokens 64 --kernels --json >>\"$OUT/bench-ab.jsonl\""
			step "bench $m T=64 mxfp8 (candidate)" 90 "$OUT/bench-ab.log" bash -c "\"$ab/mokc\" bench --precision mxfp8 --model $m --target sm_90a --tokens 64 --kernels --json >>\"$OUT/bench-ab-candidate.jsonl\""
		done
		grep -hE "FAIL|error" "$OUT/run-ab.log" "$OUT/tests-ab.log" | tail -20
		;;
	mxstages)
		# The bytes-in-flight hypothesis (docs/perf.md, "mxfp8: bytes in flight"): promote with 4 (the
		# default), 5 and 6 stages, checked at 6, then timed beside bf16 at T = 64 and 4096.
		for m in qwen3-30b-a3b gpt-oss-120b deepseek-v2-lite; do
			step "run --precision mxfp8 --stages 6 $m T=$TOKENS x3" 150 "$OUT/run-mxstages.log" \
				bash -c "\"$mokc\" run --precision mxfp8 --stages 6 --model $m --target sm_90a --tokens $TOKENS --repeat 3 --json >>\"$OUT/run-mxstages.jsonl\""
		done
		for m in ${EXPAND_MODELS:-qwen3-30b-a3b deepseek-v3 gpt-oss-120b}; do
			for T in 64 4096; do
				step "bench $m T=$T bf16" 90 "$OUT/bench-mxstages.log" bash -c "\"$mokc\" bench --model $m --target sm_90a --tokens $T --kernels --json >>\"$OUT/bench-mxstages.jsonl\""
				for st in 4 5 6; do
					step "bench $m T=$T mxfp8 promote --stages $st" 90 "$OUT/bench-mxstages.log" bash -c "\"$mokc\" bench --precision mxfp8 --stages $st --model $m --target sm_90a --tokens $T --kernels --json >>\"$OUT/bench-mxstages.jsonl\""
				done
			done
		done
		;;
	mxcodes)
		(cd codegen && step "codegen: MX GEMMs both ways" 200 "$OUT/tests.log" ../.carry/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXGemmGPU')
		(cd runtime && step "runtime: mxfp8 rows per expert 1..255, H = I = 2880" 200 "$OUT/tests.log" ../.carry/runtime.test -test.v -test.count=1 -test.run 'TestLayerMXFP8Rows')
		for m in qwen3-30b-a3b gpt-oss-120b deepseek-v2-lite mixtral-8x7b; do
			step "run --precision mxfp8 $m T=$TOKENS x3" 150 "$OUT/run-mxcodes.log" \
				bash -c "\"$mokc\" run --precision mxfp8 --model $m --target sm_90a --tokens $TOKENS --repeat 3 --json >>\"$OUT/run-mxcodes.jsonl\""
		done
		for m in qwen3-30b-a3b gpt-oss-120b; do
			step "run --backward --precision mxfp8 $m T=$TOKENS x3" 200 "$OUT/run-mxcodes.log" \
				bash -c "\"$mokc\" run --backward --precision mxfp8 --model $m --target sm_90a --tokens $TOKENS --repeat 3 --json >>\"$OUT/run-mxcodes.jsonl\""
		done
		step "memcheck --precision mxfp8 qwen3-30b-a3b T=64" 150 "$OUT/memcheck.log" compute-sanitizer --tool memcheck --error-exitcode 9 "$mokc" run --precision mxfp8 --model qwen3-30b-a3b --target sm_90a --tokens 64
		for m in ${EXPAND_MODELS:-qwen3-30b-a3b deepseek-v3 gpt-oss-120b}; do
			for T in 64 4096; do
				step "bench $m T=$T bf16" 90 "$OUT/bench-mxcodes.log" bash -c "\"$mokc\" bench --model $m --target sm_90a --tokens $T --kernels --json >>\"$OUT/bench-mxcodes.jsonl\""
				step "bench $m T=$T mxfp8" 90 "$OUT/bench-mxcodes.log" bash -c "\"$mokc\" bench --precision mxfp8 --model $m --target sm_90a --tokens $T --kernels --json >>\"$OUT/bench-mxcodes.jsonl\""
				if [ -n "${OLD_MOKC:-}" ]; then
					step "bench $m T=$T bf16 (OLD_MOKC)" 90 "$OUT/bench-mxcodes.log" bash -c "\"$OLD_MOKC\" bench --model $m --target sm_90a --tokens $T --kernels --json >>\"$OUT/bench-mxcodes-old.jsonl\""
					step "bench $m T=$T mxfp8 (OLD_MOKC)" 90 "$OUT/bench-mxcodes.log" bash -c "\"$OLD_MOKC\" bench --precision mxfp8 --model $m --target sm_90a --tokens $T --kernels --json >>\"$OUT/bench-mxcodes-old.jsonl\""
				fi
			done
		done
		grep -hE "FAIL|error" "$OUT/run-mxcodes.log" | tail -20
		;;
	sweep)
		# A sweep of T for the roofline plot (forward, and forward + backward at the larger T).
		for m in qwen3-30b-a3b deepseek-v3; do
			for T in 64 256 1024 4096 16384; do
				step "bench $m sm_90a T=$T" 120 "$OUT/sweep.log" bash -c "\"$mokc\" bench --model $m --target sm_90a --tokens $T --json >>\"$OUT/sweep.jsonl\""
			done
			for T in 1024 4096; do
				step "bench --backward $m sm_90a T=$T" 150 "$OUT/sweep.log" bash -c "\"$mokc\" bench --backward --model $m --target sm_90a --tokens $T --iters 10 --warmup 2 --json >>\"$OUT/sweep.jsonl\""
			done
		done
		step "plot roofline" 30 "$OUT/sweep.log" "$mokc" plot roofline -o "$OUT/roofline.svg" "$OUT/sweep.jsonl"
		;;
	new)
		# The built-but-not-yet-run kernels in one call (about 7 minutes): their GEMM and per-op tests, one
		# mxfp8 layer of rows 1..255 through forward and backward, a run of each on mixtral-8x7b, and the
		# first timings beside the kernels they would replace.
		(cd codegen && step "codegen: MX GEMMs both ways, backward per-op (wgmma-ws, mxfp8 ops)" 200 "$OUT/tests.log" \
			../.carry/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXGemmGPU|TestBackwardPerOpsGPU')
		(cd runtime && step "runtime: mxfp8 rows per expert 1..255, H = I = 2880" 150 "$OUT/tests.log" ../.carry/runtime.test -test.v -test.count=1 -test.run 'TestLayerMXFP8Rows')
		step "run mixtral-8x7b sm_90a --group-m 8 T=1,4096 x3" 150 "$OUT/new.log" bash -c "\"$mokc\" run --model mixtral-8x7b --target sm_90a --group-m 8 --tokens 1,4096 --repeat 3 --json >>\"$OUT/new.jsonl\""
		step "run --backward mixtral-8x7b sm_90a --wgrad wgmma-ws T=64,4096 x3" 200 "$OUT/new.log" bash -c "\"$mokc\" run --backward --wgrad wgmma-ws --model mixtral-8x7b --target sm_90a --tokens 64,4096 --repeat 3 --json >>\"$OUT/new.jsonl\""
		step "run --precision mxfp8 --mx-gemm expand qwen3-30b-a3b T=1,64,4096 x3" 150 "$OUT/new.log" bash -c "\"$mokc\" run --precision mxfp8 --mx-gemm expand --model qwen3-30b-a3b --target sm_90a --tokens 1,64,4096 --repeat 3 --json >>\"$OUT/new.jsonl\""
		step "run --backward --precision mxfp8 qwen3-30b-a3b T=1,64,4096 x3" 200 "$OUT/new.log" bash -c "\"$mokc\" run --backward --precision mxfp8 --model qwen3-30b-a3b --target sm_90a --tokens 1,64,4096 --repeat 3 --json >>\"$OUT/new.jsonl\""
		for g in 0 8 0 8; do
			step "bench mixtral-8x7b T=4096 --group-m $g" 60 "$OUT/new.log" bash -c "\"$mokc\" bench --model mixtral-8x7b --target sm_90a --tokens 4096 --group-m $g --kernels --json >>\"$OUT/bench-new.jsonl\""
		done
		for w in wgmma wgmma-ws; do
			step "bench --backward mixtral-8x7b T=4096 bf16 --wgrad $w" 90 "$OUT/new.log" bash -c "\"$mokc\" bench --backward --main-grad bf16 --wgrad $w --model mixtral-8x7b --target sm_90a --tokens 4096 --iters 10 --warmup 2 --kernels --json >>\"$OUT/bench-new.jsonl\""
		done
		for T in 64 4096; do
			for g in promote expand; do
				step "bench qwen3-30b-a3b T=$T mxfp8 $g" 60 "$OUT/new.log" bash -c "\"$mokc\" bench --precision mxfp8 --mx-gemm $g --model qwen3-30b-a3b --target sm_90a --tokens $T --json >>\"$OUT/bench-new.jsonl\""
			done
			step "bench qwen3-30b-a3b T=$T bf16" 60 "$OUT/new.log" bash -c "\"$mokc\" bench --model qwen3-30b-a3b --target sm_90a --tokens $T --json >>\"$OUT/bench-new.jsonl\""
		done
		grep -E "^(--- FAIL|FAIL|ok|PASS)" "$OUT/tests.log" | tail -20
		;;
	train)
		# The runtime's training tests alone (their float64 references are CPU-bound: beside other CPU work
		# they time out; one process takes 370 s): --save-fc1's bits and refusals, and Layer.Backward's
		# training steps in one process per layer (with its per-expert form), side by side.
		# TRAIN_RUN="pattern" runs only that -test.run pattern (e.g. one layer and target).
		cd runtime
		if [ -n "${TRAIN_RUN:-}" ]; then
			step "runtime: $TRAIN_RUN" 300 "$OUT/tests.log" ../.carry/runtime.test -test.v -test.count=1 -test.run "$TRAIN_RUN"
			cd "$root"
			continue
		fi
		step "runtime: SaveFC1 bits and refusals" 200 "$OUT/tests-savefc1.log" ../.carry/runtime.test -test.v -test.count=1 -test.run 'TestLayerSaveFC1' &
		for shard in qwen3-30b-a3b-E16 gpt-oss-20b-E4 shared-gate-map-bf16 weight-on-input; do
			step "runtime: Layer.Backward training steps $shard" 300 "$OUT/tests-$shard.log" ../.carry/runtime.test -test.v -test.count=1 -test.run "TestLayerBackward/^$shard" &
		done
		wait
		cd "$root"
		cat "$OUT"/tests-*.log >>"$OUT/tests.log"
		grep -E "^(--- FAIL|FAIL|ok|PASS)" "$OUT/tests.log" | tail -20
		;;
	speed)
		# Issue #10's comparison in one call: forward (--group-m 0 against 8) and forward + backward (the
		# default against --save-fc1 --group-m 8) at T = 4096 with bf16 main grads, four presets, beside
		# PyTorch's autograd pipeline.
		sb() { step "bench $* T=4096" 60 "$OUT/bench-speed.log" bash -c "\"$mokc\" bench $* --target sm_90a --tokens 4096 --iters 10 --warmup 2 --kernels --json >>\"$OUT/bench-speed.jsonl\""; }
		for m in mixtral-8x7b deepseek-v3 qwen3-30b-a3b gpt-oss-120b; do
			sb --model $m --group-m 0
			sb --model $m --group-m 8
			sb --backward --main-grad bf16 --model $m
			sb --backward --main-grad bf16 --model $m --save-fc1 --group-m 8
		done
		step "torch baseline --backward T=4096" 100 "$OUT/torch-backward.log" python3 bench/torch_moe.py --backward --models mixtral-8x7b,deepseek-v3,qwen3-30b-a3b,gpt-oss-120b --tokens 4096 --json "$OUT/torch-backward.json"
		;;
	sanitize)
		sanitize_backward
		;;
	megakernel)
		# The persistent lowering's steps beside the default, in the same binary: --items fixed (the walk
		# the default's queue replaced: its rounds, then a queue) and --chain fc1-fc2 (moe_fc1_fc2). The runtime
		# tests (the fixed walk's bits, graph replays), mokc run's y_sha256 per (preset, precision, T) under
		# each flag set, compared by sha_compare below, the backward of both walks, memcheck and racecheck of
		# the chained kernel (a wait limit of 60 s under the sanitizers, which slow it). megabench
		# times them: medians alternated (default, chain, fixed) at T = 4096 and 300 (bf16), 4096 and 64 (mxfp8).
		(cd runtime && step "runtime: TestItemsQueueGPU TestChainGPU TestChainWaitTimeoutGPU TestCaptureForward" 480 "$OUT/tests.log" ../.carry/runtime.test -test.v -test.count=1 -test.run 'TestItemsQueueGPU|TestChainGPU|TestChainWaitTimeoutGPU|TestCaptureForward')
		grep -E "^(--- FAIL|FAIL|ok|PASS)" "$OUT/tests.log" | tail -10
		mkrun() { # label precision model flags...
			local label=$1 prec=$2 m=$3
			shift 3
			step "run $m $prec $label" 150 "$OUT/mk-run.log" bash -c "\"$mokc\" run --model $m --target sm_90a --precision $prec --tokens ${MK_TOKENS:-0,1,64,300,1100,4096} --repeat 3 --json $* | sed 's/^{/{\"label\":\"$label\",/' >>\"$OUT/mk-run.jsonl\""
		}
		for m in ${MK_MODELS:-qwen3-30b-a3b gpt-oss-20b olmoe-1b-7b mixtral-8x7b deepseek-v2-lite}; do
			mkrun default bf16 $m
			mkrun chain bf16 $m --chain fc1-fc2
			mkrun fixed bf16 $m --items fixed
			mkrun default mxfp8 $m
			mkrun chain mxfp8 $m --chain fc1-fc2
			mkrun fixed mxfp8 $m --items fixed
		done
		sha_compare "$OUT/mk-run.jsonl" 3 "across the flag sets"
		for items in queue fixed; do
			step "run --backward qwen3-30b-a3b --items $items bf16,mxfp8" 240 "$OUT/mk-run.log" bash -c "\"$mokc\" run --backward --items $items --model qwen3-30b-a3b --target sm_90a --tokens 1,64,1000 --repeat 2 >>\"$OUT/mk-run.log\" && \"$mokc\" run --backward --items $items --precision mxfp8 --model qwen3-30b-a3b --target sm_90a --tokens 1,64,1000 --repeat 2 >>\"$OUT/mk-run.log\""
		done
		for tool in memcheck racecheck; do
			step "$tool run --chain fc1-fc2 qwen3-30b-a3b T=300" 240 "$OUT/mk-sanitize.log" \
				compute-sanitizer --tool $tool --error-exitcode 9 "$mokc" run --chain fc1-fc2 --wait-limit 60s --model qwen3-30b-a3b --target sm_90a --tokens 300 --repeat 1
			step "$tool run --chain fc1-fc2 qwen3-30b-a3b T=64" 240 "$OUT/mk-sanitize.log" \
				compute-sanitizer --tool $tool --error-exitcode 9 "$mokc" run --chain fc1-fc2 --wait-limit 60s --model qwen3-30b-a3b --target sm_90a --tokens 64 --repeat 1
			step "$tool run --chain fc1-fc2 qwen3-30b-a3b mxfp8 T=64" 240 "$OUT/mk-sanitize.log" \
				compute-sanitizer --tool $tool --error-exitcode 9 "$mokc" run --chain fc1-fc2 --wait-limit 60s --precision mxfp8 --model qwen3-30b-a3b --target sm_90a --tokens 64 --repeat 1
		done
		step "memcheck run --chain fc1-fc2 gpt-oss-20b T=4096" 240 "$OUT/mk-sanitize.log" \
			compute-sanitizer --tool memcheck --error-exitcode 9 "$mokc" run --chain fc1-fc2 --wait-limit 60s --model gpt-oss-20b --target sm_90a --tokens 4096 --repeat 1
		;;
	megabench)
		mkbench() { bench_step mk 20 "$@"; }
		for i in 1 2; do
			for m in qwen3-30b-a3b gpt-oss-20b mixtral-8x7b olmoe-1b-7b; do
				mkbench 4096 --model $m
				mkbench 4096 --model $m --chain fc1-fc2
				mkbench 4096 --model $m --items fixed
				mkbench 4096 --model $m --precision mxfp8
				mkbench 4096 --model $m --precision mxfp8 --items fixed
			done
			for m in qwen3-30b-a3b olmoe-1b-7b; do
				mkbench 300 --model $m
				mkbench 300 --model $m --chain fc1-fc2
			done
			for m in qwen3-30b-a3b olmoe-1b-7b deepseek-v2-lite; do
				mkbench 64 --model $m
				mkbench 64 --model $m --chain fc1-fc2
			done
			for m in olmoe-1b-7b deepseek-v2-lite qwen2-57b-a14b; do
				mkbench 64 --model $m --precision mxfp8
				mkbench 64 --model $m --precision mxfp8 --chain fc1-fc2
				mkbench 64 --model $m --precision mxfp8 --items fixed
			done
		done
		# The chained kernels' inner phases (FC1's items, FC2's) beside the two kernels'.
		for prec_T in "bf16 4096" "bf16 64" "mxfp8 64"; do
			read -r prec T <<<"$prec_T"
			mkbench "$T" --model qwen3-30b-a3b --precision "$prec" --phases
			mkbench "$T" --model qwen3-30b-a3b --precision "$prec" --chain fc1-fc2 --phases
		done
		bench_summary "$OUT/mk-bench.jsonl"
		;;
	cluster)
		# The bf16 routed GEMMs in 2-CTA clusters (--cluster 2: CTA pairs sharing A by TMA multicast): the runtime
		# test (the unclustered forward's bits, graph replay), mokc run's y_sha256 with and without per (preset, T),
		# the backward, memcheck, racecheck and synccheck. clusterbench times them.
		(cd runtime && step "runtime: TestClusterGPU" 300 "$OUT/tests.log" ../.carry/runtime.test -test.v -test.count=1 -test.run 'TestClusterGPU')
		grep -E "^(--- FAIL|FAIL|ok|PASS)" "$OUT/tests.log" | tail -10
		for m in ${CL_MODELS:-qwen3-30b-a3b gpt-oss-20b mixtral-8x7b olmoe-1b-7b deepseek-v2-lite}; do
			for prec in bf16 mxfp8; do
				for label in default cluster chaincl; do
					flags=""
					[ $label = cluster ] && flags="--cluster 2"
					[ $label = chaincl ] && flags="--cluster 2 --chain fc1-fc2"
					# bf16 chains in clusters only where both GEMMs pair (CL_CHAIN_MODELS); elsewhere refused
					[ $label = chaincl ] && [ $prec = bf16 ] && [[ " ${CL_CHAIN_MODELS:-qwen3-30b-a3b mixtral-8x7b olmoe-1b-7b} " != *" $m "* ]] && continue
					step "run $m $prec $label" 150 "$OUT/cl-run.log" bash -c "\"$mokc\" run --model $m --target sm_90a --precision $prec --tokens ${CL_TOKENS:-0,1,64,300,2000,4096} --repeat 2 --json $flags | sed 's/^{/{\"label\":\"$label\",/' >>\"$OUT/cl-run.jsonl\""
				done
			done
		done
		sha_compare "$OUT/cl-run.jsonl" 2 "across the default, --cluster 2 and (where it builds) --cluster 2 --chain fc1-fc2"
		step "run --backward --cluster 2 qwen3-30b-a3b" 200 "$OUT/cl-run.log" "$mokc" run --backward --cluster 2 --model qwen3-30b-a3b --target sm_90a --tokens 1,64,1000 --repeat 2
		for tool in memcheck racecheck synccheck; do
			step "$tool run --cluster 2 qwen3-30b-a3b T=300" 240 "$OUT/cl-sanitize.log" \
				compute-sanitizer --tool $tool --error-exitcode 9 "$mokc" run --cluster 2 --model qwen3-30b-a3b --target sm_90a --tokens 300 --repeat 1
		done
		step "memcheck run --cluster 2 qwen3-30b-a3b mxfp8 T=2000" 240 "$OUT/cl-sanitize.log" \
			compute-sanitizer --tool memcheck --error-exitcode 9 "$mokc" run --cluster 2 --precision mxfp8 --model qwen3-30b-a3b --target sm_90a --tokens 2000 --repeat 1
		;;
	clusterbench)
		clbench() { bench_step cl 30 "$@"; }
		for i in $(seq "${CL_ROUNDS:-2}"); do # CL_ROUNDS: alternated rounds (default 2)
			for m in qwen3-30b-a3b gpt-oss-120b mixtral-8x7b deepseek-v3; do
				clbench 4096 --model $m
				clbench 4096 --model $m --cluster 2
			done
			for m in qwen3-30b-a3b mixtral-8x7b; do
				clbench 4096 --model $m --cluster 2 --chain fc1-fc2
			done
			clbench 16384 --model qwen3-30b-a3b
			clbench 16384 --model qwen3-30b-a3b --cluster 2
			clbench 64 --model qwen3-30b-a3b # FC2 is clustered at decode sizes too (FC1 gathers its rows there)
			clbench 64 --model qwen3-30b-a3b --cluster 2
			for m in qwen3-30b-a3b mixtral-8x7b olmoe-1b-7b; do # issue #11's T = 4096 ratio: the register-fed GEMMs
				clbench 4096 --model $m --precision mxfp8
				clbench 4096 --model $m --precision mxfp8 --cluster 2
			done
		done
		bench_summary "$OUT/cl-bench.jsonl"
		;;
	raster)
		# The persistent GEMMs' work-item order (--group-m): correctness first (every tile once; the same
		# bits as column-blocks-fastest), then forward and forward + backward at T = 4096, alternated.
		# RASTER=check stops after the correctness runs.
		for m in mixtral-8x7b qwen3-30b-a3b; do
			step "run $m sm_90a --group-m 8 T=1,64,4096 x3" 200 "$OUT/raster.log" \
				bash -c "\"$mokc\" run --model $m --target sm_90a --group-m 8 --tokens 1,64,4096 --repeat 3 --json >>\"$OUT/raster.jsonl\""
			step "run --backward $m sm_90a --group-m 8 T=64,4096 x3" 200 "$OUT/raster.log" \
				bash -c "\"$mokc\" run --backward --model $m --target sm_90a --group-m 8 --tokens 64,4096 --repeat 3 --json >>\"$OUT/raster.jsonl\""
		done
		[ "${RASTER:-}" = check ] && continue
		for m in mixtral-8x7b deepseek-v3 qwen3-30b-a3b gpt-oss-120b; do
			for g in 0 8 16 0 8 16; do
				step "bench $m sm_90a T=4096 --group-m $g" 120 "$OUT/raster.log" bash -c "\"$mokc\" bench --model $m --target sm_90a --tokens 4096 --group-m $g --kernels --json >>\"$OUT/bench-raster.jsonl\""
			done
			[ $m = qwen3-30b-a3b ] && for g in 0 8 0 8; do
				step "bench $m sm_90a T=16384 --group-m $g" 120 "$OUT/raster.log" bash -c "\"$mokc\" bench --model $m --target sm_90a --tokens 16384 --group-m $g --kernels --json >>\"$OUT/bench-raster.jsonl\""
			done
			for g in 0 8; do
				step "bench --backward $m sm_90a T=4096 --group-m $g" 150 "$OUT/raster.log" bash -c "\"$mokc\" bench --backward --main-grad bf16 --model $m --target sm_90a --tokens 4096 --group-m $g --iters 10 --warmup 2 --kernels --json >>\"$OUT/bench-raster.jsonl\""
			done
		done
		;;
	mxfp8run)
		# Issue #11's matrix: every preset with --precision mxfp8 on sm_90a at T in TOKENS, forward and backward,
		# 10 bitwise-compared runs each, in three lanes (CPU-bound references). GPU memory of the backward: the
		# e4m3 weights, their two bf16 copies (scratch) and the main grads: kimi-k2, deepseek-v3 and
		# dsv4-pro-proxy run with bf16 main grads (dsv4-pro-proxy about 131 GB, last in its lane).
		# MX_ARGS: more flags for every run (e.g. "--sample 32" for the largest presets, whose float64
		# references take minutes); MX_DIRS: "fwd bwd" (default), or one of them.
		mx1() { step "run --precision mxfp8 $1 $2" "$3" "$OUT/run-mxfp8run-$1.log" bash -c "\"$mokc\" run --precision mxfp8 $2 ${MX_ARGS:-} --model $1 --target sm_90a --tokens $TOKENS --repeat 10 --json >>\"$OUT/run-mxfp8run-$1.jsonl\""; }
		mxlane() { for m in "$@"; do
			big=""; case $m in kimi-k2|deepseek-v3|dsv4-pro-proxy) big="--main-grad bf16" ;; esac
			case " ${MX_DIRS:-fwd bwd} " in *" fwd "*) mx1 "$m" "" 200 ;; esac
			case " ${MX_DIRS:-fwd bwd} " in *" bwd "*) mx1 "$m" "--backward $big" 300 ;; esac
		done; }
		# MX_LANES: the lanes' presets, lanes separated by "|".
		IFS='|' read -ra lanes <<<"${MX_LANES:-deepseek-v3 dsv4-pro-proxy kimi-k2|qwen3-235b-a22b deepseek-v4-flash mixtral-8x7b llama4-scout qwen2-57b-a14b|olmoe-1b-7b qwen3-30b-a3b gpt-oss-20b deepseek-v2-lite gpt-oss-120b}"
		for lane in "${lanes[@]}"; do
			# shellcheck disable=SC2086 # a lane is a list of presets
			mxlane $lane &
		done
		wait
		cat "$OUT"/run-mxfp8run-*.jsonl >"$OUT/run-mxfp8run.jsonl" 2>/dev/null
		grep -hE "FAIL|error" "$OUT"/run-mxfp8run-*.log | tail -40
		;;
	savefc1)
		# The saved FC1 output (--save-fc1): the runtime tests (the same bits as recomputing FC1, the refusals,
		# then TestLayerBackward's training steps: CPU-heavy, so beside the runs, not the timings) and mokc run
		# --backward --save-fc1 on four layer forms; then forward + backward timed with and without it beside
		# PyTorch's autograd pipeline, mixtral-8x7b first.
		(cd runtime && step "runtime: SaveFC1 bits and refusals" 90 "$OUT/tests.log" ../.carry/runtime.test -test.v -test.count=1 -test.run 'TestLayerSaveFC1'
			step "runtime: Layer.Backward training steps" 170 "$OUT/tests.log" ../.carry/runtime.test -test.v -test.count=1 -test.run 'TestLayerBackward') &
		(
			runs() { step "run --backward --save-fc1 $*" 90 "$OUT/run-savefc1.log" bash -c "\"$mokc\" run --backward --save-fc1 $* --repeat 3 --json >>\"$OUT/run-savefc1.jsonl\""; }
			runs --model mixtral-8x7b --target sm_90a --tokens 1,64,4096
			runs --model gpt-oss-120b --target sm_90a --tokens 0,1,64
			runs --model qwen3-30b-a3b --precision mxfp8 --target sm_90a --tokens 1,64,4096
			runs --model llama4-scout --target sm_80 --tokens 1,64
		) &
		wait
		grep -E "^(--- FAIL|FAIL|ok|PASS)" "$OUT/tests.log" | tail -20
		bench() { step "bench --backward $* T=4096 bf16" 60 "$OUT/bench-savefc1.log" bash -c "\"$mokc\" bench --backward --main-grad bf16 $* --target sm_90a --tokens 4096 --iters 10 --warmup 2 --kernels --json >>\"$OUT/bench-savefc1.jsonl\""; }
		bench --model mixtral-8x7b
		bench --model mixtral-8x7b --save-fc1
		bench --model mixtral-8x7b --save-fc1 --group-m 8
		step "torch baseline --backward T=4096" 100 "$OUT/torch-backward.log" python3 bench/torch_moe.py --backward --models mixtral-8x7b,deepseek-v3,qwen3-30b-a3b,gpt-oss-120b --tokens 4096 --json "$OUT/torch-backward.json"
		for m in deepseek-v3 qwen3-30b-a3b gpt-oss-120b; do
			bench --model $m
			bench --model $m --save-fc1
		done
		;;
	*)
		echo "unknown phase $phase (tests, run, perf, bwdtests, bwdrun, backward, mxfp8, mxfp8run, mxdecode, mxswap, mxab, expand, mxcodes, mxstages, sweep, raster, new, savefc1, train, speed, sanitize, megakernel, megabench, cluster, clusterbench)" >&2
		exit 2
		;;
	esac
done
# The logs go out as one archive beside the summary.
# The archive is written outside $OUT first (tar warns, and exits 1, when the folder it reads changes); a
# second invocation in the same $OUT writes logs-2.tgz, and so on, keeping the earlier archives.
name=logs.tgz n=1
while [ -e "$OUT/$name" ]; do n=$((n + 1)) name=logs-$n.tgz; done
logs=$(mktemp) && (cd "$OUT" && tar czf "$logs" --exclude='logs*.tgz' --exclude=summary.txt . && find . -type f ! -name 'logs*.tgz' ! -name summary.txt -delete) && mv "$logs" "$OUT/$name"
cat "$summary"
