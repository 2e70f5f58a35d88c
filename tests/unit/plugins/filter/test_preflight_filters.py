"""Tests for plugins/filter/preflight.py: the filters hand hostvars/groups to module_utils/preflight.py."""
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.llmfleet.cluster.plugins.filter.preflight import FilterModule
from ansible_collections.llmfleet.cluster.plugins.module_utils import gpu, preflight

FILTERS = FilterModule().filters()
GPU = Path(__file__).resolve().parents[2] / 'fixtures' / 'gpu'


def gpu_info(query, smi):
    gpus = gpu.parse_query_gpu((GPU / query).read_text())[0]
    return dict(gpu.summarize(gpus, (GPU / smi).read_text()), nvidia_smi_error=None)


HOSTVARS = {
    'spark1': {'llmfleet_cluster': 'lab', 'llmfleet_gpu_arch': 'sm_121',
               'preflight_gpu': gpu_info('gb10_query.csv', 'gb10_smi.txt')},
    'spark2': {'llmfleet_cluster': 'lab', 'llmfleet_gpu_arch': 'sm_121',
               'preflight_gpu': gpu_info('gb10_query.csv', 'gb10_smi.txt')},
    'hop1': {'llmfleet_cluster': 'lab', 'llmfleet_gpu_arch': 'sm_90',
             'preflight_gpu': gpu_info('h100_x8_query.csv', 'h100_smi.txt')},
    'hop2': {'llmfleet_cluster': 'lab', 'llmfleet_gpu_arch': 'sm_90',
             'preflight_gpu': gpu_info('h200_query.csv', 'h200_smi.txt')},
}
GROUPS = {'all': list(HOSTVARS), 'ray_head': ['spark1'], 'ray_workers': ['spark2'],
          'serve_nodes': ['spark1', 'spark2']}


def test_filters_registered():
    assert set(FILTERS) == {'preflight_host_checks', 'preflight_fleet', 'preflight_rdma_expectation'}


def test_rdma_expectation_feeds_the_check():
    expect = FILTERS['preflight_rdma_expectation']('spark1', GROUPS, HOSTVARS, None, 'auto', 'none')
    assert expect['expected'] is True
    chk = preflight.rdma_check('spark1', {'rdma_devices': [], 'source': 'none'}, expect,
                               fabric_ip='192.168.100.10', fabric_nic='enp1s0f1np1', fatal='false')
    assert chk['severity'] == 'warn' and chk['problem'].startswith('spark1: no RDMA device at all')
    in_podman = FILTERS['preflight_rdma_expectation']('spark1', GROUPS, HOSTVARS, None, 'auto', 'podman')
    assert preflight.rdma_check('spark1', None, in_podman)['skip'].startswith('RDMA state: container (podman)')


def test_bad_hostvars_named():
    with pytest.raises(AnsibleFilterError, match='preflight_rdma_expectation: hostvars must be a mapping'):
        FILTERS['preflight_rdma_expectation']('spark1', GROUPS, ['not', 'a', 'mapping'])


HOST_CFG = {'min_disk_gb': 50, 'weights_dir': '/opt/llmfleet', 'fabric_mtu': 9000, 'mtu_fatal': False,
            'ray_port': 6379, 'ray_unit_regex': '^ray[.]service$', 'ray_temp_dirs': ['/tmp/ray'],
            'stale_session_fatal': False, 'clock_fatal': True, 'min_cuda': {}, 'rdma_fatal': False}


def test_host_checks_filter_lines():
    """The filter returns the report lines (module_utils/test_preflight_host.py has the table)."""
    hostvars = {h: dict(v, preflight_probe={'python': '/usr/bin/python3', 'machine_id': 'id-' + h,
                                            'disk_avail_kb': '104857600', 'disk_path': '/', 'container': 'podman'})
                for h, v in HOSTVARS.items()}
    lines = FILTERS['preflight_host_checks']('spark2', hostvars, list(HOSTVARS), GROUPS, HOST_CFG)
    assert lines[:6] == ['ok   python3 at /usr/bin/python3',
                         'ok   disk: 100.0 GB free at / for weights in /opt/llmfleet (>= 50 GB)',
                         'ok   /etc/machine-id id-spark2 unique among the 4 host(s) of this run',
                         'skip Ray port 6379: not a ray_head',
                         'ok   no stale Ray session in /tmp/ray',
                         'skip clock sync: container (podman), the container host keeps the clock']
    assert lines[6] == 'skip fabric NIC: llmfleet_fabric_ip not set'
    assert len(lines) == 11


def test_host_checks_filter_names_a_missing_setting():
    cfg = dict(HOST_CFG)
    del cfg['ray_port']
    with pytest.raises(AnsibleFilterError, match='preflight_host_checks: cfg lacks ray_port'):
        FILTERS['preflight_host_checks']('spark1', HOSTVARS, list(HOSTVARS), GROUPS, cfg)
