#!/usr/bin/env bash
# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
# Fetch NCCL's upstream source tarball from Debian's archive (sid/contrib source package
# nvidia-nccl) without touching the machine's apt configuration, verify it against the signed
# Sources index, and cache it. Prints the cached tarball's path on stdout.
#
#   tools/nccl/fetch-debian-source.sh [DEBIAN_VERSION]     (default 2.29.7-1-1 = NCCL 2.29.7-1)
#
# Cache: ${LLMFLEET_CACHE:-~/.cache/llmfleet}/nccl/nvidia-nccl_<upstream>.orig.tar.gz (+ .sha256).
# A cached tarball whose recorded sha256 still matches is returned without any network access.
# Only the .orig.tar.gz matters: the Debian packaging part may be missing from the pool.
set -euo pipefail

debver=${1:-2.29.7-1-1}
upstream=${debver%-*}                       # 2.29.7-1-1 -> 2.29.7-1
orig="nvidia-nccl_${upstream}.orig.tar.gz"
cache="${LLMFLEET_CACHE:-$HOME/.cache/llmfleet}/nccl"
suite=${NCCL_DEBIAN_SUITE:-sid}
mirror=${NCCL_DEBIAN_MIRROR:-http://deb.debian.org/debian}
keyring=${NCCL_DEBIAN_KEYRING:-/usr/share/keyrings/debian-archive-keyring.gpg}
mkdir -p "$cache"

if [[ -f "$cache/$orig" && -f "$cache/$orig.sha256" ]] \
   && (cd "$cache" && sha256sum --quiet -c "$orig.sha256" >/dev/null 2>&1); then
  echo "$cache/$orig"
  exit 0
fi

# A private apt tree: its own sources list, lists and cache; the system's stay untouched.
apt="$cache/apt"
mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial"
[[ -r "$keyring" ]] || { echo "missing $keyring (apt-get install debian-archive-keyring)" >&2; exit 2; }
echo "deb-src [signed-by=$keyring] $mirror $suite contrib" > "$apt/sources.list"
opts=(-o "Dir::Etc::sourcelist=$apt/sources.list" -o "Dir::Etc::sourceparts=-"
      -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache" -o "APT::Get::List-Cleanup=0" -o "APT::Sandbox::User=$(id -un)")

apt-get "${opts[@]}" -qq update >&2

# The signed index's sha256 for the orig tarball (apt checks it too; we record it).
want=$(apt-cache "${opts[@]}" showsrc nvidia-nccl | awk -v ver="$debver" -v f="$orig" '
  /^Package: /                 { inpkg = 0 }
  /^Version: / && $2 == ver    { inpkg = 1 }
  /^Checksums-Sha256:/         { insha = 1; next }
  /^[^ ]/                      { insha = 0 }
  inpkg && insha && $3 == f    { print $1; exit }')
[[ -n "$want" ]] || { echo "nvidia-nccl $debver is not in $suite/contrib sources" >&2; exit 3; }

work=$(mktemp -d "$cache/fetch.XXXXXX")
trap 'rm -rf "$work"' EXIT
# --download-only fetches .dsc, .orig and .debian parts; the packaging parts may 404, so the
# exit status is not the verdict: the orig tarball and its checksum are.
(cd "$work" && apt-get "${opts[@]}" -qq source --download-only "nvidia-nccl=$debver") \
  >"$work/apt-get.log" 2>&1 || true
[[ -f "$work/$orig" ]] || { cat "$work/apt-get.log" >&2; echo "apt-get source did not fetch $orig" >&2; exit 4; }
got=$(sha256sum "$work/$orig" | awk '{print $1}')
[[ "$got" == "$want" ]] || { echo "$orig: sha256 $got, index says $want" >&2; exit 5; }
mv "$work/$orig" "$cache/$orig"
echo "$want  $orig" > "$cache/$orig.sha256"
echo "$cache/$orig"
