#!/usr/bin/env bash
# run 58 call 3 (about 4 minutes): branch ws-mg-stage (on wse-ag4): wgmma-ws's consumers copy each
# tile's f32 main grads into shared memory with cp.async before the K loop (two ring stages beside
# the 128 KB), carried as .carry/mokc-mg.gz, beside main's CLI (.carry/bins.tgz) and wse-ag4's
# (.carry/mokc-both.gz).
#  1. bits against main's of call 1 (the persistent backward at qwen3-30b-a3b T = 300 and 4096,
#     gpt-oss-20b T = 200, llama4-scout T = 64; per-op --wgrad wgmma-ws at deepseek-v2-lite T = 200,
#     I = 1408: partial tiles), and --main-grad bf16 (not staged) at qwen3-30b-a3b T = 300, main's
#     and mg's;
#  2. forward + backward at qwen3-30b-a3b T = 4096: main and mg persistent, two rounds; mg's
#     phases; per-op --wgrad wgmma-ws, main and mg; wse-ag4 persistent; main per-op (its default);
#  3. racecheck of mg's persistent backward (qwen3-30b-a3b T = 300), as time allows.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
mg=$(carried mg)
both=$(carried both)
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
RUN_TIMEOUT=80
P="--lowering persistent"
# main's hashes: call 1 (persistent and per-op give the same bits), but for bf16 main grads
run_json mg-pers "$mg" qwen3-30b-a3b bf16 300,4096 --backward $P
run_json mg-pers "$mg" gpt-oss-20b bf16 200 --backward $P
run_json mg-perop-ws "$mg" deepseek-v2-lite bf16 200 --backward --wgrad wgmma-ws
run_json mg-pers "$mg" llama4-scout bf16 64 --backward $P
run_json main-pers-mgbf16 "$mokc" qwen3-30b-a3b bf16 300 --backward $P --main-grad bf16
run_json mg-pers-mgbf16 "$mg" qwen3-30b-a3b bf16 300 --backward $P --main-grad bf16
echo "bits done $(($(date +%s) - START)) s" >>"$S"
BENCH_BUDGET=400
B="--model qwen3-30b-a3b --iters 10 --backward"
for r in 1 2; do
	bench "main-pers-r$r" "$mokc" 4096 $B $P
	bench "mg-pers-r$r" "$mg" 4096 $B $P
done
bench mg-phases "$mg" 4096 $B $P --phases
bench main-perop-ws "$mokc" 4096 $B --wgrad wgmma-ws
bench mg-perop-ws "$mg" 4096 $B --wgrad wgmma-ws
bench both-pers "$both" 4096 $B $P
bench main-perop "$mokc" 4096 $B
grep -hv "^{" "$O/bench.jsonl" >>"$S"
SAN_BUDGET=450
mokc=$mg san racecheck mg-q3-300 70 --model qwen3-30b-a3b --tokens 300 --backward
rm -f "$O/tmp.json"
echo "done $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
