#!/usr/bin/env bash
# run 33 call 8: TestDispatchQueueGPU with whole chunks added (T = 16384/K), and the one-block
# dispatch test, on the session's final code.
set -u
python3 -c "import tarfile; tarfile.open('.carry/bins.txz').extractall('.carry')"
. scripts/device-env.sh
O=$OUT/logs; mkdir -p $O
(cd codegen && timeout 120 ../.carry/codegen.test -test.v -test.count=1 -test.run 'TestDispatchQueueGPU|TestDispatchSmallGPU' > $O/codegen.log 2>&1; echo "codegen rc=$?" >> $O/summary.txt)
grep -E "^(--- |ok|FAIL|PASS)|^\s+--- |differs|seed" $O/codegen.log | head -30 >> $O/summary.txt
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
