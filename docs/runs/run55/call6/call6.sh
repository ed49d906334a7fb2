#!/usr/bin/env bash
# run 55 call 6 (about 1.5 minutes; carry: `make device-bins` of 8dbf411 and .carry/mokc-a.gz, the
# same tree with a row-wise phase's barriers always the named barrier 1 of its threads, bar.sync 1,
# 384, never bar.sync 0): is call 4's and 5's racecheck hazard in act_grad's 384-thread virtual
# blocks (bar.sync 0 in the virtual-block loop) the barrier's id? racecheck of both binaries at
# qwen3-30b-a3b T = 300 and 1100, persistent backward.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
gunzip -c .carry/mokc-a.gz >.carry/mokc-a && chmod +x .carry/mokc-a
new=$mokc
SAN_BUDGET=200
for T in 300 1100; do
	mokc=$PWD/.carry/mokc-a san racecheck "named-$T" 60 --model qwen3-30b-a3b --tokens $T --backward
	mokc=$new san racecheck "bar0-$T" 60 --model qwen3-30b-a3b --tokens $T --backward
done
echo "done $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
