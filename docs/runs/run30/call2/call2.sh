#!/usr/bin/env bash
# run 30 call 2: gather v3, the rest of call 1's correctness runs (call 1 ran past its limit after
# five presets). Every remaining mxfp8 preset's forward at T = 1, 64, a T past the small dispatch
# inside the decode range (moe_quantize_x) and the last decode T (new, 3 runs each); the old binary
# (8e82a73) at T = 64 for the rel L2 comparison; memcheck on qwen3-30b-a3b T = 1, 64, 300.
set -u
START=$(date +%s)
left() { [ $(( $(date +%s) - START )) -lt $1 ]; }
python3 -c "import tarfile; tarfile.open('.carry/bins.txz').extractall('.carry')"
. scripts/device-env.sh
O=$OUT/logs; mkdir -p $O
S=$O/summary.txt
OLD=$PWD/.carry/mokc-old
r() { # label bin model tokens args...
  local label=$1 bin=$2 m=$3 T=$4; shift 4
  timeout 120 $bin run --model $m --target sm_90a --tokens $T --json "$@" > $O/tmp-run.json 2>>$O/run.log
  local rc=$?
  python3 - "$label" "$O/tmp-run.json" >> $O/run.txt 2>&1 <<'PY'
import json, sys
label, path = sys.argv[1], sys.argv[2]
text = open(path).read(); dec = json.JSONDecoder(); i = 0
while i < len(text):
    while i < len(text) and text[i].isspace(): i += 1
    if i >= len(text): break
    d, i = dec.raw_decode(text, i)
    print(label, d.get('model'), d.get('tokens'), 'rel_l2 %s' % d.get('rel_l2'), '%s/%s identical' % (d.get('identical_runs'), d.get('runs')), 'PASS' if d.get('pass') else 'FAIL')
PY
  echo "run $label $m T=$T $* rc=$rc ($(( $(date +%s) - START )) s)" >> $S
}
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $mokc run --model qwen3-30b-a3b --target sm_90a --precision mxfp8 --tokens 1,64,300 > $O/memcheck.log 2>&1; echo "memcheck mxfp8 T=1,64,300 rc=$?" | tee -a $S
tail -2 $O/memcheck.log >> $S
for m in olmoe-1b-7b gpt-oss-20b mixtral-8x7b qwen2-57b-a14b gpt-oss-120b kimi-k2 dsv4-pro-proxy; do
  left 480 || { echo "skipped $m (time)" >> $S; continue; }
  P=$($mokc inspect program --model $m --target sm_90a --precision mxfp8 2>/dev/null)
  D=$(echo "$P" | grep "^moe_fc1_decode_gathered" | sed 's/.*for T in 1\.\.\([0-9]*\).*/\1/')
  Q=$(echo "$P" | grep "^moe_quantize_x " | sed 's/.*for T in \([0-9]*\)\.\..*/\1/')
  TS=$(printf "1\n64\n%s\n%s\n" "$Q" "$D" | grep -v '^$' | sort -n -u | paste -sd,)
  r new $mokc $m $TS --precision mxfp8 --repeat 3
  r old $OLD $m 64 --precision mxfp8 --repeat 1
done
cat $O/run.txt >> $S
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
