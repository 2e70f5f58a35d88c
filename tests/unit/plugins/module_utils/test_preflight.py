"""Tests for plugins/module_utils/preflight.py: driver/CUDA parity and RDMA state, as data tables.

The gpu_info / rdma_info results are built from the real command output under
tests/unit/fixtures/{gpu,rdma} with the same parsers the modules use; a few rows change one value
of a real fixture (named ``derived``) where no capture of that state was at hand.
"""
from pathlib import Path

import pytest

from ansible_collections.llmfleet.cluster.plugins.module_utils import gpu, preflight, rdma

FIXTURES = Path(__file__).resolve().parents[2] / 'fixtures'


def fixture(kind, name):
    return (FIXTURES / kind / name).read_text()


# ----------------------------------------------------------------------------- GPU results

def gpu_result(query, smi, replace=()):
    """What gpu_info returns for a host whose nvidia-smi printed these fixtures."""
    query_text, smi_text = fixture('gpu', query), fixture('gpu', smi)
    for old, new in replace:  # derived states: one value of a real capture changed
        query_text, smi_text = query_text.replace(old, new), smi_text.replace(old, new)
    gpus, malformed = gpu.parse_query_gpu(query_text)
    assert not malformed
    return dict(gpu.summarize(gpus, smi_text), nvidia_smi_error=None, changed=False)


GB10 = gpu_result('gb10_query.csv', 'gb10_smi.txt')                  # 580.95.05 / 13.0
THOR = gpu_result('thor_query.csv', 'thor_smi.txt')                  # 580.00 / 13.0
H100 = gpu_result('h100_x8_query.csv', 'h100_smi.txt')               # 550.54.15 / 12.4
H200 = gpu_result('h200_query.csv', 'h200_smi.txt')                  # 580.159.04 / 13.0
# derived: a GB10 on an older driver (another 580 build; a 575 one reporting CUDA 12.9)
GB10_OTHER_DRIVER = gpu_result('gb10_query.csv', 'gb10_smi.txt', [('580.95.05', '580.82.09')])
GB10_CUDA_12 = gpu_result('gb10_query.csv', 'gb10_smi.txt',
                          [('580.95.05', '575.57.08'), ('CUDA Version: 13.0', 'CUDA Version: 12.9')])
NO_HEADER = gpu_result('gb10_query.csv', 'gb10_smi.txt', [('CUDA Version: 13.0', '')])
MIXED = dict(gpu.summarize(gpu.parse_query_gpu(fixture('gpu', 'mixed_rtx5090_gb10_query.csv'))[0], None),
             nvidia_smi_error=None)
# the module on a host without nvidia-smi (the sim's containers), or with "No devices were found"
NO_GPU = dict(gpu.summarize([], None), nvidia_smi_error=None)
assert gpu.is_no_devices(fixture('gpu', 'no_devices.txt'))
# nvidia-smi present, driver not loaded: the module returns its message
DRIVER_DOWN = dict(gpu.summarize([], None), nvidia_smi_error=fixture('gpu', 'driver_not_loaded.txt').strip())
SKIPPED = {'changed': False, 'skipped': True, 'skip_reason': 'Conditional result was False'}


def fleet(*rows):
    """rows: (host, cluster, declared arch, gpu_info result)."""
    return {h: preflight.gpu_host_entry(c, a, r) for h, c, a, r in rows}


LAB = fleet(('spark1', 'lab', 'sm_121', GB10), ('spark2', 'lab', 'sm_121', GB10),
            ('thor1', 'lab', 'sm_110', THOR), ('thor2', 'lab', 'sm_110', THOR))


@pytest.mark.parametrize('text, expected', [
    ('580.95.05', (580, 95, 5)),
    ('13.0', (13, 0)),
    (' 12.4 ', (12, 4)),
    ('580', (580,)),
    ('', None),
    (None, None),
    ('13.0-rc', None),
])
def test_parse_version(text, expected):
    assert preflight.parse_version(text) == expected


