#!/usr/bin/env bash
# run 29 call 7: what call 6 missed (its mixtral-8x7b run asked for T = 64 twice and was refused):
# mixtral-8x7b's forward at T = 1, 64 (moe_fc1_gathered), and llama4-scout's backward at T = 1, 64,
# whose FC1·x gathers at decode sizes (moe_fc1_x_gathered).
set -u; python3 -c "import tarfile; tarfile.open('.carry/bins.txz').extractall('.carry')"; . scripts/device-env.sh; mkdir -p $OUT/logs; timeout 100 $mokc run --model mixtral-8x7b --target sm_90a --tokens 1,64 --repeat 3 2>&1 | tee $OUT/logs/run.log | grep -E "PASS|FAIL"; timeout 150 $mokc run --model llama4-scout --target sm_90a --tokens 1,64 --backward --repeat 2 2>&1 | tee -a $OUT/logs/run.log | grep -E "PASS|FAIL|gathered" ; $mokc inspect program --model llama4-scout --target sm_90a --backward 2>/dev/null | grep "gathered"
