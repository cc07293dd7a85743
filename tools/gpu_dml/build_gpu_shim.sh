#!/bin/sh
# The realdml dxcore stand-in for the GPU machine: the project's own (tools/realdml/dxcore_shim.c), which
# names its adapter after the Vulkan device vkd3d-proton drives ("vkd3d-proton (Vulkan: NVIDIA H200) via
# realdml shim"), read from the Vulkan loader when torch-directml first asks. (The kit this folder came
# from renamed a fixed "llvmpipe/lavapipe" name by sed; REALDML_ADAPTER_NAME still overrides the name.)
#   sh build_gpu_shim.sh PROJECT_CHECKOUT OUT_DIR
set -e
gcc -O2 -fPIC -shared -fvisibility=hidden -Wno-unused-parameter -o "$2/libdxcore.so" -Wl,-soname,libdxcore.so \
  "$1/tools/realdml/dxcore_shim.c"