@pytest.mark.parametrize('result, status, arch, driver, cuda', [
    (GB10, 'gpus', 'sm_121', '580.95.05', '13.0'),
    (THOR, 'gpus', 'sm_110', '580.00', '13.0'),
    (H100, 'gpus', 'sm_90', '550.54.15', '12.4'),
    (H200, 'gpus', 'sm_90', '580.159.04', '13.0'),
    (MIXED, 'gpus', None, '580.95.05', None),
    (NO_GPU, 'none', None, None, None),
    (DRIVER_DOWN, 'error', None, None, None),
    (SKIPPED, 'unprobed', None, None, None),
    (None, 'unprobed', None, None, None),
    ({'failed': True, 'msg': 'MODULE FAILURE'}, 'unprobed', None, None, None),
])
def test_gpu_host_entry(result, status, arch, driver, cuda):
    entry = preflight.gpu_host_entry(None, 'sm_121', result)
    assert entry['cluster'] == 'default'
    assert (entry['status'], entry['arch'], entry['driver'], entry['cuda']) == (status, arch, driver, cuda)


# host, fleet, min_cuda, expected status, fragments of the line
PARITY = [
    # the lab of the notes: the two Sparks agree, the two Thors agree (each arch compared apart)
    ('spark1', LAB, None, 'ok', ["driver 580.95.05 / CUDA 13.0 on sm_121 (>= CUDA 13.0), same as spark2 "
                                 "(cluster 'lab')"]),
    ('thor2', LAB, None, 'ok', ["driver 580.00 / CUDA 13.0 on sm_110 (>= CUDA 13.0), same as thor1 (cluster 'lab')"]),
    ('gpu1', fleet(('gpu1', 'gpu', 'sm_90', H200)), None, 'ok',
     ["driver 580.159.04 / CUDA 13.0 on sm_90 (>= CUDA 12.0), the only sm_90 host of cluster 'gpu'"]),
    ('gpu1', fleet(('gpu1', 'gpu', 'sm_90', H100)), None, 'ok', ['CUDA 12.4 on sm_90 (>= CUDA 12.0)']),
    # two Hopper hosts of one cluster on different drivers: both fail, each naming the other
    ('hop1', fleet(('hop1', None, 'sm_90', H100), ('hop2', None, 'sm_90', H200)), None, 'fail',
     ["hop1: NVIDIA driver 550.54.15 / CUDA 12.4 differs from hop2's 580.159.04 / CUDA 13.0 (sm_90 hosts of "
      "cluster 'default' must run one driver and CUDA version",
      "install driver 580.159.04 (CUDA 13.0) on hop1, or upgrade every sm_90 host of the cluster together"]),
    ('hop2', fleet(('hop1', None, 'sm_90', H100), ('hop2', None, 'sm_90', H200)), None, 'fail',
     ["hop2: NVIDIA driver 580.159.04 / CUDA 13.0 differs from hop1's 550.54.15 / CUDA 12.4",
      'install driver 580.159.04 (CUDA 13.0) on hop1']),
    # the driver most hosts run is the target
    ('spark3', fleet(('spark1', 'lab', 'sm_121', GB10), ('spark2', 'lab', 'sm_121', GB10),
                     ('spark3', 'lab', 'sm_121', GB10_OTHER_DRIVER)), None, 'fail',
     ["spark3: NVIDIA driver 580.82.09 / CUDA 13.0 differs from spark1's 580.95.05 / CUDA 13.0, spark2's "
      "580.95.05 / CUDA 13.0", 'install driver 580.95.05 (CUDA 13.0) on spark3,']),
    ('spark1', fleet(('spark1', 'lab', 'sm_121', GB10), ('spark2', 'lab', 'sm_121', GB10),
                     ('spark3', 'lab', 'sm_121', GB10_OTHER_DRIVER)), None, 'fail',
     ["spark1: NVIDIA driver 580.95.05 / CUDA 13.0 differs from spark3's 580.82.09 / CUDA 13.0",
      'install driver 580.95.05 (CUDA 13.0) on spark3,']),
    # other clusters are not compared, nor hosts without a GPU or not probed
    ('spark1', fleet(('spark1', 'a', 'sm_121', GB10), ('spark2', 'b', 'sm_121', GB10_OTHER_DRIVER),
                     ('spark3', 'a', 'sm_121', NO_GPU), ('spark4', 'a', 'sm_121', SKIPPED)), None, 'ok',
     ["the only sm_121 host of cluster 'a'"]),
    # below the arch's minimum (the cu130 stack on GB10)
    ('spark1', fleet(('spark1', 'lab', 'sm_121', GB10_CUDA_12)), None, 'fail',
     ['spark1: CUDA 12.9 (driver 575.57.08) on sm_121 (DGX Spark GB10), which needs CUDA >= 13.0',
      'update DGX OS (NVIDIA driver 580 or later) until nvidia-smi reports CUDA Version 13.0 or later']),
    # minimum and parity at once: both named
    ('spark2', fleet(('spark1', 'lab', 'sm_121', GB10), ('spark2', 'lab', 'sm_121', GB10_CUDA_12)), None, 'fail',
     ['which needs CUDA >= 13.0', "spark2: NVIDIA driver 575.57.08 / CUDA 12.9 differs from spark1's 580.95.05 / "
      'CUDA 13.0']),
    # the minimum can be overridden or dropped per arch
    ('spark1', fleet(('spark1', 'lab', 'sm_121', GB10_CUDA_12)), {'sm_121': None}, 'ok',
     ['driver 575.57.08 / CUDA 12.9 on sm_121 (no minimum known)']),
    ('gpu1', fleet(('gpu1', 'gpu', 'sm_90', H100)), {'sm_90': '12.8'}, 'fail',
     ['gpu1: CUDA 12.4 (driver 550.54.15) on sm_90 (Hopper), which needs CUDA >= 12.8']),
    # a host that declares a GPU but whose nvidia-smi cannot reach the driver
    ('spark1', fleet(('spark1', 'lab', 'sm_121', DRIVER_DOWN)), None, 'fail',
     ["spark1: nvidia-smi failed (NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
      "(llmfleet_gpu_arch 'sm_121' is declared); fix the driver"]),
    # no version in the header: cannot compare, said as a warning
    ('spark1', fleet(('spark1', 'lab', 'sm_121', NO_HEADER), ('spark2', 'lab', 'sm_121', GB10)), None, 'warn',
     ['spark1: nvidia-smi did not report the CUDA version (driver 580.95.05, CUDA ?)']),
    # the sim: containers, no nvidia-smi
    ('spark1', fleet(('spark1', 'sim', 'sm_121', NO_GPU), ('spark2', 'sim', 'sm_121', NO_GPU)), None, 'skip',
     ['driver/CUDA parity: no GPU detected (no nvidia-smi or no device: a sim or CPU node; declared sm_121)']),
    ('spark1', fleet(('spark1', 'lab', 'sm_121', SKIPPED)), None, 'skip',
     ['driver/CUDA parity: GPUs not probed (gpu_info did not run)']),
    ('spark1', {}, None, 'skip', ['GPUs not probed']),
    ('ws1', fleet(('ws1', None, 'sm_121', MIXED)), None, 'skip', ['GPUs of different archs on this host']),
]


