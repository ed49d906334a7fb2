#!/usr/bin/env bash
# run 47 call 4: combine v4, the persistent forward's combine phase by bulk copies into a ring of
# stages (codegen/combine_bulk.go; docs/perf.md, "combine v4", has the prediction). Carry:
# `make device-bins` of the working tree (the change) and `make device-old-cli REV=4ade866` (the
# row-wise combine phase, with combine v3). Every part bounded.
#  1. Bits: the persistent forward against per-op (the new CLI) on every combine shape it takes:
#     no shared expert (qwen3-30b-a3b bf16 and mxfp8, K = 8; gpt-oss-20b, K = 4; mixtral-8x7b,
#     K = 2), a shared expert (deepseek-v2-lite), T from 1 to 4095.
#  2. Speed, old against new CLI in the same run: --phases at qwen3-30b-a3b T = 4096 (two rounds),
#     64 and 1, deepseek-v3 and mixtral-8x7b T = 4096.
#  3. racecheck, synccheck and memcheck of the new combine phase; TestPersistentGPU if time is left.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
gunzip -c $C/mokc-old.gz >$C/mokc-old && chmod +x $C/mokc-old
old=$C/mokc-old
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
RUN_TIMEOUT=40
for lw in per-op persistent; do
	run_json $lw "$mokc" qwen3-30b-a3b bf16 1,63,4095 --lowering $lw
done
for m in deepseek-v2-lite:1,300,2000 gpt-oss-20b:1,300 mixtral-8x7b:1,300; do
	for lw in per-op persistent; do
		run_json $lw "$mokc" ${m%%:*} bf16 ${m#*:} --lowering $lw
	done
done
for lw in per-op persistent; do
	run_json $lw "$mokc" qwen3-30b-a3b mxfp8 1,4095 --lowering $lw
done
BENCH_BUDGET=300
for i in 1 2; do
	bench old-persistent "$old" 4096 --model qwen3-30b-a3b --iters 20 --lowering persistent --phases
	bench new-persistent "$mokc" 4096 --model qwen3-30b-a3b --iters 20 --lowering persistent --phases
done
bench new-per-op "$mokc" 4096 --model qwen3-30b-a3b --iters 20 --phases
for T in 64 1; do
	bench old-persistent "$old" $T --model qwen3-30b-a3b --iters 30 --lowering persistent --phases
	bench new-persistent "$mokc" $T --model qwen3-30b-a3b --iters 30 --lowering persistent --phases
done
for m in mixtral-8x7b deepseek-v3; do
	bench old-persistent "$old" 4096 --model $m --iters 10 --lowering persistent --phases
	bench new-persistent "$mokc" 4096 --model $m --iters 10 --lowering persistent --phases
done
grep -hv "^{" "$O/bench.jsonl" >>"$S"
san() { # TOOL LABEL SECONDS ARGS...: one compute-sanitizer run, its summary line
	local tool=$1 label=$2 t=$3
	shift 3
	left $((470 - t)) || { echo "skipped $tool $label" >>"$S"; return; }
	timeout -k 10 $t compute-sanitizer --tool $tool --error-exitcode 9 "$mokc" run --target sm_90a --repeat 1 --lowering persistent --wait-limit 0 "$@" >"$O/$tool-$label.log" 2>&1
	echo "$tool $label rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$O/$tool-$label.log" | tail -1)" >>"$S"
}
san racecheck qwen3-64 90 --model qwen3-30b-a3b --tokens 64
san synccheck ds2-64 50 --model deepseek-v2-lite --tokens 64
san memcheck ds2-300 50 --model deepseek-v2-lite --tokens 300
left 360 && pkgtest runtime persist-fwd $((470 - $(date +%s) + START)) $C/runtime.test -test.v -test.count=1 -test.run 'TestPersistentGPU$'
[ -f "$O/persist-fwd.log" ] && grep -E "^--- |^    --- FAIL|panic|timed out" "$O/persist-fwd.log" | head -20 >>"$S"
echo "elapsed $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
