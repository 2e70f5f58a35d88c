#!/usr/bin/env bash
# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
# Build NCCL from an unpacked source tree and install it into a versioned prefix.
# Installed and started (async) by the llmfleet.cluster.nccl role; usable by hand too.
#
#   nccl-build.sh             build; everything goes to $NCCL_BUILD_DIR/build.log
#   nccl-build.sh --progress  one JSON line: objects compiled so far, seconds, current file
#
# Inputs (environment):
#   NCCL_SRC         unpacked NCCL source tree (read-only is fine: outputs go to the build dir)
#   NCCL_BUILD_DIR   scratch directory (build.log, build/, status)
#   NCCL_PREFIX      install prefix; replaced as a whole once the build succeeded
#   NCCL_VERSION     release the source must be (X.Y.Z-R, checked against makefiles/version.mk)
#   NCCL_GENCODE     NVCC_GENCODE, e.g. -gencode=arch=compute_121,code=sm_121
#   NCCL_ONLY_FUNCS  ONLY_FUNCS regex for src/device/generate.py ("" = every collective)
#   NCCL_MAKE_TARGET make target (default src.build)
#   NCCL_MAKE_ARGS   extra make arguments, one per line (e.g. NVCC_GENCODE_LDMC_FP8=)
#   NCCL_JOBS        make -j (default: nproc)
#   NCCL_NICE        nice level of the build (default 10)
#   NCCL_CUDA_HOME   CUDA toolkit (default /usr/local/cuda)
#   NCCL_STAMP_KEY   JSON object: the build key written into the stamp
set -euo pipefail

: "${NCCL_BUILD_DIR:?NCCL_BUILD_DIR is required}"
log="$NCCL_BUILD_DIR/build.log"
objdir="$NCCL_BUILD_DIR/build/obj"

