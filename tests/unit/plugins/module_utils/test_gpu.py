"""Tests for plugins/module_utils/gpu.py: data tables of nvidia-smi output."""
from pathlib import Path

import pytest

from ansible_collections.llmfleet.cluster.plugins.module_utils import gpu

FIXTURES = Path(__file__).resolve().parents[2] / 'fixtures' / 'gpu'


def fixture(name):
    return (FIXTURES / name).read_text()


@pytest.mark.parametrize('cap, arch', [
    ('12.1', 'sm_121'),   # GB10 / DGX Spark
    ('11.0', 'sm_110'),   # Jetson Thor
    ('9.0', 'sm_90'),     # H100 / H200
    ('12.0', 'sm_120'),   # RTX 50xx
    ('10.0', 'sm_100'),   # B200
    ('8.7', 'sm_87'),     # Orin
    (' 8.0 ', 'sm_80'),
    ('[N/A]', None),
    ('12', None),
    ('12.1.0', None),
    ('', None),
    (None, None),
])
def test_compute_cap_to_arch(cap, arch):
    assert gpu.compute_cap_to_arch(cap) == arch


@pytest.mark.parametrize('value, expected', [
    ('81559', (81559, False)),
    ('143771', (143771, False)),
    ('[N/A]', (None, True)),
    ('N/A', (None, True)),
    ('[Not Supported]', (None, True)),
    ('81559 MiB', (81559, False)),
    ('[Unknown Error]', (None, False)),
    ('', (None, False)),
])
def test_parse_memory(value, expected):
    assert gpu.parse_memory(value) == expected


def _first_gpu(name, compute_cap, arch, driver, memory_mib, unified, uuid):
    """The row parse_query_gpu makes of a fixture's first GPU (index 0)."""
    return {'index': 0, 'name': name, 'compute_cap': compute_cap, 'arch': arch, 'driver_version': driver,
            'memory_mib': memory_mib, 'unified_memory': unified, 'uuid': uuid}


# the GB10's row, first in both the single-GB10 and the mixed RTX 5090 + GB10 fixtures
GB10 = _first_gpu('NVIDIA GB10', '12.1', 'sm_121', '580.95.05', None, True, 'GPU-5b1e8f0c-2a41-7d3e-9c61-0f2b7a4d8e19')


@pytest.mark.parametrize('name, count, first, arch', [
    ('gb10_query.csv', 1, GB10, 'sm_121'),
    ('thor_query.csv', 1,
     _first_gpu('NVIDIA Thor', '11.0', 'sm_110', '580.00', None, True, 'GPU-1e7c4b2a-93d5-5f08-a6c2-7b0d3e9f4a61'),
     'sm_110'),
    ('h100_x8_query.csv', 8,
     _first_gpu('NVIDIA H100 80GB HBM3', '9.0', 'sm_90', '550.54.15', 81559, False, 'GPU-3f1a9c2e-6b7d-4e81-a0c5-1d2e3f4a5b60'),
     'sm_90'),
    ('h200_query.csv', 1,
     _first_gpu('NVIDIA H200', '9.0', 'sm_90', '580.159.04', 143771, False, 'GPU-87f8ef9b-1686-3ee9-f286-c006ffe3ff40'),
     'sm_90'),
    ('mixed_rtx5090_gb10_query.csv', 2, GB10, None),   # sm_121 + sm_120: no common arch
])
def test_parse_query_fixture(name, count, first, arch):
    gpus, malformed = gpu.parse_query_gpu(fixture(name))
    assert malformed == []
    assert len(gpus) == count
    assert gpus[0] == first
    assert [g['index'] for g in gpus] == list(range(count))
    assert gpu.gpu_arch(gpus) == arch


def test_parse_query_malformed_rows_are_reported():
    gpus, malformed = gpu.parse_query_gpu(fixture('malformed_query.csv'))
    assert [g['name'] for g in gpus] == ['NVIDIA GB10']
    assert malformed == [
        {'line_number': 2, 'line': 'Field "compute_cap" is not a valid field to query.'},
        {'line_number': 3, 'line': '1, NVIDIA H200, 9.0'},
    ]


