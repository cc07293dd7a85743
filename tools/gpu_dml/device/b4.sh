#!/bin/bash
# The last transfer call of a hold: stage the last chunk (N), reassemble, refresh the project source from
# the carried checkout, then the steps:  bash tools/gpu_dml/device/b4.sh N STEP...
bash tools/gpu_dml/device/stage.sh $1 | tail -2 || exit 1
bash tools/gpu_dml/device/setup.sh || exit 1
shift; bash tools/gpu_dml/device/src.sh && bash tools/gpu_dml/device/steps.sh "$@"