def status_of(chk):
    if chk['skip']:
        return 'skip'
    if chk['problem']:
        return chk['severity']
    return 'ok'


def text_of(chk):
    return chk['skip'] or chk['problem'] or chk['good']


@pytest.mark.parametrize('host, hosts, min_cuda, status, fragments', PARITY)
def test_gpu_parity_check(host, hosts, min_cuda, status, fragments):
    chk = preflight.gpu_parity_check(host, hosts, min_cuda)
    assert status_of(chk) == status, chk
    for fragment in fragments:
        assert fragment in text_of(chk), (fragment, chk)
    if status == 'fail':
        assert chk['problem'].startswith(host + ': ')


def test_gpu_fleet_from_hostvars():
    hostvars = {
        'spark1': {'llmfleet_cluster': 'lab', 'llmfleet_gpu_arch': 'sm_121', 'preflight_gpu': GB10},
        'spark2': {'llmfleet_gpu_arch': 'sm_121', 'preflight_gpu': GB10_OTHER_DRIVER},
        'thor1': {'llmfleet_cluster': 'lab'},
    }
    got = preflight.gpu_fleet(['spark1', 'spark2', 'thor1', 'gone'], hostvars)
    assert {h: (e['cluster'], e['status'], e['driver']) for h, e in got.items()} == {
        'spark1': ('lab', 'gpus', '580.95.05'),
        'spark2': ('default', 'gpus', '580.82.09'),
        'thor1': ('lab', 'unprobed', None),
        'gone': ('default', 'unprobed', None),
    }
    # spark2 is in another cluster (default): not compared with spark1
    assert status_of(preflight.gpu_parity_check('spark1', got)) == 'ok'


# ------------------------------------------------------------------------------ RDMA state

