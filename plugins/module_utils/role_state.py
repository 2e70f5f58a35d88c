# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""What the role_state module decides, without I/O: whether a node is still as a role's last full
run left it. A role's full run ends by recording (a stamp file per role) the fingerprint of its
inputs and what its probes observed then; a later run compares the new fingerprint and what the
same probes observe now, and skips the role's tasks when nothing differs. Any difference (new
inputs, a file edited by hand, a unit stopped, a package removed, an MTU reset) is drift: the
role runs in full, which repairs it and records again."""

import re

# Each probe kind: a list of names, observed by the module (plugins/modules/role_state.py).
PROBE_KINDS = {
    'files': 'sha256, mode, owner and group of a file (or absent)',
    'dirs': 'mode, owner and group of a directory (or absent)',
    'links': 'target of a symbolic link (or absent)',
    'trees': 'relative path, size and mtime of every file under a directory (model weights: not hashed)',
    'hashed_trees': 'relative path, size and sha256 of every file under a directory (read in full: never in a snapshot)',
    'packages': 'dpkg status of a package',
    'units': 'systemd ActiveState, UnitFileState and drop-in files of a unit',
    'mtu': 'name and MTU of the interface that carries an IP address (or no such interface)',
    'nft_tables': 'whether an nftables table (family name) is loaded',
    'http': 'HTTP status of a GET on a URL (health endpoints on loopback)',
    'users': 'uid, gid, home and shell of a user (or absent)',
    'groups': 'gid of a group (or absent)',
    'venvs': "a venv's Python and a digest of its distributions (dist-info names and METADATA versions)",
}

STAMP_VERSION = 1
FINGERPRINT_RE = re.compile(r'^[0-9a-f]{64}$')
ROLE_RE = re.compile(r'^[a-z][a-z0-9_]*$')


def spec_problems(role, fingerprint, probes):
    """Problems with the module's input (empty when fine)."""
    problems = []
    if not ROLE_RE.match(role or ''):
        problems.append('role %r: a role name (lower case, digits, _)' % (role,))
    if not FINGERPRINT_RE.match(fingerprint or ''):
        problems.append('fingerprint %r: a sha256 hex digest (the role_state action computes it when left out)' % (fingerprint,))
    for kind, names in sorted((probes or {}).items()):
        if kind not in PROBE_KINDS:
            problems.append('probes.%s: unknown kind (one of %s)' % (kind, ', '.join(sorted(PROBE_KINDS))))
            continue
        if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
            problems.append('probes.%s: a list of non-empty strings, got %r' % (kind, names))
            continue
        if len(set(names)) != len(names):
            problems.append('probes.%s: a name appears twice' % kind)
        if kind in ('files', 'dirs', 'links', 'trees', 'hashed_trees', 'venvs') and not all(n.startswith('/') for n in names):
            problems.append('probes.%s: paths must be absolute' % kind)
    return problems


def normalize_probes(probes):
    """The probes with empty kinds dropped and names sorted: the stamp compares equal however a role
    orders its lists."""
    return dict((kind, sorted(names)) for kind, names in sorted((probes or {}).items()) if names)


def stamp(role, fingerprint, probes, observed, facts=None):
    """The stamp document a full run records; `facts` are the role's results that later roles read
    (handed back by a check that finds the node current, since the role's tasks then do not run)."""
    return {'version': STAMP_VERSION, 'role': role, 'fingerprint': fingerprint,
            'probes': normalize_probes(probes), 'observed': observed, 'facts': facts or {}}


def drifted_hosts(hosts, hostvars, result_name, absent='drifted'):
    """The hosts among `hosts` whose registered role_state check (`result_name`) did not find them
    current. A host without the result counts as drifted, or with absent='skip' is left out (hosts a
    role ended before its check, such as models' hosts outside every serving group)."""
    out = []
    for host in hosts:
        host_vars = hostvars.get(host) or {}
        if absent == 'skip' and result_name not in host_vars:
            continue
        result = host_vars.get(result_name)
        if not isinstance(result, dict) or result.get('current') is not True:
            out.append(host)
    return out


def probes_to_observe(recorded, probes):
    """What a check observes: every probe the record named (found during that full run, such as the
    files a patch changed) and any the check adds."""
    merged = dict((kind, set(names)) for kind, names in ((recorded or {}).get('probes') or {}).items())
    for kind, names in (probes or {}).items():
        merged.setdefault(kind, set()).update(names)
    return normalize_probes(dict((kind, list(names)) for kind, names in merged.items()))


def observed_subset(observed, probes):
    """The part of `observed` ({kind: {name: value}}) that `probes` name."""
    return dict((kind, dict((n, (observed.get(kind) or {}).get(n)) for n in names)) for kind, names in probes.items())


SNAPSHOT_EXCLUDED_KINDS = frozenset(['hashed_trees'])


def in_snapshot(recorded):
    """Whether a record's probes are cheap enough for the run's snapshot: one that hashes files in full
    (model weights with models_verify_hashes) is checked by its own role's call, not by every playbook."""
    return not (set((recorded or {}).get('probes') or {}) & SNAPSHOT_EXCLUDED_KINDS)


