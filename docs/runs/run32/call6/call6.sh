#!/usr/bin/env bash
# run 32 call 6: launch v2 as committed (the GEMMs and large-T kernels trigger by exiting, no
# launch_dependents) beside 71c27cd's build (mokc-v2: launch_dependents before the returns, which
# the idle producer lanes reach first): TestPhaseTimesGPU (with the grown workspace's reset),
# TestCaptureForward; forward y_sha256 and every backward figure new vs v2; forward medians
# alternated at T = 4096 and 64; phase times of the new code.
set -u
START=$(date +%s)
left() { [ $(( $(date +%s) - START )) -lt $1 ]; }
python3 -c "import tarfile; tarfile.open('.carry/bins.txz').extractall('.carry')"
. scripts/device-env.sh
O=$OUT/logs; mkdir -p $O
S=$O/summary.txt
OLD=$PWD/.carry/mokc-v2
(cd runtime && timeout 120 ../.carry/runtime.test -test.v -test.count=1 -test.run 'TestPhaseTimesGPU|TestCaptureForward' > $O/runtime.log 2>&1; echo "runtime rc=$? ($(( $(date +%s) - START )) s)" | tee -a $S)
grep -E "^--- |T=|FAIL" $O/runtime.log | head -12 >> $S
for p in bf16 mxfp8; do
  for bin in $OLD $mokc; do
    timeout 100 $bin run --model qwen3-30b-a3b --target sm_90a --precision $p --tokens 64,4096 --repeat 2 --json 2>>$O/run-err.log | python3 -c "
import json,sys
for line in sys.stdin:
    line=line.strip()
    if not line.startswith('{'): continue
    d=json.loads(line)
    if 'tokens' not in d: continue
    print('$(basename $bin)', d['model'], '$p', d['tokens'], repr(d['rel_l2']), d.get('y_sha256','')[:16], '%d/%d' % (d['identical_runs'], d['runs']), 'PASS' if d['pass'] else 'FAIL')
" >> $S
  done
done
rb() { # label bin model prec tokens args...
  local label=$1 bin=$2 m=$3 p=$4 T=$5; shift 5
  left 200 || { echo "skipped backward $label $m $p T=$T" >> $S; return; }
  timeout 150 $bin run --backward --model $m --target sm_90a --precision $p --tokens $T --json "$@" > $O/tmp-bwd.txt 2>>$O/run-err.log
  python3 -c "
import json
for line in open('$O/tmp-bwd.txt'):
    line=line.strip()
    if not line.startswith('{'): continue
    d=json.loads(line)
    if 'checks' not in d: continue
    print('$label', '$m', '$p', d['tokens'], ' '.join('%s=%r/%r' % (c['name'], c['rel_l2'], c['cosine']) for c in d['checks']), '%d/%d' % (d['identical_runs'], d['runs']), 'PASS' if d['pass'] else 'FAIL')
" >> $O/bwd.txt 2>>$O/run-err.log
}
for p in bf16 mxfp8; do
  rb v2 $OLD qwen3-30b-a3b $p 64,4096 --repeat 2
  rb new $mokc qwen3-30b-a3b $p 64,4096 --repeat 2
done
sort -k2,2 -k3,3 -k4,4n -k1,1r $O/bwd.txt >> $S
b() { # label bin T args...
  local label=$1 bin=$2 T=$3; shift 3
  left 330 || { echo "skipped bench $label T=$T $*" >> $S; return; }
  timeout 90 $bin bench --target sm_90a --tokens $T --json "$@" > $O/tmp.json 2>>$O/bench.log
  python3 -c "
import json; d=json.load(open('$O/tmp.json')); d['label']='$label'; print(json.dumps(d))
ph=' '.join('%s@%.0f+%.0f' % (p['name'][4:], 1000*p['start_ms'], 1000*p['ms']) for p in d.get('phases',[]))
print('$label', '$*', $T, 'median', round(d['median_ms'],4), 'min', round(d['min_ms'],4), 'span', round(d.get('phase_span_ms',0),4), ph)" >> $O/bench.jsonl 2>>$O/bench.log
}
for i in 1 2; do
  for m in qwen3-30b-a3b mixtral-8x7b deepseek-v2-lite; do
    b v2-bf16 $OLD 4096 --model $m --iters 30
    b bf16 $mokc 4096 --model $m --iters 30
  done
  b v2-mx $OLD 4096 --model qwen3-30b-a3b --precision mxfp8 --iters 30
  b mx $mokc 4096 --model qwen3-30b-a3b --precision mxfp8 --iters 30
  for m in deepseek-v2-lite olmoe-1b-7b qwen3-30b-a3b; do
    b v2-bf16 $OLD 64 --model $m --iters 50
    b bf16 $mokc 64 --model $m --iters 50
    b v2-mx $OLD 64 --model $m --precision mxfp8 --iters 50
    b mx $mokc 64 --model $m --precision mxfp8 --iters 50
  done
done
b bf16-ph $mokc 4096 --model qwen3-30b-a3b --phases --iters 30
b mx-ph $mokc 4096 --model qwen3-30b-a3b --precision mxfp8 --phases --iters 30
b mx-ph $mokc 64 --model olmoe-1b-7b --precision mxfp8 --phases --iters 50
grep -hv "^{" $O/bench.jsonl >> $S
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
