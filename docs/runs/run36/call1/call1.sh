#!/usr/bin/env bash
# run 36 call 1 (2fc83e7): the clusterbench phase of scripts/device-verify.sh (--cluster 2 medians
# alternated with the default: T = 4096 on four bf16 presets and three mxfp8 ones, 16384, 64).
BUDGET=560 bash scripts/device-verify.sh clusterbench
