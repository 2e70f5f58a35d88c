#!/bin/sh
# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
# Install an engine venv from a wheelhouse, offline. Idempotent: prints CHANGED or UNCHANGED
# on its last line (for changed_when), non-zero exit on failure.
#
#   install_from_wheelhouse.sh WHEELHOUSE_DIR VENV_DIR [PYTHON]
#
# WHEELHOUSE_DIR is a directory made by tools/wheelhouse/build_wheelhouse.py (lock.txt,
# SHA256SUMS, *.whl). PYTHON defaults to /usr/bin/python3. Steps:
#   1. sha256sum -c SHA256SUMS (a truncated copy fails here, not halfway through the install)
#   2. python -m venv VENV (stdlib venv + ensurepip: Debian needs python3-venv)
#   3. pip installs uv from the wheelhouse (no index), then `uv pip sync` makes the venv match
#      the lock exactly (installs, upgrades, and removes what the lock no longer lists):
#      --offline --no-index --require-hashes --compile-bytecode. sync installs no
#      dependencies beyond the list: lock.txt is the complete set, and some hard deps of the
#      engine are excluded on purpose. --compile-bytecode: a CPU engine's first start is
#      several times faster with .pyc present (and PYTHONDONTWRITEBYTECODE may be set).
#      Without a uv pin in the lock: pip install --no-index --no-deps --require-hashes.
#   4. records the lock's sha256 in VENV/.llmfleet-lock.sha256; same lock next time -> no-op.
set -eu

WH=${1:?wheelhouse dir}
VENV=${2:?venv dir}
PY=${3:-/usr/bin/python3}

LOCK="$WH/lock.txt"
STAMP="$VENV/.llmfleet-lock.sha256"
[ -f "$LOCK" ] || { echo "no lock.txt in $WH" >&2; exit 2; }
want=$(sha256sum "$LOCK" | cut -d' ' -f1)

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ] && [ -x "$VENV/bin/python" ]; then
    echo UNCHANGED
    exit 0
fi

(cd "$WH" && sha256sum -c --quiet --strict SHA256SUMS)

if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi

uv_pin=$(grep -E '^uv==' "$LOCK" || true)
if [ -n "$uv_pin" ]; then
    tmpreq=$(mktemp)
    cache=$(mktemp -d)
    trap 'rm -rf "$tmpreq" "$cache"' EXIT
    if [ ! -x "$VENV/bin/uv" ]; then
        # bootstrap uv with pip (a venv synced before has no pip left: ensurepip is offline)
        "$VENV/bin/python" -m pip --version >/dev/null 2>&1 || "$VENV/bin/python" -m ensurepip -q
        echo "$uv_pin" > "$tmpreq"
        PIP_CONFIG_FILE=/dev/null "$VENV/bin/python" -m pip install --quiet --no-index --no-deps \
            --require-hashes --disable-pip-version-check --find-links "$WH" -r "$tmpreq"
    fi
    UV_CACHE_DIR="$cache" VIRTUAL_ENV="$VENV" \
        "$VENV/bin/uv" pip sync --quiet --no-config --offline --no-index \
        --require-hashes --compile-bytecode --link-mode=copy --find-links "$WH" "$LOCK"
else
    PIP_CONFIG_FILE=/dev/null "$VENV/bin/python" -m pip install --quiet --no-index --no-deps \
        --require-hashes --disable-pip-version-check --find-links "$WH" -r "$LOCK"
fi

echo "$want" > "$STAMP"
echo CHANGED
