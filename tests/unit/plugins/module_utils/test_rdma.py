"""Tests for plugins/module_utils/rdma.py: data tables of real ibdev2netdev/sysfs/ip output."""
import json
from pathlib import Path

import pytest

from ansible_collections.llmfleet.cluster.plugins.module_utils import rdma

FIXTURES = Path(__file__).resolve().parents[2] / 'fixtures' / 'rdma'


def fixture(name):
    return (FIXTURES / name).read_text()


def brief(devices):
    """(ibdev, port, netdev, state, port_state) per entry: the part the tables pin down."""
    return [(d['ibdev'], d['port'], d['netdev'], d['state'], d['port_state']) for d in devices]


# ----------------------------------------------------------------- single lines

@pytest.mark.parametrize('line, expected', [
    # NVIDIA DGX Spark playbook lines, verbatim
    ('rocep1s0f1 port 1 ==> enp1s0f1np1 (Up)', ('rocep1s0f1', 1, 'enp1s0f1np1', 'Up', None)),
    ('roceP2p1s0f1 port 1 ==> enP2p1s0f1np1 (Up)', ('roceP2p1s0f1', 1, 'enP2p1s0f1np1', 'Up', None)),
    ('rocep1s0f0 port 1 ==> enp1s0f0np0 (Down)', ('rocep1s0f0', 1, 'enp1s0f0np0', 'Down', None)),
    # LAG / bond device
    ('mlx5_bond_0 port 1 ==> bond0 (Up)', ('mlx5_bond_0', 1, 'bond0', 'Up', None)),
    # second port of a dual-port HCA, trailing whitespace, CRLF
    ('mlx5_0 port 2 ==> ib1 (Up)  \r', ('mlx5_0', 2, 'ib1', 'Up', None)),
    # link state unknown: "NA" (no carrier file) or empty (no dev_id file) -> not Up
    ('mlx5_2 port 1 ==> enp3s0f0 (NA)', ('mlx5_2', 1, 'enp3s0f0', 'Down', None)),
    ('mlx5_2 port 1 ==> enp3s0f0 ()', ('mlx5_2', 1, 'enp3s0f0', 'Down', None)),
    # -v: port ACTIVE and link Up
    ('0000:02:00.0 mlx5_0 (MT4115 - MT1523X04353) CX456A - ConnectX-4 QSFP fw 12.23.1020 '
     'port 1 (ACTIVE) ==> enp2s0f0 (Up)', ('mlx5_0', 1, 'enp2s0f0', 'Up', 'ACTIVE')),
    # -v: padded port state, empty description
    ('0000:02:00.5 mlx5_2 (MT4116 - NA)  fw 12.23.1020 port 1 (DOWN  ) ==> enp2s0f2 (Down)',
     ('mlx5_2', 1, 'enp2s0f2', 'Down', 'DOWN')),
    # -v: port ACTIVE but the netdev link Down (SR-IOV VF) -> Down
    ('0000:02:00.1 mlx5_1 (MT4115 - MT1523X04353) CX456A - ConnectX-4 QSFP fw 12.23.1020 '
     'port 1 (ACTIVE) ==> ib1 (Down)', ('mlx5_1', 1, 'ib1', 'Down', 'ACTIVE')),
    # -v: link Up but the RDMA port still INIT -> not usable for NCCL yet
    ('0000:01:00.1 rocep1s0f1 (MT4129 - NA)  fw 28.45.4028 port 1 (INIT  ) ==> enp1s0f1np1 (Up)',
     ('rocep1s0f1', 1, 'enp1s0f1np1', 'Down', 'INIT')),
    # -v: description with parentheses and commas, and a trailing annotation
    ('0000:b8:00.1 mlx5_13 (MT4123 - MCX653106A-ECAT) ConnectX-6 VPI adapter card, 100Gb/s '
     '(HDR100, EDR IB and 100GbE), dual-port QSFP56 fw 20.26.4012 port 1 (ACTIVE) ==> ib4 (Up) (o2ib)',
     ('mlx5_13', 1, 'ib4', 'Up', 'ACTIVE')),
    # -v: no PCI address (soft RoCE): the line starts with a space
    (' rxe0 (NA - NA         )  fw NA port 1 (ACTIVE) ==> eth0 (Up)', ('rxe0', 1, 'eth0', 'Up', 'ACTIVE')),
    # -v: port state NA -> unknown, link decides
    ('0000:01:00.0 mlx5_0 (MT4129 - NA)  fw 28.45.4028 port 1 (NA) ==> enp1s0f0np0 (Up)',
     ('mlx5_0', 1, 'enp1s0f0np0', 'Up', None)),
])
def test_parse_line(line, expected):
    entry = rdma.parse_ibdev2netdev_line(line)
    assert entry is not None
    assert brief([entry])[0] == expected
    assert isinstance(entry['port'], int)
    # every key is always there, unknowns are None
    assert set(entry) == {'ibdev', 'port', 'netdev', 'state', 'port_state', 'link_layer', 'ipv4', 'mtu'}


