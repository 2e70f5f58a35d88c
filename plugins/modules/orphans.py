#!/usr/bin/python
# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

DOCUMENTATION = r"""
module: orphans
short_description: Remove what the collection installed on a node and the plan no longer assigns to it
version_added: 0.1.0
author: llmfleet maintainers (!UNKNOWN)
description:
  - The plan is the desired state. This module lists what the collection installed on the node, by its
    naming convention - systemd units and timers named C(llmfleet-*) (and C(<serve_unit_prefix>-*)), the nftables
    tables C(llmfleet_ray) and C(llmfleet_serve_*), the env files, firewall rule files and safeguards settings in
    the plan's configuration directory and the safeguards drop-ins of engine units - and compares it with the
    owned set of the node's plan (C(llmfleet_plan.owned), computed on the controller).
  - With O(state=absent) it removes the rest (an orphan), in this order - the watchdog timers and their instances
    are stopped, then the engine, firewall and Ray units (an orphan engine releases its memory before a new one
    loads); all are disabled, their files removed, systemd reloaded, failed units reset; then the nftables tables
    still there are deleted (a firewall unit deletes its own when it stops).
  - An image key of a node that no longer copies a container image from this one (a line of
    C(owned.image_keys.file) ending in C(llmfleet-image-<node>), the node not in C(owned.image_keys.hosts)) is
    removed from that file; its other lines stay as they are.
  - With O(state=reported), or in check mode, it changes nothing and returns what it would remove.
  - Where it finds orphans it warns with one line naming the node and each of them (removed, would remove or
    found), so that every run reports them per node without C(-v).
  - Never touched - the safeguards' template units, what the monitoring role installs (not planned), and units
    named C(llmfleet-*) of no kind the collection installs (returned in RV(orphans.unknown)).
  - Where the owned set is not complete (an emulated machine that also runs nodes of another cluster), or no
    service manager runs (a host without systemd), it only reports.
  - The logic is C(plugins/module_utils/orphans.py) (unit tables); this module lists and runs the commands.
options:
  owned:
    description:
      - The owned set of the node's plan, C(llmfleet_plan.owned) - C(units), C(nft_tables), C(files),
        C(config_dir), C(unit_dir), C(patterns), C(serve_prefixes), C(ray_units), C(complete), and C(image_keys)
        (C(file) - the authorized_keys file of the node, C(hosts) - the nodes that copy container images from
        it, whose image keys it authorizes there).
    type: dict
    required: true
  state:
    description:
      - V(absent) removes the orphans; V(reported) only lists them.
    type: str
    choices: [absent, reported]
    default: absent
  node:
    description: The node's name in the result's line (the inventory hostname).
    type: str
    default: ''
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Lists as a real run does (read-only commands) and returns what it would remove; changes nothing.
  diff_mode:
    support: none
  platform:
    support: full
    platforms: posix
    details: Linux with systemd; nftables where the collection's firewall tables are.
seealso:
  - module: llmfleet.cluster.llm_server
"""

EXAMPLES = r"""
- name: Remove what the plan no longer assigns to this node (before any new engine starts)
  llmfleet.cluster.orphans:
    owned: "{{ llmfleet_plan.owned }}"
    node: "{{ inventory_hostname }}"
  register: removed

- name: List them only (validate)
  llmfleet.cluster.orphans:
    owned: "{{ llmfleet_plan.owned }}"
    state: reported
  register: found
"""

