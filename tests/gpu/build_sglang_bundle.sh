#!/usr/bin/env bash
# Build the SGLang 0.5.17 bundle for the offline GPU host (Python 3.12, torch 2.11.0+cu130, triton,
# torchvision, numpy, huggingface-hub ... preinstalled there; no network): pinned cp312 manylinux
# x86_64 wheels from PyPI, unpacked into one site/ (PYTHONPATH, no pip on the host), with what a
# plain Llama on Hopper never loads removed, as an xz tar split for the device carries.
#   W=wheel cache  B=build dir  DEST=parts dir  PART_MIB (55)   tests/gpu/build_sglang_bundle.sh
# Output: $DEST/part.* + $DEST/SHA256 (of the whole xz stream), like ../shared/offline-gpu/build_bundle.sh.
# Not in it: Ray. The host takes Ray from the vLLM bundle's site/, placed AFTER this site/ on
# PYTHONPATH (this site wins for every package it holds; see tests/gpu/sglang-host.json).
# Why each pin (../shared/sglang-notes.md, GPU section):
#   sglang 0.5.17 is the newest SGLang pinning torch 2.11.0; its own pins: sglang-kernel 0.4.5,
#   flashinfer-python 0.6.15.post1, xgrammar 0.2.1, apache-tvm-ffi 0.1.11, openai 2.6.1,
#   transformers 5.12.1 (whose import-time check wants tokenizers <= 0.23.0, the host has 0.23.2; 0.23.0 itself was never released).
#   Not declared but imported: dill, jsonschema (+ referencing, rpds-py, specifications), loguru.
#   fastapi/starlette/pydantic as in the vLLM bundle (fastapi >= 0.140 needs opentelemetry).
#   Left out (not on the Triton-attention path): flash-attn-4, tilelang, helion, humming-kernels,
#   quack-kernels, nvidia-cutlass-dsl, sgl-deep-gemm, torchao, torchaudio, outlines.
set -euo pipefail
T=${TMPDIR:-/tmp}; W=${W:-$T/sgbundle/wheels}; B=${B:-$T/sgbundle/build}; DEST=${DEST:-$T/sgbundle/parts}
mkdir -p "$W" "$B" "$DEST"
PINS="sglang==0.5.17 sglang-kernel==0.4.5 flashinfer-python==0.6.15.post1 xgrammar==0.2.1 apache-tvm-ffi==0.1.11
openai==2.6.1 jiter==0.19.0 distro==1.9.0 sniffio==1.3.1 transformers==5.12.1 tokenizers==0.22.2
compressed-tensors==0.20.0 loguru==0.7.3 gguf==0.19.0 soundfile==0.13.1 cffi==2.1.1 pycparser==3.12
fastapi==0.136.3 starlette==1.0.1 pydantic==2.14.3 pydantic-core==2.50.4 annotated-types==0.8.0 typing-inspection==0.4.5
uvicorn==0.54.0 python-multipart==0.0.34 orjson==3.13.0 pyzmq==27.3.0 msgspec==0.22.0 pybase64==1.5.1
partial-json-parser==0.2.1.1.post7 setproctitle==1.3.8 zstandard==0.25.0 interegular==0.3.3 dill==0.4.1
jsonschema==4.26.0 referencing==0.37.0 rpds-py==2026.9.1 jsonschema-specifications==2025.9.1
ipython==9.18.1 ipython-pygments-lexers==1.1.1 jedi==0.20.1 parso==0.8.7 matplotlib-inline==0.2.2 pexpect==4.9.0
ptyprocess==0.7.0 prompt-toolkit==3.0.53 wcwidth==0.9.4 stack-data==0.6.3 asttokens==3.0.2 executing==2.3.0
pure-eval==0.2.4 traitlets==5.16.1 decorator==5.3.1"
PLAT=""; for p in manylinux_2_34 manylinux_2_31 manylinux_2_28 manylinux_2_27 manylinux_2_26 manylinux_2_24 manylinux_2_17 manylinux2014 manylinux_2_5 manylinux1; do
  PLAT="$PLAT --platform ${p}_x86_64"; done
# shellcheck disable=SC2086
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $PLAT -d "$W" $PINS
# exactly one wheel per pin (a stale second version in the cache would be unpacked over the first)
for p in $PINS; do
  n=$(echo "${p%%==*}" | tr 'A-Z-' 'a-z_'); v=${p##*==}
  ls "$W" | tr 'A-Z' 'a-z' | grep -q "^${n}-${v}-" || { echo "no wheel for $p in $W"; exit 1; }
done
# Left out while unpacking: sglang-kernel's builds other than sm90 (an H100/H200 loads
# sm90/common_ops; FA3's flash_ops, 1.1 GB unpacked, FlashMLA, InfLLM and sm100 serve backends not
# used here), SGLang's diffusion server, xgrammar's static library, jedi's typeshed copies.
SKIP=('sgl_kernel/flash_ops.abi3.so' 'sgl_kernel/flashmla_ops.abi3.so' 'sgl_kernel/infllm_ops*' 'sgl_kernel/sm100/*'
      'sglang/multimodal_gen/*' 'xgrammar/lib/libxgrammar.a' 'jedi/third_party/*')
rm -rf "$B/site"; mkdir -p "$B/site"
for p in $PINS; do
  n=$(echo "${p%%==*}" | tr 'A-Z-' 'a-z_'); v=${p##*==}
  w=$(ls "$W" | grep -i "^${n}-${v}-" | head -1)
  # rc 11: some of the left-out names are not in this wheel
  unzip -q -o "$W/$w" -d "$B/site" -x "${SKIP[@]}" || [[ $? == 11 ]]
done
cd "$B/site"
strip --strip-debug xgrammar/libxgrammar_bindings*.so 2>/dev/null || true
find . -name __pycache__ -type d -prune -exec rm -rf {} +
# every RECORD lists only files still there, and no blank line (a blank line breaks
# importlib.metadata, and with it the transformers import)
python3 - <<'PY'
import csv, glob, io, os
for rec in glob.glob('*.dist-info/RECORD'):
    rows = [r for r in csv.reader(open(rec, newline='')) if r and r[0] and os.path.exists(r[0])]
    buf = io.StringIO(); csv.writer(buf, lineterminator='\n').writerows(rows)
    open(rec, 'w').write(buf.getvalue())
PY
cd "$B" && tar cf - site | xz -6 -T0 > "$B/sglang-site.tar.xz"
rm -f "$DEST"/part.*; (cd "$DEST" && split -b "${PART_MIB:-55}M" "$B/sglang-site.tar.xz" part.)
sha256sum "$B/sglang-site.tar.xz" | awk '{print $1 "  sglang-site.tar.xz"}' | tee "$DEST/SHA256"
du -sh "$B/site"; ls -la "$DEST"