if [[ "${1:-}" == "--progress" ]]; then
  objects=0 elapsed=0 current="" state="running"
  [[ -d "$objdir" ]] && objects=$(find "$objdir" -name '*.o' -type f | wc -l)
  if [[ -f "$NCCL_BUILD_DIR/started" ]]; then
    elapsed=$(( $(date +%s) - $(cat "$NCCL_BUILD_DIR/started") ))
  fi
  if [[ -f "$log" ]]; then
    current=$(grep -a '^Compiling' "$log" | tail -n 1 | awk '{print $2}' || true)
    current=${current##*/}
  fi
  [[ -f "$NCCL_BUILD_DIR/status" ]] && state=$(cat "$NCCL_BUILD_DIR/status")
  printf '{"objects": %d, "elapsed": %d, "current": "%s", "state": "%s"}\n' \
    "$objects" "$elapsed" "${current//\"/}" "${state//\"/}"
  exit 0
fi

: "${NCCL_SRC:?}" "${NCCL_PREFIX:?}" "${NCCL_VERSION:?}" "${NCCL_GENCODE:?}"
NCCL_ONLY_FUNCS=${NCCL_ONLY_FUNCS:-}
NCCL_MAKE_TARGET=${NCCL_MAKE_TARGET:-src.build}
NCCL_JOBS=${NCCL_JOBS:-$(nproc)}
NCCL_NICE=${NCCL_NICE:-10}
NCCL_CUDA_HOME=${NCCL_CUDA_HOME:-/usr/local/cuda}
NCCL_STAMP_KEY=${NCCL_STAMP_KEY:-"{}"}

mkdir -p "$NCCL_BUILD_DIR"
rm -f "$NCCL_BUILD_DIR/status"
date +%s > "$NCCL_BUILD_DIR/started"
exec 3>&1
exec >>"$log" 2>&1

finish() {
  local rc=$?
  if [[ $rc -eq 0 ]]; then
    echo ok > "$NCCL_BUILD_DIR/status"
  else
    echo "failed rc=$rc" > "$NCCL_BUILD_DIR/status"
    echo "NCCL build failed (rc=$rc); last lines of $log:" >&3
    tail -n 40 "$log" >&3
  fi
}
trap finish EXIT

echo "== $(date -Is) NCCL $NCCL_VERSION from $NCCL_SRC, $NCCL_GENCODE, ONLY_FUNCS='$NCCL_ONLY_FUNCS', -j$NCCL_JOBS"

# The tree must be the release we were asked for (a mislabelled tarball would build fine).
vmk="$NCCL_SRC/makefiles/version.mk"
[[ -f "$vmk" ]] || { echo "not an NCCL source tree: $vmk is missing"; exit 2; }
field() { sed -n "s/^$1[[:space:]]*:=[[:space:]]*\([0-9]*\).*/\1/p" "$vmk"; }
found="$(field NCCL_MAJOR).$(field NCCL_MINOR).$(field NCCL_PATCH)-$(field PKG_REVISION)"
if [[ "$found" != "$NCCL_VERSION" ]]; then
  echo "source tree is NCCL $found, expected $NCCL_VERSION"
  exit 3
fi

make_args=()
while IFS= read -r arg; do
  if [[ -n "$arg" ]]; then make_args+=("$arg"); fi
done <<< "${NCCL_MAKE_ARGS:-}"

build="$NCCL_BUILD_DIR/build"
nice -n "$NCCL_NICE" make -C "$NCCL_SRC" -j"$NCCL_JOBS" "$NCCL_MAKE_TARGET" \
  BUILDDIR="$build" PREFIX="$NCCL_PREFIX" CUDA_HOME="$NCCL_CUDA_HOME" \
  NVCC_GENCODE="$NCCL_GENCODE" ONLY_FUNCS="$NCCL_ONLY_FUNCS" \
  ${make_args[@]+"${make_args[@]}"}

lib=$(find "$build/lib" -maxdepth 1 -name 'libnccl.so.*.*' -type f | head -n 1)
[[ -n "$lib" ]] || { echo "the build produced no libnccl.so in $build/lib"; exit 4; }

# Never install a library that does not load or reports another version (no GPU needed).
IFS=.- read -r major minor patch _ <<< "$NCCL_VERSION"
want=$(( major * 10000 + minor * 100 + patch ))
(( major == 2 && minor < 9 )) && want=$(( major * 1000 + minor * 100 + patch ))   # NCCL_VERSION_CODE before 2.9
got=$(python3 -c 'import ctypes, sys
v = ctypes.c_int(0)
rc = ctypes.CDLL(sys.argv[1]).ncclGetVersion(ctypes.byref(v))
print(v.value if rc == 0 else -rc)' "$lib") || { echo "the built $lib does not load"; exit 5; }
if [[ "$got" != "$want" ]]; then
  echo "the built $lib reports ncclGetVersion $got, expected $want"
  exit 5
fi
echo "== $(basename "$lib") loads and reports ncclGetVersion $got"

# Stage next to the prefix, then swap it in whole.
stage="$NCCL_PREFIX.partial"
rm -rf "$stage"
mkdir -p "$stage"
cp -a "$build/lib" "$build/include" "$stage/"
rm -f "$stage"/lib/*_static.a          # engines dlopen the shared library; the archive is large
if [[ -d "$build/bin" ]]; then cp -a "$build/bin" "$stage/"; fi

objects=$(find "$build/obj" -name '*.o' -type f | wc -l)
started=$(cat "$NCCL_BUILD_DIR/started")
# CPU seconds (user + sys) of everything this script waited for: the compile's real cost,
# whatever else the machine was doing.
# (`times` must run in this shell, not in a $(...) subshell, to see the children.)
times > "$NCCL_BUILD_DIR/times"
cpu=$(tail -n 1 "$NCCL_BUILD_DIR/times" | awk '{ s = 0; for (i = 1; i <= 2; i++) { split($i, a, "m"); s += a[1] * 60 + a[2] } printf "%d", s }')
cuda=$("$NCCL_CUDA_HOME/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')
STAMP_OBJECTS=$objects STAMP_SECONDS=$(( $(date +%s) - started )) STAMP_CUDA=$cuda STAMP_CPU=$cpu \
STAMP_LIB=$(basename "$lib") STAMP_HOST=$(uname -n) \
  python3 - "$stage/llmfleet-nccl.json" <<'PY'
import datetime, json, os, sys
stamp = {
    "key": json.loads(os.environ["NCCL_STAMP_KEY"]),
    "library": os.environ["STAMP_LIB"],
    "cuda": os.environ["STAMP_CUDA"],
    "objects": int(os.environ["STAMP_OBJECTS"]),
    "build_seconds": int(os.environ["STAMP_SECONDS"]),
    "cpu_seconds": int(os.environ["STAMP_CPU"]),
    "built_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "built_on": os.environ["STAMP_HOST"],
}
with open(sys.argv[1], "w") as f:
    json.dump(stamp, f, indent=2, sort_keys=True)
    f.write("\n")
PY

if [[ -e "$NCCL_PREFIX" ]]; then
  rm -rf "$NCCL_PREFIX.old"
  mv "$NCCL_PREFIX" "$NCCL_PREFIX.old"
fi
mv "$stage" "$NCCL_PREFIX"
rm -rf "$NCCL_PREFIX.old"
summary="NCCL $NCCL_VERSION installed in $NCCL_PREFIX ($objects objects, $(( $(date +%s) - started )) s wall, $cpu s CPU)"
echo "== $(date -Is) $summary"
echo "$summary" >&3
