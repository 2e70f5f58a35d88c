#!/usr/bin/python
# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

DOCUMENTATION = r"""
module: venv_state
short_description: Read a release venv against its lock and say whether it needs a (re)sync
version_added: 0.1.0
author: llmfleet maintainers (!UNKNOWN)
description:
  - Everything the python_env role's install step decides on, read on the host in one call - the lock's
    sha1, the stamp the venv was last synced with (C(<venv>/.llmfleet-lock.sha256), C(<lock sha1>:<install mode>)),
    what the venv really holds (listed by its own python) against the lock, the engine CLI check's stamp, and,
    when the venv needs a sync, the node's Python version and the name of its venv archive on the controller.
  - A venv whose stamp names the lock but whose packages differ from it (a package changed by hand, a
    half-finished upgrade) needs a sync too - RV(drift) names each package and RV(reinstall) the packages the
    sync reinstalls by name.
  - The logic is C(plugins/module_utils/venv_state.py) (unit tables); this module only reads.
options:
  venv:
    description: The release venv (C(<prefix>/<release>)); it may not exist yet.
    type: path
    required: true
  lock:
    description: The lock on the host (C(<wheelhouse>/<arch>-<release>/lock.txt), C(name==version --hash=...) lines).
    type: path
    required: true
  install_mode:
    description: The install mode a synced venv is stamped with after the lock's sha1.
    type: str
    default: bytecode
  read_installed:
    description:
      - V(stamped) lists the venv's packages only where its stamp names the lock (a venv that is re-synced anyway
        is not read); V(always) lists them whenever the venv exists (a verify).
    type: str
    choices: [stamped, always]
    default: stamped
  wheelhouse_name:
    description:
      - The wheelhouse (C(<arch>-<variant release>)). With O(release), names the venv archive (RV(archive_key))
        when the venv needs a sync; empty - no archive key (archives off).
    type: str
    default: ''
  release:
    description: The release (the venv directory's name), part of the archive key.
    type: str
    default: ''
  base_python:
    description: The interpreter the venv is created from; its X.Y keys the archive (read only for a key).
    type: path
    default: /usr/bin/python3
extends_documentation_fragment:
  - llmfleet.cluster.attributes.read_only
seealso:
  - module: llmfleet.cluster.wait_progress
"""

EXAMPLES = r"""
- name: Read the release venv against its lock
  llmfleet.cluster.venv_state:
    venv: /opt/llmfleet/venvs/sim-vllm-0.32.0-cpu
    lock: /opt/llmfleet/wheelhouse/cpu-vllm-0.32.0/lock.txt
    wheelhouse_name: cpu-vllm-0.32.0
    release: sim-vllm-0.32.0-cpu
  register: venv

- name: Say why it is re-synced
  ansible.builtin.debug:
    msg: "{{ venv.reason }}"
  when: venv.needs_sync

- name: Verify - list the venv whatever its stamp
  llmfleet.cluster.venv_state:
    venv: /opt/llmfleet/venvs/current
    lock: /opt/llmfleet/wheelhouse/cpu-vllm-0.32.0/lock.txt
    read_installed: always
  register: installed
"""

RETURN = r"""
needs_sync:
  description: Whether the venv must be (re)synced to the lock (no venv, no or another stamp, drift, no lock).
  returned: always
  type: bool
  sample: false
reason:
  description: Why, in a few words; V(matches its lock) when nothing is to do.
  returned: always
  type: str
  sample: "drifted from its lock: ray locked 2.49.0 installed 2.59.0"
drift:
  description: The packages whose installed version differs from the lock (C(null) - absent), where the venv was listed.
  returned: always
  type: list
  elements: dict
  sample: [{package: ray, locked: 2.49.0, installed: 2.59.0}]
reinstall:
  description: The drifted packages' names (the sync reinstalls them by name).
  returned: always
  type: list
  elements: str
  sample: [ray]
venv_exists:
  description: Whether the venv directory exists.
  returned: always
  type: bool
  sample: true
lock_sha1:
  description: The lock's sha1 (C('') when the lock is not on the host).
  returned: always
  type: str
  sample: 3f786850e387550fdab836ed7e6dc881de23001b
stamp:
  description: What the venv is stamped with once synced to this lock.
  returned: always
  type: str
  sample: 3f786850e387550fdab836ed7e6dc881de23001b:bytecode
stamp_found:
  description: The venv's stamp (C(null) when it has none).
  returned: always
  type: str
  sample: 3f786850e387550fdab836ed7e6dc881de23001b:bytecode
listed:
  description: Whether the venv's python listed its packages (RV(python), RV(packages), RV(installed_digest)).
  returned: always
  type: bool
  sample: true
python:
  description: The venv's Python version (C('') when not listed).
  returned: always
  type: str
  sample: 3.11.2
packages:
  description: The venv's distributions, C({normalized name - version}) (C({}) when not listed).
  returned: always
  type: dict
  sample: {ray: 2.49.0, vllm: 0.32.0}
installed_digest:
  description: sha1 of the package list as printed (the engine CLI check's stamp; C('') when not listed).
  returned: always
  type: str
  sample: 9c1185a5c5e9fc54612808977ee8f548b2258d31
cli_checked:
  description: The package-list sha1 the engine CLI last answered for (C(<venv>/.llmfleet-cli-checked); C('') when none).
  returned: always
  type: str
  sample: 9c1185a5c5e9fc54612808977ee8f548b2258d31
base_python_version:
  description: X.Y of O(base_python), read only for RV(archive_key) (C('') otherwise).
  returned: always
  type: str
  sample: "3.11"
archive_key:
  description: >-
    The venv archive's name under the controller's archive directory, when the venv needs a sync and
    O(wheelhouse_name) and O(release) are given (C('') otherwise).
  returned: always
  type: str
  sample: cpu-vllm-0.32.0/sim-vllm-0.32.0-cpu-1a2b3c4d-3f786850e3875500-py3.11.tar.zst
"""

