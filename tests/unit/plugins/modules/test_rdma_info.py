"""Tests for the llmfleet.cluster.rdma_info module: run_command patched, sysfs built in tmp_path."""
import os
from pathlib import Path

import pytest


from ansible_collections.llmfleet.cluster.plugins.modules import rdma_info
from uthelper import run_module

FIXTURES = Path(__file__).resolve().parents[2] / 'fixtures' / 'rdma'


def fixture(name):
    return (FIXTURES / name).read_text()


def make_tree(root, files):
    """Create ``{relative path: text | None}`` under ``root`` (None makes a directory)."""
    for rel, text in files.items():
        path = root / rel
        if text is None:
            path.mkdir(parents=True, exist_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)


def run(monkeypatch, args, bins, commands):
    """Run the module; ``bins`` maps tool name -> path, ``commands`` maps basename -> (rc, out, err)."""
    out = run_module(monkeypatch, rdma_info, args, commands=lambda argv: commands[os.path.basename(argv[0])],
                     bins=bins)
    return out, out.calls, out.warnings


# A DGX Spark with one QSFP cable in port 1 (both halves of that port Up).
SPARK_SYSFS = {
    'class/infiniband/rocep1s0f0/ports/1/state': '1: DOWN\n',
    'class/infiniband/rocep1s0f0/ports/1/link_layer': 'Ethernet\n',
    'class/infiniband/rocep1s0f0/device/net/enp1s0f0np0': None,
    'class/infiniband/rocep1s0f1/ports/1/state': '4: ACTIVE\n',
    'class/infiniband/rocep1s0f1/ports/1/link_layer': 'Ethernet\n',
    'class/infiniband/rocep1s0f1/ports/1/gid_attrs/ndevs/0': 'enp1s0f1np1\n',
    'class/infiniband/rocep1s0f1/device/net/enp1s0f1np1': None,
    'class/infiniband/roceP2p1s0f0/ports/1/state': '1: DOWN\n',
    'class/infiniband/roceP2p1s0f0/ports/1/link_layer': 'Ethernet\n',
    'class/infiniband/roceP2p1s0f0/device/net/enP2p1s0f0np0': None,
    'class/infiniband/roceP2p1s0f1/ports/1/state': '4: ACTIVE\n',
    'class/infiniband/roceP2p1s0f1/ports/1/link_layer': 'Ethernet\n',
    'class/infiniband/roceP2p1s0f1/device/net/enP2p1s0f1np1': None,
    'class/net/enp1s0f0np0/carrier': '0\n',
    'class/net/enp1s0f0np0/mtu': '1500\n',
    'class/net/enp1s0f1np1/carrier': '1\n',
    'class/net/enp1s0f1np1/mtu': '9000\n',
    'class/net/enP2p1s0f0np0/carrier': '0\n',
    'class/net/enP2p1s0f0np0/mtu': '1500\n',
    'class/net/enP2p1s0f1np1/carrier': '1\n',
    'class/net/enP2p1s0f1np1/mtu': '9000\n',
}

# A Jetson Thor: no RDMA at all.
THOR_SYSFS = {
    'class/net/mgbe0_0/mtu': '1500\n',
    'class/net/mgbe0_0/carrier': '1\n',
}

# soft RoCE: ibdev2netdev (Mellanox only) prints nothing, sysfs has the device
RXE_SYSFS = {
    'class/infiniband/rxe0/ports/1/state': '4: ACTIVE\n',
    'class/infiniband/rxe0/ports/1/link_layer': 'Ethernet\n',
    'class/infiniband/rxe0/ports/1/gid_attrs/ndevs/0': 'eth0\n',
    'class/net/eth0/carrier': '1\n',
    'class/net/eth0/mtu': '1500\n',
}

TOOL = '/usr/sbin/ibdev2netdev'
IP = '/usr/sbin/ip'
BOTH = {'ibdev2netdev': TOOL, 'ip': IP}


