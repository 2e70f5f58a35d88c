"""Tests for module_utils/preflight.py host_checks: the host check table, one row per outcome.

Every expected line was rendered from the Jinja check table this function replaced (the role's
vars/main.yml, by ansible-core's templating), so the lines stay byte-identical: order, severity and
wording are what tests/integration/preflight and molecule/cluster/tests/test_validate.py assert on.
A base lab (spark1 the ray_head, spark2 a worker, Alpha a third host of the run; one healthy GB10
each) is changed by each case of tests/unit/fixtures/preflight_host/cases.yml: ``path`` = value,
~ (DROP here) deletes.
"""
import copy
import json
from pathlib import Path

import pytest
import yaml

from ansible_collections.llmfleet.cluster.plugins.filter.preflight import FilterModule
from ansible_collections.llmfleet.cluster.plugins.module_utils import gpu, preflight

GPU_FIXTURES = Path(__file__).resolve().parents[2] / 'fixtures' / 'gpu'
DROP = object()


def gpu_result(query, smi, replace=()):
    query_text, smi_text = (GPU_FIXTURES / query).read_text(), (GPU_FIXTURES / smi).read_text()
    for old, new in replace:  # derived states: one value of a real capture changed
        query_text, smi_text = query_text.replace(old, new), smi_text.replace(old, new)
    return dict(gpu.summarize(gpu.parse_query_gpu(query_text)[0], smi_text), nvidia_smi_error=None, changed=False)


RESULTS = {
    'GB10': gpu_result('gb10_query.csv', 'gb10_smi.txt'),
    'GB10_OTHER_DRIVER': gpu_result('gb10_query.csv', 'gb10_smi.txt', [('580.95.05', '580.82.09')]),
    'MIXED': dict(gpu.summarize(gpu.parse_query_gpu((GPU_FIXTURES / 'mixed_rtx5090_gb10_query.csv').read_text())[0],
                                None), nvidia_smi_error=None),
    'NO_GPU': dict(gpu.summarize([], None), nvidia_smi_error=None),
    'SKIPPED': {'changed': False, 'skipped': True, 'skip_reason': 'Conditional result was False'},
    # the fabric IP as a secondary address of the management NIC
    'SECONDARY_NIC': {'device': 'enP7s7', 'mtu': 9000, 'ipv4': {'address': '10.0.0.11'},
                      'ipv4_secondaries': [{'address': '192.168.100.11'}]},
    'RDMA_UP': {'source': 'ibdev2netdev', 'rdma_devices': [
        {'ibdev': 'rocep1s0f1', 'port': 1, 'netdev': 'enp1s0f1np1', 'state': 'Up', 'port_state': 'ACTIVE',
         'link_layer': 'Ethernet'}]},
    'RDMA_DOWN': {'source': 'ibdev2netdev', 'rdma_devices': [
        {'ibdev': 'rocep1s0f1', 'port': 1, 'netdev': 'enp1s0f1np1', 'state': 'Down', 'port_state': 'DOWN',
         'link_layer': 'Ethernet'}]},
}


def host(name, n, machine_id):
    """A healthy GB10 node: what the probe, the network facts and the modules return for it."""
    fabric_ip, mgmt_ip = '192.168.100.1%d' % n, '10.0.0.1%d' % n
    return {
        'inventory_hostname': name, 'llmfleet_cluster': 'lab', 'llmfleet_gpu_arch': 'sm_121',
        'llmfleet_fabric_ip': fabric_ip,
        'preflight_probe': {
            'python': '/usr/bin/python3', 'disk_path': '/opt', 'disk_avail_kb': '123456789',
            'machine_id': machine_id, 'container': 'none', 'ntp_synced': 'yes', 'ntp_active': 'yes',
            'raylet': 'no'},
        'ansible_facts': {
            'all_ipv4_addresses': [mgmt_ip, fabric_ip], 'hostname': 'spark%d' % n,
            'enP7s7': {'device': 'enP7s7', 'mtu': 1500, 'ipv4': {'address': mgmt_ip}},
            'enp1s0f1np1': {'device': 'enp1s0f1np1', 'mtu': 9000, 'ipv4': {'address': fabric_ip}}},
        'preflight_gpu': RESULTS['GB10'], 'preflight_rdma': RESULTS['RDMA_UP'],
    }


BASE = {
    'hosts': ['spark1', 'spark2', 'Alpha'],
    'hv': {'spark1': host('spark1', 1, 'aaaa'), 'spark2': host('spark2', 2, 'bbbb'), 'Alpha': host('Alpha', 3, 'cccc')},
    'groups': {'all': ['spark1', 'spark2', 'Alpha'], 'ray_head': ['spark1'], 'ray_workers': ['spark2', 'Alpha'],
               'serve_nodes': ['spark1', 'spark2']},
    # the role's preflight_host_cfg with the defaults
    'cfg': {'min_disk_gb': 50, 'weights_dir': '/opt/llmfleet', 'fabric_mtu': 9000, 'mtu_fatal': False,
            'ray_port': 6379, 'ray_unit_regex': '^(llmfleet-)?ray([-_@.][-_@.A-Za-z0-9]*)?[.]service$',
            'ray_temp_dirs': ['/var/lib/llmfleet/ray', '/tmp/ray'], 'stale_session_fatal': False,
            'clock_fatal': True, 'min_cuda': {}, 'rdma_fatal': False},
}


