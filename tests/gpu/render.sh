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
# one host: <stage>/etc/...; several (emulated nodes of one machine): <stage>/<host>/etc/...
n_hosts=$(ansible-inventory -i "$inventory" --list 2>/dev/null | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["_meta"]["hostvars"]))' || echo 1)
export LLMFLEET_STAGE_PER_HOST=$([[ $n_hosts -gt 1 ]] && echo 1 || echo 0)
# serve_flag_check needs the engine's --help on the host; the render runs where no engine is installed
ansible-playbook tests/gpu/render.yml -i "$inventory" --check --diff -e serve_flag_check=false ${LLMFLEET_STAGE_EXTRA:-} >"$stage/render.log" 2>&1 || {
  tail -40 "$stage/render.log"; exit 1; }
python3 - "$stage" <<'PY'
import json, sys
stage = sys.argv[1]
m = json.load(open(stage + '/manifest.json'))
# every host's values (emulated nodes: the runner starts each node's units from its own stage);
# stage.json: the serving group head's (rank 0: the API), which the runner's one-host phases read
hosts = {h: v['gpu_stage'] for h, v in m['hosts'].items() if 'gpu_stage' in v}
head = next((h for h, v in sorted(hosts.items()) if v['serve_plan'].get('head') == h), None)
json.dump(hosts[head] if head else m['facts']['gpu_stage'], open(stage + '/stage.json', 'w'), indent=1, sort_keys=True)
json.dump(hosts, open(stage + '/hosts.json', 'w'), indent=1, sort_keys=True)
for f in m['files']:
    print('%-8s %-60s %6d  %s' % (f.get('host', ''), f['path'], f['bytes'], f['task']))
PY
