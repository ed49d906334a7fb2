#!/usr/bin/env bash
# run 33 call 3: one binary (call 2's), --dispatch queue against --dispatch ops, forward medians
# alternated at T = 300, 1024, 2048, 4096 (qwen3-30b-a3b bf16), and phase times of both at 1024:
# why call 2's phase times show moe_dispatch 9 µs ahead at T = 1024 and the event medians do not.
set -u
START=$(date +%s)
left() { [ $(( $(date +%s) - START )) -lt $1 ]; }
python3 -c "import tarfile; tarfile.open('.carry/bins.txz').extractall('.carry')"
. scripts/device-env.sh
O=$OUT/logs; mkdir -p $O
S=$O/summary.txt
b() { # label T args...
  local label=$1 T=$2; shift 2
  left 400 || { echo "skipped bench $label T=$T $*" >> $S; return; }
  timeout 60 $mokc bench --target sm_90a --tokens $T --json "$@" > $O/tmp.json 2>>$O/bench.log
  python3 -c "
import json; d=json.load(open('$O/tmp.json')); d['label']='$label'; print(json.dumps(d))
ph=' '.join('%s@%.1f+%.1f' % (p['name'][4:], 1000*p['start_ms'], 1000*p['ms']) for p in d.get('phases',[]))
print('$label', '$*', $T, 'median', round(d['median_ms'],4), 'min', round(d['min_ms'],4), 'p90', round(d['p90_ms'],4), 'span', round(d.get('phase_span_ms',0),4), ph)" >> $O/bench.jsonl 2>>$O/bench.log
}
b ops-ph 1024 --model qwen3-30b-a3b --dispatch ops --phases --iters 30
b queue-ph 1024 --model qwen3-30b-a3b --dispatch queue --phases --iters 30
b ops-ph 300 --model qwen3-30b-a3b --dispatch ops --phases --iters 30
b queue-ph 300 --model qwen3-30b-a3b --dispatch queue --phases --iters 30
for i in 1 2 3; do
  for T in 300 1024 2048 4096; do
    b ops $T --model qwen3-30b-a3b --dispatch ops --iters 40
    b queue $T --model qwen3-30b-a3b --dispatch queue --iters 40
  done
done
grep -hv "^{" $O/bench.jsonl >> $S
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