RETURN = r"""
orphans:
  description: What the node holds and its plan does not assign to it (before any removal).
  returned: always
  type: dict
  contains:
    units:
      description: Units (and timers) with their kind (engine, serve_firewall, watchdog, ray, ray_firewall), state
        (C(active) as systemctl says it), whether they run, are enabled and have their file.
      type: list
      elements: dict
      sample: [{unit: llmfleet-serve-tiny-llama-sglang.service, kind: engine, active: activating, sub: auto-restart,
                running: true, enabled: true, file: true}]
    nft_tables:
      description: The collection's nftables tables no owned firewall loads.
      type: list
      elements: str
      sample: [inet llmfleet_serve_tiny_llama_sglang]
    files:
      description: Env files, firewall rule files, safeguards settings and drop-ins no owned unit reads.
      type: list
      elements: str
      sample: [/etc/llmfleet/llmfleet-serve-tiny-llama-sglang.env]
    image_keys:
      description: The copying nodes whose image key this node still authorizes and its plan does not.
      type: list
      elements: str
      sample: [thor2]
    image_key_file:
      description: The authorized_keys file read for them (C(owned.image_keys.file)).
      type: str
      sample: /root/.ssh/authorized_keys
    unknown:
      description: Units named like the collection's of no kind it installs; never touched.
      type: list
      elements: str
      sample: []
removed:
  description: What this run removed (C(units), C(nft_tables), C(files), C(image_keys)); empty lists in check mode
    and with O(state=reported), where RV(orphans) is what would be removed.
  returned: always
  type: dict
  sample: {units: [llmfleet-serve-tiny-llama-sglang.service], nft_tables: [], files: [], image_keys: []}
msg:
  description: One line - the node, then what was (or would be) removed.
  returned: always
  type: str
  sample: "thor1: removed llmfleet-serve-tiny-llama-sglang.service (engine, running); nft table inet llmfleet_serve_x"
"""

import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native, to_text

from ansible_collections.llmfleet.cluster.plugins.module_utils import orphans as _o

# what systemctl says where no service manager runs (a container or host without systemd as PID 1)
_NO_MANAGER = ('not been booted with systemd', 'Failed to connect to bus', 'System has not been booted')


def _listdir(path):
    try:
        return sorted(os.listdir(path))
    except (FileNotFoundError, NotADirectoryError):
        return []


def _read(path, whole=False):
    """A file's text (its first 4 KiB: a unit's hash stamp is in its head; `whole`: all of it), None if unreadable."""
    try:
        with open(path, 'rb') as handle:
            return to_text(handle.read() if whole else handle.read(4096), errors='surrogate_or_replace')
    except OSError:
        return None


class _Node:
    """What the node holds, listed by commands and directory reads."""

    def __init__(self, module, owned):
        self.module, self.owned = module, owned
        self.systemctl = module.get_bin_path('systemctl')
        self.nft = module.get_bin_path('nft', opt_dirs=['/usr/sbin', '/sbin'])
        self.unit_dir = owned.get('unit_dir') or _o.UNIT_DIR
        self.manager = self.systemctl is not None

    def run(self, argv, check=True):
        rc, out, err = self.module.run_command(argv)
        if rc != 0 and check:
            self.module.fail_json(msg='%s failed (rc %s): %s' % (' '.join(argv), rc, (err or out).strip()),
                                  rc=rc, stdout=out, stderr=err)
        return rc, out, err

    def units(self):
        if self.systemctl is None:
            self.module.warn('no systemctl on this node: its units were not listed')
            return {}
        patterns = list(self.owned.get('patterns') or ['llmfleet-*'])
        # rc 1 with nothing listed: no unit file matched
        rc, files_out, err = self.run([self.systemctl, 'list-unit-files', '--no-legend', '--no-pager', '--full'] + patterns,
                                      check=False)
        if rc not in (0, 1) or (rc == 1 and files_out.strip()):
            self.module.fail_json(msg='systemctl list-unit-files failed (rc %s): %s' % (rc, (err or files_out).strip()))
        rc, units_out, err = self.run([self.systemctl, 'list-units', '--all', '--plain', '--no-legend', '--no-pager',
                                       '--full'] + patterns, check=False)
        if rc != 0:
            if any(word in (err or '') for word in _NO_MANAGER):
                self.manager = False
                self.module.warn('no service manager runs on this node (%s): only its unit files were listed, and '
                                 'nothing is stopped or removed' % (err or '').strip().splitlines()[0])
                units_out = ''
            else:
                self.module.fail_json(msg='systemctl list-units failed (rc %s): %s' % (rc, (err or units_out).strip()))
        unit_files = _o.parse_unit_files(files_out)
        texts = {}
        for unit in unit_files:
            text = _read(os.path.join(self.unit_dir, unit)) if '@.' not in unit else None
            if text is not None:
                texts[unit] = text
        wanted = set()
        for entry in _listdir(self.unit_dir):
            if entry.endswith('.wants'):
                wanted.update(n for n in _listdir(os.path.join(self.unit_dir, entry))
                              if n.startswith('llmfleet-') and '@' in n and not n.split('@', 1)[1].startswith('.'))
        return _o.installed(unit_files, _o.parse_units(units_out), texts, sorted(wanted))

    def tables(self):
        if self.nft is None:
            return []
        rc, out, err = self.run([self.nft, 'list', 'tables'], check=False)
        if rc != 0:
            self.module.warn('nft list tables failed (rc %s): %s; the nftables tables were not compared'
                             % (rc, (err or out).strip()))
            return []
        return _o.parse_tables(out)

    def files(self):
        config_dir = self.owned.get('config_dir') or '/etc/llmfleet'
        dropins = [e[:-len('.service.d')] for e in _listdir(self.unit_dir)
                   if e.endswith('.service.d') and os.path.lexists(os.path.join(self.unit_dir, e, _o.SAFEGUARDS_DROPIN))]
        names = [n for n in _listdir(config_dir) if os.path.isfile(os.path.join(config_dir, n))]
        return _o.collection_files(config_dir, names, _listdir(os.path.join(config_dir, 'safeguards')), dropins,
                                   self.unit_dir)


