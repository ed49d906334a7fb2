#!/usr/bin/env bash
# run 60 call 1 (about 8 minutes; written in run 59, whose device time ran out before it could
# start a machine for it): branch ws-mg-prefetch (one commit on main): wgmma-ws's consumers issue
# the loads of a tile's f32 main grads before its K loop (codegen/kernels_wgrad_ws.go,
# wsMainPairs) and add and store them after it, so the loads' latency runs beside the K loop.
# And branch actgrad-bulk-warps (one commit on main): the bulk-copy act_grad with fewer than 8 rows a
# stage (gpt-oss-20b, deepseek-v2-lite, olmoe-1b-7b, qwen2-57b-a14b, deepseek-v3) runs each row on
# 8/R consumer warps instead of one (qwen3-30b-a3b's PTX unchanged).
# Carry: .carry/bins.tgz holding main's CLI (`make device-old-cli REV=main`, gunzipped as mokc and
# tarred), .carry/mokc-pf.gz and .carry/mokc-abw.gz (`make device-old-cli REV=ws-mg-prefetch` and
# `REV=actgrad-bulk-warps`, renamed).
#  1. bits against main's: the persistent backward at qwen3-30b-a3b T = 300, 1100 and 4096,
#     gpt-oss-20b T = 200 (partial tiles), deepseek-v2-lite T = 200, llama4-scout T = 64; per-op
#     --wgrad wgmma-ws at deepseek-v2-lite T = 200; --main-grad bf16 (not prefetched) at
#     qwen3-30b-a3b T = 300. Main's hashes (run 59): qwen3-30b-a3b 300 2ed0e5c14a224723, 1100
#     c693b4636beb8f5b, 4096 b3024b53d72ffe4d; gpt-oss-20b 200 b324a191a5f08092; deepseek-v2-lite
#     200 6239f8b2a31e9f91; llama4-scout 64 614b213b8b8f6729; bf16 main grads c7c4247e9893ba1d;
#  2. forward + backward at qwen3-30b-a3b: main and pf persistent at T = 4096 (two rounds), 1100
#     and 2400, pf's phases at 4096 and 1100, per-op (main's default, pf's --wgrad wgmma-ws) at
#     4096 and 1100;
#  3. abw: bits against main's at gpt-oss-20b, deepseek-v2-lite, qwen2-57b-a14b and olmoe-1b-7b
#     T = 200 (olmoe-1b-7b 3ed6b67e8f8d5bb1, qwen2-57b-a14b 620debce987c3f03) and gpt-oss-20b
#     T = 4096 (main's in this call); act_grad's phase, main and abw, at gpt-oss-20b and
#     deepseek-v2-lite T = 4096;
#  4. memcheck (gpt-oss-20b T = 200) and racecheck (qwen3-30b-a3b T = 300) of pf, racecheck of abw
#     (deepseek-v2-lite T = 200), as time allows.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
pf=$(carried pf)
abw=$(carried abw)
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
RUN_TIMEOUT=80
P="--lowering persistent"
run_json pf-pers "$pf" qwen3-30b-a3b bf16 300,1100,4096 --backward $P
run_json pf-pers "$pf" gpt-oss-20b bf16 200 --backward $P
run_json pf-pers "$pf" deepseek-v2-lite bf16 200 --backward $P
run_json pf-pers "$pf" llama4-scout bf16 64 --backward $P
run_json pf-perop-ws "$pf" deepseek-v2-lite bf16 200 --backward --wgrad wgmma-ws
run_json pf-pers-mgbf16 "$pf" qwen3-30b-a3b bf16 300 --backward $P --main-grad bf16
run_json abw-pers "$abw" gpt-oss-20b bf16 200,4096 --backward $P
run_json main-pers "$mokc" gpt-oss-20b bf16 4096 --backward $P
run_json abw-pers "$abw" deepseek-v2-lite bf16 200 --backward $P
run_json abw-pers "$abw" qwen2-57b-a14b bf16 200 --backward $P
run_json abw-pers "$abw" olmoe-1b-7b bf16 200 --backward $P
echo "bits done $(($(date +%s) - START)) s" >>"$S"
BENCH_BUDGET=400
B="--model qwen3-30b-a3b --iters 10 --backward"
for r in 1 2; do
	bench "main-pers-r$r" "$mokc" 4096 $B $P
	bench "pf-pers-r$r" "$pf" 4096 $B $P
done
bench pf-phases "$pf" 4096 $B $P --phases
bench main-perop "$mokc" 4096 $B
bench pf-perop-ws "$pf" 4096 $B --wgrad wgmma-ws
bench main-pers-T1100 "$mokc" 1100 $B $P
bench pf-pers-T1100 "$pf" 1100 $B $P
bench pf-phases-T1100 "$pf" 1100 $B $P --phases
bench main-perop-T1100 "$mokc" 1100 $B
bench pf-perop-ws-T1100 "$pf" 1100 $B --wgrad wgmma-ws
bench main-pers-T2400 "$mokc" 2400 $B $P
bench pf-pers-T2400 "$pf" 2400 $B $P
for m in gpt-oss-20b deepseek-v2-lite; do
	bench "main-phases-$m" "$mokc" 4096 --model $m --iters 10 --backward $P --phases
	bench "abw-phases-$m" "$abw" 4096 --model $m --iters 10 --backward $P --phases
done
grep -hv "^{" "$O/bench.jsonl" >>"$S"
SAN_BUDGET=560
mokc=$pf san memcheck pf-oss-200 70 --model gpt-oss-20b --tokens 200 --backward
mokc=$pf san racecheck pf-q3-300 70 --model qwen3-30b-a3b --tokens 300 --backward
mokc=$abw san racecheck abw-dsv2-200 70 --model deepseek-v2-lite --tokens 200 --backward
rm -f "$O/tmp.json"
echo "done $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