def spark_sysfs(states, link_layer='Ethernet'):
    """A Spark's /sys/class/infiniband: {ibdev: (netdev, 'ACTIVE' | 'DOWN')}."""
    files = {}
    for ibdev, (netdev, state) in states.items():
        base = '/sys/class/infiniband/%s/ports/1' % ibdev
        files[base + '/state'] = '4: ACTIVE' if state == 'ACTIVE' else '1: DOWN'
        files[base + '/link_layer'] = link_layer
        files[base + '/gid_attrs/ndevs/0'] = netdev
        files['/sys/class/net/%s/carrier' % netdev] = '1' if state == 'ACTIVE' else '0'
    return rdma.collect_sysfs(*rdma.fs_from_mapping(files))


SPARK_PORTS = {'rocep1s0f0': 'enp1s0f0np0', 'rocep1s0f1': 'enp1s0f1np1',
               'roceP2p1s0f0': 'enP2p1s0f0np0', 'roceP2p1s0f1': 'enP2p1s0f1np1'}


def rdma_result(name, link_layer='Ethernet', sysfs=True):
    """What rdma_info returns for an ibdev2netdev fixture; sysfs agrees with the tool (Up = ACTIVE)."""
    devices, _malformed = rdma.parse_ibdev2netdev(fixture('rdma', name))
    if sysfs:
        ports = {d['ibdev']: (d['netdev'], 'ACTIVE' if d['state'] == 'Up' else 'DOWN') for d in devices}
        devices = rdma.merge_sysfs(devices, spark_sysfs(ports, link_layer))
    devices = rdma.annotate_addresses(devices, rdma.parse_ip_addr_json(fixture('rdma', 'ip_addr_spark.json')))
    return dict(rdma.summarize(devices), source='ibdev2netdev' if devices else 'none', changed=False)


TWO_UP = rdma_result('spark_two_ports_up.txt')
ONE_CABLE = rdma_result('spark_one_cable.txt')  # one QSFP cable: rocep1s0f1 and roceP2p1s0f1 Up
NO_CABLE = rdma_result('spark_no_cable.txt')
THOR_EMPTY = rdma_result('empty.txt')
BOND = rdma_result('bond.txt')
IB_HDR = rdma_result('verbose_cx6_hdr.txt', link_layer='InfiniBand')
SYNTH_NO_SYSFS = rdma_result('verbose_spark_synth.txt', sysfs=False)
EXPECTED = {'expected': True, 'reason': 'DGX Spark GB10, ConnectX-7 RoCE serving on RoCE (fabric_transport auto)'}
IP = '192.168.100.10'

