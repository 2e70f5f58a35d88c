# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""How each node gets its release venv: clone a packed venv, or sync it from the wheelhouse.

Unpacking the same ~150 wheels and compiling their bytecode on every node is most of an install
(measured on the sim: 2.7 GB per node, CPU-bound). So one node per (wheelhouse, release, lock,
Python) syncs from the wheelhouse into a venv that did not exist before (pristine: no engine
patch, no hand edit), packs it, and every other node unpacks that archive: byte-identical venvs
by construction, and an install is a copy plus a decompression.

Pure logic, no I/O: the role gathers what each host reported and asks for its action.
"""

from __future__ import annotations

import hashlib


def archive_key(wheelhouse_name, release, lock_sha1, python_version, venv_path=None):
    """File name of a packed venv on the controller, relative to the archives directory.

    A venv's absolute path is written into its scripts and pyvenv.cfg, its site-packages directory
    is named by the Python minor version, and its content is the lock's: all of them key it (the
    path as a short digest, so nodes with another python_env_prefix never unpack it).
    """
    if not (wheelhouse_name and release and lock_sha1 and python_version):
        raise ValueError('archive_key needs the wheelhouse name, release, lock checksum and Python version, got %r'
                         % ([wheelhouse_name, release, lock_sha1, python_version],))
    minor = '.'.join(str(python_version).split('.')[:2])
    where = '-' + hashlib.sha1(str(venv_path).encode('utf-8')).hexdigest()[:8] if venv_path else ''
    return '%s/%s%s-%s-py%s.tar.zst' % (wheelhouse_name, release, where, str(lock_sha1)[:16], minor)


def install_plan(hosts, enabled=True):
    """Action per host, from what each one reported.

    hosts: {host: {key, needs_sync, venv_exists, archive_ready}} in play order (a dict keeps it).
    Returns {host: action}:
      none   the venv matches its lock already
      clone  unpack the archive (there already, or packed in this run by a 'pack' host)
      pack   sync from the wheelhouse into a new venv, then pack it for the others
      sync   sync from the wheelhouse (no archive and no pristine venv to pack; or archives off)
    The packer of a key is its first host (sorted by name: the same choice from every host) that
    needs a venv that does not exist yet.
    """
    plan = {}
    packers = {}
    for name in sorted(hosts):
        h = hosts[name]
        if (enabled and h.get('needs_sync') and not h.get('archive_ready') and not h.get('venv_exists')
                and h.get('key') not in packers):
            packers[h.get('key')] = name
    for name, h in hosts.items():
        if not h.get('needs_sync'):
            plan[name] = 'none'
        elif not enabled:
            plan[name] = 'sync'
        elif h.get('archive_ready'):
            plan[name] = 'clone'
        elif packers.get(h.get('key')) == name:
            plan[name] = 'pack'
        elif h.get('key') in packers:
            plan[name] = 'clone'
        else:
            plan[name] = 'sync'
    return plan
