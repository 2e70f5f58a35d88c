#!/usr/bin/env bash
# Controller side of the GPU validation (issue 11): render the GPU host's files with the
# collection's roles (check mode) and pack what the offline host needs into carry folders of
# under 64 MiB each (.gpu-bundle/x1, x2, x3; .gpu-bundle/ is git-excluded).
#
#   tests/gpu/prepare_bundle.sh [SITE_TAR_XZ]
#     SITE_TAR_XZ  the offline wheel bundle as one xz tar of site/ (default: the parts that
#                  ../shared/offline-gpu/build_bundle.sh wrote to .gpu-bundle/parts, joined)
# Needs: the controller toolchain (.venv), the NCCL source tarball (NCCL_TARBALL, default
# ~/.cache/llmfleet/nccl/nvidia-nccl_2.29.7-1.orig.tar.gz), pip (ansible-core wheel for the host).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
b=$repo/.gpu-bundle
site_tar=${1:-}
nccl_tarball=${NCCL_TARBALL:-$HOME/.cache/llmfleet/nccl/nvidia-nccl_2.29.7-1.orig.tar.gz}
export PATH=$repo/.venv/bin:$PATH
cd "$repo"

echo "== render (TP=2 and TP=1) with the roles, check mode"
tests/gpu/render.sh "$b/stage"
# the single-GPU run: same inventory, TP=1 on one GPU of the node (the planner wants TP x PP = GPUs)
LLMFLEET_STAGE_EXTRA='-e {"llmfleet_tensor_parallel_size":1,"llmfleet_gpus_per_node":1}' tests/gpu/render.sh "$b/stage-tp1"

echo "== ansible-core for the host (the nccl role runs there for real)"
mkdir -p "$b/ansible"
[[ -f $b/ansible/ansible_core-2.19.14-py3-none-any.whl ]] || python3 -m pip download -q --no-deps --only-binary=:all: \
  --python-version 3.12 --implementation cp -d "$b/ansible" ansible-core==2.19.14 resolvelib==1.2.0

echo "== carry folders"
rm -rf "$b"/x1 "$b"/x2 "$b"/x3 "$b/split"; mkdir -p "$b"/x1 "$b"/x2 "$b"/x3 "$b/split"
if [[ -z $site_tar ]]; then
  cat "$b"/parts/part.* > "$b/split/site.tar.xz"; site_tar=$b/split/site.tar.xz
fi
sha256sum "$site_tar" | awk '{print $1 "  site.tar.xz"}' > "$b/x1/SHA256"
(cd "$b/split" && split -n 3 -d "$site_tar" part.)
mv "$b/split/part.00" "$b/x1/"; mv "$b/split/part.01" "$b/x2/"; mv "$b/split/part.02" "$b/x3/"
rm -rf "$b/split"
cp -a "$b/stage" "$b/stage-tp1" "$b/ansible" "$b/x1/"
cp "$nccl_tarball" "$b/x1/$(python3 -c "import json; print(json.load(open('$b/stage/stage.json'))['nccl_source'].rsplit('/', 1)[1])")"
du -sh "$b"/x1 "$b"/x2 "$b"/x3
