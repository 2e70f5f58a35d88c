"""build_wheelhouse.py spec key `local`: packages kept in the repository (the sim-only stand-ins of
the sglang_cpu variant) built into deterministic wheels, keyed into the spec digest by content."""
import importlib.util
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
BUILDER = ROOT / "roles" / "python_env" / "files" / "build_wheelhouse.py"
VARIANT = ROOT / "roles" / "python_env" / "vars" / "variants" / "sglang_cpu.yml"
_spec = importlib.util.spec_from_file_location("build_wheelhouse_local_test", BUILDER)
bw = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bw)


def spec_with(tmp_path, files):
    src = tmp_path / "pkg"
    for rel, text in files.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    spec_file = tmp_path / "v.yml"
    spec_file.write_text("arch: cpu\nrelease: r\npython: '3.11'\npython_platform: x86_64-manylinux_2_36\n"
                         "packages: [x-sim==0.0.1]\nlocal:\n  - {name: x-sim, version: 0.0.1, source: pkg}\n")
    return spec_file


def test_local_wheel_is_deterministic_and_installable_content(tmp_path):
    spec = bw.load_spec(spec_with(tmp_path, {"x_sim/__init__.py": "A = 1\n", "x_sim.pth": "import x_sim\n"}))
    one = bw.build_local_wheel(spec["local"][0], tmp_path / "a")
    two = bw.build_local_wheel(spec["local"][0], tmp_path / "b")
    assert one.name == "x_sim-0.0.1-py3-none-any.whl" and one.read_bytes() == two.read_bytes()
    with zipfile.ZipFile(one) as zf:
        names = zf.namelist()
        assert names[:2] == ["x_sim.pth", "x_sim/__init__.py"] and names[-1] == "x_sim-0.0.1.dist-info/RECORD"
        assert "Name: x-sim" in zf.read("x_sim-0.0.1.dist-info/METADATA").decode()


def test_content_not_location_keys_the_digest(tmp_path):
    a = bw.load_spec(spec_with(tmp_path / "a", {"x_sim/__init__.py": "A = 1\n"}))
    b = bw.load_spec(spec_with(tmp_path / "b", {"x_sim/__init__.py": "A = 1\n"}))
    c = bw.load_spec(spec_with(tmp_path / "c", {"x_sim/__init__.py": "A = 2\n"}))
    assert bw.spec_digest(a, []) == bw.spec_digest(b, [])
    assert bw.spec_digest(a, []) != bw.spec_digest(c, [])


@pytest.mark.parametrize("local, message", [
    ("[{name: x, version: 1}]", "needs name, version and source"),
    ("[{name: x, version: 1, source: nowhere}]", "is not a directory"),
    ("{name: x}", "local must be a list"),
])
def test_bad_local_entries(tmp_path, local, message):
    spec_file = tmp_path / "v.yml"
    spec_file.write_text("arch: cpu\nrelease: r\npython: '3.11'\npython_platform: x86_64-manylinux_2_36\n"
                         f"packages: []\nlocal: {local}\n")
    with pytest.raises(bw.WheelhouseError, match=message):
        bw.load_spec(spec_file)


def test_sglang_cpu_standins_import_and_behave():
    """The shipped stand-ins, imported in a fresh interpreter with torch: LLMFLEET_TORCH_PYTHON, or this
    one if it has torch (the controller's venv has none: the cluster scenario's SGLang endpoint covers
    them end to end)."""
    python = os.environ.get("LLMFLEET_TORCH_PYTHON") or sys.executable
    if subprocess.run([python, "-c", "import torch"], capture_output=True, check=False).returncode:
        pytest.skip("no torch in %s (set LLMFLEET_TORCH_PYTHON)" % python)
    spec = bw.load_spec(VARIANT)
    paths = [entry["_source_path"] for entry in spec["local"]]
    code = (
        "import sys; sys.path[:0] = %r\n"
        "import torch, sgl_kernel, llmfleet_sim_torchvision_ops as h\n"
        "t = torch.zeros(2, 6, dtype=torch.int32)\n"
        "sgl_kernel.assign_req_to_token_pool_cpu(torch.tensor([1, 0]), t, torch.tensor([0, 2]), torch.tensor([2, 5]),\n"
        "    torch.tensor([7, 8, 9, 10, 11]), 6)\n"
        "assert t.tolist() == [[0, 0, 9, 10, 11, 0], [7, 8, 0, 0, 0, 0]], t\n"
        "try:\n    sgl_kernel.copy_all_layer_kv_cache_cpu(1)\nexcept NotImplementedError as e:\n    print('NIE', e)\n"
        "h.define_schemas(); torch._C._dispatch_find_schema_or_throw('torchvision::qnms', ''); print('schemas ok')\n"
    ) % (paths,)
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True, timeout=120).stdout
    assert "NIE sgl_kernel.copy_all_layer_kv_cache_cpu: not implemented by the llmfleet sim stand-in" in out
    assert "schemas ok" in out
