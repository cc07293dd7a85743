#!/bin/bash
# Reassemble what the transfer calls staged in ${DEV_ROOT:-/root}/stage: torch 2.4.1 site (${DEV_ROOT:-/root}/t241), realdml
# libs (${DEV_ROOT:-/root}/rd); glvnd + Vulkan loader .debs unpacked to /.
set -e
S=${DEV_ROOT:-/root}/stage; cd $S
t0=$(date +%s)
cat payload.part* | tar xf -
[ -n "$SKIP_GL" ] || { for f in gl/*.deb; do dpkg -x $f /; done; ldconfig; }
echo "loader libs: $(ldconfig -p | grep -c -E 'libvulkan.so.1|libGLX.so.0|libGLdispatch.so.0')"
tar xJf rest.tar.xz -C ${DEV_ROOT:-/root}
xz -dc -T0 cpu.xz > ${DEV_ROOT:-/root}/t241/torch/lib/libtorch_cpu.so
echo "libtorch_cpu.so $(sha256sum ${DEV_ROOT:-/root}/t241/torch/lib/libtorch_cpu.so | cut -c1-16) expected $(cut -c1-16 cpu.sha256)"
mkdir -p ${DEV_ROOT:-/root}/rd && tar xJf rd.tar.xz -C ${DEV_ROOT:-/root}/rd
# the project source: the carried checkout, copied by device/src.sh before the steps
python3 -m pip install -q --no-index --no-deps --no-compile --target ${DEV_ROOT:-/root}/t241 whl/*.whl 2>&1 | grep -v WARNING | tail -2 || true
rm -f payload.part* cpu.xz rest.tar.xz
echo "setup $(( $(date +%s) - t0 )) s"; du -sh ${DEV_ROOT:-/root}/t241 ${DEV_ROOT:-/root}/rd
