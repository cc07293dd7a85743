#!/bin/sh
# Provision real DirectML on a CPU-only Debian bookworm (or WSL-less Linux) machine, for
# torch-directml 0.2.5 on torch 2.4.1 (docs/realdml.md): Mesa 25 lavapipe (a CPU Vulkan driver,
# unpacked privately from bookworm-backports), vkd3d-proton 3.0.1 (D3D12 on Vulkan, built here and
# patched for the SysV struct-return ABI libdirectml.so expects), and the libd3d12/libdxcore
# stand-ins torch-directml loads instead of WSL's.
#
#   usage: sh tools/realdml/build.sh [REALDML_HOME]        (default: $HOME/.cache/realdml)
#   then:  . REALDML_HOME/env.sh                           and use torch-directml as usual
#
# vkd3d-proton's source: VKD3D_PROTON_SRC, a source tarball of v3.0.1 with its submodules (one lies
# in the team's shared folder beside this checkout, ../shared/realdml/src/) or a checkout of the tag:
#   git clone --recursive --branch v3.0.1 https://github.com/HansKristian-Work/vkd3d-proton
# Idempotent: a finished build whose inputs have not changed is reused. ~5-12 min cold on 2 cores;
# needs root for apt-get (build tools only: the system's Mesa is left alone).
set -e
HERE=$(cd "$(dirname "$0")" && pwd)
H=${1:-${REALDML_HOME:-$HOME/.cache/realdml}}
SHARED_SNAPSHOT="$HERE/../../../shared/realdml/src/vkd3d-proton-3.0.1-src.tar.xz"
SRC=${VKD3D_PROTON_SRC:-$SHARED_SNAPSHOT}
if [ ! -e "$SRC" ]; then
  echo "realdml: no vkd3d-proton 3.0.1 source at $SRC: set VKD3D_PROTON_SRC to its tarball or a checkout of v3.0.1" >&2
  exit 2
fi
mkdir -p "$H"; H=$(cd "$H" && pwd)
if [ -d "$SRC" ]; then
  SRC_ID=$(git -C "$SRC" rev-parse HEAD 2>/dev/null || echo "$SRC")
else
  SRC_ID=$(sha256sum "$SRC" | cut -c1-16)
fi
STAMP=$( (cat "$HERE/build.sh" "$HERE/patch_sysv_abi.py" "$HERE/dxcore_shim.c" "$HERE/d3d12_shim.c" "$HERE/d3d12.ver"; echo "$SRC_ID") | sha256sum | cut -c1-16)
if [ -f "$H/.stamp" ] && [ "$(cat "$H/.stamp")" = "$STAMP" ] && [ -f "$H/env.sh" ]; then
  echo "realdml: already built in $H"; exit 0
fi
t0=$(date +%s)
# 1. build tools (Debian)
need=""
for p in gcc g++ meson ninja-build glslang-tools mingw-w64-tools libvulkan-dev libvulkan1 xz-utils; do
  dpkg -s "$p" >/dev/null 2>&1 || need="$need $p"
done
if [ -n "$need" ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need >/dev/null
fi
# 2. Mesa 25.0.7 lavapipe, unpacked privately (bookworm's Mesa 22.3 lacks descriptor indexing)
A=$H/apt; mkdir -p "$A/lists/partial" "$A/cache/archives/partial" "$A/debs"
URI=$(sed -n 's#^URIs:[[:space:]]*\([^[:space:]]*/debian\)/*$#\1#p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1)
[ -n "$URI" ] || URI=$(sed -n 's#^deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?\([^[:space:]]*/debian\)/*[[:space:]].*#\2#p' /etc/apt/sources.list 2>/dev/null | head -1)
[ -n "$URI" ] || { echo "realdml: no Debian archive found in the apt sources" >&2; exit 1; }
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $URI bookworm-backports main" > "$A/sources.list"
O="-o Dir::Etc::SourceList=$A/sources.list -o Dir::Etc::SourceParts=/dev/null -o Dir::State::Lists=$A/lists -o Dir::Cache=$A/cache"
apt-get $O update -qq
(cd "$A/debs" && apt-get $O download -qq mesa-vulkan-drivers=25.0.7-2~bpo12+1 libdrm2=2.4.123-1~bpo12+1 libdrm-amdgpu1=2.4.123-1~bpo12+1)
M=$H/mesa; rm -rf "$M"; mkdir -p "$M"
for d in "$A"/debs/*.deb; do dpkg -x "$d" "$M"; done
sed "s#\"library_path\": \"libvulkan_lvp.so\"#\"library_path\": \"$M/usr/lib/x86_64-linux-gnu/libvulkan_lvp.so\"#" \
  "$M/usr/share/vulkan/icd.d/lvp_icd.json" > "$M/lvp_icd.json"
# 3. vkd3d-proton from the source, patched, built
rm -rf "$H/src" "$H/build"; mkdir -p "$H/src" "$H/bin"
if [ -d "$SRC" ]; then
  cp -r "$SRC" "$H/src/vkd3d-proton"
else
  tar -xJf "$SRC" -C "$H/src" && mv "$H"/src/vkd3d-proton-* "$H/src/vkd3d-proton"
fi
python3 "$HERE/patch_sysv_abi.py" "$H/src/vkd3d-proton" >/dev/null
ln -sf /usr/bin/x86_64-w64-mingw32-widl "$H/bin/widl"
PATH="$H/bin:$PATH" meson setup "$H/build" "$H/src/vkd3d-proton" --buildtype=release -Denable_trace=true >/dev/null
PATH="$H/bin:$PATH" ninja -C "$H/build" >/dev/null
mkdir -p "$H/lib"
cp "$H/build/libs/d3d12/libvkd3d-proton-d3d12.so" "$H/build/libs/d3d12core/libvkd3d-proton-d3d12core.so" "$H/lib/"
# 4. the stand-ins torch-directml loads instead of WSL's libd3d12.so / libdxcore.so
gcc -O2 -fPIC -shared -fvisibility=hidden -Wno-unused-parameter -o "$H/lib/libdxcore.so" -Wl,-soname,libdxcore.so "$HERE/dxcore_shim.c"
gcc -O2 -fPIC -shared -fvisibility=hidden -o "$H/lib/libd3d12.so" -Wl,-soname,libd3d12.so -Wl,--version-script="$HERE/d3d12.ver" "$HERE/d3d12_shim.c" -ldl -lpthread
rm -rf "$H/src" "$H/build"
cat > "$H/env.sh" <<ENV
# . this file, then torch_directml runs on vkd3d-proton + lavapipe (CPU): docs/realdml.md
export VK_ICD_FILENAMES=$M/lvp_icd.json
export LD_LIBRARY_PATH=$H/lib:$M/usr/lib/x86_64-linux-gnu\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
export VKD3D_DEBUG=\${VKD3D_DEBUG:-none} VKD3D_SHADER_DEBUG=\${VKD3D_SHADER_DEBUG:-none}
export VKD3D_SHADER_CACHE_PATH=\${VKD3D_SHADER_CACHE_PATH:-$H/cache/vkd3d} MESA_SHADER_CACHE_DIR=\${MESA_SHADER_CACHE_DIR:-$H/cache/mesa}
export VKD3D_REALDML_NO_TILED=\${VKD3D_REALDML_NO_TILED:-1}
export REALDML_VKD3D_PROTON=3.0.1 REALDML_MESA="25.0.7 (lavapipe)"
ENV
mkdir -p "$H/cache/vkd3d" "$H/cache/mesa"
echo "$STAMP" > "$H/.stamp"
echo "realdml: built in $H in $(( $(date +%s) - t0 )) s; . $H/env.sh"
