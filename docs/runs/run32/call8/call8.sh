#!/usr/bin/env bash
# run 32 call 8: TestPhaseTimesGPU on 08d1c71 (the instrumentation pass now runs before
# programmaticLaunch; the same instruction order).
set -u
python3 -c "import tarfile; tarfile.open('.carry/bins.txz').extractall('.carry')"
. scripts/device-env.sh
O=$OUT/logs; mkdir -p $O
(cd runtime && timeout 120 ../.carry/runtime.test -test.v -test.count=1 -test.run 'TestPhaseTimesGPU' > $O/runtime.log 2>&1; echo "runtime TestPhaseTimesGPU rc=$?" | tee $O/summary.txt)
grep -E "^--- |T=" $O/runtime.log >> $O/summary.txt
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
