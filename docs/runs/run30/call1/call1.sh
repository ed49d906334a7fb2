#!/usr/bin/env bash
# run 30 call 1: gather v3 (docs/perf.md). The mxfp8 forward's decode FC1 reads x's per-token MXFP8
# form (x_q, x_scales) by slot (moe_fc1_decode_gathered); quantize_x runs in the small dispatch's
# extra blocks (moe_dispatch_small_quantize_x) or as its own kernel past it. The MX GEMM cases
# (three new gathered ones) and the quantize/gather kernels; TestLayerMXFP8Rows (its forced-swap
# schedules run the gathering FC1 at T = 707, H = I = 2880); every mxfp8 preset's forward at T = 1,
# 64, a T past the small dispatch inside the decode range (moe_quantize_x) and the last decode T,
# old (8e82a73) and new, rel L2 compared; memcheck; the bench at T = 64 for mxfp8 old/new and bf16
# (issue #11's ratio), and at the decode range's top (old, new, new --gather separate).
set -u
python3 -c "import tarfile; tarfile.open('.carry/bins.txz').extractall('.carry')"
. scripts/device-env.sh
O=$OUT/logs; mkdir -p $O
S=$O/summary.txt
OLD=$PWD/.carry/mokc-old
(cd codegen && timeout 150 ../.carry/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXGemmGPU|TestQuantizeGPU|TestGatherMXGPU' > $O/gemm.log 2>&1; echo "codegen MX GEMM tests rc=$?" | tee -a $S)
grep -E "^(\s+--- |--- )" $O/gemm.log | grep -v PASS | head -20 >> $S
grep -E "^\s+--- .*gather" $O/gemm.log | head -10 >> $S
(cd runtime && timeout 200 ../.carry/runtime.test -test.v -test.count=1 -test.run 'TestLayerMXFP8Rows' > $O/layer.log 2>&1; echo "runtime TestLayerMXFP8Rows rc=$?" | tee -a $S)
grep -E "^(\s+--- |--- )" $O/layer.log | head -10 >> $S
r() { # label bin model tokens args...
  local label=$1 bin=$2 m=$3 T=$4; shift 4
  timeout 150 $bin run --model $m --target sm_90a --tokens $T --json "$@" > $O/tmp-run.json 2>>$O/run.log
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
  echo "run $label $m T=$T $* rc=$rc" >> $S
}
for m in qwen3-30b-a3b qwen3-235b-a22b deepseek-v3 deepseek-v2-lite deepseek-v4-flash kimi-k2 gpt-oss-120b gpt-oss-20b mixtral-8x7b olmoe-1b-7b qwen2-57b-a14b; do
  P=$($mokc inspect program --model $m --target sm_90a --precision mxfp8 2>/dev/null)
  D=$(echo "$P" | grep "^moe_fc1_decode_gathered" | sed 's/.*for T in 1\.\.\([0-9]*\).*/\1/')
  Q=$(echo "$P" | grep "^moe_quantize_x " | sed 's/.*for T in \([0-9]*\)\.\..*/\1/')
  TS=$(printf "1\n64\n%s\n%s\n" "$Q" "$D" | grep -v '^$' | sort -n -u | paste -sd,)
  r new $mokc $m $TS --precision mxfp8 --repeat 3
  r old $OLD $m $TS --precision mxfp8 --repeat 1
done
cat $O/run.txt >> $S
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $mokc run --model qwen3-30b-a3b --target sm_90a --precision mxfp8 --tokens 1,64,300 > $O/memcheck.log 2>&1; echo "memcheck mxfp8 T=1,64,300 rc=$?" | tee -a $S
tail -2 $O/memcheck.log >> $S
b() { # label bin T args...
  local label=$1 bin=$2 T=$3; shift 3
  timeout 90 $bin bench --target sm_90a --tokens $T --kernels --json --iters 30 "$@" > $O/tmp.json 2>>$O/bench.log
  local rc=$?
  python3 -c "import json; d=json.load(open('$O/tmp.json')); d['label']='$label'; print(json.dumps(d)); print('$label', '$*', $T, round(d['median_ms'],4), ' '.join('%s=%.0f' % (k['name'][4:], 1000*k['median_ms']) for k in d['kernel_times'] if k['median_ms'] > 0.003))" >> $O/bench.jsonl 2>>$O/bench.log
  echo "bench $label T=$T $* rc=$rc" >> $S
}
for m in olmoe-1b-7b qwen2-57b-a14b qwen3-30b-a3b mixtral-8x7b deepseek-v2-lite gpt-oss-20b gpt-oss-120b qwen3-235b-a22b deepseek-v3 deepseek-v4-flash kimi-k2; do
  b new-bf16 $mokc 64 --model $m
  b old-mx $OLD 64 --model $m --precision mxfp8
  b new-mx $mokc 64 --model $m --precision mxfp8
done
for a in "qwen3-30b-a3b 512" "qwen3-30b-a3b 1" "mixtral-8x7b 256" "deepseek-v3 1024"; do
  set -- $a
  b old-mx $OLD $2 --model $1 --precision mxfp8
  b new-mx $mokc $2 --model $1 --precision mxfp8
  b new-mx-sep $mokc $2 --model $1 --precision mxfp8 --gather separate
done
grep -hv "^{" $O/bench.jsonl >> $S
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
