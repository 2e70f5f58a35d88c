"""Tests for module_utils/preflight.py host_checks: the host check table, one row per outcome.

Every expected line was rendered from the Jinja check table this function replaced (the role's
vars/main.yml, by ansible-core's templating), so the lines stay byte-identical: order, severity and
wording are what tests/integration/preflight and molecule/cluster/tests/test_validate.py assert on.
A base lab (spark1 the ray_head, spark2 a worker, Alpha a third host of the run; one healthy GB10
each) is changed by each row: ``path`` = value, DROP deletes.
"""
import copy
import json
from pathlib import Path

import pytest

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

# id, host, changes, index of the check, the line (as the Jinja table rendered it)
ROWS = [
    pytest.param(
        'spark1', [], 0,
        'ok   python3 at /usr/bin/python3',
        id='python ok'),
    pytest.param(
        'spark1', [('hv.spark1.preflight_probe.python', '')], 0,
        'FAIL spark1: no python3 in PATH; install it (apt-get install -y python3): every Ansible '
        'module, and so the fabric and GPU checks, need it',
        id='python empty'),
    pytest.param(
        'spark1', [('hv.spark1.preflight_probe.python', DROP)], 0,
        'FAIL spark1: no python3 in PATH; install it (apt-get install -y python3): every Ansible '
        'module, and so the fabric and GPU checks, need it',
        id='python not probed'),
    pytest.param(
        'spark1', [], 1,
        'ok   disk: 117.7 GB free at /opt for weights in /opt/llmfleet (>= 50 GB)',
        id='disk ok'),
    pytest.param(
        'spark1', [('hv.spark1.preflight_probe.disk_avail_kb', '52428800')], 1,
        'ok   disk: 50.0 GB free at /opt for weights in /opt/llmfleet (>= 50 GB)',
        id='disk exactly the minimum'),
    pytest.param(
        'spark1', [('hv.spark1.preflight_probe.disk_avail_kb', '52428799')], 1,
        'ok   disk: 50.0 GB free at /opt for weights in /opt/llmfleet (>= 50 GB)',
        id='disk 1 kB short of the minimum rounds to it'),
    pytest.param(
        'spark1', [('hv.spark1.preflight_probe.disk_avail_kb', '1048576')], 1,
        'FAIL spark1: only 1.0 GB free at /opt (filesystem of /opt/llmfleet), '
        'preflight_min_disk_gb is 50; free space there or put the weights on a larger disk '
        '(preflight_weights_dir)',
        id='disk low'),
    pytest.param(
        'spark1', [
            ('hv.spark1.preflight_probe.disk_avail_kb', DROP),
            ('hv.spark1.preflight_probe.disk_path', DROP),
        ], 1,
        'FAIL spark1: only 0.0 GB free at ? (filesystem of /opt/llmfleet), preflight_min_disk_gb '
        'is 50; free space there or put the weights on a larger disk (preflight_weights_dir)',
        id='disk unread'),
    pytest.param(
        'spark1', [('cfg.min_disk_gb', '200.5')], 1,
        'FAIL spark1: only 117.7 GB free at /opt (filesystem of /opt/llmfleet), '
        'preflight_min_disk_gb is 200.5; free space there or put the weights on a larger disk '
        '(preflight_weights_dir)',
        id='disk minimum as a string'),
    pytest.param(
        'spark1', [], 2,
        'ok   /etc/machine-id aaaa unique among the 3 host(s) of this run',
        id='machine-id unique'),
    pytest.param(
        'spark1', [('hv.spark1.preflight_probe.machine_id', '')], 2,
        'FAIL spark1: /etc/machine-id is empty or missing; run `systemd-machine-id-setup` (then '
        'reboot)',
        id='machine-id empty'),
    pytest.param(
        'spark1', [('hv.spark1.preflight_probe.machine_id', DROP)], 2,
        'FAIL spark1: /etc/machine-id is empty or missing; run `systemd-machine-id-setup` (then '
        'reboot)',
        id='machine-id missing'),
    pytest.param(
        'spark2', [('hv.spark2.preflight_probe.machine_id', 'aaaa')], 2,
        "FAIL spark2: /etc/machine-id aaaa duplicates spark1's (cloned image: systemd, DHCP and "
        'Ray node ids collide); on all but one of spark1, spark2 run `rm /etc/machine-id && '
        'systemd-machine-id-setup` and reboot',
        id='machine-id duplicate'),
    pytest.param(
        'spark2', [
            ('hv.spark2.preflight_probe.machine_id', 'aaaa'),
            ('hv.Alpha.preflight_probe.machine_id', 'aaaa'),
        ], 2,
        "FAIL spark2: /etc/machine-id aaaa duplicates spark1's, Alpha's (cloned image: systemd, "
        'DHCP and Ray node ids collide); on all but one of Alpha, spark1, spark2 run `rm '
        '/etc/machine-id && systemd-machine-id-setup` and reboot',
        id='machine-id three twins sorted case-insensitively'),
    pytest.param(
        'spark1', [
            ('hv.Alpha.preflight_probe', DROP),
            ('hv.Alpha.preflight_probe_unused', 'aaaa'),
        ], 2,
        'ok   /etc/machine-id aaaa unique among the 3 host(s) of this run',
        id='machine-id of an unreachable host not compared'),
    pytest.param(
        'spark2', [], 3,
        'skip Ray port 6379: not a ray_head',
        id='ray port worker'),
    pytest.param(
        'spark1', [], 3,
        'ok   Ray port 6379 free',
        id='ray port free'),
    pytest.param(
        'spark1', [
            ('hv.spark1.preflight_probe.port_listening', 'yes'),
            ('hv.spark1.preflight_probe.port_pid', '4242'),
            ('hv.spark1.preflight_probe.port_comm', 'gcs_server'),
            ('hv.spark1.preflight_probe.port_unit', 'llmfleet-ray-head.service'),
        ], 3,
        'ok   Ray port 6379 held by our llmfleet-ray-head.service',
        id='ray port ours'),
    pytest.param(
        'spark1', [
            ('hv.spark1.preflight_probe.port_listening', 'yes'),
            ('hv.spark1.preflight_probe.port_pid', '1234'),
            ('hv.spark1.preflight_probe.port_comm', 'redis-server'),
            ('hv.spark1.preflight_probe.port_unit', 'redis.service'),
        ], 3,
        'FAIL spark1: port 6379 (Ray GCS) is held by redis-server (pid 1234, unit redis.service), '
        'not by our Ray unit; stop it (systemctl disable --now redis.service) or move Ray to a '
        'free port (ray_node_port)',
        id='ray port foreign unit'),
    pytest.param(
        'spark1', [
            ('hv.spark1.preflight_probe.port_listening', 'yes'),
            ('hv.spark1.preflight_probe.port_pid', ''),
            ('hv.spark1.preflight_probe.port_unit', ''),
        ], 3,
        'FAIL spark1: port 6379 (Ray GCS) is held by an unknown process (pid ?, not in a systemd '
        'service), not by our Ray unit; stop that process or move Ray to a free port '
        '(ray_node_port)',
        id='ray port foreign, no pid/comm/unit'),
    pytest.param(
        'spark2', [('cfg.ray_port', 6380)], 3,
        'skip Ray port 6380: not a ray_head',
        id='ray port custom port'),
    pytest.param(
        'spark1', [], 4,
        'ok   no stale Ray session in /var/lib/llmfleet/ray, /tmp/ray',
        id='ray session none'),
    pytest.param(
        'spark1', [
            ('hv.spark1.preflight_probe.ray_session', '/tmp/ray/session_latest -> session_x'),
            ('hv.spark1.preflight_probe.raylet', 'yes'),
        ], 4,
        'ok   Ray session in use (raylet running)',
        id='ray session in use'),
    pytest.param(
        'spark1', [
            ('hv.spark1.preflight_probe.ray_session', '/tmp/ray/session_latest -> session_x'),
        ], 4,
        'WARN spark1: stale Ray session /tmp/ray/session_latest -> session_x with no raylet '
        'running; remove it: rm -rf /tmp/ray (Ray recreates it; a leftover owned by another user '
        'breaks ray start)',
        id='ray session stale'),
    pytest.param(
        'spark1', [
            ('hv.spark1.preflight_probe.ray_session', '/tmp/ray/session_latest -> session_x'),
            ('cfg.stale_session_fatal', True),
        ], 4,
        'FAIL spark1: stale Ray session /tmp/ray/session_latest -> session_x with no raylet '
        'running; remove it: rm -rf /tmp/ray (Ray recreates it; a leftover owned by another user '
        'breaks ray start)',
        id='ray session stale fatal'),
    pytest.param(
        'spark1', [], 5,
        'ok   clock synchronized (timedatectl)',
        id='clock timedatectl'),
    pytest.param(
        'spark1', [
            ('hv.spark1.preflight_probe.ntp_synced', 'no'),
            ('hv.spark1.preflight_probe.chrony_leap', 'Normal'),
        ], 5,
        'ok   clock synchronized (chrony)',
        id='clock chrony'),
    pytest.param(
        'spark1', [
            ('hv.spark1.preflight_probe.ntp_synced', 'no'),
            ('hv.spark1.preflight_probe.ntp_active', 'yes'),
            ('hv.spark1.preflight_probe.chrony_leap', 'Not synchronised'),
        ], 5,
        'FAIL spark1: clock not synchronized (timedatectl NTPSynchronized=no, NTP=yes, chrony leap '
        'status=Not synchronised); enable time sync: `timedatectl set-ntp true` '
        '(systemd-timesyncd) or install and start chrony, then wait for "System clock '
        'synchronized: yes"',
        id='clock not synced'),
    pytest.param(
        'spark1', [
            ('hv.spark1.preflight_probe.ntp_synced', DROP),
            ('hv.spark1.preflight_probe.ntp_active', DROP),
        ], 5,
        'FAIL spark1: clock not synchronized (timedatectl NTPSynchronized=n/a, NTP=n/a, chrony '
        'leap status=n/a); enable time sync: `timedatectl set-ntp true` (systemd-timesyncd) or '
        'install and start chrony, then wait for "System clock synchronized: yes"',
        id='clock unread'),
    pytest.param(
        'spark1', [
            ('hv.spark1.preflight_probe.ntp_synced', ''),
            ('cfg.clock_fatal', False),
        ], 5,
        'WARN spark1: clock not synchronized (timedatectl NTPSynchronized=n/a, NTP=yes, chrony '
        'leap status=n/a); enable time sync: `timedatectl set-ntp true` (systemd-timesyncd) or '
        'install and start chrony, then wait for "System clock synchronized: yes"',
        id='clock not synced, not fatal'),
    pytest.param(
        'spark1', [
            ('hv.spark1.preflight_probe.container', 'podman'),
            ('hv.spark1.preflight_probe.ntp_synced', 'no'),
        ], 5,
        'skip clock sync: container (podman), the container host keeps the clock',
        id='clock in a container'),
    pytest.param(
        'spark1', [], 6,
        'ok   fabric NIC enp1s0f1np1 holds 192.168.100.11',
        id='fabric NIC found'),
    pytest.param(
        'spark1', [
            ('hv.spark1.ansible_facts.enp1s0f1np1', DROP),
            ('hv.spark1.ansible_facts.enP7s7', 'SECONDARY_NIC'),
        ], 6,
        'ok   fabric NIC enP7s7 holds 192.168.100.11',
        id='fabric NIC by a secondary address'),
    pytest.param(
        'spark1', [('hv.spark1.llmfleet_fabric_ip', '192.168.100.99')], 6,
        "FAIL spark1: no interface holds llmfleet_fabric_ip '192.168.100.99' (IPv4 here: "
        '10.0.0.11, 192.168.100.11); fix llmfleet_fabric_ip, or give the QSFP port that address',
        id='fabric NIC none holds the IP'),
    pytest.param(
        'spark1', [('hv.spark1.ansible_facts', {})], 6,
        "FAIL spark1: no interface holds llmfleet_fabric_ip '192.168.100.11' (IPv4 here: none); "
        'fix llmfleet_fabric_ip, or give the QSFP port that address',
        id='fabric NIC no IPv4 facts'),
    pytest.param(
        'spark1', [('hv.spark1.llmfleet_fabric_ip', DROP)], 6,
        'skip fabric NIC: llmfleet_fabric_ip not set',
        id='fabric NIC ip not set'),
    pytest.param(
        'spark1', [], 7,
        'ok   fabric NIC enp1s0f1np1 MTU 9000',
        id='fabric MTU ok'),
    pytest.param(
        'spark1', [('hv.spark1.ansible_facts.enp1s0f1np1.mtu', 1500)], 7,
        'WARN spark1: fabric NIC enp1s0f1np1 (192.168.100.11) has MTU 1500 < 9000 '
        '(preflight_fabric_mtu); the fabric role raises it later in site.yml (--tags fabric), '
        'validate fails on it',
        id='fabric MTU 1500 warns'),
    pytest.param(
        'spark1', [
            ('hv.spark1.ansible_facts.enp1s0f1np1.mtu', 1500),
            ('cfg.mtu_fatal', True),
        ], 7,
        'FAIL spark1: fabric NIC enp1s0f1np1 (192.168.100.11) has MTU 1500 < 9000 '
        '(preflight_fabric_mtu); the fabric role raises it later in site.yml (--tags fabric), '
        'validate fails on it',
        id='fabric MTU 1500 fatal'),
    pytest.param(
        'spark1', [('hv.spark1.llmfleet_fabric_ip', '192.168.100.99')], 7,
        'skip fabric MTU: no fabric NIC',
        id='fabric MTU no NIC'),
    pytest.param(
        'spark1', [], 8,
        'ok   GPU arch sm_121 on 1 GPU(s) as declared',
        id='GPU arch as declared'),
    pytest.param(
        'spark1', [('hv.spark1.preflight_gpu', 'NO_GPU')], 8,
        'skip GPU arch: no GPU detected (declared sm_121; sim or CPU node)',
        id='GPU arch no GPU'),
    pytest.param(
        'spark1', [
            ('hv.spark1.preflight_gpu', 'SKIPPED'),
            ('hv.spark1.llmfleet_gpu_arch', DROP),
        ], 8,
        'skip GPU arch: no GPU detected (declared nothing; sim or CPU node)',
        id='GPU arch module skipped, nothing declared'),
    pytest.param(
        'spark1', [('hv.spark1.llmfleet_gpu_arch', 'sm_110')], 8,
        "FAIL spark1: llmfleet_gpu_arch 'sm_110' declared but nvidia-smi reports sm_121; set "
        'llmfleet_gpu_arch: sm_121 for spark1 (or move it to the right platform group)',
        id='GPU arch declared differs'),
    pytest.param(
        'spark1', [('hv.spark1.preflight_gpu', 'MIXED')], 8,
        'FAIL spark1: 2 GPUs of different archs (sm_121, sm_120); serve from one kind of GPU per '
        'host',
        id='GPU arch mixed GPUs'),
    pytest.param(
        'spark1', [('hv.spark1.llmfleet_gpus_per_node', 2)], 8,
        'FAIL spark1: llmfleet_gpus_per_node 2 but only 1 GPU(s) detected; lower '
        'llmfleet_gpus_per_node or check the driver (nvidia-smi)',
        id='GPU arch fewer GPUs than llmfleet_gpus_per_node'),
    pytest.param(
        'spark1', [], 9,
        'ok   driver 580.95.05 / CUDA 13.0 on sm_121 (>= CUDA 13.0), same as Alpha, spark2 '
        "(cluster 'lab')",
        id='driver/CUDA parity same'),
    pytest.param(
        'spark1', [('hv.spark2.preflight_gpu', 'GB10_OTHER_DRIVER')], 9,
        "FAIL spark1: NVIDIA driver 580.95.05 / CUDA 13.0 differs from spark2's 580.82.09 / CUDA "
        "13.0 (sm_121 hosts of cluster 'lab' must run one driver and CUDA version: the engine "
        'wheels and NCCL of a release are built and tested against it); install driver 580.95.05 '
        '(CUDA 13.0) on spark2, or upgrade every sm_121 host of the cluster together',
        id='driver/CUDA parity differs'),
    pytest.param(
        'spark1', [], 10,
        'ok   RDMA rocep1s0f1 port 1 on fabric NIC enp1s0f1np1 (llmfleet_fabric_ip '
        '192.168.100.11): Up, ACTIVE, Ethernet (RoCE; DGX Spark GB10, ConnectX-7 RoCE serving on '
        'RoCE (fabric_transport auto))',
        id='RDMA port up'),
    pytest.param(
        'spark1', [('hv.spark1.preflight_rdma', 'RDMA_DOWN')], 10,
        'WARN spark1: RDMA device rocep1s0f1 port 1 on fabric NIC enp1s0f1np1 (llmfleet_fabric_ip '
        '192.168.100.11) is Down (port state DOWN, link layer Ethernet), expected Up / ACTIVE / '
        'Ethernet (DGX Spark GB10, ConnectX-7 RoCE serving on RoCE (fabric_transport auto)); NCCL '
        'would fall back to NET/Socket (TCP, 10-20x slower) without saying so. Fix: check the QSFP '
        'cable and the peer port, `ip link set enp1s0f1np1 up`, then `ibdev2netdev` must show (Up) '
        'and /sys/class/infiniband/rocep1s0f1/ports/1/state 4: ACTIVE',
        id='RDMA port down'),
    pytest.param(
        'spark1', [('hv.spark1.preflight_rdma', 'SKIPPED'), ('cfg.rdma_fatal', True)], 10,
        'FAIL spark1: RDMA devices not read (rdma_info did not run), RDMA is expected (DGX Spark '
        'GB10, ConnectX-7 RoCE serving on RoCE (fabric_transport auto)); NCCL would fall back to '
        'NET/Socket (TCP, 10-20x slower) without saying so. Fix: make llmfleet.cluster.rdma_info '
        'run on the host (python3, /sys/class/infiniband readable)',
        id='RDMA not read, fatal'),
    pytest.param(
        'spark1', [('hv.spark1.fabric_transport', 'socket')], 10,
        'skip RDMA state: fabric_transport socket (NCCL_IB_DISABLE=1, NCCL over TCP), RDMA not used',
        id='RDMA not expected: sockets'),
    pytest.param(
        'spark1', [('hv.spark1.preflight_probe.container', 'docker')], 10,
        'skip RDMA state: container (docker), no RDMA devices inside; set preflight_rdma_expected: '
        'true to check anyway',
        id='RDMA not expected: container'),
    pytest.param(
        'spark1', [('hv.spark1.llmfleet_fabric_ip', '192.168.100.99')], 10,
        'skip RDMA state: no interface holds llmfleet_fabric_ip (see the fabric NIC line)',
        id='RDMA no fabric NIC'),
]