@pytest.mark.parametrize('line', [
    '',
    'garbage',
    'mlx4_0 port 1 <===> ib0',                      # old-style output: no link state
    'rocep1s0f0 port X ==> enp1s0f0np0 (Down)',     # non-numeric port
    'rocep1s0f0 port 1 ==> (Down)',                 # no netdev
    'rocep1s0f0 port 1 => enp1s0f0np0 (Down)',      # wrong arrow
    'rocep1s0f0 port 1 ==> enp1s0f0np0',            # no state
    'ibdev2netdev: command not found',
])
def test_parse_line_rejects(line):
    assert rdma.parse_ibdev2netdev_line(line) is None


# ------------------------------------------------------------------ whole files

@pytest.mark.parametrize('name, expected, up_netdevs, hca', [
    ('spark_two_ports_up.txt',
     [('rocep1s0f1', 1, 'enp1s0f1np1', 'Up', None),
      ('roceP2p1s0f1', 1, 'enP2p1s0f1np1', 'Up', None)],
     ['enp1s0f1np1', 'enP2p1s0f1np1'], 'rocep1s0f1,roceP2p1s0f1'),
    ('spark_one_cable.txt',
     [('roceP2p1s0f0', 1, 'enP2p1s0f0np0', 'Down', None),
      ('roceP2p1s0f1', 1, 'enP2p1s0f1np1', 'Up', None),
      ('rocep1s0f0', 1, 'enp1s0f0np0', 'Down', None),
      ('rocep1s0f1', 1, 'enp1s0f1np1', 'Up', None)],
     ['enP2p1s0f1np1', 'enp1s0f1np1'], 'roceP2p1s0f1,rocep1s0f1'),
    ('spark_no_cable.txt',
     [('rocep1s0f0', 1, 'enp1s0f0np0', 'Down', None),
      ('rocep1s0f1', 1, 'enp1s0f1np1', 'Down', None),
      ('roceP2p1s0f0', 1, 'enP2p1s0f0np0', 'Down', None),
      ('roceP2p1s0f1', 1, 'enP2p1s0f1np1', 'Down', None)],
     [], ''),
    ('bond.txt', [('mlx5_bond_0', 1, 'bond0', 'Up', None)], ['bond0'], 'mlx5_bond_0'),
    ('verbose_cx4_sriov.txt',
     [('mlx5_0', 1, 'enp2s0f0', 'Up', 'ACTIVE'),
      ('mlx5_1', 1, 'enp2s0f1', 'Up', 'ACTIVE'),
      ('mlx5_2', 1, 'enp2s0f2', 'Down', 'DOWN'),
      ('mlx5_3', 1, 'enp2s0f3', 'Down', 'DOWN')],
     ['enp2s0f0', 'enp2s0f1'], 'mlx5_0,mlx5_1'),
    ('verbose_cx6_hdr.txt',
     [('mlx5_13', 1, 'ib4', 'Up', 'ACTIVE'), ('mlx5_15', 1, 'ib5', 'Up', 'ACTIVE')],
     ['ib4', 'ib5'], 'mlx5_13,mlx5_15'),
    ('verbose_spark_synth.txt',
     [('rocep1s0f0', 1, 'enp1s0f0np0', 'Down', 'DOWN'),
      ('rocep1s0f1', 1, 'enp1s0f1np1', 'Up', 'ACTIVE'),
      ('roceP2p1s0f0', 1, 'enP2p1s0f0np0', 'Down', 'DOWN'),
      ('roceP2p1s0f1', 1, 'enP2p1s0f1np1', 'Up', 'ACTIVE')],
     ['enp1s0f1np1', 'enP2p1s0f1np1'], 'rocep1s0f1,roceP2p1s0f1'),
    ('empty.txt', [], [], ''),
])
def test_parse_fixture(name, expected, up_netdevs, hca):
    devices, malformed = rdma.parse_ibdev2netdev(fixture(name))
    assert malformed == []
    assert brief(devices) == expected
    assert rdma.rdma_up_netdevs(devices) == up_netdevs
    assert rdma.nccl_ib_hca(devices) == hca


