#!/usr/bin/env bash
# run 33 call 2: moe_dispatch with the ids loaded in one batch per warp, the error words in
# batches, and the permute items' recount before their wait for the scan; beside 178eff1's build
# (mokc-old). The queue kernel against the four; y_sha256 new vs old; phase times and forward
# medians alternated at T = 1024, 4096, 16384.
set -u
START=$(date +%s)
left() { [ $(( $(date +%s) - START )) -lt $1 ]; }
python3 -c "import tarfile; tarfile.open('.carry/bins.txz').extractall('.carry')"
. scripts/device-env.sh
O=$OUT/logs; mkdir -p $O
S=$O/summary.txt
OLD=$PWD/.carry/mokc-old
(cd codegen && timeout 100 ../.carry/codegen.test -test.v -test.count=1 -test.run 'TestDispatchQueueGPU|TestDispatchSmallGPU' > $O/codegen.log 2>&1; echo "codegen rc=$? ($(( $(date +%s) - START )) s)" | tee -a $S)
grep -E "^(--- |ok|FAIL|PASS)|differs" $O/codegen.log | head -30 >> $S
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
for bin in $OLD $mokc; do rj $(basename $bin) $bin qwen3-30b-a3b bf16 300,1024,4096,16384; done
for bin in $OLD $mokc; do rj $(basename $bin) $bin deepseek-v3 bf16 4096; done
b() { # label bin T args...
  local label=$1 bin=$2 T=$3; shift 3
  left 500 || { echo "skipped bench $label T=$T $*" >> $S; return; }
  timeout 60 $bin bench --target sm_90a --tokens $T --json "$@" > $O/tmp.json 2>>$O/bench.log
  python3 -c "
import json; d=json.load(open('$O/tmp.json')); d['label']='$label'; print(json.dumps(d))
ph=' '.join('%s@%.1f+%.1f' % (p['name'][4:], 1000*p['start_ms'], 1000*p['ms']) for p in d.get('phases',[]))
print('$label', '$*', $T, 'median', round(d['median_ms'],4), 'min', round(d['min_ms'],4), 'span', round(d.get('phase_span_ms',0),4), ph)" >> $O/bench.jsonl 2>>$O/bench.log
}
for T in 1024 4096 16384; do
  b old-ph $OLD $T --model qwen3-30b-a3b --phases --iters 20
  b new-ph $mokc $T --model qwen3-30b-a3b --phases --iters 20
done
for i in 1 2 3; do
  for T in 1024 4096 16384; do
    b old $OLD $T --model qwen3-30b-a3b --iters 30
    b new $mokc $T --model qwen3-30b-a3b --iters 30
  done
done
b old-mx $OLD 4096 --model qwen3-30b-a3b --precision mxfp8 --iters 30
b new-mx $mokc 4096 --model qwen3-30b-a3b --precision mxfp8 --iters 30
b old $OLD 4096 --model deepseek-v3 --iters 10
b new $mokc 4096 --model deepseek-v3 --iters 10
b old-mx $OLD 4096 --model qwen3-30b-a3b --precision mxfp8 --iters 30
b new-mx $mokc 4096 --model qwen3-30b-a3b --precision mxfp8 --iters 30
grep -hv "^{" $O/bench.jsonl >> $S
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
