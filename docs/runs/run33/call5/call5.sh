#!/usr/bin/env bash
# run 33 call 5: the work-queue dispatch past T*K = 8192 only, the four routing kernels (now with
# their early launch_dependents: a closed token range) between 2048 and 8192 slots, and bench
# --phases queuing each recorded forward behind two others; beside --dispatch ops of the same binary
# (mokc-old: the PTX of 178eff1, byte for byte).
# Runtime tests (capture at T = 1100: moe_dispatch), y_sha256 new vs old, forward medians
# alternated at T = 300 .. 16384, phase times of the new build.
set -u
START=$(date +%s)
left() { [ $(( $(date +%s) - START )) -lt $1 ]; }
python3 -c "import tarfile; tarfile.open('.carry/bins.txz').extractall('.carry')"
. scripts/device-env.sh
O=$OUT/logs; mkdir -p $O
S=$O/summary.txt
OLD=$PWD/.carry/mokc-old
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
for bin in $OLD $mokc; do rj $(basename $bin) $bin qwen3-30b-a3b bf16 300,1024,1100,4096; done
for bin in $OLD $mokc; do rj $(basename $bin) $bin qwen3-30b-a3b mxfp8 300,1100,4096; done
for bin in $OLD $mokc; do rj $(basename $bin) $bin kimi-k2 bf16 1100; done
b() { # label bin T args...
  local label=$1 bin=$2 T=$3; shift 3
  left 520 || { echo "skipped bench $label T=$T $*" >> $S; return; }
  timeout 60 $bin bench --target sm_90a --tokens $T --json "$@" > $O/tmp.json 2>>$O/bench.log
  python3 -c "
import json; d=json.load(open('$O/tmp.json')); d['label']='$label'; print(json.dumps(d))
ph=' '.join('%s@%.1f+%.1f' % (p['name'][4:], 1000*p['start_ms'], 1000*p['ms']) for p in d.get('phases',[]))
print('$label', '$*', $T, 'median', round(d['median_ms'],4), 'min', round(d['min_ms'],4), 'p90', round(d['p90_ms'],4), 'span', round(d.get('phase_span_ms',0),4), ph)" >> $O/bench.jsonl 2>>$O/bench.log
}
for i in 1 2 3; do
  for T in 300 1024 2048 4096 16384; do
    b old $OLD $T --model qwen3-30b-a3b --iters 40
    b new $mokc $T --model qwen3-30b-a3b --iters 40
  done
  b old-mx $OLD 4096 --model qwen3-30b-a3b --precision mxfp8 --iters 30
  b new-mx $mokc 4096 --model qwen3-30b-a3b --precision mxfp8 --iters 30
done
for i in 1 2; do
  b old $OLD 4096 --model deepseek-v3 --iters 10
  b new $mokc 4096 --model deepseek-v3 --iters 10
  b old $OLD 4096 --model kimi-k2 --iters 10
  b new $mokc 4096 --model kimi-k2 --iters 10
done
for T in 300 4096 16384; do
  b new-ph $mokc $T --model qwen3-30b-a3b --phases --iters 20
  b ops-ph $mokc $T --model qwen3-30b-a3b --dispatch ops --phases --iters 20
done
b new-mx-ph $mokc 4096 --model qwen3-30b-a3b --precision mxfp8 --phases --iters 20
b new-mx-ph $mokc 64 --model olmoe-1b-7b --precision mxfp8 --phases --iters 30
b new-ph $mokc 64 --model olmoe-1b-7b --phases --iters 30
grep -hv "^{" $O/bench.jsonl >> $S
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
