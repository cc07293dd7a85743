#!/bin/bash
# Part B call 1: stage chunk 1, unpack the project source, CUDA reference scans (the machine's torch)
bash tools/gpu_dml/device/stage.sh 1 || exit 1
mkdir -p ${DEV_ROOT:-/root}/src ${DEV_ROOT:-/root}/res && tar xJf ${DEV_ROOT:-/root}/stage/src.tar.xz -C ${DEV_ROOT:-/root}/src
bash tools/gpu_dml/device/cuda_refs.sh ${DEV_ROOT:-/root}/src ${DEV_ROOT:-/root}/res
tar cJf $OUT/b1_res.tar.xz -C ${DEV_ROOT:-/root} res
