#!/usr/bin/env bash
# Controller side of the GPU validation (issue 11): pack what the offline host needs into carry
# folders of under 64 MiB each with the repository (offline/x1, x2, x3; /offline/ is git-ignored).
# Nothing is rendered here: the host renders its own files with the roles (run_gpu_validation.sh
# render), so PID 1's limits and the GPU count are the host's.
#
#   tests/gpu/prepare_bundle.sh [SITE_TAR_XZ]
#     SITE_TAR_XZ  the offline wheel bundle as one xz tar of site/ (default: offline/build/site.tar.xz,
#                  which ../shared/offline-gpu/build_bundle.sh writes with B=offline/build)
# Environment: NCCL_TARBALL (the NCCL source for the nccl role; default
# ~/.cache/llmfleet/nccl/nvidia-nccl_2.29.7-1.orig.tar.gz, "none" = leave it out), PART_MIB (55).
# Needs pip (ansible-core wheel for the host).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
b=$repo/offline
site_tar=${1:-$b/build/site.tar.xz}
nccl_tarball=${NCCL_TARBALL:-$HOME/.cache/llmfleet/nccl/nvidia-nccl_2.29.7-1.orig.tar.gz}
cd "$repo"

echo "== ansible-core for the host (the collection's playbooks run there, local connection)"
mkdir -p "$b/ansible"
[[ -f $b/ansible/ansible_core-2.19.14-py3-none-any.whl ]] || python3 -m pip download -q --no-deps --only-binary=:all: \
  --python-version 3.12 --implementation cp -d "$b/ansible" ansible-core==2.19.14 resolvelib==1.2.0

echo "== carry folders"
rm -rf "$b"/x1 "$b"/x2 "$b"/x3 "$b/split"; mkdir -p "$b"/x1 "$b"/x2 "$b"/x3 "$b/split"
sha256sum "$site_tar" | awk '{print $1 "  site.tar.xz"}' > "$b/x1/SHA256"
(cd "$b/split" && split -b "${PART_MIB:-55}M" -d "$site_tar" part.)
n=0; for f in "$b"/split/part.*; do n=$((n + 1)); mv "$f" "$b/x$n/"; done
(( n <= 3 )) || { echo "bundle needs $n trips: raise PART_MIB"; exit 1; }
rmdir "$b/split"
cp -a "$b/ansible" "$b/x1/"
if [[ $nccl_tarball != none ]]; then
  cp "$nccl_tarball" "$b/x$n/nccl-2.29.7-1.tar.gz"
fi
du -sh "$b"/x1 "$b"/x2 "$b"/x3