def test_malformed_lines_are_reported_not_fatal():
    devices, malformed = rdma.parse_ibdev2netdev(fixture('malformed.txt'))
    assert brief(devices) == [
        ('rocep1s0f1', 1, 'enp1s0f1np1', 'Up', None),
        ('roceP2p1s0f1', 1, 'enP2p1s0f1np1', 'Up', None),
    ]
    # line numbers are 1-based in the original text; the blank line 5 is skipped silently
    assert malformed == [
        {'line_number': 2, 'line': 'ibdev2netdev: command output truncated'},
        {'line_number': 3, 'line': 'mlx4_0 port 1 <===> ib0'},
        {'line_number': 4, 'line': 'rocep1s0f0 port X ==> enp1s0f0np0 (Down)'},
    ]


@pytest.mark.parametrize('text', ['', None, '\n\n   \n'])
def test_empty_output(text):
    assert rdma.parse_ibdev2netdev(text) == ([], [])
    assert rdma.summarize([]) == {'rdma_devices': [], 'rdma_up_netdevs': [], 'nccl_ib_hca': ''}


def test_summaries_deduplicate_and_keep_order():
    text = '\n'.join([
        'mlx5_1 port 1 ==> enp2 (Up)',
        'mlx5_0 port 1 ==> enp1 (Up)',
        'mlx5_0 port 2 ==> enp1 (Up)',      # same ibdev and netdev again
        'mlx5_9 port 1 ==> enp9 (Down)',
        'mlx5_1 port 2 ==> enp3 (Up)',
    ])
    devices, _malformed = rdma.parse_ibdev2netdev(text)
    assert rdma.rdma_up_netdevs(devices) == ['enp2', 'enp1', 'enp3']
    assert rdma.nccl_ib_hca(devices) == 'mlx5_1,mlx5_0'


# ----------------------------------------------------------------------- sysfs

@pytest.mark.parametrize('text, expected', [
    ('4: ACTIVE\n', 'ACTIVE'),
    ('1: DOWN\n', 'DOWN'),
    ('2: INIT', 'INIT'),
    ('4', 'ACTIVE'),
    ('ACTIVE', 'ACTIVE'),
    ('', None),
    (None, None),
    ('4: ', None),
    ('9', None),
])
def test_parse_port_state(text, expected):
    assert rdma.parse_port_state(text) == expected


@pytest.mark.parametrize('text, expected', [
    ('Ethernet\n', 'Ethernet'),
    ('InfiniBand\n', 'InfiniBand'),
    ('infiniband', 'InfiniBand'),
    ('Unknown', None),
    (None, None),
])
def test_parse_link_layer(text, expected):
    assert rdma.parse_link_layer(text) == expected


@pytest.mark.parametrize('text, expected', [('1\n', True), ('0\n', False), ('', None), (None, None), ('x', None)])
def test_parse_carrier(text, expected):
    assert rdma.parse_carrier(text) is expected


SPARK_SYSFS = {
    # rocep1s0f0: cable out
    '/sys/class/infiniband/rocep1s0f0/ports/1/state': '1: DOWN\n',
    '/sys/class/infiniband/rocep1s0f0/ports/1/link_layer': 'Ethernet\n',
    '/sys/class/infiniband/rocep1s0f0/device/net/enp1s0f0np0': None,
    '/sys/class/net/enp1s0f0np0/carrier': '0\n',
    '/sys/class/net/enp1s0f0np0/mtu': '1500\n',
    # rocep1s0f1: Up, netdev from gid_attrs
    '/sys/class/infiniband/rocep1s0f1/ports/1/state': '4: ACTIVE\n',
    '/sys/class/infiniband/rocep1s0f1/ports/1/link_layer': 'Ethernet\n',
    '/sys/class/infiniband/rocep1s0f1/ports/1/gid_attrs/ndevs/0': 'enp1s0f1np1\n',
    '/sys/class/infiniband/rocep1s0f1/device/net/enp1s0f1np1': None,
    '/sys/class/net/enp1s0f1np1/carrier': '1\n',
    '/sys/class/net/enp1s0f1np1/mtu': '9000\n',
    # roceP2p1s0f1: Up, netdev only via device/net
    '/sys/class/infiniband/roceP2p1s0f1/ports/1/state': '4: ACTIVE\n',
    '/sys/class/infiniband/roceP2p1s0f1/ports/1/link_layer': 'Ethernet\n',
    '/sys/class/infiniband/roceP2p1s0f1/device/net/enP2p1s0f1np1': None,
    '/sys/class/net/enP2p1s0f1np1/carrier': '1\n',
    '/sys/class/net/enP2p1s0f1np1/mtu': '9000\n',
}


