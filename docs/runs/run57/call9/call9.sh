#!/usr/bin/env bash
# run 57 call 9 (about 2 minutes; carry as call 7's): cgr-wpe's combine_grad change reaches the
# per-op backward too (its dots loaded together): its per-op bits against main's (qwen3-30b-a3b T =
# 300, 4096; gpt-oss-20b T = 200) and the per-op backward at T = 4096, main and cgr-wpe alternated,
# two rounds, with --kernels for combine_grad's time.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
cw=$(carried cw)
RUN_TIMEOUT=80
for v in main cw; do
	bin=$mokc
	[ $v = cw ] && bin=$cw
	run_json "$v-perop" "$bin" qwen3-30b-a3b bf16 300,4096 --backward
	run_json "$v-perop" "$bin" gpt-oss-20b bf16 200 --backward
done
BENCH_BUDGET=200
B="--model qwen3-30b-a3b --iters 10 --backward --kernels"
for r in 1 2; do
	bench "main-perop-r$r" "$mokc" 4096 $B
	bench "cw-perop-r$r" "$cw" 4096 $B
done
bench_kernels
rm -f "$O/tmp.json"
echo "done $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
