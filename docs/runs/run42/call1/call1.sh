#!/usr/bin/env bash
# run 42 call 1: run 41's call 5 (docs/runs/run41/call5/call5.sh: FC2Large with shared experts,
# and the switch at 384 rows per expert), then TestLayerBackward's sm_90a cases with the time left
# (cut off in run 41; about 250 s). Carry: .carry/bins.tgz of `make device-bins` at df07a45.
START=$(date +%s)
bash docs/runs/run41/call5/call5.sh
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
left 480 && pkgtest runtime bwd $((585 - $(date +%s) + START)) $C/runtime.test -test.v -test.count=1 -test.run 'TestLayerBackward$/.*/sm_90a'
tail -1 "$S"
grep -E '^\s*--- (PASS|FAIL)' "$O/bwd.log" | tail -40
