#!/bin/sh
# Split the Part B payload over consecutive calls (each call carries one tools/gpu_dml/cargo/cN).
#   sh make_chunks.sh PAYLOAD_DIR CHUNK_BYTES    (PAYLOAD_DIR: gl/ whl/ rd.tar.xz rest.tar.xz cpu.xz cpu.sha256 src.tar.xz)
set -e
P=$1; B=$2; C=$(cd "$(dirname "$0")" && pwd)/cargo
rm -rf "$C"/c[0-9]*; mkdir -p "$C"
tmp=$(mktemp -d)
(cd "$P" && tar cf - gl whl rd.tar.xz rest.tar.xz cpu.xz cpu.sha256) | split -b "$B" -d -a 2 - "$tmp/payload.part"
n=0
for f in "$tmp"/payload.part*; do
  n=$((n + 1)); mkdir -p "$C/c$n"; mv "$f" "$C/c$n/"
  (cd "$C/c$n" && sha256sum payload.part* > SHA256SUMS.c$n)
done
cp "$P/src.tar.xz" "$C/c1/"
rmdir "$tmp"; echo "$n chunks"; du -sb "$C"/c*