# result, expectation, fabric NIC, fatal, status, fragments
RDMA = [
    (TWO_UP, EXPECTED, 'enp1s0f1np1', False, 'ok',
     ['RDMA rocep1s0f1 port 1 on fabric NIC enp1s0f1np1 (llmfleet_fabric_ip 192.168.100.10): Up, ACTIVE, '
      'Ethernet (RoCE;']),
    (BOND, EXPECTED, 'bond0', True, 'ok', ['RDMA mlx5_bond_0 port 1 on fabric NIC bond0']),
    (ONE_CABLE, EXPECTED, 'enP2p1s0f1np1', False, 'ok', ['RDMA roceP2p1s0f1 port 1 on fabric NIC enP2p1s0f1np1']),
    # the fabric IP sits on the port without a cable (NVIDIA's one-cable playbook: the f0 ports are Down)
    (ONE_CABLE, EXPECTED, 'enp1s0f0np0', False, 'warn',
     ['spark1: RDMA device rocep1s0f0 port 1 on fabric NIC enp1s0f0np0 (llmfleet_fabric_ip 192.168.100.10) is '
      'Down (port state DOWN, link layer Ethernet), expected Up / ACTIVE / Ethernet',
      'NCCL would fall back to NET/Socket', 'Fix: check the QSFP cable and the peer port, `ip link set '
      'enp1s0f0np0 up`', '/sys/class/infiniband/rocep1s0f0/ports/1/state 4: ACTIVE']),
    (NO_CABLE, EXPECTED, 'enP2p1s0f1np1', True, 'fail', ['RDMA device roceP2p1s0f1 port 1', 'is Down']),
    # the fabric IP is on the management NIC, RDMA is Up elsewhere
    (ONE_CABLE, EXPECTED, 'enP7s7', True, 'fail',
     ['spark1: no RDMA device is bound to fabric NIC enP7s7 (llmfleet_fabric_ip 192.168.100.10) (RDMA ports '
      'here: roceP2p1s0f0 port 1 -> enP2p1s0f0np0 (Down), roceP2p1s0f1 port 1 -> enP2p1s0f1np1 (Up)',
      'NCCL would fall back to NET/Socket',
      'Fix: RDMA is Up on enP2p1s0f1np1, enp1s0f1np1: put llmfleet_fabric_ip on one of those ports']),
    (NO_CABLE, EXPECTED, 'enP7s7', False, 'warn', ['Fix: cable a ConnectX port, bring it up and give it '
                                                   'llmfleet_fabric_ip']),
    # no RDMA device at all (a Thor's empty ibdev2netdev, or a Spark without the driver)
    (THOR_EMPTY, EXPECTED, 'enP7s7', True, 'fail',
     ['spark1: no RDMA device at all (ibdev2netdev and /sys/class/infiniband show none; source none)',
      'modprobe mlx5_ib', 'NCCL would fall back to NET/Socket']),
    # an InfiniBand port is not RoCE
    (IB_HDR, EXPECTED, 'ib4', True, 'fail',
     ['is Up (port state ACTIVE, link layer InfiniBand)', 'mlxconfig -d mlx5_13 set LINK_TYPE_P1=2']),
    # ibdev2netdev -v alone (no sysfs): the link layer is not shown, so it is not claimed
    (SYNTH_NO_SYSFS, EXPECTED, 'enp1s0f1np1', False, 'warn',
     ['is Up (port state ACTIVE, link layer unknown)', '/sys/class/infiniband/rocep1s0f1/ports/1/{state,link_layer}']),
    # the module did not run or failed
    (SKIPPED, EXPECTED, 'enp1s0f1np1', False, 'warn', ['spark1: RDMA devices not read (rdma_info did not run)']),
    (None, EXPECTED, 'enp1s0f1np1', True, 'fail', ['rdma_info did not run']),
    ({'failed': True, 'msg': 'boom'}, EXPECTED, 'enp1s0f1np1', True, 'fail', ['(rdma_info failed: boom)']),
    # not expected: skipped with the reason, whatever the result
    (None, {'expected': False, 'reason': 'RDMA state: container (podman), no RDMA devices inside'}, 'eth1', True,
     'skip', ['RDMA state: container (podman), no RDMA devices inside']),
    (THOR_EMPTY, {}, 'eth1', True, 'skip', ['RDMA state: not expected on this host']),
    # expected but no NIC holds the fabric IP: the fabric NIC line fails already
    (TWO_UP, EXPECTED, '', True, 'skip', ['RDMA state: no interface holds llmfleet_fabric_ip']),
]


@pytest.mark.parametrize('result, expectation, nic, fatal, status, fragments', RDMA)
def test_rdma_check(result, expectation, nic, fatal, status, fragments):
    chk = preflight.rdma_check('spark1', result, expectation, fabric_ip=IP, fabric_nic=nic, fatal=fatal)
    assert status_of(chk) == status, chk
    for fragment in fragments:
        assert fragment in text_of(chk), (fragment, chk)


def inv(groups, hostvars):
    groups = dict(groups)
    groups.setdefault('all', sorted({h for hs in groups.values() for h in hs}))
    return groups, hostvars


# inventories/lab: 2 Sparks + 2 Thors serving together; example-2spark: two Sparks; the sim
LAB_INV = inv({'gb10': ['spark1', 'spark2'], 'thor': ['thor1', 'thor2'], 'ray_head': ['spark1'],
               'ray_workers': ['spark2', 'thor1', 'thor2']},
              {'spark1': {'llmfleet_gpu_arch': 'sm_121', 'llmfleet_cluster': 'lab'},
               'spark2': {'llmfleet_gpu_arch': 'sm_121', 'llmfleet_cluster': 'lab'},
               'thor1': {'llmfleet_gpu_arch': 'sm_110', 'llmfleet_cluster': 'lab'},
               'thor2': {'llmfleet_gpu_arch': 'sm_110', 'llmfleet_cluster': 'lab'}})
