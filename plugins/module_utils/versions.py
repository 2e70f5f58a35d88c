# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Version alignment: an installed set against its lock, and a package across nodes. Pure.

Fix 6 of the vllm-gb10 notes: a Ray worker runs model code in its own node's environment, so a
missing or different package there ("ModuleNotFoundError: triton", a transformers mismatch)
breaks the whole cluster. Every finding names the package and both versions.
"""
import re

_LOCK_LINE = re.compile(r'^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([^\s;\\]+)')


def canonical(name):
    """PEP 503 normalised project name."""
    return re.sub(r'[-_.]+', '-', str(name)).lower()


def parse_lock(text):
    """``{name: version}`` from a ``name==version [--hash=...]`` requirements/lock text."""
    pins = {}
    for line in (text or '').splitlines():
        line = line.split('#', 1)[0]
        m = _LOCK_LINE.match(line)
        if m:
            pins[canonical(m.group(1))] = m.group(2)
    return pins


def lock_drift(installed, lock_text, ignore=('pip', 'setuptools', 'wheel')):
    """Differences between an installed ``{name: version}`` map and a lock.

    Returns a sorted list of ``{package, locked, installed}`` (``None`` = absent).
    """
    have = {canonical(k): v for k, v in (installed or {}).items()}
    want = parse_lock(lock_text)
    skip = {canonical(i) for i in ignore}
    out = []
    for name in sorted(set(have) | set(want)):
        if name in skip:
            continue
        if have.get(name) != want.get(name):
            out.append({'package': name, 'locked': want.get(name), 'installed': have.get(name)})
    return out


def version_mismatch(reports, hosts, packages):
    """Lines naming each package (and Python) whose version differs across ``hosts``.

    ``reports`` is a list (same order as ``hosts``) of ``{python: '3.11.2', packages: {...}}``.
    """
    lines = []
    by_host = dict(zip(hosts, reports))
    keys = ['python'] + [canonical(p) for p in packages]
    for key in keys:
        seen = {}
        for host, rep in by_host.items():
            rep = rep or {}
            value = rep.get('python') if key == 'python' else (rep.get('packages') or {}).get(key)
            seen.setdefault(value or 'absent', []).append(host)
        if len(seen) > 1:
            parts = ', '.join('%s on %s' % (v, '/'.join(sorted(h))) for v, h in sorted(seen.items()))
            lines.append('%s differs: %s' % (key, parts))
    return lines
