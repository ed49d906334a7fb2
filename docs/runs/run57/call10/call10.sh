#!/usr/bin/env bash
# run 57 call 10 (about 3 minutes; carry: .carry/bins.tgz holding main's CLI, ebcb47a, and branch
# ring-lane0's as .carry/mokc-l0.gz): call 4's one racecheck of ring-lane0 found no hazard, but
# run 56 call 1's 4 hazards on main's item ring were timing-dependent (run 55 call 8 saw none on
# the same code). Racecheck of main's persistent backward at qwen3-30b-a3b T = 300 beside a second
# of ring-lane0's, with the per-hazard report.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
l0=$(carried l0)
SAN_BUDGET=250
export SAN_FLAGS="--racecheck-report hazard --print-limit 100"
san racecheck main-q3-300 80 --model qwen3-30b-a3b --tokens 300 --backward
mokc=$l0 san racecheck l0-q3-300b 80 --model qwen3-30b-a3b --tokens 300 --backward
echo "done $(($(date +%s) - START)) s" >>"$S"
grep -E "Race reported|Write Thread|Read Thread|Current Value|Previous" "$O"/racecheck-main-q3-300.log | head -12 >>"$S"
pack_logs
cat "$S"
