"""role_state's decisions as tables: the drift between a recorded full run and what the probes see
now, the probe set a check observes, and the parsers of systemctl, dpkg-query, ip and nft output."""
import pytest

from ansible_collections.llmfleet.cluster.plugins.module_utils import role_state as rs

FP = 'a' * 64
OTHER = 'b' * 64
RECORD = rs.stamp('fabric', FP, {'files': ['/etc/llmfleet/comm.env'], 'units': ['systemd-networkd.service']},
                  {'files': {'/etc/llmfleet/comm.env': {'sha256': 'x', 'mode': '0640', 'uid': 0, 'gid': 998}},
                   'units': {'systemd-networkd.service': 'active/enabled'}},
                  facts={'fabric_iface': 'eth1'})
SAME = {'files': {'/etc/llmfleet/comm.env': {'sha256': 'x', 'mode': '0640', 'uid': 0, 'gid': 998}},
        'units': {'systemd-networkd.service': 'active/enabled'}}


@pytest.mark.parametrize('recorded, fingerprint, observed, expected', [
    (RECORD, FP, SAME, []),
    (None, FP, {}, ['no record of a full run of this role']),
    (dict(RECORD, version=0), FP, SAME, ['the record is of another format (version 0)']),
    (RECORD, OTHER, SAME, ["the role's inputs changed (inventory, profile, plan or the collection's code)"]),
    (RECORD, FP, dict(SAME, units={'systemd-networkd.service': 'failed/enabled'}),
     ["units systemd-networkd.service: 'failed/enabled', was 'active/enabled'"]),
    (RECORD, FP, dict(SAME, files={'/etc/llmfleet/comm.env': None}),
     ["files /etc/llmfleet/comm.env: None, was {'sha256': 'x', 'mode': '0640', 'uid': 0, 'gid': 998}"]),
    (RECORD, FP, dict(SAME, mtu={'10.0.0.1': 'eth1 mtu 9000'}), ['mtu 10.0.0.1: not observed by the last full run']),
])
def test_drift(recorded, fingerprint, observed, expected):
    assert rs.drift(recorded, fingerprint, observed) == expected


def test_a_check_observes_what_the_record_named_and_what_it_adds():
    assert rs.probes_to_observe(RECORD, {}) == {'files': ['/etc/llmfleet/comm.env'], 'units': ['systemd-networkd.service']}
    assert rs.probes_to_observe(RECORD, {'units': ['ray.service'], 'mtu': ['10.0.0.1']}) == {
        'files': ['/etc/llmfleet/comm.env'], 'mtu': ['10.0.0.1'], 'units': ['ray.service', 'systemd-networkd.service']}
    assert rs.probes_to_observe(None, {'files': ['/b', '/a']}) == {'files': ['/a', '/b']}


@pytest.mark.parametrize('role, fingerprint, probes, problem', [
    ('fabric', FP, {'files': ['/a']}, None),
    ('Fabric', FP, {}, "role 'Fabric'"),
    ('fabric', 'abc', {}, "fingerprint 'abc'"),
    ('fabric', FP, {'sockets': ['/a']}, 'probes.sockets: unknown kind'),
    ('fabric', FP, {'files': ['relative']}, 'probes.files: paths must be absolute'),
    ('fabric', FP, {'units': ['a', 'a']}, 'probes.units: a name appears twice'),
    ('fabric', FP, {'units': 'a'}, 'probes.units: a list of non-empty strings'),
])
def test_spec_problems(role, fingerprint, probes, problem):
    problems = rs.spec_problems(role, fingerprint, probes)
    assert (problems == []) if problem is None else any(problem in p for p in problems), problems


SHOW = """Id=llmfleet-ray.service
ActiveState=active
UnitFileState=enabled

Id=earlyoom.service
ActiveState=reloading
UnitFileState=enabled
DropInPaths=/etc/systemd/system/earlyoom.service.d/50-llmfleet-container.conf

Id=gone.service
ActiveState=inactive
UnitFileState=
"""


def test_parse_systemctl_show():
    units = ['llmfleet-ray.service', 'earlyoom.service', 'gone.service', 'never-printed.service']
    assert rs.parse_systemctl_show(SHOW, units) == {
        'llmfleet-ray.service': 'active/enabled',
        'earlyoom.service': 'active/enabled +/etc/systemd/system/earlyoom.service.d/50-llmfleet-container.conf',
        'gone.service': 'inactive/none', 'never-printed.service': 'unknown/unknown'}


def test_parse_dpkg_query():
    out = 'earlyoom install ok installed\nlibc6:amd64 install ok installed\nzstd deinstall ok config-files\n'
    assert rs.parse_dpkg_query(out, ['earlyoom', 'libc6', 'zstd', 'nftables']) == {
        'earlyoom': 'install ok installed', 'libc6': 'install ok installed',
        'zstd': 'deinstall ok config-files', 'nftables': 'absent'}


def test_mtu_for_ips():
    links = [{'ifname': 'lo', 'mtu': 65536, 'addr_info': [{'local': '127.0.0.1'}]},
             {'ifname': 'eth1', 'mtu': 9000, 'addr_info': [{'local': '10.231.1.11'}, {'local': 'fe80::1'}]}]
    assert rs.mtu_for_ips(links, ['10.231.1.11', '10.9.9.9']) == {'10.231.1.11': 'eth1 mtu 9000', '10.9.9.9': None}


def test_nft_tables_loaded():
    out = 'table inet llmfleet_ray\ntable inet llmfleet_serve_tiny\n'
    assert rs.nft_tables_loaded(out, ['inet llmfleet_ray', 'inet  llmfleet_serve_tiny', 'ip nat']) == {
        'inet llmfleet_ray': True, 'inet  llmfleet_serve_tiny': True, 'ip nat': False}


def test_drifted_hosts():
    hostvars = {'a': {'s': {'current': True}}, 'b': {'s': {'current': False}}, 'c': {}}
    assert rs.drifted_hosts(['a', 'b', 'c'], hostvars, 's') == ['b', 'c']
    assert rs.drifted_hosts(['a'], hostvars, 's') == []
    # 'skip': a host without the result (ended before the check) is left out; one that failed its check is not
    hostvars['d'] = {'s': {'failed': True}}
    assert rs.drifted_hosts(['a', 'b', 'c', 'd'], hostvars, 's', absent='skip') == ['b', 'd']
    assert rs.drifted_hosts(['c'], hostvars, 's', absent='skip') == []


def test_converge_drift():
    hostvars = {'spark1': {'__fabric_state': {'current': True, 'fingerprint': FP},
                           '__serve_state': {'current': False, 'fingerprint': FP},
                           '__models_state': {'skipped': True}, 'other_state': {'current': False, 'fingerprint': FP}},
                'thor1': {'__fabric_state': {'current': True, 'fingerprint': FP}}, 'thor2': {}}
    assert rs.converge_drift(['spark1', 'thor1', 'thor2'], hostvars) == {
        'checked': 3, 'drifted': ['spark1: serve'], 'unchanged': False}
    assert rs.converge_drift(['thor1'], hostvars) == {'checked': 1, 'drifted': [], 'unchanged': True}
    assert rs.converge_drift(['thor2'], hostvars) == {'checked': 0, 'drifted': [], 'unchanged': False}
