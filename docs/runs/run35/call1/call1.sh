#!/usr/bin/env bash
# run 35 call 1 (937c083): the cluster phase of scripts/device-verify.sh (--cluster 2 and --cluster 2
# --chain fc1-fc2 beside the default: y_sha256 per preset, precision and T; backward; sanitizers).
BUDGET=560 bash scripts/device-verify.sh cluster