import hashlib
import json
import os
import socket

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.llmfleet.cluster.plugins.module_utils import venv_archive
from ansible_collections.llmfleet.cluster.plugins.module_utils import venv_state as vs


def _read(path):
    """A small file's text, None when it is absent."""
    try:
        with open(path, 'rb') as handle:
            return handle.read().decode('utf-8', 'replace')
    except (FileNotFoundError, NotADirectoryError):
        return None


def _sha1(path):
    digest = hashlib.sha1()
    try:
        with open(path, 'rb') as handle:
            for block in iter(lambda: handle.read(1 << 20), b''):
                digest.update(block)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return digest.hexdigest()


def _list(module, venv):
    """(listing, stdout as the command module returns it, error) of the venv's own python."""
    rc, out, err = module.run_command([os.path.join(venv, 'bin', 'python'), '-c', vs.LIST_SCRIPT])
    out = to_native(out).rstrip('\r\n')
    if rc != 0:
        return None, '', (to_native(err).strip() or out or 'rc %d' % rc).splitlines()[-1]
    try:
        listing = json.loads(out)
    except ValueError:
        return None, '', 'not a package list: %r' % out[:200]
    return listing, out, None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            venv=dict(type='path', required=True),
            lock=dict(type='path', required=True),
            install_mode=dict(type='str', default='bytecode'),
            read_installed=dict(type='str', choices=['stamped', 'always'], default='stamped'),
            wheelhouse_name=dict(type='str', default=''),
            release=dict(type='str', default=''),
            base_python=dict(type='path', default='/usr/bin/python3'),
        ),
        supports_check_mode=True,
    )
    p = module.params
    venv = p['venv']
    lock_text = _read(p['lock'])
    lock_sha1 = _sha1(p['lock']) if lock_text is not None else None
    expected = vs.stamp(lock_sha1, p['install_mode'])
    venv_exists = os.path.isdir(venv)
    stamp_found = _read(os.path.join(venv, vs.STAMP_FILE)) if venv_exists else None
    listing, printed, error = None, '', None
    if vs.should_list(stamp_found, expected, venv_exists, p['read_installed']):
        listing, printed, error = _list(module, venv)
    state = vs.decide(expected, stamp_found, venv_exists, lock_text, listing, error)
    cli = _read(os.path.join(venv, vs.CLI_STAMP_FILE)) if venv_exists else None
    result = dict(
        changed=False, venv_exists=venv_exists, lock_sha1=lock_sha1 or '', stamp=expected,
        stamp_found=stamp_found.strip() if stamp_found is not None else None,
        listed=listing is not None, python=(listing or {}).get('python') or '',
        packages=(listing or {}).get('packages') or {},
        installed_digest=hashlib.sha1(printed.encode('utf-8')).hexdigest() if listing is not None else '',
        cli_checked=(cli or '').strip(), base_python_version='', archive_key='', **state)
    if state['needs_sync'] and p['wheelhouse_name'] and p['release']:
        # a second try: on a node loaded to ~100 runnable tasks per core (an upgrade under load on the
        # sim) the interpreter once exited 0 with nothing on stdout
        for _attempt in range(3):
            rc, out, err = module.run_command([p['base_python'], '-c', "import sys; print('%d.%d' % sys.version_info[:2])"])
            if rc == 0 and to_native(out).strip():
                break
        if rc != 0 or not to_native(out).strip():
            module.fail_json(msg='%s: %s cannot tell its version (rc %s, %r): the venv archive is keyed by it; fix the '
                                 'interpreter or set python_env_venv_archives=false'
                                 % (socket.gethostname(), p['base_python'], rc, to_native(err).strip()), **result)
        result['base_python_version'] = to_native(out).strip()
        result['archive_key'] = venv_archive.archive_key(p['wheelhouse_name'], p['release'], lock_sha1 or 'none',
                                                         result['base_python_version'], venv)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
