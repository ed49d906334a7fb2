#!/usr/bin/env bash
# run 50 call 1 (written after run 49's last device call, not yet run). Carry: `make device-bins` of
# the tree and `make device-old-cli REV=3386d3c` (the CLI before FC2's counters). Every part bounded.
# docs/perf.md, "phase counters v3 (written, not run) and what main keeps": main's persistent forward
# with FC2 waiting for FC1's row tiles (no grid barrier between them), not yet timed in this form.
#  1. The CLI: new persistent against old persistent (whose bits are per-op's), same y_sha256, at
#     decode sizes (the gathering FC1 signals) and past them.
#  2. Speed: qwen3-30b-a3b's phases at T = 4096, then old and new alternated at T = 64 and 4096.
#  3. racecheck of the new persistent forward and of the old (qwen3-30b-a3b T = 300): is run 49
#     call 3's hazard new?
#  4. TestPersistentGPU.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
old_cli
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
RUN_TIMEOUT=60
run_json new-pers "$mokc" qwen3-30b-a3b bf16 1,64,300,1100 --lowering persistent
run_json old-pers "$old" qwen3-30b-a3b bf16 1,64,300,1100 --lowering persistent
run_json new-pers "$mokc" gpt-oss-20b bf16 1,300 --lowering persistent
run_json old-pers "$old" gpt-oss-20b bf16 1,300 --lowering persistent
BENCH_BUDGET=300
bench old-pers-phases-T4096 "$old" 4096 --model qwen3-30b-a3b --iters 20 --lowering persistent --phases
bench new-pers-phases-T4096 "$mokc" 4096 --model qwen3-30b-a3b --iters 20 --lowering persistent --phases
for r in 1 2; do
	for T in 64 4096; do
		for m in qwen3-30b-a3b gpt-oss-120b; do
			bench "old-pers-$m-T$T-r$r" "$old" $T --model $m --iters 20 --lowering persistent
			bench "new-pers-$m-T$T-r$r" "$mokc" $T --model $m --iters 20 --lowering persistent
		done
	done
done
grep -hv "^{" "$O/bench.jsonl" >>"$S"
SAN_BUDGET=400 san racecheck q3-300 60 --model qwen3-30b-a3b --tokens 300
if left 340; then
	timeout -k 5 60 compute-sanitizer --tool racecheck --error-exitcode 9 "$old" run --target sm_90a --repeat 1 \
		--lowering persistent --wait-limit 0 --model qwen3-30b-a3b --tokens 300 >"$O/racecheck-old-q3-300.log" 2>&1
	echo "racecheck old q3-300 rc=$? $(grep -E 'RACECHECK SUMMARY' "$O/racecheck-old-q3-300.log" | tail -1)" >>"$S"
fi
left 400 && pkgtest runtime persist-fwd 190 $C/runtime.test -test.v -test.count=1 -test.timeout 185s -test.run 'TestPersistentGPU$'
[ -f "$O/persist-fwd.log" ] && grep -E "^--- |^    --- FAIL|panic|timed out|wait" "$O/persist-fwd.log" | head -20 >>"$S"
echo "elapsed $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
