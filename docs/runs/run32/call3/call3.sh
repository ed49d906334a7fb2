#!/usr/bin/env bash
# run 32 call 3: phase times (schedule.Schedule.PhaseTimes, mokc bench --phases): TestPhaseTimesGPU
# (the instrumented forward's bits equal the plain one's, records in launch order) and
# TestCaptureForward; then each kernel's in-situ start and duration at T = 4096 (bf16 and mxfp8)
# and T = 64, beside the plain bench median (the instrumentation's cost).
set -u
START=$(date +%s)
left() { [ $(( $(date +%s) - START )) -lt $1 ]; }
python3 -c "import tarfile; tarfile.open('.carry/bins.txz').extractall('.carry')"
. scripts/device-env.sh
O=$OUT/logs; mkdir -p $O
S=$O/summary.txt
(cd runtime && timeout 200 ../.carry/runtime.test -test.v -test.count=1 -test.run 'TestPhaseTimesGPU|TestCaptureForward' > $O/runtime.log 2>&1; echo "runtime TestPhaseTimesGPU|TestCaptureForward rc=$? ($(( $(date +%s) - START )) s)" | tee -a $S)
grep -E "^(=== RUN|--- |    ---)|T=|FAIL|panic" $O/runtime.log | head -30 >> $S
b() { # label T args...
  local label=$1 T=$2; shift 2
  left 480 || { echo "skipped bench $label T=$T $*" >> $S; return; }
  timeout 90 $mokc bench --target sm_90a --tokens $T --json --iters 30 "$@" > $O/tmp.json 2>>$O/bench.log
  python3 -c "
import json; d=json.load(open('$O/tmp.json')); d['label']='$label'; print(json.dumps(d))
ph=' '.join('%s@%.0f+%.0f' % (p['name'][4:], 1000*p['start_ms'], 1000*p['ms']) for p in d.get('phases',[]))
print('$label', '$*', $T, 'median', round(d['median_ms'],4), 'span', round(d.get('phase_span_ms',0),4), ph)" >> $O/bench.jsonl 2>>$O/bench.log
}
for m in qwen3-30b-a3b olmoe-1b-7b deepseek-v2-lite mixtral-8x7b; do
  b bf16 4096 --model $m
  b bf16-ph 4096 --model $m --phases
  b mx 4096 --model $m --precision mxfp8
  b mx-ph 4096 --model $m --precision mxfp8 --phases
done
for m in qwen3-30b-a3b deepseek-v2-lite qwen2-57b-a14b; do
  b bf16 64 --model $m
  b bf16-ph 64 --model $m --phases
  b mx 64 --model $m --precision mxfp8
  b mx-ph 64 --model $m --precision mxfp8 --phases
done
b bf16-ph-plain 4096 --model qwen3-30b-a3b --phases --plain-launch
b mx-ph-plain 4096 --model qwen3-30b-a3b --precision mxfp8 --phases --plain-launch
grep -hv "^{" $O/bench.jsonl >> $S
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
