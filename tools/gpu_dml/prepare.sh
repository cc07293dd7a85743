#!/bin/sh
# Part B, the local half: build everything the lent H200 needs to run the real torch-directml 0.2.5
# (torch 2.4.1 cp312, its CUDA half stubbed out) on vkd3d-proton -> NVIDIA's Vulkan driver, and split
# it into the chunks that consecutive `run` calls carry (tools/gpu_dml/cargo/c1..cN, git-ignored).
#
#   sh tools/gpu_dml/prepare.sh PROJECT_CHECKOUT REALDML_HOME WORK_DIR [CHUNK_BYTES]
#   e.g. nice -n 15 sh tools/gpu_dml/prepare.sh . ~/.cache/realdml ~/.cache/dmlprof-gpu
# (WORK_DIR outside the checkout: it is a cache; only tools/gpu_dml/cargo/cN travels, git-ignored.)
# XZ_LEVEL (default 6): -9 saves ~5 % of the bytes for ~2x the time on 2 cores.
#
# PROJECT_CHECKOUT: dmlprof (read only); REALDML_HOME: a finished tools/realdml/build.sh (its lib/);
# WORK_DIR: scratch (about 3.5 GB). Needs pip (PyPI), unzip, gcc, binutils (readelf, strip), xz,
# apt-get (Debian's archive, for the glvnd/Vulkan loader .debs). Every call's working tree (the
# checkout's tracked + untracked files, plus one chunk) must stay under 64 MiB: CHUNK_BYTES defaults to
# what fits now. It ran here with 21700000 (5 chunks).
# Time here: download ~1 min; xz of the two archives ~30 min on 2 busy cores (minutes on more).
set -e
HERE=$(cd "$(dirname "$0")" && pwd)
P=$(cd "$1" && pwd); RD=$2; W=$3; CHUNK=$4
mkdir -p "$W/dl"; W=$(cd "$W" && pwd)
cd "$W/dl"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux1_x86_64 --platform manylinux2010_x86_64 --platform manylinux2014_x86_64 \
  --platform manylinux_2_17_x86_64 -d . torch==2.4.1 torch-directml==0.2.5.dev240914 expecttest==0.3.0
rm -rf u; unzip -q torch-2.4.1-cp312-*.whl -d u; unzip -q torch_directml-0.2.5.dev240914-cp312-*.whl -d u
U=$W/dl/u
# 1. stubs for the CUDA half (libtorch_cuda, libc10_cuda, cudart 12, cupti 12, nvToolsExt, cudnn 9)
python3 "$HERE/gen_cuda_stubs.py" "$U"/torch/lib/libtorch.so "$U"/torch/lib/libtorch_python.so \
  "$U"/torch/lib/libtorch_cpu.so "$U"/torch/lib/libc10.so "$U"/torch/lib/libshm.so \
  "$U"/torch/lib/libtorch_global_deps.so "$U"/torch/_C.cpython-312-x86_64-linux-gnu.so \
  "$U"/functorch/_C.cpython-312-x86_64-linux-gnu.so "$U"/torch_directml_native.cpython-312-x86_64-linux-gnu.so \
  "$U"/torch/lib/libgomp-a34b3233.so.1 --real "$U"/torch/lib/libtorch_cuda.so --real "$U"/torch/lib/libc10_cuda.so \
  --out "$W/stubs" | grep -v "^    "
sh "$W/stubs/build.sh" "$W/stubs"
# 2. the CPU-only site folder t241 (470 MB)
sh "$HERE/pack_torch.sh" "$U" "$W/stubs" "$W/t241"
# 3. the payload
rm -rf "$W/payload"; mkdir -p "$W/payload/gl" "$W/payload/whl" "$W/rd"
(cd "$W" && tar cf - --exclude=t241/torch/lib/libtorch_cpu.so t241 | xz -T0 -${XZ_LEVEL:-6} > payload/rest.tar.xz)
xz -T0 -${XZ_LEVEL:-6} -c "$W/t241/torch/lib/libtorch_cpu.so" > "$W/payload/cpu.xz"
sha256sum "$W/t241/torch/lib/libtorch_cpu.so" | cut -d' ' -f1 > "$W/payload/cpu.sha256"
# the realdml build may still be running (tools/realdml/build.sh): wait for its libraries
while [ ! -f "$RD/.stamp" ]; do echo "waiting for $RD/.stamp (tools/realdml/build.sh)"; sleep 30; done
cp "$RD/lib/libvkd3d-proton-d3d12.so" "$RD/lib/libvkd3d-proton-d3d12core.so" "$RD/lib/libd3d12.so" "$W/rd/"
sh "$HERE/build_gpu_shim.sh" "$P" "$W/rd"
(cd "$W/rd" && tar cJf "$W/payload/rd.tar.xz" .)
APTLISTS=$(mktemp -d); mkdir -p "$APTLISTS/partial"
o="-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=$APTLISTS"
apt-get $o update -qq 2>/dev/null
(cd "$W/payload/gl" && apt-get $o download -qq libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2 2>/dev/null)
cp "$W"/dl/expecttest-*.whl "$W/payload/whl/"
(cd "$P" && tar cJf "$W/payload/src.tar.xz" --exclude=./.git --exclude=__pycache__ --exclude=./reports .)
du -sb "$W"/payload/*
# 4. the chunks: by default as large as fits beside what the checkout sends now (64 MiB in all, 3 MB
#    spare for files other sessions add meanwhile); chunk 1 also carries the source
if [ -z "$CHUNK" ]; then
  top=$(git -C "$HERE" rev-parse --show-toplevel)
  tree=$(cd "$top" && git ls-files -z -co --exclude-standard | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
  CHUNK=$((67108864 - tree - $(stat -c %s "$W/payload/src.tar.xz") - 3000000))
  echo "checkout sends $tree bytes: chunks of $CHUNK bytes"
fi
sh "$HERE/make_chunks.sh" "$W/payload" "$CHUNK"
