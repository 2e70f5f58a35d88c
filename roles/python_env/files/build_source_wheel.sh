#!/bin/sh
# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
# Build ONE wheel from source on a build node (python_env role, build: source variants).
#
#   build_source_wheel.sh VENV OUT REQUIREMENT [PIP_ARG ...]
#
# VENV holds the binary part of the wheelhouse (torch etc.), installed offline; the build runs
# without isolation against it: `VENV/bin/python -m pip wheel --no-deps --no-build-isolation`.
# The variant's build_env arrives as the environment (TORCH_CUDA_ARCH_LIST, CUDA_HOME, MAX_JOBS,
# NVCC_THREADS, ...); PATH_PREPEND (":"-separated) goes before PATH, then VENV/bin (cmake, ninja).
# LLMFLEET_BUILD_ENV_KEYS names the build_env keys, printed at the top of the log.
# The wheel lands alone in OUT (replaced only when the build succeeds); exit status = the build's.
set -eu

VENV=${1:?venv}
OUT=${2:?output dir}
REQ=${3:?requirement}
shift 3

if [ -n "${PATH_PREPEND:-}" ]; then
    PATH="$PATH_PREPEND:$PATH"
fi
PATH="$VENV/bin:$PATH"
export PATH
unset PATH_PREPEND

echo "llmfleet source build: $REQ on $(hostname) at $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) CPUs"
echo "python: $("$VENV/bin/python" -V 2>&1); pip wheel args: $*"
for key in ${LLMFLEET_BUILD_ENV_KEYS:-}; do
    [ "$key" = PATH_PREPEND ] && continue
    eval "echo \"build_env $key=\${$key-}\""
done
echo "PATH=$PATH"

rm -rf "$OUT.tmp"
mkdir -p "$OUT.tmp"
start=$(date +%s)
"$VENV/bin/python" -m pip wheel --no-deps --no-build-isolation --no-cache-dir \
    --disable-pip-version-check --progress-bar off -v -w "$OUT.tmp" "$@" "$REQ"
set -- "$OUT.tmp"/*.whl
if [ "$#" -ne 1 ] || [ ! -f "$1" ]; then
    echo "expected exactly one wheel in $OUT.tmp, found: $*" >&2
    exit 3
fi
rm -rf "$OUT"
mv "$OUT.tmp" "$OUT"
echo "built $(basename "$1") in $(( $(date +%s) - start )) s"
