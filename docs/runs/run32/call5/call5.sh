#!/usr/bin/env bash
# run 32 call 5: launch v2 (71c27cd) checked and timed: TestPhaseTimesGPU, TestCaptureForward;
# y_sha256 of 806a092's CLI and the new one; memcheck; then bf16 / mxfp8 forward medians of the
# new CLI at T = 64 on every preset and at T = 4096 on most, beside the old CLI on two.
set -u
START=$(date +%s)
left() { [ $(( $(date +%s) - START )) -lt $1 ]; }
python3 -c "import tarfile; tarfile.open('.carry/bins.txz').extractall('.carry')"
. scripts/device-env.sh
O=$OUT/logs; mkdir -p $O
S=$O/summary.txt
OLD=$PWD/.carry/mokc-old
(cd runtime && timeout 150 ../.carry/runtime.test -test.v -test.count=1 -test.run 'TestPhaseTimesGPU|TestCaptureForward' > $O/runtime.log 2>&1; echo "runtime rc=$? ($(( $(date +%s) - START )) s)" | tee -a $S)
grep -E "^--- |T=" $O/runtime.log | head -12 >> $S
r() { # label bin model prec tokens args...
  local label=$1 bin=$2 m=$3 p=$4 T=$5; shift 5
  left 200 || { echo "skipped run $label $m $p T=$T" >> $S; return; }
  timeout 120 $bin run --model $m --target sm_90a --precision $p --tokens $T --json "$@" > $O/tmp-run.txt 2>>$O/run-err.log
  python3 -c "
import json
for line in open('$O/tmp-run.txt'):
    line=line.strip()
    if not line.startswith('{'): continue
    d=json.loads(line)
    if 'tokens' not in d: continue
    print('$label', d['model'], '$p', d['tokens'], repr(d['rel_l2']), d.get('y_sha256','')[:16], '%d/%d' % (d['identical_runs'], d['runs']), 'PASS' if d['pass'] else 'FAIL')
" >> $O/runs.txt 2>>$O/run-err.log
}
for p in bf16 mxfp8; do
  r old $OLD qwen3-30b-a3b $p 64,600,4096 --repeat 2
  r new $mokc qwen3-30b-a3b $p 64,600,4096 --repeat 3
done
r old $OLD deepseek-v2-lite mxfp8 64,4096 --repeat 2 --sample 32
r new $mokc deepseek-v2-lite mxfp8 64,4096 --repeat 2 --sample 32
r old $OLD gpt-oss-20b mxfp8 4096 --repeat 2 --sample 32
r new $mokc gpt-oss-20b mxfp8 4096 --repeat 2 --sample 32
sort -k2,2 -k3,3 -k4,4n -k1,1r $O/runs.txt >> $S
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 $mokc run --model qwen3-30b-a3b --target sm_90a --precision mxfp8 --tokens 600 --repeat 1 > $O/memcheck.log 2>&1; echo "memcheck mxfp8 qwen3-30b-a3b T=600 rc=$?" | tee -a $S
tail -1 $O/memcheck.log >> $S
b() { # label bin T args...
  local label=$1 bin=$2 T=$3; shift 3
  left 560 || { echo "skipped bench $label T=$T $*" >> $S; return; }
  timeout 90 $bin bench --target sm_90a --tokens $T --json "$@" > $O/tmp.json 2>>$O/bench.log
  python3 -c "
import json; d=json.load(open('$O/tmp.json')); d['label']='$label'; print(json.dumps(d))
print('$label', '$*', $T, 'median', round(d['median_ms'],4), 'min', round(d['min_ms'],4), 'p90', round(d['p90_ms'],4))" >> $O/bench.jsonl 2>>$O/bench.log
}
for m in deepseek-v2-lite qwen2-57b-a14b; do
  b old-bf16 $OLD 64 --model $m --iters 50
  b old-mx $OLD 64 --model $m --precision mxfp8 --iters 50
  b bf16 $mokc 64 --model $m --iters 50
  b mx $mokc 64 --model $m --precision mxfp8 --iters 50
  b bf16 $mokc 64 --model $m --iters 50
  b mx $mokc 64 --model $m --precision mxfp8 --iters 50
done
for m in qwen3-30b-a3b olmoe-1b-7b mixtral-8x7b gpt-oss-20b gpt-oss-120b llama4-scout qwen3-235b-a22b deepseek-v4-flash deepseek-v3; do
  b bf16 $mokc 64 --model $m --iters 50
  b mx $mokc 64 --model $m --precision mxfp8 --iters 50
done
b old-bf16 $OLD 4096 --model qwen3-30b-a3b --iters 30
b old-mx $OLD 4096 --model qwen3-30b-a3b --precision mxfp8 --iters 30
for m in qwen3-30b-a3b mixtral-8x7b deepseek-v2-lite olmoe-1b-7b gpt-oss-20b qwen2-57b-a14b llama4-scout gpt-oss-120b deepseek-v3 qwen3-235b-a22b; do
  b bf16 $mokc 4096 --model $m --iters 30
  b mx $mokc 4096 --model $m --precision mxfp8 --iters 30
done
grep -hv "^{" $O/bench.jsonl >> $S
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
