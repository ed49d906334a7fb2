#!/usr/bin/env bash
# run 33 call 1: the dispatch work queue (moe_dispatch, schedule.DispatchQueue) beside 178eff1's
# build (mokc-old: init, count, scan, permute as four kernels past T*K = 2048). GPU tests of the
# queue kernel against the four kernels; layer tests with out-of-range ids past the one-block
# dispatch; graph capture at T = 1024; y_sha256 new vs old; sanitizers on moe_dispatch; forward
# medians alternated; phase times.
set -u
START=$(date +%s)
left() { [ $(( $(date +%s) - START )) -lt $1 ]; }
python3 -c "import tarfile; tarfile.open('.carry/bins.txz').extractall('.carry')"
. scripts/device-env.sh
O=$OUT/logs; mkdir -p $O
S=$O/summary.txt
OLD=$PWD/.carry/mokc-old
(cd codegen && timeout 150 ../.carry/codegen.test -test.v -test.count=1 -test.run 'TestDispatchQueueGPU|TestDispatchSmallGPU|TestForwardSM80' > $O/codegen.log 2>&1; echo "codegen rc=$? ($(( $(date +%s) - START )) s)" | tee -a $S)
grep -E "^(--- |ok|FAIL|PASS)|differs|seed" $O/codegen.log | head -30 >> $S
(cd runtime && timeout 200 ../.carry/runtime.test -test.v -test.count=1 -test.run 'TestCaptureForward|TestPhaseTimesGPU|TestLayerForward' > $O/runtime.log 2>&1; echo "runtime rc=$? ($(( $(date +%s) - START )) s)" | tee -a $S)
grep -E "^\s*--- |^(ok|FAIL|PASS)" $O/runtime.log | head -40 >> $S
rj() { # label bin model prec tokens
  timeout 120 $2 run --model $3 --target sm_90a --precision $4 --tokens $5 --repeat 2 --json 2>>$O/run-err.log | python3 -c "
import json,sys
for line in sys.stdin:
    line=line.strip()
    if not line.startswith('{'): continue
    d=json.loads(line)
    if 'tokens' not in d: continue
    print('$1', d['model'], '$4', d['tokens'], repr(d['rel_l2']), d.get('y_sha256','')[:16], '%d/%d' % (d['identical_runs'], d['runs']), 'PASS' if d['pass'] else 'FAIL', d.get('error_word',''))
" >> $S
}
for m in qwen3-30b-a3b deepseek-v2-lite gpt-oss-20b; do
  for bin in $OLD $mokc; do rj $(basename $bin) $bin $m bf16 300,1024,4096; done
done
for bin in $OLD $mokc; do rj $(basename $bin) $bin qwen3-30b-a3b mxfp8 1024,4096; done
left 330 && for bin in $OLD $mokc; do rj $(basename $bin) $bin qwen3-30b-a3b bf16 16384; done
# sanitizers on the dispatch kernel alone
for tool in memcheck racecheck synccheck; do
  left 360 || break
  timeout 90 compute-sanitizer --tool $tool --kernel-name kne=moe_dispatch $mokc run --model qwen3-30b-a3b --target sm_90a --tokens 4096 --repeat 2 > $O/san-$tool.log 2>&1
  echo "sanitizer $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|hazard' $O/san-$tool.log | head -2 | tr '\n' ' ')" >> $S
done
b() { # label bin T args...
  local label=$1 bin=$2 T=$3; shift 3
  left 540 || { echo "skipped bench $label T=$T $*" >> $S; return; }
  timeout 60 $bin bench --target sm_90a --tokens $T --json "$@" > $O/tmp.json 2>>$O/bench.log
  python3 -c "
import json; d=json.load(open('$O/tmp.json')); d['label']='$label'; print(json.dumps(d))
ph=' '.join('%s@%.1f+%.1f' % (p['name'][4:], 1000*p['start_ms'], 1000*p['ms']) for p in d.get('phases',[]))
print('$label', '$*', $T, 'median', round(d['median_ms'],4), 'min', round(d['min_ms'],4), 'span', round(d.get('phase_span_ms',0),4), ph)" >> $O/bench.jsonl 2>>$O/bench.log
}
b old-ph $OLD 4096 --model qwen3-30b-a3b --phases --iters 30
b new-ph $mokc 4096 --model qwen3-30b-a3b --phases --iters 30
for i in 1 2; do
  b old $OLD 4096 --model qwen3-30b-a3b --iters 30
  b new $mokc 4096 --model qwen3-30b-a3b --iters 30
  b old $OLD 1024 --model qwen3-30b-a3b --iters 30
  b new $mokc 1024 --model qwen3-30b-a3b --iters 30
  b old $OLD 16384 --model qwen3-30b-a3b --iters 20
  b new $mokc 16384 --model qwen3-30b-a3b --iters 20
  b old-mx $OLD 4096 --model qwen3-30b-a3b --precision mxfp8 --iters 30
  b new-mx $mokc 4096 --model qwen3-30b-a3b --precision mxfp8 --iters 30
  b old $OLD 4096 --model mixtral-8x7b --iters 20
  b new $mokc 4096 --model mixtral-8x7b --iters 20
done
b old-ph $OLD 16384 --model qwen3-30b-a3b --phases --iters 20
b new-ph $mokc 16384 --model qwen3-30b-a3b --phases --iters 20
grep -hv "^{" $O/bench.jsonl >> $S
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
