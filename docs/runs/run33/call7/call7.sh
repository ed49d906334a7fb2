#!/usr/bin/env bash
# run 33 call 7: prefetch v1 (the decode FC1's first weights prefetched into L2 before its
# programmatic wait) beside c8bceec's build (mokc-c8b): y_sha256 at decode T, runtime tests,
# memcheck, forward medians at T = 64 (and 1, 256) alternated, phase times.
set -u
START=$(date +%s)
left() { [ $(( $(date +%s) - START )) -lt $1 ]; }
python3 -c "import tarfile; tarfile.open('.carry/bins.txz').extractall('.carry')"
. scripts/device-env.sh
O=$OUT/logs; mkdir -p $O
S=$O/summary.txt
OLD=$PWD/.carry/mokc-c8b
(cd runtime && timeout 100 ../.carry/runtime.test -test.v -test.count=1 -test.run 'TestCaptureForward|TestPhaseTimesGPU' > $O/runtime.log 2>&1; echo "runtime rc=$? ($(( $(date +%s) - START )) s)" | tee -a $S)
grep -E "^\s*--- |^(ok|FAIL|PASS)" $O/runtime.log | head -20 >> $S
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
for m in olmoe-1b-7b qwen3-30b-a3b gpt-oss-20b; do
  for p in bf16 mxfp8; do
    for bin in $OLD $mokc; do rj $(basename $bin) $bin $m $p 1,64,256; done
  done
done
timeout 90 compute-sanitizer --tool memcheck $mokc run --model olmoe-1b-7b --target sm_90a --precision mxfp8 --tokens 64 --repeat 1 > $O/san-memcheck.log 2>&1
echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY' $O/san-memcheck.log | head -1)" >> $S
b() { # label bin T args...
  local label=$1 bin=$2 T=$3; shift 3
  left 480 || { echo "skipped bench $label T=$T $*" >> $S; return; }
  timeout 60 $bin bench --target sm_90a --tokens $T --json "$@" > $O/tmp.json 2>>$O/bench.log
  python3 -c "
import json; d=json.load(open('$O/tmp.json')); d['label']='$label'; print(json.dumps(d))
ph=' '.join('%s@%.1f+%.1f' % (p['name'][4:], 1000*p['start_ms'], 1000*p['ms']) for p in d.get('phases',[]))
print('$label', '$*', $T, 'median', round(d['median_ms'],4), 'min', round(d['min_ms'],4), 'p90', round(d['p90_ms'],4), 'span', round(d.get('phase_span_ms',0),4), ph)" >> $O/bench.jsonl 2>>$O/bench.log
}
for i in 1 2; do
  for m in olmoe-1b-7b deepseek-v2-lite qwen3-30b-a3b gpt-oss-20b mixtral-8x7b; do
    for p in bf16 mxfp8; do
      b old-$p $OLD 64 --model $m --precision $p --iters 50
      b new-$p $mokc 64 --model $m --precision $p --iters 50
    done
  done
done
for p in bf16 mxfp8; do
  b old-$p $OLD 256 --model qwen3-30b-a3b --precision $p --iters 50
  b new-$p $mokc 256 --model qwen3-30b-a3b --precision $p --iters 50
  b old-$p $OLD 1 --model qwen3-30b-a3b --precision $p --iters 50
  b new-$p $mokc 1 --model qwen3-30b-a3b --precision $p --iters 50
done
b old-ph $OLD 64 --model olmoe-1b-7b --precision mxfp8 --phases --iters 30
b new-ph $mokc 64 --model olmoe-1b-7b --precision mxfp8 --phases --iters 30
b old-ph $OLD 64 --model olmoe-1b-7b --phases --iters 30
b new-ph $mokc 64 --model olmoe-1b-7b --phases --iters 30
grep -hv "^{" $O/bench.jsonl >> $S
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
