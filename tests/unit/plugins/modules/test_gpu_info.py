"""Tests for the llmfleet.cluster.gpu_info module, with run_command patched."""
from pathlib import Path

import pytest


from ansible_collections.llmfleet.cluster.plugins.modules import gpu_info
from uthelper import run_module

FIXTURES = Path(__file__).resolve().parents[2] / 'fixtures' / 'gpu'

SMI = '/usr/bin/nvidia-smi'
QUERY = [SMI, '--query-gpu=index,name,compute_cap,driver_version,memory.total,uuid',
         '--format=csv,noheader,nounits']


def fixture(name):
    return (FIXTURES / name).read_text()


def run(monkeypatch, args, smi_path, query, header=(0, '', '')):
    """``query``/``header``: (rc, out, err) of the CSV query and of plain nvidia-smi."""
    out = run_module(monkeypatch, gpu_info, args, commands=lambda argv: query if len(argv) > 1 else header,
                     bins={'nvidia-smi': smi_path})
    return out, out.calls, out.warnings


@pytest.mark.parametrize('query, header, expected', [
    ('gb10_query.csv', 'gb10_smi.txt',
     dict(gpu_count=1, gpu_arch='sm_121', driver_version='580.95.05', cuda_version='13.0',
          first=dict(name='NVIDIA GB10', arch='sm_121', memory_mib=None, unified_memory=True))),
    ('thor_query.csv', 'thor_smi.txt',
     dict(gpu_count=1, gpu_arch='sm_110', driver_version='580.00', cuda_version='13.0',
          first=dict(name='NVIDIA Thor', arch='sm_110', memory_mib=None, unified_memory=True))),
    ('h100_x8_query.csv', 'h100_smi.txt',
     dict(gpu_count=8, gpu_arch='sm_90', driver_version='550.54.15', cuda_version='12.4',
          first=dict(name='NVIDIA H100 80GB HBM3', arch='sm_90', memory_mib=81559, unified_memory=False))),
    ('h200_query.csv', 'h200_smi.txt',
     dict(gpu_count=1, gpu_arch='sm_90', driver_version='580.159.04', cuda_version='13.0',
          first=dict(name='NVIDIA H200', arch='sm_90', memory_mib=143771, unified_memory=False))),
    ('mixed_rtx5090_gb10_query.csv', 'gb10_smi.txt',
     dict(gpu_count=2, gpu_arch=None, driver_version='580.95.05', cuda_version='13.0',
          first=dict(name='NVIDIA GB10', arch='sm_121', memory_mib=None, unified_memory=True))),
])
def test_gpus(monkeypatch, query, header, expected):
    out, calls, warnings = run(monkeypatch, {}, SMI, (0, fixture(query), ''), (0, fixture(header), ''))
    result = out.result
    assert not out.failed
    assert result['changed'] is False
    first = expected.pop('first')
    assert {k: result[k] for k in expected} == expected
    assert {k: result['gpus'][0][k] for k in first} == first
    assert len(result['gpus']) == result['gpu_count']
    assert result['nvidia_smi_error'] is None
    assert calls == [QUERY, [SMI]]
    assert warnings == []


@pytest.mark.parametrize('smi_path, query, error, n_warnings', [
    (None, None, None, 0),                                                    # no nvidia-smi
    (SMI, (6, fixture('no_devices.txt'), ''), None, 0),                       # no GPU
    (SMI, (0, '', ''), None, 0),                                              # empty list
    (SMI, (9, fixture('driver_not_loaded.txt'), ''),
     "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", 1),
    (SMI, (2, '', 'Field "compute_cap" is not a valid field to query.\n'),
     'Field "compute_cap" is not a valid field to query.', 1),
    (SMI, (255, '', ''), 'nvidia-smi exited with 255', 1),
])
def test_no_gpu_is_success(monkeypatch, smi_path, query, error, n_warnings):
    out, calls, warnings = run(monkeypatch, {}, smi_path, query)
    result = out.result
    assert not out.failed
    assert result['gpus'] == [] and result['gpu_count'] == 0
    assert result['gpu_arch'] is None and result['driver_version'] is None
    assert result['cuda_version'] is None
    assert (result['nvidia_smi_error'] or '').startswith(error or '')
    assert (result['nvidia_smi_error'] is None) == (error is None)
    assert len(warnings) == n_warnings
    assert calls == ([] if smi_path is None else [QUERY])   # no header run without GPUs


def test_malformed_rows_warn(monkeypatch):
    out, _calls, warnings = run(monkeypatch, {}, SMI, (0, fixture('malformed_query.csv'), ''),
                                (0, fixture('gb10_smi.txt'), ''))
    assert out.result['gpu_count'] == 1
    assert out.result['gpu_arch'] == 'sm_121'
    assert warnings == [
        'nvidia-smi line 2 not understood: Field "compute_cap" is not a valid field to query.',
        'nvidia-smi line 3 not understood: 1, NVIDIA H200, 9.0',
    ]


def test_header_failure_leaves_cuda_unknown(monkeypatch):
    out, _calls, _warnings = run(monkeypatch, {}, SMI, (0, fixture('gb10_query.csv'), ''), (1, '', 'boom'))
    assert out.result['gpu_count'] == 1
    assert out.result['cuda_version'] is None
    assert out.result['driver_version'] == '580.95.05'


def test_explicit_path(monkeypatch, tmp_path):
    smi = tmp_path / 'nvidia-smi'
    smi.write_text('#!/bin/sh\n')
    smi.chmod(0o755)
    out, calls, warnings = run(monkeypatch, {'nvidia_smi_path': str(smi)}, None,
                               (0, fixture('thor_query.csv'), ''), (0, fixture('thor_smi.txt'), ''))
    assert calls[0][0] == str(smi) and calls[1] == [str(smi)]
    assert out.result['gpu_arch'] == 'sm_110'
    assert warnings == []


def test_explicit_path_missing(monkeypatch, tmp_path):
    out, calls, warnings = run(monkeypatch, {'nvidia_smi_path': str(tmp_path / 'nope')}, SMI,
                               (0, fixture('thor_query.csv'), ''))
    assert calls == []
    assert out.result['gpu_count'] == 0
    assert len(warnings) == 1 and 'nope' in warnings[0]


def test_check_mode(monkeypatch):
    args = {'_ansible_check_mode': True}
    out, calls, _warnings = run(monkeypatch, args, SMI, (0, fixture('gb10_query.csv'), ''),
                                (0, fixture('gb10_smi.txt'), ''))
    assert out.result['changed'] is False
    assert out.result['gpu_arch'] == 'sm_121'
    assert calls == [QUERY, [SMI]]


def test_argument_spec_matches_documentation():
    import yaml
    doc = yaml.safe_load(gpu_info.DOCUMENTATION)
    assert set(doc['options']) == {'nvidia_smi_path'}
    assert 'llmfleet.cluster.attributes.read_only' in doc['extends_documentation_fragment']  # check_mode: full
    returned = yaml.safe_load(gpu_info.RETURN)
    assert set(returned) == {'gpus', 'gpu_count', 'gpu_arch', 'driver_version', 'cuda_version',
                             'nvidia_smi_error'}