def _remove(module, path):
    try:
        if os.path.lexists(path):
            os.remove(path)
        parent = os.path.dirname(path)
        # a safeguards drop-in's directory goes with its last file
        if parent.endswith('.service.d') and os.path.isdir(parent) and not os.listdir(parent):
            os.rmdir(parent)
    except OSError as exc:
        module.fail_json(msg='could not remove %s: %s' % (path, to_native(exc)))


def _rewrite(module, path, text):
    """Writes `text` to `path` in place of its content (atomic; the file keeps its owner and mode)."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or '.', prefix='.llmfleet-orphans-')
    try:
        with os.fdopen(fd, 'w') as handle:
            handle.write(text)
    except OSError as exc:
        os.unlink(tmp)
        module.fail_json(msg='cannot write %s: %s' % (path, exc))
    module.atomic_move(tmp, path)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            owned=dict(type='dict', required=True),
            state=dict(type='str', choices=['absent', 'reported'], default='absent'),
            node=dict(type='str', default=''),
        ),
        supports_check_mode=True,
    )
    owned, state = module.params['owned'], module.params['state']
    node = module.params['node'] or os.uname()[1]
    host = _Node(module, owned)
    found = _o.orphans(owned, host.units(), host.tables(), host.files())
    keys = owned.get('image_keys') or {}
    key_file = keys.get('file') or ''
    key_text = _read(key_file, whole=True) if key_file else None
    found['image_keys'], kept_keys = _o.stale_image_keys(key_text, keys.get('hosts') or [])
    found['image_key_file'] = key_file
    removed = {'units': [], 'nft_tables': [], 'files': [], 'image_keys': []}
    pending = bool(found['units'] or found['nft_tables'] or found['files'] or found['image_keys'])
    can = state == 'absent' and pending
    if can and not owned.get('complete', True):
        module.warn('the plan does not know every node of this machine (an emulated node of another cluster runs '
                    'here): orphans are reported, not removed')
        can = False
    if can and not host.manager:
        # units run outside systemd here (tests/gpu's unit runner reads the env files): report only
        can = False
    if can and not module.check_mode:
        for kind, step in _o.actions(found, host.unit_dir):
            if kind == 'remove':
                _remove(module, step)
                continue
            # reset-failed of a unit systemd already unloaded says "not loaded": nothing to reset
            host.run([host.systemctl] + step[1:], check=step[1] != 'reset-failed')
        if found['nft_tables'] and host.nft is not None:
            # a firewall unit that stopped above deleted its own table
            left = set(host.tables())
            for table in found['nft_tables']:
                if table in left:
                    host.run([host.nft, 'delete', 'table'] + table.split(' ', 1))
        if found['image_keys']:
            _rewrite(module, key_file, kept_keys)
        removed = {'units': [u['unit'] for u in found['units']], 'nft_tables': list(found['nft_tables']),
                   'files': list(found['files']), 'image_keys': list(found['image_keys'])}
    verb = ('would remove' if module.check_mode else 'removed') if can else 'found'
    line = _o.summary(node, found, verb)
    if pending:
        # one line per node in the run's output, without -v and without a task of its own
        module.warn(line)
    module.exit_json(changed=can, orphans=found, removed=removed, msg=line)


if __name__ == '__main__':
    main()
