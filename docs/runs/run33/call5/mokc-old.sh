#!/bin/sh
# 178eff1's program: the four routing kernels past T*K = 2048 (the same PTX, golden test)
exec "$(dirname "$0")/mokc" "$@" --dispatch ops