def snapshot(stamps, observed):
    """{role: {fingerprint, drift, facts, path}} for every record, its probes' drift judged from one
    observation of all of them (`observed` covers every record's probes; records that hash files are
    left out, see in_snapshot)."""
    out = {}
    for role, recorded in sorted(stamps.items()):
        if not in_snapshot(recorded):
            continue
        wanted = probes_to_observe(recorded, {})
        out[role] = {'fingerprint': recorded.get('fingerprint'), 'facts': recorded.get('facts') or {},
                     'path': recorded.get('path', ''),
                     'drift': drift(recorded, recorded.get('fingerprint'), observed_subset(observed, wanted))}
    return out


def drift(recorded, fingerprint, observed):
    """Why the node is not as the recorded full run left it (empty: it is).

    recorded: the stamp document (None when there is none); observed: what the probes see now,
    {kind: {name: value}}, for probes_to_observe(recorded, ...)."""
    if not recorded:
        return ['no record of a full run of this role']
    if recorded.get('version') != STAMP_VERSION:
        return ['the record is of another format (version %r)' % (recorded.get('version'),)]
    reasons = []
    if recorded.get('fingerprint') != fingerprint:
        reasons.append("the role's inputs changed (inventory, profile, plan or the collection's code)")
    before = recorded.get('observed') or {}
    for kind in sorted(observed):
        then, now = before.get(kind) or {}, observed[kind] or {}
        for name in sorted(now):
            if name not in then:
                reasons.append('%s %s: not observed by the last full run' % (kind, name))
            elif then[name] != now[name]:
                reasons.append('%s %s: %s, was %s' % (kind, name, _short(now[name]), _short(then[name])))
    return reasons


def _short(value):
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + '...'


def converge_drift(hosts, hostvars):
    """What this run's role_state checks found, over every result registered as __<role>_state on the
    given hosts: {'checked': how many, 'drifted': ['host: role', ...], 'unchanged': whether some role
    was checked and none drifted (nothing ran its tasks)}."""
    checked, drifted = 0, []
    for host in hosts:
        host_vars = hostvars.get(host) or {}
        # the names first: Ansible's hostvars template a value only when it is read
        for name in sorted(n for n in host_vars if n.startswith('__') and n.endswith('_state')):
            result = host_vars[name]
            if not (isinstance(result, dict) and 'fingerprint' in result and 'current' in result):
                continue
            checked += 1
            if result.get('current') is not True:
                drifted.append('%s: %s' % (host, name[2:-len('_state')]))
    return {'checked': checked, 'drifted': drifted, 'unchanged': checked > 0 and not drifted}


def parse_systemctl_show(text, units):
    """{unit: 'ActiveState/UnitFileState[ +drop-ins]'} from `systemctl show -p Id -p ActiveState -p
    UnitFileState -p DropInPaths u1 u2 ...` (blocks in the order asked, separated by a blank line):
    a drop-in planted beside a unit is drift. 'reloading' counts as active."""
    blocks = [b for b in re.split(r'\n\s*\n', text.strip()) if b.strip()] if text.strip() else []
    result = {}
    for unit, block in zip(units, blocks):
        props = dict(line.split('=', 1) for line in block.splitlines() if '=' in line)
        active = props.get('ActiveState', 'unknown')
        if active == 'reloading':
            active = 'active'
        dropins = props.get('DropInPaths', '').strip()
        result[unit] = '%s/%s%s' % (active, props.get('UnitFileState') or 'none', (' +' + dropins) if dropins else '')
    for unit in units[len(blocks):]:
        result[unit] = 'unknown/unknown'
    return result


def parse_dpkg_query(text, packages):
    """{package: 'install ok installed' | 'absent'} from `dpkg-query -W -f '${Package} ${Status}\\n' p1 ...`
    (a name dpkg does not know is not printed)."""
    seen = {}
    for line in text.splitlines():
        parts = line.split(' ', 1)
        if len(parts) == 2:
            seen[parts[0].split(':')[0]] = parts[1].strip()
    return dict((p, seen.get(p, 'absent')) for p in packages)


def mtu_for_ips(links, ips):
    """{ip: 'ifname mtu N' or None} from `ip -j addr` output (a list of links with addr_info): a
    renamed NIC is drift too (the env files name it)."""
    found = {}
    for link in links or []:
        for addr in link.get('addr_info') or []:
            if addr.get('local') in ips:
                found[addr['local']] = '%s mtu %s' % (link.get('ifname'), link.get('mtu'))
    return dict((ip, found.get(ip)) for ip in ips)


def nft_tables_loaded(text, tables):
    """{'family name': bool} from `nft list tables` (lines 'table inet llmfleet_ray')."""
    loaded = set(' '.join(line.split()[1:3]) for line in text.splitlines() if line.startswith('table '))
    return dict((t, ' '.join(t.split()) in loaded) for t in tables)
