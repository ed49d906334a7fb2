#!/usr/bin/env bash
# run 29 call 8: issue #11's T = 64 ratio (mxfp8 against our bf16 forward) after gather v2 made the
# bf16 decode forward 2-9% faster; the presets whose margin was thinnest (olmoe-1b-7b,
# qwen2-57b-a14b, deepseek-v2-lite) and qwen3-30b-a3b, bf16 with the old CLI (73f273d) and this one.
set -u
python3 -c "import tarfile; tarfile.open('.carry/bins.txz').extractall('.carry')"
. scripts/device-env.sh
O=$OUT/logs; mkdir -p $O
S=$O/summary.txt
b() { # label bin T args...
  local label=$1 bin=$2 T=$3; shift 3
  timeout 60 $bin bench --target sm_90a --tokens $T --kernels --json --iters 30 "$@" > $O/tmp.json 2>>$O/bench.log
  local rc=$?
  python3 -c "import json; d=json.load(open('$O/tmp.json')); d['label']='$label'; print(json.dumps(d)); print('$label', '$*', $T, round(d['median_ms'],4), ' '.join('%s=%.0f' % (k['name'][4:], 1000*k['median_ms']) for k in d['kernel_times'] if k['median_ms'] > 0.003))" >> $O/bench.jsonl 2>>$O/bench.log
  echo "bench $label T=$T $* rc=$rc" >> $S
}
OLD=$PWD/.carry/mokc-old
for m in olmoe-1b-7b qwen2-57b-a14b deepseek-v2-lite qwen3-30b-a3b; do
  b bf16-old $OLD 64 --model $m; b bf16-new $mokc 64 --model $m; b mxfp8 $mokc 64 --model $m --precision mxfp8
done
grep -hv "^{" $O/bench.jsonl >> $S
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
