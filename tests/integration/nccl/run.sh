#!/usr/bin/env bash
# NCCL integration test: a real NCCL 2.29.7 compile for sm_121 through the nccl role, then
# llmfleet.cluster.nccl_check and cuobjdump on the result.
#
#   tests/integration/nccl/run.sh            CI subset (ONLY_FUNCS=SendRecv, DEBUG=1; symmetric kernels always built)
#   tests/integration/nccl/run.sh --full     every collective (about 30 min on 2 cores)
#   extra arguments go to pytest (e.g. -k check)
#
# Environment: VENV (default .venv), NCCL_IT_CUDA_HOME (default /usr/local/cuda),
# NCCL_IT_JOBS (default nproc), NCCL_IT_ONLY_FUNCS (subset regex), NCCL_IT_MAKE_ARGS (default DEBUG=1), LLMFLEET_CACHE.
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

# ansible.cfg reads the collection from .build/collections (make link does the same).
link="$root/.build/collections/ansible_collections/llmfleet/cluster"
if [[ ! -L "$link" ]]; then
  mkdir -p "$(dirname "$link")"
  ln -s "$root" "$link"
fi

exec "$venv/bin/python" -m pytest tests/integration/nccl -v -s -p no:cacheprovider "$@"
