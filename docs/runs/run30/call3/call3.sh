#!/usr/bin/env bash
# run 30 call 3: gather v3. kimi-k2's mxfp8 forward with --sample 32 (call 2's full check ran past
# its limit in the host reference); the bench at T = 64 for bf16 (new), mxfp8 old (8e82a73) and new
# (issue #11's ratio), then at the decode range's top: old, new, new --gather separate.
set -u
START=$(date +%s)
left() { [ $(( $(date +%s) - START )) -lt $1 ]; }
python3 -c "import tarfile; tarfile.open('.carry/bins.txz').extractall('.carry')"
. scripts/device-env.sh
O=$OUT/logs; mkdir -p $O
S=$O/summary.txt
OLD=$PWD/.carry/mokc-old
timeout 100 $mokc run --model kimi-k2 --target sm_90a --precision mxfp8 --tokens 1,64,257,1536 --repeat 3 --sample 32 > $O/kimi.log 2>&1; echo "kimi-k2 mxfp8 T=1,64,257,1536 --sample 32 rc=$? ($(( $(date +%s) - START )) s)" >> $S
grep -E "T=|PASS|FAIL" $O/kimi.log >> $S
b() { # label bin T args...
  local label=$1 bin=$2 T=$3; shift 3
  left 545 || { echo "skipped bench $label T=$T $*" >> $S; return; }
  timeout 60 $bin bench --target sm_90a --tokens $T --kernels --json --iters 30 "$@" > $O/tmp.json 2>>$O/bench.log
  local rc=$?
  python3 -c "import json; d=json.load(open('$O/tmp.json')); d['label']='$label'; print(json.dumps(d)); print('$label', '$*', $T, round(d['median_ms'],4), ' '.join('%s=%.0f' % (k['name'][4:], 1000*k['median_ms']) for k in d['kernel_times'] if k['median_ms'] > 0.003))" >> $O/bench.jsonl 2>>$O/bench.log
  echo "bench $label T=$T $* rc=$rc ($(( $(date +%s) - START )) s)" >> $S
}
for m in olmoe-1b-7b qwen3-30b-a3b mixtral-8x7b gpt-oss-20b deepseek-v2-lite qwen2-57b-a14b gpt-oss-120b qwen3-235b-a22b deepseek-v3 deepseek-v4-flash kimi-k2; do
  b new-bf16 $mokc 64 --model $m
  b old-mx $OLD 64 --model $m --precision mxfp8
  b new-mx $mokc 64 --model $m --precision mxfp8
done
for a in "qwen3-30b-a3b 512" "qwen3-30b-a3b 1" "mixtral-8x7b 256" "deepseek-v3 1024"; do
  set -- $a
  b old-mx $OLD $2 --model $1 --precision mxfp8
  b new-mx $mokc $2 --model $1 --precision mxfp8
  b new-mx-sep $mokc $2 --model $1 --precision mxfp8 --gather separate
done
grep -hv "^{" $O/bench.jsonl >> $S
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
