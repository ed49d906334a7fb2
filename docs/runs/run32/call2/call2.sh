#!/usr/bin/env bash
# run 32 call 2: where the mxfp8 forward's T = 4096 time goes beside bf16's: totals with and
# without programmatic launch, alternated; per-kernel durations of the programmatic pass by nsys
# when the machine has it.
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
  timeout 60 $mokc bench --target sm_90a --tokens $T --json --iters 50 "$@" > $O/tmp.json 2>>$O/bench.log
  python3 -c "import json; d=json.load(open('$O/tmp.json')); d['label']='$label'; print(json.dumps(d)); print('$label', '$*', $T, 'median', round(d['median_ms'],4), 'min', round(d['min_ms'],4), 'p90', round(d['p90_ms'],4))" >> $O/bench.jsonl 2>>$O/bench.log
}
for m in qwen3-30b-a3b olmoe-1b-7b; do
  for i in 1 2; do
    b bf16 4096 --model $m
    b mx 4096 --model $m --precision mxfp8
    b bf16-plain 4096 --model $m --plain-launch
    b mx-plain 4096 --model $m --precision mxfp8 --plain-launch
  done
done
grep -hv "^{" $O/bench.jsonl >> $S
echo "nsys: $(command -v nsys || echo none)" >> $S
if command -v nsys > /dev/null; then
  for p in bf16 mxfp8; do
    left 450 || break
    timeout 120 nsys profile -o $O/nsys-$p --force-overwrite true -t cuda --cuda-graph-trace=node $mokc bench --target sm_90a --tokens 4096 --iters 20 --model qwen3-30b-a3b --precision $p > $O/nsys-$p.log 2>&1
    timeout 120 nsys stats -r cuda_gpu_kern_sum -f csv $O/nsys-$p.nsys-rep > $O/nsys-$p-kern.csv 2>>$O/nsys-$p.log
    timeout 120 nsys stats -r cuda_gpu_trace -f csv $O/nsys-$p.nsys-rep > $O/nsys-$p-trace.csv 2>>$O/nsys-$p.log
    head -20 $O/nsys-$p-kern.csv >> $S
    rm -f $O/nsys-$p.nsys-rep $O/nsys-$p.sqlite
    gzip -f $O/nsys-$p-trace.csv
  done
fi
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
