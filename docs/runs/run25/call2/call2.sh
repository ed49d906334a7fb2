#!/usr/bin/env bash
# run 25 call 2: decode-shape sweep at T = 64 (the mxfp8 decode variant's tiles and stages through
# --variant-*; the bf16 shared GEMMs' tiles through --fc1-tile/--fc2-tile), then ncu of olmoe-1b-7b's
# two decode GEMMs with warp-stall sampling.
set -u
. scripts/device-env.sh
O=$OUT/logs; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv >> $O/summary.txt
b() { # label args...
  local label=$1; shift
  timeout 60 $mokc bench --target sm_90a --tokens ${TT:-64} --kernels --json "$@" > $O/tmp.json 2>>$O/bench.log
  local rc=$?
  python3 -c "import json,sys; d=json.load(open('$O/tmp.json')); d['label']='$label'; print(json.dumps(d))" >> $O/sweep.jsonl 2>>$O/bench.log
  echo "$label rc=$rc" | tee -a $O/summary.txt
}
for m in olmoe-1b-7b qwen2-57b-a14b qwen3-30b-a3b; do
  b "$m bf16" --model $m
  b "$m mx default" --model $m --precision mxfp8
  b "$m mx st6" --model $m --precision mxfp8 --variant-stages 6
  b "$m mx st4" --model $m --precision mxfp8 --variant-stages 4
  b "$m mx fc2 32x256 st5" --model $m --precision mxfp8 --variant-fc2-tile 32x256x128 --variant-stages 5
  b "$m mx fc2 32x64" --model $m --precision mxfp8 --variant-fc2-tile 32x64x128
  b "$m mx default again" --model $m --precision mxfp8
done
for t in 128x128x64 128x64x64; do
  b "qwen2 bf16 fc2 $t" --model qwen2-57b-a14b --fc2-tile $t
  b "llama4 bf16 fc2 $t" --model llama4-scout --fc2-tile $t
done
b "qwen2 bf16 fc1 128x128x64 fc2 128x64x64" --model qwen2-57b-a14b --fc1-tile 128x128x64 --fc2-tile 128x64x64
# T = 256 (olmoe 32, mixtral 64 mean rows per expert: past the decode variant's 16).
for m in olmoe-1b-7b mixtral-8x7b; do
  TT=256 b "$m T256 bf16" --model $m
  TT=256 b "$m T256 mx default" --model $m --precision mxfp8
  TT=256 b "$m T256 mx decode to 64 rows" --model $m --precision mxfp8 --variant-max-rows 64
done
OUT=$OUT/prof MODELS= NCU_MODELS= MX_MODEL=olmoe-1b-7b MX_TOKENS=64 MX_FLAGS= MX_KERNELS='^moe_fc[12]_decode$' MX_SKIP=4 MX_COUNT=2 timeout 240 bash scripts/device-profile.sh > $O/prof.log 2>&1; echo "profile rc=$?" | tee -a $O/summary.txt
rm -f $OUT/prof/*.ncu-rep
cd $OUT && tar czf logs.tgz logs prof && cp logs/summary.txt .