def test_collect_sysfs_spark():
    listdir, read_text = rdma.fs_from_mapping(SPARK_SYSFS)
    devices = rdma.collect_sysfs(listdir, read_text)
    # sorted by name: 'P' sorts before 'p'
    assert brief(devices) == [
        ('roceP2p1s0f1', 1, 'enP2p1s0f1np1', 'Up', 'ACTIVE'),
        ('rocep1s0f0', 1, 'enp1s0f0np0', 'Down', 'DOWN'),
        ('rocep1s0f1', 1, 'enp1s0f1np1', 'Up', 'ACTIVE'),
    ]
    assert [d['link_layer'] for d in devices] == ['Ethernet'] * 3
    assert [d['mtu'] for d in devices] == [9000, 1500, 9000]
    assert rdma.nccl_ib_hca(devices) == 'roceP2p1s0f1,rocep1s0f1'


@pytest.mark.parametrize('files, expected', [
    # no /sys/class/infiniband at all (Jetson Thor)
    ({'/sys/class/net/mgbe0_0/mtu': '1500\n'}, []),
    # empty /sys/class/infiniband
    ({'/sys/class/infiniband': None}, []),
    # bond: gid_attrs names bond0 while device/net lists the two slaves
    ({'/sys/class/infiniband/mlx5_bond_0/ports/1/state': '4: ACTIVE',
      '/sys/class/infiniband/mlx5_bond_0/ports/1/link_layer': 'Ethernet',
      '/sys/class/infiniband/mlx5_bond_0/ports/1/gid_attrs/ndevs/0': 'bond0',
      '/sys/class/infiniband/mlx5_bond_0/device/net/enp1s0f0np0': None,
      '/sys/class/infiniband/mlx5_bond_0/device/net/enp1s0f1np1': None,
      '/sys/class/net/bond0/carrier': '1'},
     [('mlx5_bond_0', 1, 'bond0', 'Up', 'ACTIVE')]),
    # port ACTIVE but carrier 0 -> Down; port ACTIVE, carrier unreadable -> Up
    ({'/sys/class/infiniband/mlx5_0/ports/1/state': '4: ACTIVE',
      '/sys/class/infiniband/mlx5_0/device/net/eth0': None,
      '/sys/class/net/eth0/carrier': '0',
      '/sys/class/infiniband/mlx5_1/ports/1/state': '4: ACTIVE',
      '/sys/class/infiniband/mlx5_1/device/net/eth1': None},
     [('mlx5_0', 1, 'eth0', 'Down', 'ACTIVE'), ('mlx5_1', 1, 'eth1', 'Up', 'ACTIVE')]),
    # InfiniBand without IPoIB: no netdev; two ports, numeric order (2 before 10)
    ({'/sys/class/infiniband/mlx5_4/ports/2/state': '4: ACTIVE',
      '/sys/class/infiniband/mlx5_4/ports/2/link_layer': 'InfiniBand',
      '/sys/class/infiniband/mlx5_4/ports/10/state': '1: DOWN',
      '/sys/class/infiniband/mlx5_4/ports/10/link_layer': 'InfiniBand'},
     [('mlx5_4', 2, None, 'Up', 'ACTIVE'), ('mlx5_4', 10, None, 'Down', 'DOWN')]),
    # multi-port function: the netdev whose dev_port matches the port
    ({'/sys/class/infiniband/mlx4_0/ports/1/state': '4: ACTIVE',
      '/sys/class/infiniband/mlx4_0/ports/2/state': '1: DOWN',
      '/sys/class/infiniband/mlx4_0/device/net/ib0': None,
      '/sys/class/infiniband/mlx4_0/device/net/ib1': None,
      '/sys/class/net/ib0/dev_port': '0',
      '/sys/class/net/ib1/dev_port': '1'},
     [('mlx4_0', 1, 'ib0', 'Up', 'ACTIVE'), ('mlx4_0', 2, 'ib1', 'Down', 'DOWN')]),
    # unreadable/garbage state -> Down, not a crash
    ({'/sys/class/infiniband/mlx5_0/ports/1/state': '\x00\x01',
      '/sys/class/infiniband/mlx5_0/ports/junk': None},
     [('mlx5_0', 1, None, 'Down', None)]),
])
def test_collect_sysfs_cases(files, expected):
    listdir, read_text = rdma.fs_from_mapping(files)
    assert brief(rdma.collect_sysfs(listdir, read_text)) == expected


