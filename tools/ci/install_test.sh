#!/usr/bin/env bash
# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
# `make install-test`: the collection as a user gets it. Builds the tarball, installs it (and its
# dependency) into a fresh collections path of a temporary project outside the checkout, with that
# project's own ansible.cfg and no system-wide collections, then:
#   1. ansible-doc: every module, filter and role documented (no UNDOCUMENTED entry);
#   2. every playbook resolves by FQCN (llmfleet.cluster.<name> --syntax-check);
#   3. ansible-builder renders the execution environment's build context; bindep finds the
#      controller's system tools;
#   4. with the sim lab up (skipped with a reason otherwise; LLMFLEET_INSTALL_TEST_LAB=1: failed instead,
#      =off: skipped):
#      llmfleet.cluster.site --tags preflight, --tags common --check, and llmfleet.cluster.summary,
#      all read-only on the nodes; reports land in the project, none in the installed collection.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$ROOT/.venv/bin
T=$(mktemp -d /tmp/llmfleet-install-test.XXXXXX)
trap '[ -n "${LLMFLEET_INSTALL_TEST_KEEP:-}" ] || rm -rf "$T"' EXIT
step() { echo "--- install-test: $*"; }
fail() { echo "install-test FAILED: $*" >&2; exit 1; }
t0=$(date +%s)

step "build the tarball"
"$BIN/ansible-galaxy" collection build "$ROOT" --output-path "$T/dist" >/dev/null
TAR=$(ls "$T"/dist/llmfleet-cluster-*.tar.gz)
tar -tzf "$TAR" > "$T/files.txt"
for f in LICENSE playbooks/site.yml playbooks/files/bench_serve_sweep.py requirements.txt bindep.txt; do
  grep -qx "$f" "$T/files.txt" || fail "$f is not in $TAR"
done

step "install into $T/project/collections (ansible.posix from the installed ansible package: no Galaxy here)"
mkdir -p "$T/project"
cd "$T/project"
POSIX=$("$BIN/python" -c 'import ansible_collections.ansible.posix as m; print(list(m.__path__)[0])')
cp -r "$ROOT/inventories/sim" "$T/project/inventory"
cat > "$T/project/ansible.cfg" <<'CFG'
[defaults]
collections_path = ./collections
collections_scan_sys_path = false
callback_result_format = yaml
host_key_checking = False
interpreter_python = auto_silent
[ssh_connection]
pipelining = True
ssh_args = -o ControlMaster=auto -o ControlPersist=60s -o UserKnownHostsFile=/dev/null -o StrictHostKeyChecking=no -o LogLevel=ERROR
CFG
export ANSIBLE_CONFIG=$T/project/ansible.cfg ANSIBLE_COLLECTIONS_PATH=$T/project/collections
unset ANSIBLE_ROLES_PATH ANSIBLE_INVENTORY
export ANSIBLE_COLLECTIONS_SCAN_SYS_PATH=false
"$BIN/ansible-galaxy" collection install --offline -p "$T/project/collections" "$TAR" "$POSIX" >/dev/null
echo "installed ($(( $(date +%s) - t0 ))s)"
COLL=$T/project/collections/ansible_collections/llmfleet/cluster
[ -f "$COLL/MANIFEST.json" ] || fail "no installed collection at $COLL"

step "ansible-doc: modules, filters, roles"
for kind in module filter role; do
  list=$("$BIN/ansible-doc" -t "$kind" -l llmfleet.cluster 2>&1)
  n=$(grep -c '^llmfleet\.cluster\.' <<< "$list" || true)
  [ "$n" -gt 0 ] || fail "ansible-doc -t $kind lists nothing: $list"
  if grep -q UNDOCUMENTED <<< "$list"; then fail "undocumented ${kind}s: $(grep UNDOCUMENTED <<< "$list" | awk '{print $1}' | xargs)"; fi
  # one call renders them all (a broken doc fails it, naming the plugin)
  "$BIN/ansible-doc" -t "$kind" --json $(grep -o '^llmfleet\.cluster\.[a-z_0-9]*' <<< "$list") > "$T/doc.json" 2> "$T/doc.err" \
    || fail "ansible-doc -t $kind: $(cat "$T/doc.err")"
  m=$("$BIN/python" -c 'import json, sys; print(len(json.load(open(sys.argv[1]))))' "$T/doc.json")
  [ "$m" -eq "$n" ] || fail "ansible-doc -t $kind rendered $m of $n: $(cat "$T/doc.err")"
  echo "$kind: $n documented ($(( $(date +%s) - t0 ))s)"
