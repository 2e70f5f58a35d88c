# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Does a release venv hold its lock? The decision the python_env role's install step takes on every run.

A venv synced to a lock is stamped with ``<lock sha1>:<install mode>`` (a file in the venv). The stamp
says which lock it was synced to, but a package changed by hand since (pip install on a node, a
half-finished upgrade) must not hide behind it: where the stamp names the lock, what the venv really
holds is compared with the lock, and drift is re-synced (the drifted packages reinstalled by name:
uv takes an installed version from the dist-info directory's name, not from METADATA).

Pure logic, no I/O: the module llmfleet.cluster.venv_state reads the files and the venv's package
list on the host and hands them in; unit tables in tests/unit/plugins/module_utils/test_venv_state.py.
"""

from __future__ import annotations

from ansible_collections.llmfleet.cluster.plugins.module_utils import versions

STAMP_FILE = '.llmfleet-lock.sha256'
# The sha1 of the package list the engine CLI last answered for (the verify step's cache).
CLI_STAMP_FILE = '.llmfleet-cli-checked'
IGNORED = ('pip', 'setuptools', 'wheel')
# Printed by the venv's own python: {"python": X.Y.Z, "packages": {normalized name: version}}. Its exact
# output is hashed into the CLI stamp, so keep it byte-stable (sorted keys).
LIST_SCRIPT = (
    'import importlib.metadata as m, json, platform\n'
    'd = {x.metadata["Name"].lower().replace("_", "-"): x.version for x in m.distributions()}\n'
    'print(json.dumps({"python": platform.python_version(), "packages": d}, sort_keys=True))\n'
)


def stamp(lock_sha1, mode='bytecode'):
    """What a venv synced to the lock is stamped with (``none:<mode>`` without a lock)."""
    return '%s:%s' % (lock_sha1 or 'none', mode)


def should_list(stamp_found, expected, venv_exists, read_installed='stamped'):
    """Whether to run the venv's python to list what it holds: always for a verify, else only for a
    venv whose stamp names the lock (one that is re-synced anyway is not read)."""
    if not venv_exists:
        return False
    return read_installed == 'always' or (stamp_found or '').strip() == expected


def decide(expected, stamp_found, venv_exists, lock_text, listing=None, listing_error=None, ignore=IGNORED):
    """The venv's state against its lock and whether it needs a (re)sync.

    expected: stamp(lock sha1, mode); stamp_found: the venv's stamp file content (None: absent);
    lock_text: the lock (None: not on the host); listing: the parsed LIST_SCRIPT output (None: not
    listed); listing_error: why the venv's python could not list it.
    Returns {needs_sync, reason, drift, reinstall}: reason says why in a few words
    ('matches its lock' when nothing is to do); drift lists {package, locked, installed} (None =
    absent) where the venv was listed, reinstall those packages' names (for the sync).
    """
    drift = []
    if listing is not None and lock_text is not None:
        drift = versions.lock_drift(listing.get('packages') or {}, lock_text, ignore)
    found = (stamp_found or '').strip()
    if lock_text is None:
        reason = 'no lock on the host'
    elif not venv_exists:
        reason = 'no venv'
    elif stamp_found is None:
        reason = 'no stamp (never synced to a lock)'
    elif found != expected:
        reason = 'stamped %s, the lock is %s' % (found or "''", expected)
    elif listing_error:
        reason = 'its python cannot list its packages (%s)' % listing_error
    elif drift:
        reason = 'drifted from its lock: %s' % drift_text(drift)
    else:
        reason = 'matches its lock'
    return {
        'needs_sync': reason != 'matches its lock',
        'reason': reason,
        'drift': drift,
        'reinstall': [d['package'] for d in drift],
    }


def drift_text(drift):
    """'ray locked 2.49.0 installed 2.59.0; ...' (the words tests and operators grep for)."""
    return '; '.join('%s locked %s installed %s' % (d['package'], d['locked'], d['installed']) for d in drift)
