#!/usr/bin/env bash
# run 30 call 4: gather v3's crossover. Call 3 measured the gathering mxfp8 decode FC1 faster at
# T = 1, even at T = 64 on olmoe and slower on the larger presets and at the decode range's top;
# here old (8e82a73) and new at T = 2, 4, 8, 16, 32 on qwen3-30b-a3b and gpt-oss-120b.
set -u
START=$(date +%s)
left() { [ $(( $(date +%s) - START )) -lt $1 ]; }
python3 -c "import tarfile; tarfile.open('.carry/bins.txz').extractall('.carry')"
. scripts/device-env.sh
O=$OUT/logs; mkdir -p $O
S=$O/summary.txt
OLD=$PWD/.carry/mokc-old
b() { # label bin T args...
  local label=$1 bin=$2 T=$3; shift 3
  left 200 || { echo "skipped bench $label T=$T $*" >> $S; return; }
  timeout 60 $bin bench --target sm_90a --tokens $T --kernels --json --iters 30 "$@" > $O/tmp.json 2>>$O/bench.log
  local rc=$?
  python3 -c "import json; d=json.load(open('$O/tmp.json')); d['label']='$label'; print(json.dumps(d)); print('$label', '$*', $T, round(d['median_ms'],4), ' '.join('%s=%.0f' % (k['name'][4:], 1000*k['median_ms']) for k in d['kernel_times'] if k['median_ms'] > 0.003))" >> $O/bench.jsonl 2>>$O/bench.log
  echo "bench $label T=$T $* rc=$rc ($(( $(date +%s) - START )) s)" >> $S
}
for m in qwen3-30b-a3b gpt-oss-120b; do
  for T in 2 4 8 16 32; do
    b old-mx $OLD $T --model $m --precision mxfp8
    b new-mx $mokc $T --model $m --precision mxfp8
  done
done
grep -hv "^{" $O/bench.jsonl >> $S
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
