#!/usr/bin/env bash
# run 47 call 6: gather v3, the persistent kernels' plain gathers by bulk copies (docs/perf.md,
# "gather v3", has the prediction). Carry: `make device-bins` of the change and `make device-old-cli
# REV=67d74f4` (combine v4, the row-wise gather). Every part bounded.
#  1. Bits: the persistent forward against per-op on T past the one-block dispatch (the gather runs
#     at T > 256): qwen3-30b-a3b, deepseek-v2-lite (shared expert), gpt-oss-20b (H = 2880),
#     mixtral-8x7b (H = 4096).
#  2. Speed, old against new persistent --phases: qwen3-30b-a3b T = 4096 (two rounds), mixtral-8x7b.
#  3. TestPersistentGPU; TestPersistentBackwardGPU on its three smaller layers (the backward's two
#     gathers); memcheck and racecheck of the new phase.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
gunzip -c $C/mokc-old.gz >$C/mokc-old && chmod +x $C/mokc-old
old=$C/mokc-old
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
RUN_TIMEOUT=40
for m in qwen3-30b-a3b:300,1100,4095 deepseek-v2-lite:300,2000 gpt-oss-20b:300,1100 mixtral-8x7b:300; do
	for lw in per-op persistent; do
		run_json $lw "$mokc" ${m%%:*} bf16 ${m#*:} --lowering $lw
	done
done
BENCH_BUDGET=150
for i in 1 2; do
	bench old-persistent "$old" 4096 --model qwen3-30b-a3b --iters 20 --lowering persistent --phases
	bench new-persistent "$mokc" 4096 --model qwen3-30b-a3b --iters 20 --lowering persistent --phases
done
bench old-persistent "$old" 4096 --model mixtral-8x7b --iters 10 --lowering persistent --phases
bench new-persistent "$mokc" 4096 --model mixtral-8x7b --iters 10 --lowering persistent --phases
grep -hv "^{" "$O/bench.jsonl" >>"$S"
left 200 && pkgtest runtime persist-fwd 100 $C/runtime.test -test.v -test.count=1 -test.timeout 95s -test.run 'TestPersistentGPU$'
[ -f "$O/persist-fwd.log" ] && grep -E "^--- |^    --- FAIL|panic|timed out" "$O/persist-fwd.log" | head -20 >>"$S"
left 280 && pkgtest runtime persist-bwd 60 $C/runtime.test -test.v -test.count=1 -test.timeout 55s -test.run 'TestPersistentBackwardGPU/(qwen3-30b-a3b-E16|shared-gate-map-bf16|weight-on-input)$'
[ -f "$O/persist-bwd.log" ] && grep -E "^\s*--- (FAIL|PASS)|panic|timed out" "$O/persist-bwd.log" | head -20 >>"$S"
san() { # TOOL LABEL SECONDS ARGS...: one compute-sanitizer run, its summary line
	local tool=$1 label=$2 t=$3
	shift 3
	left $((350 - t)) || { echo "skipped $tool $label" >>"$S"; return; }
	timeout -k 10 $t compute-sanitizer --tool $tool --error-exitcode 9 "$mokc" run --target sm_90a --repeat 1 --lowering persistent --wait-limit 0 "$@" >"$O/$tool-$label.log" 2>&1
	echo "$tool $label rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$O/$tool-$label.log" | tail -1)" >>"$S"
}
san memcheck qwen3-300 40 --model qwen3-30b-a3b --tokens 300
san racecheck olmoe-300 60 --model olmoe-1b-7b --tokens 300
echo "elapsed $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
