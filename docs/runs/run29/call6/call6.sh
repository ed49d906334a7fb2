#!/usr/bin/env bash
# run 29 call 6: gather v2. The bf16 forward's FC1 reads the dispatched rows from x (call 5's
# copies: every producer thread its own rows, through L1) only at decode sizes, at most 16 mean rows
# per expert (moe_fc1_gathered, T = 1 .. 16E/K); the gather kernel and the plain FC1 kernels (the
# same PTX as 73f273d's) run at larger T. The GEMM cases; the runtime's forward and capture tests;
# every bf16 preset at T = 1, 64 and the last gathered T; memcheck; the bench at decode sizes, old
# (73f273d) and new, and at T = 4096 for the unchanged path.
set -u
python3 -c "import tarfile; tarfile.open('.carry/bins.txz').extractall('.carry')"
. scripts/device-env.sh
O=$OUT/logs; mkdir -p $O
S=$O/summary.txt
(cd codegen && timeout 120 ../.carry/codegen.test -test.v -test.count=1 -test.run 'TestSM90GemmGPU' > $O/gemm.log 2>&1; echo "codegen sm90 GEMM tests rc=$?" | tee -a $S)
grep -E "^(\s+--- |--- )" $O/gemm.log | grep -v PASS | head -20 >> $S
grep -E "^\s+--- .*gather" $O/gemm.log | head -10 >> $S
(cd runtime && timeout 120 ../.carry/runtime.test -test.v -test.count=1 -test.run 'TestLayerForward|TestCaptureForward' > $O/layer.log 2>&1; echo "runtime layer tests rc=$?" | tee -a $S)
grep -E "^(\s+--- |--- )" $O/layer.log | grep -v "PASS" | head -10 >> $S
grep -cE "^\s*--- PASS" $O/layer.log >> $S
for m in qwen3-30b-a3b qwen3-235b-a22b deepseek-v3 deepseek-v2-lite deepseek-v4-flash kimi-k2 gpt-oss-120b gpt-oss-20b mixtral-8x7b olmoe-1b-7b qwen2-57b-a14b llama4-scout dsv4-pro-proxy; do
  D=$($mokc inspect program --model $m --target sm_90a 2>/dev/null | grep "^moe_fc1_gathered" | sed 's/.*for T in 1\.\.\([0-9]*\).*/\1/')
  TS=1,64${D:+,$D}
  [ $m = dsv4-pro-proxy ] && TS=1
  timeout 100 $mokc run --model $m --target sm_90a --tokens $TS --repeat 3 >> $O/run.log 2>&1; echo "run $m T=$TS rc=$?" | tee -a $S
done
grep -E "PASS$|FAIL" $O/run.log | grep -v "^mokc run" >> $S
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $mokc run --model qwen3-30b-a3b --target sm_90a --tokens 1,64,256 > $O/memcheck.log 2>&1; echo "memcheck bf16 T=1,64,256 rc=$?" | tee -a $S
tail -1 $O/memcheck.log >> $S
b() { # label bin T args...
  local label=$1 bin=$2 T=$3; shift 3
  timeout 60 $bin bench --target sm_90a --tokens $T --kernels --json --iters 30 "$@" > $O/tmp.json 2>>$O/bench.log
  local rc=$?
  python3 -c "import json; d=json.load(open('$O/tmp.json')); d['label']='$label'; print(json.dumps(d)); print('$label', '$*', $T, round(d['median_ms'],4), ' '.join('%s=%.0f' % (k['name'][4:], 1000*k['median_ms']) for k in d['kernel_times'] if k['median_ms'] > 0.003))" >> $O/bench.jsonl 2>>$O/bench.log
  echo "bench $label T=$T $* rc=$rc" >> $S
}
OLD=$PWD/.carry/mokc-old
for m in qwen3-30b-a3b gpt-oss-120b deepseek-v3 mixtral-8x7b olmoe-1b-7b deepseek-v2-lite qwen3-235b-a22b; do b old $OLD 64 --model $m; b new $mokc 64 --model $m; done
for T in 1 256; do b old $OLD $T --model qwen3-30b-a3b; b new $mokc $T --model qwen3-30b-a3b; done
b old $OLD 4096 --model qwen3-30b-a3b; b new $mokc 4096 --model qwen3-30b-a3b
grep -hv "^{" $O/bench.jsonl >> $S
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