@pytest.mark.parametrize('text', ['', None, '\n \n', 'No devices were found\n'])
def test_parse_query_empty_or_no_gpu(text):
    gpus, malformed = gpu.parse_query_gpu(text)
    assert gpus == []
    assert malformed == ([] if not (text or '').strip() else [{'line_number': 1, 'line': 'No devices were found'}])


def test_parse_query_na_compute_cap():
    gpus, _malformed = gpu.parse_query_gpu('0, NVIDIA Mystery, [N/A], 999.1, 1024, [N/A]\n')
    assert gpus[0]['compute_cap'] is None and gpus[0]['arch'] is None and gpus[0]['uuid'] is None
    assert gpu.gpu_arch(gpus) is None


@pytest.mark.parametrize('name, cuda, driver', [
    ('gb10_smi.txt', '13.0', '580.95.05'),
    ('thor_smi.txt', '13.0', '580.00'),
    ('h100_smi.txt', '12.4', '550.54.15'),
    ('h200_smi.txt', '13.0', '580.159.04'),
    ('driver_not_loaded.txt', None, None),
])
def test_header_versions(name, cuda, driver):
    text = fixture(name)
    assert gpu.parse_cuda_version(text) == cuda
    assert gpu.parse_driver_version(text) == driver


@pytest.mark.parametrize('text, cuda', [
    ('    CUDA Version                          : 12.8\n', '12.8'),   # nvidia-smi -q
    ('| NVIDIA-SMI 580.00   Driver Version: 580.00   CUDA Version: N/A |', None),
    (None, None),
])
def test_cuda_version_variants(text, cuda):
    assert gpu.parse_cuda_version(text) == cuda


@pytest.mark.parametrize('name, expected', [
    ('no_devices.txt', True),
    ('driver_not_loaded.txt', False),
    ('gb10_smi.txt', False),
])
def test_is_no_devices(name, expected):
    assert gpu.is_no_devices(fixture(name)) is expected


@pytest.mark.parametrize('query, header, expected', [
    ('gb10_query.csv', 'gb10_smi.txt',
     {'gpu_count': 1, 'gpu_arch': 'sm_121', 'driver_version': '580.95.05', 'cuda_version': '13.0'}),
    ('thor_query.csv', 'thor_smi.txt',
     {'gpu_count': 1, 'gpu_arch': 'sm_110', 'driver_version': '580.00', 'cuda_version': '13.0'}),
    ('h100_x8_query.csv', 'h100_smi.txt',
     {'gpu_count': 8, 'gpu_arch': 'sm_90', 'driver_version': '550.54.15', 'cuda_version': '12.4'}),
    ('h200_query.csv', 'h200_smi.txt',
     {'gpu_count': 1, 'gpu_arch': 'sm_90', 'driver_version': '580.159.04', 'cuda_version': '13.0'}),
    ('h200_query.csv', None,
     {'gpu_count': 1, 'gpu_arch': 'sm_90', 'driver_version': '580.159.04', 'cuda_version': None}),
    (None, None,
     {'gpu_count': 0, 'gpu_arch': None, 'driver_version': None, 'cuda_version': None}),
])
def test_summarize(query, header, expected):
    gpus, _malformed = gpu.parse_query_gpu(fixture(query) if query else '')
    result = gpu.summarize(gpus, fixture(header) if header else None)
    assert result['gpus'] == gpus
    assert {k: result[k] for k in expected} == expected


def test_summarize_driver_from_header_when_gpus_disagree():
    gpus, _malformed = gpu.parse_query_gpu(
        '0, NVIDIA H100 80GB HBM3, 9.0, 550.54.15, 81559, GPU-a\n'
        '1, NVIDIA H100 80GB HBM3, 9.0, 550.54.14, 81559, GPU-b\n')
    assert gpu.summarize(gpus, fixture('h100_smi.txt'))['driver_version'] == '550.54.15'
    assert gpu.summarize(gpus, None)['driver_version'] is None


def test_query_args_match_fields():
    assert gpu.QUERY_ARGS == (
        '--query-gpu=index,name,compute_cap,driver_version,memory.total,uuid',
        '--format=csv,noheader,nounits',
    )
