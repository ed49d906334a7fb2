#!/usr/bin/env bash
# run 32 call 4: where the programmatic launch's trigger goes (an experiment build:
# MOKC_PDL_TRIGGER=entry (as main), gemm-exit (the persistent GEMMs trigger their dependents at
# their return, the others at entry), exit (every kernel at its return)); y_sha256 per mode, and
# the bench with and without --phases at T = 4096 and T = 64.
set -u
START=$(date +%s)
left() { [ $(( $(date +%s) - START )) -lt $1 ]; }
python3 -c "import tarfile; tarfile.open('.carry/bins.txz').extractall('.carry')"
. scripts/device-env.sh
export MOKC_CACHE_DIR=off
O=$OUT/logs; mkdir -p $O
S=$O/summary.txt
for mode in entry gemm-exit exit; do
  for p in bf16 mxfp8; do
    MOKC_PDL_TRIGGER=$mode timeout 120 $mokc run --model qwen3-30b-a3b --target sm_90a --precision $p --tokens 64,600 --repeat 2 --json > $O/tmp-run.txt 2>>$O/run-err.log
    python3 -c "
import json
for line in open('$O/tmp-run.txt'):
    line=line.strip()
    if not line.startswith('{'): continue
    d=json.loads(line)
    if 'tokens' not in d: continue
    print('$mode', '$p', d['tokens'], repr(d['rel_l2']), d.get('y_sha256','')[:16], '%d/%d' % (d['identical_runs'], d['runs']), 'PASS' if d['pass'] else 'FAIL')
" >> $S 2>>$O/run-err.log
  done
done
b() { # mode label T args...
  local mode=$1 label=$2 T=$3; shift 3
  left 520 || { echo "skipped bench $mode $label T=$T $*" >> $S; return; }
  MOKC_PDL_TRIGGER=$mode timeout 90 $mokc bench --target sm_90a --tokens $T --json --iters 30 "$@" > $O/tmp.json 2>>$O/bench.log
  python3 -c "
import json; d=json.load(open('$O/tmp.json')); d['label']='$mode $label'; print(json.dumps(d))
ph=' '.join('%s@%.0f+%.0f' % (p['name'][4:], 1000*p['start_ms'], 1000*p['ms']) for p in d.get('phases',[]))
print('$mode', '$label', '$*', $T, 'median', round(d['median_ms'],4), 'span', round(d.get('phase_span_ms',0),4), ph)" >> $O/bench.jsonl 2>>$O/bench.log
}
for rep in 1 2; do
  for mode in entry gemm-exit exit; do
    b $mode bf16 4096 --model qwen3-30b-a3b
    b $mode mx 4096 --model qwen3-30b-a3b --precision mxfp8
    b $mode bf16 64 --model qwen3-30b-a3b
    b $mode mx 64 --model qwen3-30b-a3b --precision mxfp8
    b $mode mx 64 --model deepseek-v2-lite --precision mxfp8
    b $mode bf16 64 --model deepseek-v2-lite
  done
done
for mode in entry gemm-exit exit; do
  b $mode bf16-ph 4096 --model qwen3-30b-a3b --phases
  b $mode mx-ph 4096 --model qwen3-30b-a3b --precision mxfp8 --phases
  b $mode bf16 4096 --model deepseek-v2-lite
  b $mode mx 4096 --model deepseek-v2-lite --precision mxfp8
  b $mode bf16 4096 --model mixtral-8x7b
  b $mode mx 4096 --model mixtral-8x7b --precision mxfp8
done
grep -hv "^{" $O/bench.jsonl | sort -k3,3 -k5,5n -k2,2 -s >> $S
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
