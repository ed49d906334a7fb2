#!/usr/bin/env bash
# run 57 call 7 (about 3 minutes; carry: .carry/bins.tgz holding main's CLI, ebcb47a, and the CLIs of
# branches cgr-wpe and ws-phase-end as .carry/mokc-cw.gz and .carry/mokc-wpe.gz): what call 4's
# time bound skipped before the branches can land: racecheck of cgr-wpe's persistent backward
# (qwen3-30b-a3b T = 300, gpt-oss-20b T = 200: FC2 biases) and synccheck of ws-phase-end's (its
# mbarrier.inval and setmaxnreg at the weight gradients' phase end), qwen3-30b-a3b T = 300.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
cw=$(carried cw)
wpe=$(carried wpe)
SAN_BUDGET=260
mokc=$cw san racecheck cw-q3-300 80 --model qwen3-30b-a3b --tokens 300 --backward
mokc=$wpe san synccheck wpe-q3-300 60 --model qwen3-30b-a3b --tokens 300 --backward
mokc=$cw san racecheck cw-gptoss-200 60 --model gpt-oss-20b --tokens 200 --backward
echo "done $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