TWO_SPARK_INV = inv({'gb10': ['spark-a', 'spark-b'], 'ray_head': ['spark-a'], 'ray_workers': ['spark-b']},
                    {'spark-a': {'llmfleet_gpu_arch': 'sm_121'}, 'spark-b': {'llmfleet_gpu_arch': 'sm_121'}})
SIM_INV = inv({'gb10': ['spark1', 'spark2'], 'thor': ['thor1', 'thor2'], 'ray_head': ['spark1'],
               'ray_workers': ['spark2', 'thor1', 'thor2'], 'serve_nodes': ['spark1', 'spark2']},
              LAB_INV[1])
ONE_SERVER_INV = inv({'ray_head': ['spark1'], 'ray_workers': ['spark2'], 'serve_nodes': ['spark1']},
                     {'spark1': {'llmfleet_gpu_arch': 'sm_121'}, 'spark2': {'llmfleet_gpu_arch': 'sm_121'}})
HOPPER_INV = inv({'ray_head': ['gpu1']}, {'gpu1': {'llmfleet_gpu_arch': 'sm_90'}})

# host, inventory, declared, transport, container, expected, fragment of the reason
EXPECTATION = [
    ('spark-a', TWO_SPARK_INV, None, 'auto', 'none', True, 'DGX Spark GB10, ConnectX-7 RoCE serving on RoCE'),
    ('spark1', SIM_INV, None, 'auto', 'none', True, 'fabric_transport auto'),
    # the lab mixes Thors into the serving group: auto puts everyone on sockets
    ('spark1', LAB_INV, None, 'auto', 'none', False,
     "the serving group of cluster 'lab' includes thor1 (sm_110), thor2 (sm_110) (no RoCE)"),
    ('thor1', LAB_INV, None, 'auto', 'none', False, 'Jetson Thor: no RoCE NIC, NCCL over sockets'),
    ('gpu1', HOPPER_INV, None, 'auto', 'none', False, 'sm_90 is not a known RoCE platform'),
    ('spark2', ONE_SERVER_INV, None, 'auto', 'none', False, "not in the serving group of cluster 'default'"),
    # the sim's containers: skipped unless the inventory says otherwise
    ('spark1', SIM_INV, None, 'auto', 'podman', False,
     'container (podman), no RDMA devices inside; set preflight_rdma_expected: true'),
    ('spark1', SIM_INV, True, 'auto', 'podman', True, 'preflight_rdma_expected is true'),
    ('spark1', SIM_INV, 'true', 'auto', 'podman', True, 'preflight_rdma_expected is true'),  # -e gives strings
    ('spark-a', TWO_SPARK_INV, 'false', 'auto', 'none', False, 'preflight_rdma_expected is false'),
    ('spark-a', TWO_SPARK_INV, '', 'auto', 'none', True, 'fabric_transport auto'),  # empty = unset
    # fabric_transport decides first
    ('spark-a', TWO_SPARK_INV, None, 'socket', 'none', False, 'fabric_transport socket (NCCL_IB_DISABLE=1'),
    ('thor1', LAB_INV, None, 'roce', 'none', True, 'fabric_transport roce'),
    ('thor1', LAB_INV, None, 'roce', 'podman', False, 'container (podman)'),
]


@pytest.mark.parametrize('host, inventory, declared, transport, container, expected, fragment', EXPECTATION)
def test_rdma_expectation(host, inventory, declared, transport, container, expected, fragment):
    groups, hostvars = inventory
    got = preflight.rdma_expectation(host, groups, hostvars, declared=declared, transport=transport,
                                     container=container)
    assert got['expected'] is expected, got
    assert fragment in got['reason'], got


def test_rdma_expectation_reads_the_plans_serving_group():
    # the lab split into groups (llmfleet_serve_groups): the sparks' own group is all RoCE, so auto is RoCE
    # there, where the cluster's default group (its Ray nodes: sparks and Thors) would say sockets
    groups, hostvars = LAB_INV
    got = preflight.rdma_expectation('spark1', groups, hostvars, serving=['spark1', 'spark2'])
    assert got['expected'] is True and 'serving on RoCE' in got['reason'], got
    # a host in no group of the plan (a Ray node only) carries no NCCL traffic
    got = preflight.rdma_expectation('spark2', groups, hostvars, serving=['spark1'])
    assert got['expected'] is False and "not in the serving group of cluster 'lab'" in got['reason'], got
