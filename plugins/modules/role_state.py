#!/usr/bin/python
# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

DOCUMENTATION = r"""
module: role_state
short_description: Tell whether a node is still as a role's last full run left it, or record that it is
version_added: 0.1.0
author: llmfleet maintainers (!UNKNOWN)
description:
  - A re-run that changes nothing spends its time on tasks that each find their one thing already right.
    With this module a role first asks, in one call, whether the node is as its last full run left it; if so
    the role skips its tasks (one skipped include), else it runs in full and records again at its end.
  - O(state=check) compares the role's input fingerprint (computed on the controller over the
    role's variables, the host's cluster plan and the collection's code) with the recorded one, and what the
    probes observe now with what they observed at the record - file checksums and modes, directories, links,
    model files' size and mtime, packages, unit states and drop-ins, the fabric NIC's name and MTU, nftables
    tables, health endpoints, users, groups and a venv's distributions. Any difference is drift, named in
    RV(drift).
  - O(state=record) observes the probes and writes the stamp (JSON, mode 0600) when it differs.
  - The decisions are C(plugins/module_utils/role_state.py) (unit tables).
options:
  role:
    description: The role's name (names the stamp file).
    type: str
    required: true
  fingerprint:
    description:
      - sha256 of the role's inputs. Left out, the action plugin computes it on the controller - over the templated
        value of every variable in the role's C(meta/argument_specs.yml) and every C(llmfleet_*) variable (the
        cluster plan included), and the content of the role's directory, the collection's C(plugins/) and
        C(profiles/) (plugins/plugin_utils/role_inputs.py); the task must then run inside that role, or in the
        C(pre_tasks) of a play that lists it under C(roles) (whose defaults and vars are then the play's).
    type: str
  probes:
    description:
      - What to observe, by kind, each a list of names. O(state=record) stores them (they may name what the full
        run found, such as the files a patch changed); O(state=check) observes the stored ones and any given
        here - V(files), V(dirs), V(links), V(trees) (absolute paths),
        V(hashed_trees) (the same, files hashed in full; such a record is left out of a snapshot), V(packages) (dpkg names),
        V(units) (systemd units), V(mtu) (IP addresses), V(nft_tables)
        (C(family name)), V(http) (URLs), V(users), V(groups), V(venvs) (venv paths; their interpreter and dist-info
        names).
    type: dict
    default: {}
  facts:
    description:
      - With O(state=record), results of the role that later roles or plays read (stored in the stamp, not
        compared); a check that finds the node current returns them as RV(facts) for a C(set_fact).
    type: dict
    default: {}
  state:
    description: V(check) reads only; V(record) writes the stamp.
    type: str
    choices: [check, record]
    default: check
  snapshot:
    description:
      - With O(state=check), also observe the probes of every role's record in O(state_dir), in the same call,
        and return them as RV(snapshot); the role_state action answers later checks of the same run from it
        without contacting the node, as long as no role of the run has drifted (nothing has changed since).
    type: bool
    default: false
  rerun:
    description:
      - With O(state=check), a reason to run the role whatever the record says (an action asked for, such as a
        restart); empty for none. The node is then not current and the reason is the first line of RV(drift).
    type: str
    default: ""
  host:
    description:
      - The inventory host the stamps are for (a directory of its own below O(state_dir), so that inventory hosts
        sharing one machine, as in connection-local tests, keep theirs apart). The action plugin passes
        C(inventory_hostname); empty keeps the stamps in O(state_dir) itself.
    type: str
    default: ""
  state_dir:
    description: Where the stamps are kept (made 0700 by O(state=record)).
    type: path
    default: /var/lib/llmfleet/state
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: V(check) is read-only and runs as in a real run; V(record) reports whether it would write.
  diff_mode:
    support: none
  platform:
    support: full
    platforms: posix
"""

EXAMPLES = r"""
- name: Is this node as the fabric role's last full run left it?
  llmfleet.cluster.role_state:
    role: fabric
  register: fabric_state

- name: Everything else of the role, only where something drifted
  ansible.builtin.include_tasks: apply.yml
  when: not fabric_state.current

# last task of apply.yml
- name: Record what the full run left
  llmfleet.cluster.role_state:
    role: fabric
    fingerprint: "{{ fabric_state.fingerprint }}"
    probes:
      files: [/etc/llmfleet/comm.env]
      units: [systemd-networkd.service]
      mtu: ["{{ llmfleet_fabric_ip }}"]
    state: record
"""

