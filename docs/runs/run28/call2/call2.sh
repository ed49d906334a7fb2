#!/usr/bin/env bash
# run 28 call 2: mxfp8 v30 (call 1's binaries) on every preset: device-verify.sh mxfp8run forward at
# T = 0, 1, 64, 4096, 10 runs each, in five lanes (dsv4-pro-proxy and kimi-k2 alone in theirs: their
# float64 references are the longest), 64 sampled tokens per check; the backward on gpt-oss-120b
# (T = 64, 4096) and deepseek-v2-lite (T = 4096); then the default mxfp8 forward timed beside bf16 at
# T = 4096 on the eight presets call 1 did not time.
set -u
python3 -c "import tarfile; tarfile.open('.carry/bins.txz').extractall('.carry')"
. scripts/device-env.sh
O=$OUT/logs; mkdir -p $O
S=$O/summary.txt
OUT=$O/verify BUDGET=330 TOKENS=0,1,64,4096 MX_DIRS=fwd MX_ARGS="--sample 64" \
  MX_LANES="dsv4-pro-proxy|kimi-k2|deepseek-v3 qwen3-235b-a22b deepseek-v4-flash|mixtral-8x7b llama4-scout qwen2-57b-a14b|olmoe-1b-7b qwen3-30b-a3b gpt-oss-20b deepseek-v2-lite gpt-oss-120b" \
  bash scripts/device-verify.sh mxfp8run > $O/verify.log 2>&1
echo "mxfp8run rc=$?" | tee -a $S
tail -20 $O/verify.log >> $S
python3 - "$O/verify/run-mxfp8run.jsonl" >> $S 2>&1 <<'PY'
import json, sys
n = bad = 0
for l in open(sys.argv[1]):
    try: d = json.loads(l)
    except Exception: continue
    n += 1
    ok = d.get('pass') and d.get('identical_runs') == d.get('runs')
    bad += not ok
    print(d.get('model'), d.get('tokens'), 'rel_l2 %.2e' % d.get('rel_l2', -1), '%s/%s identical' % (d.get('identical_runs'), d.get('runs')), 'PASS' if ok else 'FAIL')
print('checks', n, 'failed', bad)
PY
r() { # model tokens args...
  local m=$1 T=$2; shift 2
  timeout 120 $mokc run --model $m --target sm_90a --tokens $T --json "$@" >> $O/run.jsonl 2>>$O/run.log; echo "run $m T=$T $* rc=$?" | tee -a $S
}
r gpt-oss-120b 64,4096 --precision mxfp8 --backward --repeat 3
r deepseek-v2-lite 4096 --precision mxfp8 --backward --repeat 3
python3 -c "
import json
for l in open('$O/run.jsonl'):
    try: d=json.loads(l)
    except Exception: continue
    print(d.get('model'), d.get('tokens'), 'bwd', '%s/%s identical' % (d.get('identical_runs'), d.get('runs')), 'PASS' if d.get('pass') else 'FAIL')
" >> $S 2>&1
b() { # label T args...
  local label=$1 T=$2; shift 2
  timeout 60 $mokc bench --target sm_90a --tokens $T --kernels --json --iters 30 "$@" > $O/tmp.json 2>>$O/bench.log
  local rc=$?
  python3 -c "import json; d=json.load(open('$O/tmp.json')); d['label']='$label'; print(json.dumps(d)); print('$label', '$*', $T, round(d['median_ms'],4), ' '.join('%s=%.0f' % (k['name'][4:], 1000*k['median_ms']) for k in d['kernel_times'] if k['median_ms'] > 0.003))" >> $O/bench.jsonl 2>>$O/bench.log
  echo "bench $label T=$T $* rc=$rc" >> $S
}
for m in deepseek-v2-lite llama4-scout qwen3-235b-a22b olmoe-1b-7b gpt-oss-20b qwen2-57b-a14b deepseek-v4-flash kimi-k2; do
  b bf16 4096 --model $m; b mxfp8 4096 --model $m --precision mxfp8
done
grep -hv "^{" $O/bench.jsonl >> $S
rm -f $O/tmp.json
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