done

step "every playbook by FQCN (--syntax-check)"
names=$(for pb in "$COLL"/playbooks/*.yml; do echo "llmfleet.cluster.$(basename "$pb" .yml)"; done)
# shellcheck disable=SC2086  # one ansible-playbook run checks them all
"$BIN/ansible-playbook" $names -i inventory --syntax-check > "$T/syntax.log" 2>&1 || { cat "$T/syntax.log"; fail "syntax-check by FQCN"; }
echo "playbooks: $(wc -w <<< "$names") resolve by FQCN ($(( $(date +%s) - t0 ))s)"

step "execution environment: ansible-builder create, bindep"
mkdir -p "$ROOT/.build/ee" && cp "$TAR" "$ROOT/.build/ee/llmfleet-cluster.tar.gz"
rm -rf "$ROOT/.build/ee/context"
"$BIN/ansible-builder" create -f "$ROOT/execution-environment.yml" -c "$ROOT/.build/ee/context" > "$T/ee.log" 2>&1 \
  || { cat "$T/ee.log"; fail "ansible-builder create"; }
grep -q 'ansible-galaxy collection install' "$ROOT/.build/ee/context/Containerfile" || fail "Containerfile installs no collection"
[ -f "$ROOT/.build/ee/context/_build/collections/llmfleet-cluster.tar.gz" ] || fail "the tarball is not in the EE build context"
# what the image build will install for the collection, by ansible-builder's own introspection
"$BIN/python" "$ROOT/.build/ee/context/_build/scripts/introspect.py" introspect "$T/project/collections" > "$T/introspect.yml"
grep -q "huggingface_hub.*from collection llmfleet.cluster" "$T/introspect.yml" && grep -q "rsync.*from collection llmfleet.cluster" "$T/introspect.yml" \
  || fail "ansible-builder does not see requirements.txt / bindep.txt: $(cat "$T/introspect.yml")"
"$BIN/bindep" -b -f "$COLL/bindep.txt" > "$T/bindep.log" 2>&1 || fail "bindep: controller tools missing: $(cat "$T/bindep.log")"
echo "ee: build context at .build/ee/context; bindep: controller tools present"

step "against the sim lab, by FQCN, from $T/project"
if [ "${LLMFLEET_INSTALL_TEST_LAB:-0}" = off ]; then
  echo "SKIPPED the sim runs: LLMFLEET_INSTALL_TEST_LAB=off"
elif ! timeout 20 "$BIN/ansible" all -i inventory -m ansible.builtin.ping -o > "$T/ping.log" 2>&1; then
  [ "${LLMFLEET_INSTALL_TEST_LAB:-0}" = 1 ] && { cat "$T/ping.log"; fail "the sim lab is not reachable"; }
  echo "SKIPPED the sim runs: the sim lab is not up (make lab-up; LLMFLEET_INSTALL_TEST_LAB=1 makes this a failure)"
else
  run() { echo "+ ansible-playbook $*"; "$BIN/ansible-playbook" "$@" -i inventory > "$T/run.log" 2>&1 || { tail -n 40 "$T/run.log"; fail "ansible-playbook $*"; }; tail -n 6 "$T/run.log" | grep -E '^(spark|thor)' || true; }
  run llmfleet.cluster.site --tags preflight
  run llmfleet.cluster.site --tags common --check
  # --check: this step runs before the cluster scenario converges the engines (nothing serves yet);
  # the summary's lines are computed and printed all the same, its completions are the cluster's checks
  run llmfleet.cluster.summary --check
  sed -n '/Print the summary/,/PLAY RECAP/p' "$T/run.log"
  grep -q 'Endpoint: http' "$T/run.log" || fail "the summary printed no Endpoint line"
  [ ! -e "$T/project/reports/summary-sim.txt" ] || fail "check mode wrote the summary file"
fi
[ ! -e "$COLL/reports" ] || fail "something wrote reports into the installed collection"
echo "install-test passed in $(( $(date +%s) - t0 ))s"
