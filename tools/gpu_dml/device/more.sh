#!/bin/bash
# A later call of the same hold (torch 2.4.1 already set up): refresh the source, run steps.
#   bash tools/gpu_dml/device/more.sh STEP...
[ -d ${DEV_ROOT:-/root}/t241/torch ] || { echo "no torch 2.4.1 here: the hold was lost (start again with call 1)"; exit 1; }
bash tools/gpu_dml/device/src.sh && bash tools/gpu_dml/device/steps.sh "$@"
