#!/usr/bin/env bash
# run 57 call 11 (about 2 minutes; carry: .carry/bins.tgz holding main's CLI after run 57's merges,
# b53be96, and branch ws-epilogue rebased on it as .carry/mokc-wse.gz, `make device-old-cli
# REV=ws-epilogue-2` renamed). ws-epilogue: wgmma-ws's epilogue with 16 main-grad pairs' loads in
# flight per round, not 8 (run 56's call 2, never run). Its bits against main's (the persistent
# backward at qwen3-30b-a3b T = 300 and gpt-oss-20b T = 200, per-op --wgrad wgmma-ws at
# qwen3-30b-a3b T = 300), then the persistent backward and per-op --wgrad wgmma-ws at qwen3-30b-a3b
# T = 4096, main and branch alternated, and the branch's phases.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
wse=$(carried wse)
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
RUN_TIMEOUT=60
for v in main wse; do
	bin=$mokc
	[ $v = wse ] && bin=$wse
	run_json "$v-pers" "$bin" qwen3-30b-a3b bf16 300 --backward --lowering persistent
	run_json "$v-pers" "$bin" gpt-oss-20b bf16 200 --backward --lowering persistent
	run_json "$v-perop-ws" "$bin" qwen3-30b-a3b bf16 300 --backward --wgrad wgmma-ws
done
BENCH_BUDGET=170
B="--model qwen3-30b-a3b --iters 10 --backward"
for r in 1 2; do
	bench "main-pers-r$r" "$mokc" 4096 $B --lowering persistent
	bench "wse-pers-r$r" "$wse" 4096 $B --lowering persistent
done
bench main-perop-ws "$mokc" 4096 $B --wgrad wgmma-ws
bench wse-perop-ws "$wse" 4096 $B --wgrad wgmma-ws
bench wse-phases "$wse" 4096 $B --lowering persistent --phases
grep -hv "^{" "$O/bench.jsonl" >>"$S"
rm -f "$O/tmp.json"
echo "done $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
