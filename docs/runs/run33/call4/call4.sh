#!/usr/bin/env bash
# run 33 call 4: is the time moe_dispatch loses outside its phase records (call 3: T = 300 and
# 1024) the SM's shared-memory carveout changing before it? An experiment build (mokc-exp: call 2's
# code plus an environment knob MOKC_EXP_CARVEOUT that sets every kernel's preferred carveout,
# cuFuncSetAttribute CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT): --dispatch ops against
# queue at T = 300, 1024, 4096 with no preference and with 100 (shared memory first).
set -u
START=$(date +%s)
left() { [ $(( $(date +%s) - START )) -lt $1 ]; }
python3 -c "import tarfile; tarfile.open('.carry/bins.txz').extractall('.carry')"
. scripts/device-env.sh
O=$OUT/logs; mkdir -p $O
S=$O/summary.txt
X=$PWD/.carry/mokc-exp
b() { # label T args...
  local label=$1 T=$2; shift 2
  left 400 || { echo "skipped bench $label T=$T $*" >> $S; return; }
  timeout 60 $X bench --target sm_90a --tokens $T --json "$@" > $O/tmp.json 2>>$O/bench.log
  python3 -c "
import json; d=json.load(open('$O/tmp.json')); d['label']='$label'; print(json.dumps(d))
ph=' '.join('%s@%.1f+%.1f' % (p['name'][4:], 1000*p['start_ms'], 1000*p['ms']) for p in d.get('phases',[]))
print('$label', '$*', $T, 'median', round(d['median_ms'],4), 'min', round(d['min_ms'],4), 'p90', round(d['p90_ms'],4), 'span', round(d.get('phase_span_ms',0),4), ph)" >> $O/bench.jsonl 2>>$O/bench.log
}
for i in 1 2 3; do
  for T in 300 1024 4096; do
    for d in ops queue; do
      unset MOKC_EXP_CARVEOUT; b $d-none $T --model qwen3-30b-a3b --dispatch $d --iters 40
      export MOKC_EXP_CARVEOUT=100; b $d-c100 $T --model qwen3-30b-a3b --dispatch $d --iters 40
    done
  done
done
export MOKC_EXP_CARVEOUT=100
b ops-c100-ph 300 --model qwen3-30b-a3b --dispatch ops --phases --iters 30
b queue-c100-ph 300 --model qwen3-30b-a3b --dispatch queue --phases --iters 30
for m in olmoe-1b-7b deepseek-v2-lite; do
  for p in bf16 mxfp8; do
    unset MOKC_EXP_CARVEOUT; b none-$p 64 --model $m --precision $p --iters 50
    export MOKC_EXP_CARVEOUT=100; b c100-$p 64 --model $m --precision $p --iters 50
  done
done
grep -hv "^{" $O/bench.jsonl >> $S
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
