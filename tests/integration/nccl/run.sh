#!/usr/bin/env bash
# NCCL integration test: a real NCCL 2.29.7 compile for sm_121 through the nccl role, then
# llmfleet.cluster.nccl_check and cuobjdump on the result.
#
#   tests/integration/nccl/run.sh            CI subset (ONLY_FUNCS=SendRecv, DEBUG=1; symmetric kernels always built)
#   tests/integration/nccl/run.sh --full     every collective (about 30 min on 2 cores)
#   extra arguments go to pytest (e.g. -k check)
#
# Environment: VENV (default .venv), NCCL_IT_CUDA_HOME (default /usr/local/cuda),
# NCCL_IT_JOBS (default nproc), NCCL_IT_ONLY_FUNCS (subset regex), NCCL_IT_MAKE_ARGS (default DEBUG=1),
# NCCL_IT_CCACHE (default 1: compile through ccache where it is installed; 0: plain nvcc), LLMFLEET_CACHE.
#
# ccache: every compile command still runs (through the role, make and nvcc's command lines); an
# object whose source, flags and compiler are unchanged comes from the cache kept in
# $LLMFLEET_CACHE/nccl/ccache. The subset's build CPU: 224 s warm (123/123 hits; the rest is NCCL's
# `nvcc -M` dependency runs and its device link, which ccache cannot cache), 573 s cold, 449-519 s
# without ccache. NCCL_IT_CCACHE=0 compiles everything.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
cd "$root"
venv=${VENV:-$root/.venv}

if [[ "${1:-}" == "--full" ]]; then
  export NCCL_IT_FULL=1
  shift
fi

cuda=${NCCL_IT_CUDA_HOME:-/usr/local/cuda}
if [[ ! -x "$cuda/bin/nvcc" ]]; then
  echo "tests/integration/nccl: no nvcc at $cuda/bin/nvcc (set NCCL_IT_CUDA_HOME)" >&2
  exit 2
fi
export LLMFLEET_IT_NCCL=1

if [[ "${NCCL_IT_CCACHE:-1}" != 0 ]] && command -v ccache > /dev/null; then
  cache=${LLMFLEET_CACHE:-$HOME/.cache/llmfleet}/nccl
  bin="$cache/ccache-bin"
  mkdir -p "$bin"
  # nvcc through ccache (NCCL's NVCC make variable, set by the test), and g++/gcc by name: NCCL
  # passes its CXX to nvcc as -ccbin, which must be one program, not "ccache g++"
  printf '#!/bin/sh\nexec ccache %q "$@"\n' "$cuda/bin/nvcc" > "$bin/nvcc"
  chmod +x "$bin/nvcc"
  for c in g++ gcc; do ln -sf "$(command -v ccache)" "$bin/$c"; done
  export PATH="$bin:$PATH" NCCL_IT_NVCC="$bin/nvcc" CCACHE_DIR="$cache/ccache" CCACHE_MAXSIZE=2G
  # the build runs in a fresh temp dir each time: paths below it are hashed relative to it
  export CCACHE_BASEDIR="${TMPDIR:-/tmp}" CCACHE_NOHASHDIR=1
  ccache --zero-stats > /dev/null
  trap 'echo "ccache (NCCL build):"; ccache --show-stats | sed -n "1,8p"' EXIT
fi

# ansible.cfg reads the collection from .build/collections (make link does the same).
link="$root/.build/collections/ansible_collections/llmfleet/cluster"
if [[ ! -L "$link" ]]; then
  mkdir -p "$(dirname "$link")"
  ln -s "$root" "$link"
fi

"$venv/bin/python" -m pytest tests/integration/nccl -v -s -p no:cacheprovider "$@"
