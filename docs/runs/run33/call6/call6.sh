#!/usr/bin/env bash
# run 33 call 6: the session's final code (moe_dispatch past T*K = 8192; the four routing kernels,
# triggering at their end as before, between 2048 and 8192 slots): the queue kernel against the four
# and the one-block dispatch against the four, the sm_80 forward GPU test; the large-E presets
# (deepseek-v3 E = 256, kimi-k2 E = 384) at T = 4096 with phase times, new against --dispatch ops
# (mokc-old: 178eff1's PTX); sanitizers on moe_dispatch at kimi-k2 T = 4096.
set -u
START=$(date +%s)
left() { [ $(( $(date +%s) - START )) -lt $1 ]; }
python3 -c "import tarfile; tarfile.open('.carry/bins.txz').extractall('.carry')"
. scripts/device-env.sh
O=$OUT/logs; mkdir -p $O
S=$O/summary.txt
OLD=$PWD/.carry/mokc-old
(cd codegen && timeout 150 ../.carry/codegen.test -test.v -test.count=1 -test.run 'TestDispatchQueueGPU|TestDispatchSmallGPU|TestForwardSM80' > $O/codegen.log 2>&1; echo "codegen rc=$? ($(( $(date +%s) - START )) s)" | tee -a $S)
grep -E "^(--- |ok|FAIL|PASS)|differs" $O/codegen.log | head -30 >> $S
for tool in memcheck racecheck synccheck; do
  left 200 || break
  timeout 100 compute-sanitizer --tool $tool --kernel-name kne=moe_dispatch $mokc run --model kimi-k2 --target sm_90a --tokens 4096 --repeat 1 --sample 16 > $O/san-$tool.log 2>&1
  echo "sanitizer $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $O/san-$tool.log | head -2 | tr '\n' ' ')" >> $S
done
b() { # label bin T args...
  local label=$1 bin=$2 T=$3; shift 3
  left 420 || { echo "skipped bench $label T=$T $*" >> $S; return; }
  timeout 90 $bin bench --target sm_90a --tokens $T --json "$@" > $O/tmp.json 2>>$O/bench.log
  python3 -c "
import json; d=json.load(open('$O/tmp.json')); d['label']='$label'; print(json.dumps(d))
ph=' '.join('%s@%.1f+%.1f' % (p['name'][4:], 1000*p['start_ms'], 1000*p['ms']) for p in d.get('phases',[]))
print('$label', '$*', $T, 'median', round(d['median_ms'],4), 'min', round(d['min_ms'],4), 'p90', round(d['p90_ms'],4), 'span', round(d.get('phase_span_ms',0),4), ph)" >> $O/bench.jsonl 2>>$O/bench.log
}
for i in 1 2; do
  for m in deepseek-v3 kimi-k2; do
    b old-ph $OLD 4096 --model $m --phases --iters 15
    b new-ph $mokc 4096 --model $m --phases --iters 15
  done
done
for i in 1 2; do
  b old $OLD 4096 --model qwen3-30b-a3b --iters 40
  b new $mokc 4096 --model qwen3-30b-a3b --iters 40
  b old $OLD 1024 --model qwen3-30b-a3b --iters 40
  b new $mokc 1024 --model qwen3-30b-a3b --iters 40
done
grep -hv "^{" $O/bench.jsonl >> $S
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