RETURN = r"""
current:
  description: Whether the node is as the recorded full run left it (V(check)); V(true) after V(record).
  returned: always
  type: bool
drift:
  description: What differs (V(check)); empty when RV(current).
  returned: always
  type: list
  elements: str
  sample: ["units ray-head.service: 'failed/enabled', was 'active/enabled'"]
path:
  description: The stamp file.
  returned: always
  type: str
fingerprint:
  description: The fingerprint given (for the record at the end of the same run).
  returned: always
  type: str
facts:
  description: The facts the last record stored (V(check) when RV(current)); else empty.
  returned: always
  type: dict
snapshot:
  description:
    - With O(snapshot), per role recorded in O(state_dir) - its recorded C(fingerprint), the C(drift) of its probes
      now (inputs not compared), its C(facts) and C(path).
  returned: when O(snapshot) is set
  type: dict
"""

import glob
import grp
import hashlib
import json
import os
import pwd
import stat

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url

from ansible_collections.llmfleet.cluster.plugins.module_utils import role_state


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, 'rb') as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b''):
            digest.update(chunk)
    return digest.hexdigest()


def _stat(path, follow, is_kind, kind):
    """(stat, None), or (None, what to record): None when absent, a type note when not a `kind`."""
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except FileNotFoundError:
        return None, None
    return (st, None) if is_kind(st.st_mode) else (None, {'type': 'not a %s' % kind})


def _owner_mode(st):
    return {'mode': '%04o' % stat.S_IMODE(st.st_mode), 'uid': st.st_uid, 'gid': st.st_gid}


def _file(path):
    st, other = _stat(path, False, stat.S_ISREG, 'file')
    return other if st is None else dict(_owner_mode(st), sha256=_sha256(path))


def _dir(path):
    st, other = _stat(path, True, stat.S_ISDIR, 'directory')
    return other if st is None else _owner_mode(st)


def _link(path):
    return os.readlink(path) if os.path.islink(path) else None


def _walk(path, describe):
    """{relative path: describe(full path)} for every file under a directory (None when absent)."""
    if not os.path.isdir(path):
        return None
    seen = {}
    for root, _dirs, files in os.walk(path):
        for name in files:
            full = os.path.join(root, name)
            try:
                seen[os.path.relpath(full, path)] = describe(full)
            except FileNotFoundError:
                continue
    return seen


def _tree(path):
    """Size and modification time of every file (rsync's quick check): a copy rewritten in place
    changes its mtime."""
    def describe(full):
        st = os.stat(full)
        return '%d@%d' % (st.st_size, st.st_mtime_ns)
    return _walk(path, describe)


def _venv(path):
    """The venv's interpreter and a digest of its installed distributions: each dist-info's name and
    the Version its METADATA declares (what a pip install, or an edit, by hand changes)."""
    python = os.path.join(path, 'bin', 'python')
    if not os.path.lexists(python):
        return None
    digest, count = hashlib.sha256(), 0
    for site in sorted(glob.glob(os.path.join(path, 'lib', 'python*', 'site-packages'))):
        for name in sorted(n for n in os.listdir(site) if n.endswith('.dist-info')):
            version = ''
            try:
                with open(os.path.join(site, name, 'METADATA'), errors='replace') as handle:
                    for line in handle:
                        if line.startswith('Version:'):
                            version = line.split(':', 1)[1].strip()
                            break
                        if not line.strip():
                            break
            except FileNotFoundError:
                version = '<no METADATA>'
            digest.update(('%s %s\n' % (name, version)).encode('utf-8'))
            count += 1
    return {'python': os.path.realpath(python), 'distributions': count, 'digest': digest.hexdigest()}


def _hashed_tree(path):
    """Size and sha256 of every file (what models_verify_hashes asks of every run)."""
    return _walk(path, lambda full: '%d %s' % (os.path.getsize(full), _sha256(full)))


def _user(name):
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return None
    return {'uid': entry.pw_uid, 'gid': entry.pw_gid, 'home': entry.pw_dir, 'shell': entry.pw_shell}


def _group(name):
    try:
        return grp.getgrnam(name).gr_gid
    except KeyError:
        return None


def _http(url):
    try:
        return open_url(url, method='GET', timeout=5, validate_certs=False).getcode()
    except Exception as exc:  # an HTTP error, a refused connection or a timeout is what was observed
        return 'error: %s' % getattr(exc, 'code', type(exc).__name__)


def _run(module, argv):
    rc, out, err = module.run_command(argv)
    return out if rc == 0 else ''


