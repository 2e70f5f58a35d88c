#!/usr/bin/env bash
# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
# ansible-test sanity on a snapshot of this checkout laid out as ansible_collections/llmfleet/cluster
# (ansible-test needs that path and lists files through git).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DEST=$ROOT/.build/sanity/ansible_collections/llmfleet/cluster
# ansible-test bootstraps pip in its venvs with a get-pip.py from a host this network cannot reach;
# the stand-in does the same from ensurepip + PyPI (see tools/ci/get_pip_standin.py).
mkdir -p ~/.ansible/test/cache
for v in 24_2 24_3 25_0 25_1; do cp "$ROOT/tools/ci/get_pip_standin.py" ~/.ansible/test/cache/get_pip_$v.py; done
rm -rf "$ROOT/.build/sanity" && mkdir -p "$DEST"
cd "$ROOT" && git ls-files -co --exclude-standard | grep -v '^\.build/' | tar -cf - -T - | tar -xf - -C "$DEST"
cd "$DEST" && git init -q && git add -A && git -c user.email=ci@localhost -c user.name=ci commit -qm snapshot
exec "$ROOT/.venv/bin/ansible-test" sanity --venv --python 3.11 --color no "$@"
