#!/usr/bin/env bash
# run 58 call 4 (20 s, warm after call 2): racecheck of branch wse-ag4's persistent backward (main
# after call 1's merges), carried as .carry/mokc-both.gz beside .carry/bins.tgz, at qwen3-30b-a3b
# T = 300 (call 1 skipped the branches' racechecks for time).
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
both=$(carried both)
SAN_BUDGET=600
mokc=$both san racecheck both-q3-300 230 --model qwen3-30b-a3b --tokens 300 --backward
echo "done $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
