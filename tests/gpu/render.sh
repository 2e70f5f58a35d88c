#!/usr/bin/env bash
# Render the GPU host's files with the collection's own roles (check mode, nothing on the host
# changes) into a staging tree: tests/gpu/render.sh [STAGE_DIR] [INVENTORY]
#   STAGE_DIR  default .gpu-bundle/stage (git-excluded); INVENTORY default inventories/gpu-host
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
stage=$(realpath -m "${1:-$repo/.gpu-bundle/stage}")
inventory=${2:-$repo/inventories/gpu-host}
rm -rf "$stage"; mkdir -p "$stage"
cd "$repo"
export ANSIBLE_CONFIG=$repo/ansible.cfg ANSIBLE_COLLECTIONS_PATH=${ANSIBLE_COLLECTIONS_PATH:-$repo/.build/collections}
export ANSIBLE_CALLBACK_PLUGINS=$repo/tests/gpu/callback_plugins ANSIBLE_CALLBACKS_ENABLED=llmfleet_stage
export LLMFLEET_STAGE_DIR=$stage ANSIBLE_CACHE_PLUGIN=memory
# serve_flag_check needs the engine's --help on the host; the render runs where no engine is installed
ansible-playbook tests/gpu/render.yml -i "$inventory" --check --diff -e serve_flag_check=false ${LLMFLEET_STAGE_EXTRA:-} >"$stage/render.log" 2>&1 || {
  tail -40 "$stage/render.log"; exit 1; }
python3 - "$stage" <<'PY'
import json, sys
stage = sys.argv[1]
m = json.load(open(stage + '/manifest.json'))
json.dump(m['facts']['gpu_stage'], open(stage + '/stage.json', 'w'), indent=1, sort_keys=True)
for f in m['files']:
    print('%-60s %6d  %s' % (f['path'], f['bytes'], f['task']))
PY
