#!/bin/bash
# Part B call 1 of a fresh hold when the CUDA references are already done: stage chunk 1 and the source
bash tools/gpu_dml/device/stage.sh 1 | tail -2 || exit 1
mkdir -p ${DEV_ROOT:-/root}/src ${DEV_ROOT:-/root}/res && tar xJf ${DEV_ROOT:-/root}/stage/src.tar.xz -C ${DEV_ROOT:-/root}/src && echo src-ok