def observe(module, probes):
    """{kind: {name: observed}} for every probe."""
    seen = {}
    per_path = {'files': _file, 'dirs': _dir, 'links': _link, 'trees': _tree, 'users': _user,
                'groups': _group, 'http': _http, 'venvs': _venv, 'hashed_trees': _hashed_tree}
    for kind, fn in per_path.items():
        if probes.get(kind):
            seen[kind] = dict((name, fn(name)) for name in probes[kind])
    if probes.get('units'):
        units = probes['units']
        out = _run(module, ['systemctl', 'show', '-p', 'Id', '-p', 'ActiveState', '-p', 'UnitFileState', '-p', 'DropInPaths', '--'] + units)
        seen['units'] = role_state.parse_systemctl_show(out, units)
    if probes.get('packages'):
        # dpkg-query exits 1 when a name is unknown, and still prints the others
        _rc, out, _err = module.run_command(['dpkg-query', '-W', '-f', '${Package} ${Status}\n', '--'] + probes['packages'])
        seen['packages'] = role_state.parse_dpkg_query(out, probes['packages'])
    if probes.get('mtu'):
        out = _run(module, ['ip', '-j', 'addr', 'show'])
        try:
            links = json.loads(out) if out else []
        except ValueError:
            links = []
        seen['mtu'] = role_state.mtu_for_ips(links, probes['mtu'])
    if probes.get('nft_tables'):
        nft = module.get_bin_path('nft')
        out = _run(module, [nft, 'list', 'tables']) if nft else ''
        seen['nft_tables'] = role_state.nft_tables_loaded(out, probes['nft_tables'])
    return seen


def _all_stamps(state_dir):
    """{role: stamp} of every record in the directory."""
    stamps = {}
    if os.path.isdir(state_dir):
        for name in sorted(os.listdir(state_dir)):
            if name.endswith('.json'):
                stamp = _read_stamp(os.path.join(state_dir, name))
                if stamp and stamp.get('role'):
                    stamp['path'] = os.path.join(state_dir, name)
                    stamps[stamp['role']] = stamp
    return stamps


def _read_stamp(path):
    try:
        with open(path) as handle:
            return json.load(handle)
    except (FileNotFoundError, ValueError):
        return None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            role=dict(type='str', required=True),
            fingerprint=dict(type='str', no_log=False),
            probes=dict(type='dict', default={}),
            facts=dict(type='dict', default={}),
            snapshot=dict(type='bool', default=False),
            state=dict(type='str', choices=['check', 'record'], default='check'),
            rerun=dict(type='str', default=''),
            host=dict(type='str', default=''),
            state_dir=dict(type='path', default='/var/lib/llmfleet/state'),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if not p['fingerprint']:
        module.fail_json(msg='role_state: no fingerprint (the action plugin computes it: run the module through it)')
    problems = role_state.spec_problems(p['role'], p['fingerprint'], p['probes'])
    if problems:
        module.fail_json(msg='; '.join(problems))
    if '/' in p['host'] or p['host'] in ('.', '..'):
        module.fail_json(msg='role_state: host %r is not a plain name' % p['host'])
    state_dir = os.path.join(p['state_dir'], p['host']) if p['host'] else p['state_dir']
    path = os.path.join(state_dir, p['role'] + '.json')
    if p['state'] == 'check':
        recorded = _read_stamp(path)
        stamps = _all_stamps(state_dir) if p['snapshot'] else {}
        own = role_state.probes_to_observe(recorded, p['probes'])
        wanted = own
        for other in stamps.values():
            if role_state.in_snapshot(other):
                wanted = role_state.probes_to_observe(other, wanted)
        observed = observe(module, wanted)
        reasons = ([p['rerun']] if p['rerun'] else []) + role_state.drift(recorded, p['fingerprint'],
                                                                          role_state.observed_subset(observed, own))
        result = dict(changed=False, current=not reasons, drift=reasons, path=path, fingerprint=p['fingerprint'],
                      facts={} if reasons else recorded.get('facts') or {})
        if p['snapshot']:
            result['snapshot'] = role_state.snapshot(stamps, observed)
        module.exit_json(**result)
    probes = role_state.normalize_probes(p['probes'])
    document = role_state.stamp(p['role'], p['fingerprint'], probes, observe(module, probes), p['facts'])
    text = json.dumps(document, indent=1, sort_keys=True) + '\n'
    current = None
    if os.path.exists(path):
        with open(path) as handle:
            current = handle.read()
    changed = current != text
    if changed and not module.check_mode:
        for directory in (p['state_dir'], state_dir):
            if not os.path.isdir(directory):
                os.makedirs(directory, 0o700)
        tmp = path + '.tmp'
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, 'w') as handle:
            handle.write(text)
        os.chmod(tmp, 0o600)
        os.rename(tmp, path)
    module.exit_json(changed=changed, current=True, drift=[], path=path, fingerprint=p['fingerprint'], facts=p['facts'])


if __name__ == '__main__':
    main()