@pytest.mark.parametrize('case', [
    dict(id='spark-ibdev2netdev', tree=SPARK_SYSFS, bins=BOTH,
         commands={'ibdev2netdev': (0, fixture('spark_one_cable.txt'), ''),
                   'ip': (0, fixture('ip_addr_spark.json'), '')},
         source='ibdev2netdev', up=['enP2p1s0f1np1', 'enp1s0f1np1'], hca='roceP2p1s0f1,rocep1s0f1',
         ran=[[TOOL], [IP, '-j', 'addr', 'show']], warnings=0),
    dict(id='spark-no-tool-sysfs', tree=SPARK_SYSFS, bins={'ip': IP},
         commands={'ip': (0, fixture('ip_addr_spark.json'), '')},
         source='sysfs', up=['enP2p1s0f1np1', 'enp1s0f1np1'], hca='roceP2p1s0f1,rocep1s0f1',
         ran=[[IP, '-j', 'addr', 'show']], warnings=0),
    dict(id='spark-tool-disabled', tree=SPARK_SYSFS, bins=BOTH, args={'use_ibdev2netdev': False},
         commands={'ip': (0, fixture('ip_addr_spark.json'), '')},
         source='sysfs', up=['enP2p1s0f1np1', 'enp1s0f1np1'], hca='roceP2p1s0f1,rocep1s0f1',
         ran=[[IP, '-j', 'addr', 'show']], warnings=0),
    dict(id='spark-no-cable', tree=SPARK_SYSFS, bins=BOTH,
         commands={'ibdev2netdev': (0, fixture('spark_no_cable.txt'), ''),
                   'ip': (0, fixture('ip_addr_spark.json'), '')},
         source='ibdev2netdev', up=[], hca='', ran=None, warnings=0),
    dict(id='thor-nothing', tree=THOR_SYSFS, bins={'ip': IP},
         commands={}, source='none', up=[], hca='', ran=[], warnings=0),
    dict(id='thor-tool-installed-no-driver', tree=THOR_SYSFS, bins=BOTH,
         commands={'ibdev2netdev': (255, '', '')}, source='none', up=[], hca='',
         ran=[[TOOL]], warnings=0),
    dict(id='thor-tool-prints-nothing', tree=THOR_SYSFS, bins=BOTH,
         commands={'ibdev2netdev': (0, fixture('empty.txt'), '')}, source='none', up=[], hca='',
         ran=[[TOOL]], warnings=0),
    dict(id='tool-fails-loudly', tree=SPARK_SYSFS, bins=BOTH,
         commands={'ibdev2netdev': (2, '', 'ls: cannot access /sys/class/net: Permission denied'),
                   'ip': (0, fixture('ip_addr_spark.json'), '')},
         source='sysfs', up=['enP2p1s0f1np1', 'enp1s0f1np1'], hca='roceP2p1s0f1,rocep1s0f1',
         ran=None, warnings=1),
    dict(id='soft-roce-only-in-sysfs', tree=RXE_SYSFS, bins={'ibdev2netdev': TOOL},
         commands={'ibdev2netdev': (0, '', '')},
         source='sysfs', up=['eth0'], hca='rxe0', ran=[[TOOL]], warnings=0),
    dict(id='malformed-lines', tree=THOR_SYSFS, bins={'ibdev2netdev': TOOL},
         commands={'ibdev2netdev': (0, fixture('malformed.txt'), '')},
         source='ibdev2netdev', up=['enp1s0f1np1', 'enP2p1s0f1np1'], hca='rocep1s0f1,roceP2p1s0f1',
         ran=[[TOOL]], warnings=3),
    dict(id='bond', tree=THOR_SYSFS, bins={'ibdev2netdev': TOOL},
         commands={'ibdev2netdev': (0, fixture('bond.txt'), '')},
         source='ibdev2netdev', up=['bond0'], hca='mlx5_bond_0', ran=[[TOOL]], warnings=0),
    dict(id='verbose-output', tree=SPARK_SYSFS, bins={'ibdev2netdev': TOOL},
         commands={'ibdev2netdev': (0, fixture('verbose_spark_synth.txt'), '')},
         source='ibdev2netdev', up=['enp1s0f1np1', 'enP2p1s0f1np1'], hca='rocep1s0f1,roceP2p1s0f1',
         ran=[[TOOL]], warnings=0),
], ids=lambda c: c['id'])
def test_rdma_info(monkeypatch, tmp_path, case):
    make_tree(tmp_path, case['tree'])
    args = dict({'sysfs_root': str(tmp_path)}, **case.get('args', {}))
    out, calls, warnings = run(monkeypatch, args, case['bins'], case['commands'])
    result = out.result
    assert not out.failed, result
    assert result['changed'] is False
    assert result['source'] == case['source']
    assert result['rdma_up_netdevs'] == case['up']
    assert result['nccl_ib_hca'] == case['hca']
    assert len(warnings) == case['warnings'], warnings
    if case['ran'] is not None:
        assert calls == case['ran']
    for dev in result['rdma_devices']:
        assert set(dev) >= {'ibdev', 'port', 'netdev', 'state', 'ipv4', 'mtu', 'link_layer'}
        assert dev['state'] in ('Up', 'Down')
        assert isinstance(dev['port'], int)


def test_spark_entries_are_enriched(monkeypatch, tmp_path):
    make_tree(tmp_path, SPARK_SYSFS)
    out, _calls, _warnings = run(monkeypatch, {'sysfs_root': str(tmp_path)}, BOTH,
                                 {'ibdev2netdev': (0, fixture('spark_one_cable.txt'), ''),
                                  'ip': (0, fixture('ip_addr_spark.json'), '')})
    devices = {d['netdev']: d for d in out.result['rdma_devices']}
    assert devices['enp1s0f1np1'] == {
        'ibdev': 'rocep1s0f1', 'port': 1, 'netdev': 'enp1s0f1np1', 'state': 'Up',
        'port_state': 'ACTIVE', 'link_layer': 'Ethernet', 'ipv4': '192.168.100.10', 'mtu': 9000,
    }
    assert devices['enp1s0f0np0']['state'] == 'Down'
    assert devices['enp1s0f0np0']['ipv4'] is None
    assert devices['enP2p1s0f1np1']['ipv4'] == '169.254.42.8'
    assert [d['ibdev'] for d in out.result['rdma_devices']] == [
        'roceP2p1s0f0', 'roceP2p1s0f1', 'rocep1s0f0', 'rocep1s0f1']   # the tool's order


