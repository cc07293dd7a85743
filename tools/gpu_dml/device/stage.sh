#!/bin/bash
# Part B transfer call N: keep this call's chunk (tools/gpu_dml/cargo/cN, carried) outside the checkout,
# where the next call of the same hold finds it. usage: bash stage.sh N
set -e
mkdir -p ${DEV_ROOT:-/root}/stage
cp -a tools/gpu_dml/cargo/c$1/. ${DEV_ROOT:-/root}/stage/
cd ${DEV_ROOT:-/root}/stage && ls -la && (sha256sum -c SHA256SUMS.c$1 2>/dev/null || true) && df -h ${DEV_ROOT:-/root} | tail -1