def scenario(changes):
    s = copy.deepcopy(BASE)
    for path, value in changes:
        keys = path.split('.')
        node = s
        for key in keys[:-1]:
            node = node[key]
        if value is DROP:
            node.pop(keys[-1], None)
        else:
            node[keys[-1]] = copy.deepcopy(RESULTS.get(value, value) if isinstance(value, str) else value)
    return s


def report(name, changes):
    s = scenario(changes)
    return preflight.host_report(name, s['hosts'], s['hv'], s['groups'], s['cfg'])


FILTERS = FilterModule().filters()

CASES = yaml.safe_load((Path(__file__).resolve().parents[2] / 'fixtures' / 'preflight_host' / 'cases.yml').read_text())


def _changes(case):
    return [(path, DROP if value is None else value) for path, value in case['changes'].items()]


# one line of a host's report: tests/unit/fixtures/preflight_host/cases.yml, line_cases
ROWS = [pytest.param(c['host'], _changes(c), c['check'], c['line'], id=c['id']) for c in CASES['line_cases']]


@pytest.mark.parametrize('name, changes, index, line', ROWS)
def test_host_check_line(name, changes, index, line):
    assert report(name, changes)[index] == line


# whole reports (the order of the checks, and the skips without python3): report_cases
REPORTS = [pytest.param(c['host'], _changes(c), c['lines'], id=c['id']) for c in CASES['report_cases']]


@pytest.mark.parametrize('name, changes, lines', REPORTS)
def test_host_report(name, changes, lines):
    assert report(name, changes) == lines


class ReadCounter(dict):
    """hostvars that records which hosts a check read."""

    def __init__(self, data):
        super().__init__(data)
        self.read = []

    def get(self, key, default=None):
        self.read.append(key)
        return super().get(key, default)


@pytest.mark.parametrize('name, changes', [(r.values[0], r.values[1]) for r in ROWS + REPORTS])
def test_the_fleet_view_gives_the_same_lines_reading_only_the_host_itself(name, changes):
    """preflight_fleet once per run, then each host's check reads only its own hostvars (every host's
    before: O(hosts²) hostvars builds per run); the lines are those of the full hostvars."""
    s = scenario(changes)
    hostvars = ReadCounter(s['hv'])
    fleet = FILTERS['preflight_fleet'](s['hosts'], s['hv'])
    lines = FILTERS['preflight_host_checks'](name, hostvars, s['hosts'], s['groups'], s['cfg'], fleet)
    assert lines == report(name, changes)
    # hosts outside the run (a --limit) are still read from hostvars
    assert set(hostvars.read) <= {name} | (set(s['hv']) - set(fleet))
    assert set(fleet) == set(s['hosts'])


# The probe's `ip -j -4 addr show` line (iproute2 6.1, a sim container's shape) stands in for the
# gathered network facts; a line that does not parse falls back to them.
IP_JSON = json.dumps([
    {'ifindex': 1, 'ifname': 'lo', 'flags': ['LOOPBACK', 'UP'], 'mtu': 65536,
     'addr_info': [{'family': 'inet', 'local': '127.0.0.1', 'prefixlen': 8}]},
    {'ifindex': 2, 'ifname': 'eth1', 'flags': ['BROADCAST', 'UP', 'LOWER_UP'], 'mtu': 1500,
     'addr_info': [{'family': 'inet', 'local': '10.0.0.11', 'prefixlen': 24},
                   {'family': 'inet', 'local': '192.168.100.11', 'prefixlen': 24, 'secondary': True}]},
    {'ifindex': 3, 'ifname': 'eth0', 'flags': ['BROADCAST'], 'mtu': 9000, 'addr_info': []}])


def test_network_from_ip_json():
    net = preflight.network_from_ip_json(IP_JSON)
    assert net['all_ipv4_addresses'] == ['127.0.0.1', '10.0.0.11', '192.168.100.11']
    assert net['eth1'] == {'device': 'eth1', 'mtu': 1500, 'active': True, 'ipv4': {'address': '10.0.0.11', 'prefix': '24'},
                           'ipv4_secondaries': [{'address': '192.168.100.11', 'prefix': '24'}]}
    assert net['eth0'] == {'device': 'eth0', 'mtu': 9000, 'active': False}
    assert preflight.fabric_nic(net, '192.168.100.11')['device'] == 'eth1'
    assert preflight.network_from_ip_json('') is None and preflight.network_from_ip_json('{not json') is None


@pytest.mark.parametrize('ip_addr, line', [
    (IP_JSON, 'WARN spark1: fabric NIC eth1 (192.168.100.11) has MTU 1500 < 9000'),
    ('garbled', 'ok   fabric NIC enp1s0f1np1 MTU 9000'),
])
def test_the_probe_line_is_the_network_when_it_parses(ip_addr, line):
    lines = report('spark1', [('hv.spark1.preflight_probe.ip_addr', ip_addr)])
    assert any(x.startswith(line) for x in lines), "\n".join(lines)
