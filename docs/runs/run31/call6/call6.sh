#!/usr/bin/env bash
# run 31 call 6: the session's final code. TestSM90RoundOddGPU (each CRoundOdd case beside its f32
# twin on the same inputs: every stored bf16 the f32 output rounded to odd, bit for bit),
# TestSM90MXGemmGPU (its runner now returns C), and mokc run --json (now with y_sha256) on
# qwen3-30b-a3b (bf16 and mxfp8) and gpt-oss-20b (mxfp8) at T = 0, 1, 64, 4096.
set -u
START=$(date +%s)
python3 -c "import tarfile; tarfile.open('.carry/bins.txz').extractall('.carry')"
. scripts/device-env.sh
O=$OUT/logs; mkdir -p $O
S=$O/summary.txt
(cd codegen && timeout 150 ../.carry/codegen.test -test.v -test.count=1 -test.run 'TestSM90RoundOddGPU|TestSM90MXGemmGPU' > $O/codegen.log 2>&1; echo "codegen TestSM90RoundOddGPU TestSM90MXGemmGPU rc=$? ($(( $(date +%s) - START )) s)" | tee -a $S)
grep -E "^--- |RoundOdd|bit for bit|FAIL" $O/codegen.log | head -20 >> $S
grep -c -- "--- PASS" $O/codegen.log >> $S
r() { # model tokens args...
  local m=$1 T=$2; shift 2
  timeout 150 $mokc run --model $m --target sm_90a --tokens $T --json "$@" > $O/tmp-run.txt 2>>$O/run-err.log
  local rc=$?
  python3 -c "
import json
for line in open('$O/tmp-run.txt'):
    line=line.strip()
    if not line.startswith('{'): continue
    d=json.loads(line)
    if 'tokens' not in d: continue
    print(d['model'], d['precision'], d['tokens'], '%.3e' % d['rel_l2'], '%d/%d' % (d['identical_runs'], d['runs']), d.get('y_sha256','')[:16], 'PASS' if d['pass'] else 'FAIL')
" >> $S 2>>$O/run-err.log
  echo "run $m T=$T $* rc=$rc ($(( $(date +%s) - START )) s)" >> $S
}
r qwen3-30b-a3b 0,1,64,4096 --repeat 3 --precision mxfp8
r qwen3-30b-a3b 0,1,64,4096 --repeat 3
r gpt-oss-20b 0,1,64,4096 --repeat 3 --precision mxfp8 --sample 64
r qwen3-30b-a3b 64,4096 --repeat 2 --precision mxfp8
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