@pytest.mark.parametrize('ip_bins, ip_result', [
    ({}, None),                                  # no ip binary
    ({'ip': IP}, (1, '', 'Option "-j" is unknown')),  # old iproute2
    ({'ip': IP}, (0, 'not json', '')),
])
def test_mtu_falls_back_to_sysfs(monkeypatch, tmp_path, ip_bins, ip_result):
    make_tree(tmp_path, SPARK_SYSFS)
    commands = {'ibdev2netdev': (0, fixture('spark_two_ports_up.txt'), '')}
    if ip_result:
        commands['ip'] = ip_result
    out, _calls, warnings = run(monkeypatch, {'sysfs_root': str(tmp_path)},
                                dict(ip_bins, ibdev2netdev=TOOL), commands)
    assert [(d['netdev'], d['mtu'], d['ipv4']) for d in out.result['rdma_devices']] == [
        ('enp1s0f1np1', 9000, None), ('enP2p1s0f1np1', 9000, None)]
    assert warnings == []


def test_mtu_unknown_everywhere(monkeypatch, tmp_path):
    make_tree(tmp_path, THOR_SYSFS)   # no class/net/bond0
    out, _calls, _warnings = run(monkeypatch, {'sysfs_root': str(tmp_path)}, {'ibdev2netdev': TOOL},
                                 {'ibdev2netdev': (0, fixture('bond.txt'), '')})
    (dev,) = out.result['rdma_devices']
    assert dev['mtu'] is None and dev['ipv4'] is None and dev['link_layer'] is None


def test_malformed_lines_are_returned_and_warned(monkeypatch, tmp_path):
    out, _calls, warnings = run(monkeypatch, {'sysfs_root': str(tmp_path)}, {'ibdev2netdev': TOOL},
                                {'ibdev2netdev': (0, fixture('malformed.txt'), '')})
    assert [u['line_number'] for u in out.result['unparsed_lines']] == [2, 3, 4]
    assert warnings[1] == 'ibdev2netdev line 3 not understood: mlx4_0 port 1 <===> ib0'


def test_explicit_path_used(monkeypatch, tmp_path):
    tool = tmp_path / 'bin' / 'ibdev2netdev'
    tool.parent.mkdir()
    tool.write_text('#!/bin/sh\n')
    tool.chmod(0o755)
    out, calls, warnings = run(
        monkeypatch, {'sysfs_root': str(tmp_path), 'ibdev2netdev_path': str(tool)}, {},
        {'ibdev2netdev': (0, fixture('spark_two_ports_up.txt'), '')})
    assert calls == [[str(tool)]]
    assert out.result['source'] == 'ibdev2netdev'
    assert warnings == []


@pytest.mark.parametrize('make_file', [False, True])
def test_explicit_path_missing_or_not_executable(monkeypatch, tmp_path, make_file):
    tool = tmp_path / 'ibdev2netdev'
    if make_file:
        tool.write_text('#!/bin/sh\n')
        tool.chmod(0o644)
    make_tree(tmp_path / 'sys', RXE_SYSFS)
    out, calls, warnings = run(
        monkeypatch, {'sysfs_root': str(tmp_path / 'sys'), 'ibdev2netdev_path': str(tool)}, BOTH,
        {'ip': (0, '[]', '')})
    assert out.result['source'] == 'sysfs'
    assert [TOOL] not in calls and [str(tool)] not in calls
    assert len(warnings) == 1 and str(tool) in warnings[0]


def test_check_mode_same_result(monkeypatch, tmp_path):
    make_tree(tmp_path, SPARK_SYSFS)
    commands = {'ibdev2netdev': (0, fixture('spark_one_cable.txt'), ''),
                'ip': (0, fixture('ip_addr_spark.json'), '')}
    normal, _calls, _warnings = run(monkeypatch, {'sysfs_root': str(tmp_path)}, BOTH, commands)
    checked, _calls, _warnings = run(monkeypatch, {'sysfs_root': str(tmp_path), '_ansible_check_mode': True},
                                     BOTH, commands)
    assert checked.result == normal.result
    assert checked.result['changed'] is False


def test_argument_spec_matches_documentation():
    import yaml
    doc = yaml.safe_load(rdma_info.DOCUMENTATION)
    assert set(doc['options']) == {'ibdev2netdev_path', 'sysfs_root', 'use_ibdev2netdev'}
    assert doc['options']['sysfs_root']['default'] == '/sys'
    assert doc['options']['use_ibdev2netdev']['default'] is True
    assert 'llmfleet.cluster.attributes.read_only' in doc['extends_documentation_fragment']  # check_mode: full
    returned = yaml.safe_load(rdma_info.RETURN)
    assert set(returned) == {'rdma_devices', 'rdma_up_netdevs', 'nccl_ib_hca', 'source', 'unparsed_lines'}