def test_collect_sysfs_other_root():
    files = {'/host/sys' + k[len('/sys'):]: v for k, v in SPARK_SYSFS.items()}
    listdir, read_text = rdma.fs_from_mapping(files)
    assert rdma.collect_sysfs(listdir, read_text, root='/sys') == []
    assert len(rdma.collect_sysfs(listdir, read_text, root='/host/sys')) == 3


def test_merge_sysfs_fills_unknowns_only():
    devices, _malformed = rdma.parse_ibdev2netdev(fixture('spark_one_cable.txt'))
    listdir, read_text = rdma.fs_from_mapping(SPARK_SYSFS)
    merged = rdma.merge_sysfs(devices, rdma.collect_sysfs(listdir, read_text))
    by_dev = {d['ibdev']: d for d in merged}
    assert by_dev['rocep1s0f1']['link_layer'] == 'Ethernet'
    assert by_dev['rocep1s0f1']['port_state'] == 'ACTIVE'
    assert by_dev['rocep1s0f1']['mtu'] == 9000
    # not in the fake sysfs: left unknown
    assert by_dev['roceP2p1s0f0']['link_layer'] is None
    # the tool's state wins and the inputs are not modified
    assert [d['state'] for d in merged] == [d['state'] for d in devices]
    assert devices[3]['link_layer'] is None


# -------------------------------------------------------------------- ip -j addr

def test_parse_ip_addr_json_spark():
    addrs = rdma.parse_ip_addr_json(fixture('ip_addr_spark.json'))
    # a routable global address wins over the 169.254 one listed first
    assert addrs['enp1s0f1np1'] == {'ipv4': '192.168.100.10', 'mtu': 9000}
    # only a link-local IPv4: still reported
    assert addrs['enP2p1s0f1np1'] == {'ipv4': '169.254.42.8', 'mtu': 9000}
    assert addrs['enp1s0f0np0'] == {'ipv4': None, 'mtu': 1500}
    assert addrs['lo'] == {'ipv4': None, 'mtu': 65536}  # host scope is skipped


@pytest.mark.parametrize('text', ['', None, 'not json', '{"ifname": "x"}', '[1, "a", {"mtu": 1}]'])
def test_parse_ip_addr_json_bad_input(text):
    assert rdma.parse_ip_addr_json(text) == {}


def test_parse_ip_addr_json_odd_entries():
    text = json.dumps([
        {'ifname': 'eth0', 'mtu': 'big', 'addr_info': [{'family': 'inet', 'local': 'nonsense'}]},
        {'ifname': 'eth1', 'addr_info': [{'family': 'inet6', 'local': 'fe80::1', 'scope': 'link'}]},
        {'ifname': 'eth2', 'mtu': 1500, 'addr_info': [
            {'family': 'inet', 'local': '10.1.0.5', 'scope': 'link'},
            {'family': 'inet', 'local': '10.2.0.5', 'scope': 'global'}]},
    ])
    assert rdma.parse_ip_addr_json(text) == {
        'eth0': {'ipv4': None, 'mtu': None},
        'eth1': {'ipv4': None, 'mtu': None},
        'eth2': {'ipv4': '10.2.0.5', 'mtu': 1500},
    }


def test_annotate_addresses():
    devices, _malformed = rdma.parse_ibdev2netdev(fixture('spark_one_cable.txt'))
    out = rdma.annotate_addresses(devices, rdma.parse_ip_addr_json(fixture('ip_addr_spark.json')))
    got = {d['netdev']: (d['ipv4'], d['mtu']) for d in out}
    assert got == {
        'enP2p1s0f0np0': (None, 1500),
        'enP2p1s0f1np1': ('169.254.42.8', 9000),
        'enp1s0f0np0': (None, 1500),
        'enp1s0f1np1': ('192.168.100.10', 9000),
    }
    assert devices[0]['mtu'] is None  # copies, not in place
