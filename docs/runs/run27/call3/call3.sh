#!/usr/bin/env bash
# run 27 call 3: the register-fed GEMMs as the sm_90a default for mxfp8 (schedule.DefaultMXGemm; the
# PTX is call 2's --mx-gemm regfed). The runtime's MXFP8 rows test (gpt-oss's H = I = 2880, rows per
# expert 1, 127, 128, 129, 0, 255, 64, 3, forward and backward); every preset with --precision mxfp8
# (the default) at T = 0, 1, 64, 4096, 10 runs each (device-verify.sh mxfp8run, forward); then the
# default mxfp8 forward timed beside bf16 at T = 4096 on the presets call 2 did not time.
set -u
. scripts/device-env.sh
O=$OUT/logs; mkdir -p $O
S=$O/summary.txt
(cd runtime && timeout 150 ../.carry/runtime.test -test.v -test.count=1 -test.run 'TestLayerMXFP8Rows' > $O/rows.log 2>&1; echo "runtime MXFP8 rows test rc=$?" | tee -a $S)
grep -E "^(\s+--- |--- )" $O/rows.log | head -10 >> $S
OUT=$O/verify BUDGET=${VBUDGET:-300} TOKENS=0,1,64,4096 MX_DIRS=fwd bash scripts/device-verify.sh mxfp8run > $O/verify.log 2>&1
echo "mxfp8run rc=$?" | tee -a $S
tail -30 $O/verify.log >> $S
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
b() { # label T args...
  local label=$1 T=$2; shift 2
  timeout 60 $mokc bench --target sm_90a --tokens $T --kernels --json --iters 30 "$@" > $O/tmp.json 2>>$O/bench.log
  local rc=$?
  python3 -c "import json; d=json.load(open('$O/tmp.json')); d['label']='$label'; print(json.dumps(d)); print('$label', '$*', $T, round(d['median_ms'],4))" >> $O/bench.jsonl 2>>$O/bench.log
  echo "bench $label T=$T $* rc=$rc" >> $S
}
for m in deepseek-v2-lite llama4-scout qwen3-235b-a22b olmoe-1b-7b gpt-oss-20b qwen2-57b-a14b deepseek-v4-flash kimi-k2; do
  b bf16 4096 --model $m; b mxfp8 4096 --model $m --precision mxfp8
done
grep -hv "^{" $O/bench.jsonl >> $S
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
