#!/usr/bin/env bash
# run 29 call 1: gather v1 (the bf16 forward's FC1 on sm_90a reads the dispatched rows from x by
# their slots: warp 0 of the producer copies them by cp.async; no gather kernel, no xs). The sm_90a
# GEMM cases (new: four gathered ones, llc-19 and mokc PTX bit for bit); the runtime's forward and
# SaveFC1 layer tests; the default bf16 forward on four presets (qwen3-30b-a3b at T = 2048 runs the
# 192-row mid tiles), the backward of llama4-scout (its FC1·x gathers) and qwen3-30b-a3b; memcheck;
# the old CLI (73f273d, .carry/mokc-old) and the new one side by side: rel L2 and the bench.
set -u
python3 -c "import tarfile; tarfile.open('.carry/bins.txz').extractall('.carry')"
. scripts/device-env.sh
O=$OUT/logs; mkdir -p $O
S=$O/summary.txt
END=$((SECONDS + ${BUDGET:-500}))
if [ -z "${SKIP_TESTS:-}" ]; then # the second attempt (the first ran a CLI without -tags cuda) skips them
(cd codegen && timeout 150 ../.carry/codegen.test -test.v -test.count=1 -test.run 'TestSM90GemmGPU|TestSM90NMajorGPU' > $O/gemm.log 2>&1; echo "codegen sm90 GEMM tests rc=$?" | tee -a $S)
grep -E "^(\s+--- |--- )" $O/gemm.log | grep -v PASS | head -20 >> $S
grep -E "gather" $O/gemm.log | head -10 >> $S
(cd runtime && timeout 150 ../.carry/runtime.test -test.v -test.count=1 -test.run 'TestLayerForward|TestLayerSaveFC1|TestCaptureForward' > $O/layer.log 2>&1; echo "runtime layer tests rc=$?" | tee -a $S)
grep -E "^(\s+--- |--- )" $O/layer.log | head -30 >> $S
fi
r() { # label bin model tokens args...
  local label=$1 bin=$2 m=$3 T=$4; shift 4
  timeout 100 $bin run --model $m --target sm_90a --tokens $T --json "$@" > $O/tmp-run.json 2>>$O/run.log
  local rc=$?
  python3 - "$label" "$O/tmp-run.json" >> $O/run.txt 2>&1 <<'PY'
import json, sys
label, path = sys.argv[1], sys.argv[2]
text = open(path).read(); dec = json.JSONDecoder(); i = 0
while i < len(text):
    while i < len(text) and text[i].isspace(): i += 1
    if i >= len(text): break
    d, i = dec.raw_decode(text, i)
    print(label, d.get('model'), d.get('tokens'), 'bwd' if 'checked_intermediate_columns' in d else 'fwd', 'rel_l2 %s' % d.get('rel_l2'), '%s/%s identical' % (d.get('identical_runs'), d.get('runs')), 'PASS' if d.get('pass') else 'FAIL')
PY
  echo "run $label $m T=$T $* rc=$rc" >> $S
}
OLD=$PWD/.carry/mokc-old
r new $mokc qwen3-30b-a3b 0,1,64,2048,4096 --repeat 3
r old $OLD qwen3-30b-a3b 1,64,2048,4096 --repeat 1
r new $mokc gpt-oss-120b 1,64,4096 --repeat 3
r old $OLD gpt-oss-120b 64,4096 --repeat 1
r new $mokc deepseek-v2-lite 1,64,4096 --repeat 3
r new $mokc mixtral-8x7b 1,4096 --repeat 3
r new $mokc llama4-scout 64,1024 --backward --repeat 2
r new $mokc qwen3-30b-a3b 1024 --backward --repeat 2
cat $O/run.txt >> $S
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $mokc run --model qwen3-30b-a3b --target sm_90a --tokens 64,2048 > $O/memcheck.log 2>&1; echo "memcheck bf16 T=64,2048 rc=$?" | tee -a $S
tail -2 $O/memcheck.log >> $S
b() { # label bin T args...
  local label=$1 bin=$2 T=$3; shift 3
  [ $SECONDS -gt $END ] && { echo "bench $label T=$T $* skipped (budget)" | tee -a $S; return; }
  timeout 60 $bin bench --target sm_90a --tokens $T --kernels --json --iters 30 "$@" > $O/tmp.json 2>>$O/bench.log
  local rc=$?
  python3 -c "import json; d=json.load(open('$O/tmp.json')); d['label']='$label'; print(json.dumps(d)); print('$label', '$*', $T, round(d['median_ms'],4), ' '.join('%s=%.0f' % (k['name'][4:], 1000*k['median_ms']) for k in d['kernel_times'] if k['median_ms'] > 0.003))" >> $O/bench.jsonl 2>>$O/bench.log
  echo "bench $label T=$T $* rc=$rc" >> $S
}
for m in qwen3-30b-a3b gpt-oss-120b deepseek-v3 mixtral-8x7b; do
  b old $OLD 4096 --model $m; b new $mokc 4096 --model $m
done
for T in 64 2048 16384; do b old $OLD $T --model qwen3-30b-a3b; b new $mokc $T --model qwen3-30b-a3b; done
for m in qwen3-30b-a3b deepseek-v3; do b old $OLD 4096 --model $m; b new $mokc 4096 --model $m; done
grep -hv "^{" $O/bench.jsonl >> $S
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