@pytest.mark.parametrize('name, changes, index, line', ROWS)
def test_host_check_line(name, changes, index, line):
    assert report(name, changes)[index] == line


# whole reports: the order of the checks, and the skips without python3
REPORTS = [
    pytest.param(
        'spark1', [], [
            'ok   python3 at /usr/bin/python3',
            'ok   disk: 117.7 GB free at /opt for weights in /opt/llmfleet (>= 50 GB)',
            'ok   /etc/machine-id aaaa unique among the 3 host(s) of this run',
            'ok   Ray port 6379 free',
            'ok   no stale Ray session in /var/lib/llmfleet/ray, /tmp/ray',
            'ok   clock synchronized (timedatectl)',
            'ok   fabric NIC enp1s0f1np1 holds 192.168.100.11',
            'ok   fabric NIC enp1s0f1np1 MTU 9000',
            'ok   GPU arch sm_121 on 1 GPU(s) as declared',
            'ok   driver 580.95.05 / CUDA 13.0 on sm_121 (>= CUDA 13.0), same as Alpha, spark2 '
            "(cluster 'lab')",
            'ok   RDMA rocep1s0f1 port 1 on fabric NIC enp1s0f1np1 (llmfleet_fabric_ip '
            '192.168.100.11): Up, ACTIVE, Ethernet (RoCE; DGX Spark GB10, ConnectX-7 RoCE serving on '
            'RoCE (fabric_transport auto))',
        ],
        id='healthy head'),
    pytest.param(
        'spark2', [('hv.spark2.preflight_probe.python', '')], [
            'FAIL spark2: no python3 in PATH; install it (apt-get install -y python3): every Ansible '
            'module, and so the fabric and GPU checks, need it',
            'ok   disk: 117.7 GB free at /opt for weights in /opt/llmfleet (>= 50 GB)',
            'ok   /etc/machine-id bbbb unique among the 3 host(s) of this run',
            'skip Ray port 6379: not a ray_head',
            'ok   no stale Ray session in /var/lib/llmfleet/ray, /tmp/ray',
            'ok   clock synchronized (timedatectl)',
            'skip python3 missing',
            'skip python3 missing',
            'skip python3 missing',
            'skip driver/CUDA parity: python3 missing',
            'skip RDMA state: python3 missing',
        ],
        id='no python3: the module checks say why they are skipped'),
    pytest.param(
        'spark1', [
            ('hv.spark1.preflight_probe.ray_session', '/tmp/ray/session_latest -> x\n  y'),
        ], [
            'ok   python3 at /usr/bin/python3',
            'ok   disk: 117.7 GB free at /opt for weights in /opt/llmfleet (>= 50 GB)',
            'ok   /etc/machine-id aaaa unique among the 3 host(s) of this run',
            'ok   Ray port 6379 free',
            'WARN spark1: stale Ray session /tmp/ray/session_latest -> x',
            'y with no raylet running; remove it: rm -rf /tmp/ray (Ray recreates it; a leftover owned '
            'by another user breaks ray start)',
            'ok   clock synchronized (timedatectl)',
            'ok   fabric NIC enp1s0f1np1 holds 192.168.100.11',
            'ok   fabric NIC enp1s0f1np1 MTU 9000',
            'ok   GPU arch sm_121 on 1 GPU(s) as declared',
            'ok   driver 580.95.05 / CUDA 13.0 on sm_121 (>= CUDA 13.0), same as Alpha, spark2 '
            "(cluster 'lab')",
            'ok   RDMA rocep1s0f1 port 1 on fabric NIC enp1s0f1np1 (llmfleet_fabric_ip '
            '192.168.100.11): Up, ACTIVE, Ethernet (RoCE; DGX Spark GB10, ConnectX-7 RoCE serving on '
            'RoCE (fabric_transport auto))',
        ],
        id='a multi-line problem becomes several lines'),
]


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
