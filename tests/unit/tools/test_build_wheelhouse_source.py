"""build_wheelhouse.py for build: source variants (roles/python_env/files/build_wheelhouse.py).

The pure parts as data tables; then the builder end to end, offline: a source spec whose binary
part is one real (metadata-only) wheel in a find-links dir (uv pip compile --no-index + pip
download), a wheel "built on a build node" locked in with --add-built, its checks, idempotence
and a spec change dropping it. About 5 s (uv and pip run for real).
"""
import importlib.util
import io
import json
import os
import shutil
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
BUILDER = ROOT / "roles" / "python_env" / "files" / "build_wheelhouse.py"
VARIANTS = ROOT / "roles" / "python_env" / "vars" / "variants"
_spec = importlib.util.spec_from_file_location("build_wheelhouse_src_test", BUILDER)
bw = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bw)


def make_wheel(out: Path, name: str, version: str, tags: str = "cp311-cp311-linux_x86_64",
               requires=(), meta_name=None) -> Path:
    """A wheel file with real METADATA/WHEEL/RECORD (content: one module)."""
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    meta = ["Metadata-Version: 2.1", f"Name: {meta_name or name}", f"Version: {version}"]
    meta += [f"Requires-Dist: {r}" for r in requires]
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{dist}-{version}-{tags}.whl"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr(f"{dist}.py", "X = 1\n")
        zf.writestr(f"{info}/METADATA", "\n".join(meta) + "\n")
        zf.writestr(f"{info}/WHEEL", f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: {tags}\n")
        zf.writestr(f"{info}/RECORD", "")
    path.write_bytes(buf.getvalue())
    return path


# ----------------------------------------------------------------------------- pure parts
def test_digest_of_a_spec_without_the_new_keys_is_unchanged():
    """Optional keys enter the digest only when set: existing wheelhouses stay no-ops."""
    spec = {"arch": "cpu", "release": "r1", "python": "3.11", "python_platform": "x86_64-manylinux_2_36",
            "packages": ["a==1"], "excludes": ["b"]}
    # computed with the builder before build: source existed (commit 1c4cbfc)
    assert bw.spec_digest(spec, ["/x"]) == "be6eea2fb3d2a476302f3ffda317d8c75acbdfa3736e70baf9cecc3815658645"
    assert bw.spec_digest({**spec, "build_env": {"MAX_JOBS": "2"}}, ["/x"]) != bw.spec_digest(spec, ["/x"])
    assert bw.spec_digest({**spec, "source": {"name": "a", "requirement": "a==1"}}, ["/x"]) \
        != bw.spec_digest({**spec, "source": {"name": "a", "requirement": "a==2"}}, ["/x"])


@pytest.mark.parametrize("line,name", [
    ("vllm==0.32.0", "vllm"),
    ("Ray[default]==2.60.0 ; python_version >= '3.9'", "ray"),
    ("llmfleet_testext @ file:///tmp/x.tar.gz", "llmfleet-testext"),
    ("setuptools>=77.0.3,<81.0.0", "setuptools"),
    ("# comment", None),
    ("--hash=sha256:00", None),
])
def test_requirement_name(line, name):
    assert bw.requirement_name(line) == name


def test_resolve_inputs_adds_the_source_requirement_unless_told_not_to():
    spec = {"build": "source", "packages": ["torch==2.13.0"], "source": {"name": "vllm", "requirement": "vllm==0.32.0"}}
    assert bw.resolve_inputs(spec) == ["torch==2.13.0", "vllm==0.32.0"]
    spec["source"]["resolve_deps"] = False
    assert bw.resolve_inputs(spec) == ["torch==2.13.0"]
    assert bw.resolve_inputs({"packages": ["a==1"]}) == ["a==1"]
    with pytest.raises(bw.WheelhouseError, match=r"vllm is built from source .* must not be in packages"):
        bw.resolve_inputs({**spec, "packages": ["vllm==0.32.0"]})


@pytest.mark.parametrize("extra,message", [
    ({"build": "source"}, "needs a 'source' mapping with name, requirement"),
    ({"build": "source", "source": {"name": "x"}}, "needs a 'source' mapping"),
    ({"build": "docker"}, "must be 'wheelhouse' or 'source'"),
    ({"build": "source", "source": {"name": "x", "requirement": "x==1"}, "build_env": {"A": ["list"]}},
     "build_env must map names to strings"),
])
def test_load_spec_refuses_bad_source_specs(tmp_path, extra, message):
    path = tmp_path / "v.json"
    path.write_text(json.dumps({"arch": "a", "release": "r", "python": "3.12",
                                "python_platform": "aarch64-manylinux_2_39", "packages": [], **extra}))
    with pytest.raises(bw.WheelhouseError, match=message):
        bw.load_spec(path)


def test_sm_110_variant_is_a_source_build_with_the_thor_arch_list():
    spec = bw.load_spec(VARIANTS / "sm_110.yml")
    assert bw.is_source(spec) and bw.source_name(spec) == "vllm"
    assert spec["build_env"]["TORCH_CUDA_ARCH_LIST"] == "11.0a"
    assert bw.expected_version(spec) == "0.32.0"
    assert "vllm" not in [bw.requirement_name(p) for p in spec["packages"]]
    assert bw.resolve_inputs(spec)[-1] == "vllm==0.32.0"
    for other in sorted(VARIANTS.glob("*.yml")):       # every variant file loads now
        bw.load_spec(other)


@pytest.mark.parametrize("filename,platform,python,problems", [
    ("x-1-cp311-cp311-linux_x86_64.whl", "x86_64-manylinux_2_36", "3.11", []),
    ("x-1-cp38-abi3-manylinux_2_35_aarch64.whl", "aarch64-manylinux_2_39", "3.12", []),
    ("x-1-py3-none-any.whl", "aarch64-manylinux_2_39", "3.12", []),
    ("x-1-cp312-cp312-linux_x86_64.whl", "aarch64-manylinux_2_39", "3.12",
     ["platform tag linux_x86_64 is not for aarch64 (python_platform aarch64-manylinux_2_39)"]),
    ("x-1-cp312-cp312-linux_aarch64.whl", "aarch64-manylinux_2_39", "3.11",
     ["python tag cp312 does not run on python 3.11"]),
    ("x-1-cp313-abi3-linux_aarch64.whl", "aarch64-manylinux_2_39", "3.12",
     ["python tag cp313 does not run on python 3.12"]),
])
def test_check_tags(filename, platform, python, problems):
    parts = filename[:-4].split("-")
    info = {"python_tags": parts[2].split("."), "abi_tags": parts[3].split("."), "platform_tags": parts[4].split(".")}
    assert bw.check_tags(info, {"python_platform": platform, "python": python}) == problems


@pytest.mark.parametrize("requires,problems", [
    (["torch==2.13.0", "numpy>=2"], []),
    (["torch==2.12.0"], ["torch==2.12.0 (locked 2.13.0+cu130)"]),
    (["flashinfer-python==0.7.0"], ["flashinfer-python==0.7.0 (not in the lock)"]),
    (["torchaudio==2.11.0"], []),                                   # excluded on purpose
    (["pywin32; sys_platform == 'win32'", "pytest; extra == 'test'"], []),   # markers evaluated
    (["tomli; python_version < '3.11'"], []),
    (["intel-openmp; platform_machine == 'aarch64'"], ["intel-openmp; platform_machine == 'aarch64' (not in the lock)"]),
])
def test_unmet_requires(requires, problems):
    locked = {"torch": "2.13.0+cu130", "numpy": "2.3.5"}
    spec = {"python": "3.12", "python_platform": "aarch64-manylinux_2_39"}
    assert bw.unmet_requires(requires, locked, {"torchaudio"}, spec) == problems


# ----------------------------------------------------------------------------- end to end
@pytest.fixture()
def wh(tmp_path, monkeypatch):
    uv = os.environ.get("UV") or str(Path(sys.executable).with_name("uv"))
    if not os.access(uv, os.X_OK):
        pytest.skip("no uv next to this interpreter")
    links = tmp_path / "links"
    bw.build_alias_wheel("dep", "1.0", [], links)
    spec = {"name": "t", "arch": "testarch", "release": "r1", "build": "source", "python": "3.11",
            "python_platform": "x86_64-manylinux_2_36", "no_index": True, "find_links": [str(links)],
            "packages": ["dep==1.0"], "excludes": ["gone"],
            "source": {"name": "ext", "requirement": "ext==2.0", "resolve_deps": False},
            "build_env": {"TORCH_CUDA_ARCH_LIST": "11.0a"}}
    path = tmp_path / "t.yml"
    path.write_text(yaml.safe_dump({"python_env_variant": spec}))
    monkeypatch.setenv("UV", uv)
    monkeypatch.delenv("LLMFLEET_WHEEL_FIND_LINKS", raising=False)
    root = tmp_path / "wheelhouse"
    return {"spec": path, "data": spec, "root": root, "out": root / "testarch-r1", "tmp": tmp_path}


def test_source_variant_end_to_end(wh):
    spec, root, out = wh["spec"], wh["root"], wh["out"]
    first = bw.build(spec, None, root, force=False, verify=False, dry_run=False)
    assert first["status"] == "built" and first["complete"] is False and first["packages"] == 1
    assert (out / "build-lock.txt").read_text().splitlines()[-1].startswith("dep==1.0 --hash=sha256:")
    assert not (out / "lock.txt").exists()                      # an incomplete set cannot be installed
    status = bw.source_status(spec, None, root)
    assert (status["binary_ready"], status["built"], status["needed"], status["name"]) == (True, False, True, "ext")

    built = make_wheel(wh["tmp"] / "built", "ext", "2.0", requires=["dep>=1", "gone==3"])
    added = bw.add_built(spec, None, root, built, "thor1")
    assert added["status"] == "added" and added["complete"] is True
    sha = bw.sha256_file(out / built.name)
    lock = (out / "lock.txt").read_text()
    assert f"ext==2.0 --hash=sha256:{sha}\n" in lock and "dep==1.0 --hash=sha256:" in lock
    assert bw.verify_dir(out, full=True) == []
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["source_build"]["built_on"] == "thor1" and manifest["source_build"]["sha256"] == sha
    assert manifest["source_build"]["build_env"] == {"TORCH_CUDA_ARCH_LIST": "11.0a"}
    status = bw.source_status(spec, None, root)
    assert (status["built"], status["needed"], status["sha256"], status["built_on"]) == (True, False, sha, "thor1")

    lock_bytes = (out / "lock.txt").read_bytes()
    assert bw.add_built(spec, None, root, built, "thor1")["status"] == "unchanged"
    assert (out / "lock.txt").read_bytes() == lock_bytes
    assert bw.build(spec, None, root, force=False, verify=True, dry_run=False)["status"] == "up-to-date"

    # a tampered built wheel is not "built" any more
    (out / built.name).write_bytes(b"x" + (out / built.name).read_bytes())
    assert bw.source_status(spec, None, root)["needed"] is True
    bw.add_built(spec, None, root, built, "thor2")
    assert bw.source_status(spec, None, root)["built_on"] == "thor2"

    # a changed build_env: the binary part is rebuilt, the old built wheel dropped
    data = {**wh["data"], "build_env": {"TORCH_CUDA_ARCH_LIST": "12.1a"}}
    spec.write_text(yaml.safe_dump({"python_env_variant": data}))
    status = bw.source_status(spec, None, root)
    assert (status["binary_ready"], status["needed"]) == (False, True)
    with pytest.raises(bw.WheelhouseError, match="no binary wheelhouse for this spec"):
        bw.add_built(spec, None, root, built, "thor1")
    assert bw.build(spec, None, root, force=False, verify=False, dry_run=False)["status"] == "built"
    assert not (out / "lock.txt").exists() and not list(out.glob("ext-*.whl"))


@pytest.mark.parametrize("kwargs,message", [
    ({"name": "other", "version": "2.0"}, "it is other, not source.name ext"),
    ({"name": "ext", "version": "2.1"}, "version 2.1 is not the required 2.0"),
    ({"name": "ext", "version": "2.0", "tags": "cp311-cp311-linux_aarch64"}, "platform tag linux_aarch64 is not for x86_64"),
    ({"name": "ext", "version": "2.0", "requires": ["missing>=1"]}, r"missing>=1 \(not in the lock\)"),
    ({"name": "ext", "version": "2.0", "requires": ["dep>=2"]}, r"dep>=2 \(locked 1.0\)"),
    ({"name": "ext", "version": "2.0", "meta_name": "notext"}, "METADATA says notext 2.0"),
])
def test_add_built_refuses_a_wrong_wheel(wh, kwargs, message):
    bw.build(wh["spec"], None, wh["root"], force=False, verify=False, dry_run=False)
    wheel = make_wheel(wh["tmp"] / "built", **kwargs)
    with pytest.raises(bw.WheelhouseError, match=message):
        bw.add_built(wh["spec"], None, wh["root"], wheel, "thor1")
    assert not (wh["out"] / "lock.txt").exists() and not list(wh["out"].glob("*-2.*.whl"))


def test_version_with_a_local_label_is_accepted(wh):
    bw.build(wh["spec"], None, wh["root"], force=False, verify=False, dry_run=False)
    wheel = make_wheel(wh["tmp"] / "built", "ext", "2.0+cu130")
    assert bw.add_built(wh["spec"], None, wh["root"], wheel, "thor1")["status"] == "added"
    assert "ext==2.0+cu130 --hash=sha256:" in (wh["out"] / "lock.txt").read_text()


def test_cli_source_status_and_add_built(wh, capsys):
    assert bw.main([str(wh["spec"]), "--root", str(wh["root"])]) == 0
    capsys.readouterr()
    assert bw.main([str(wh["spec"]), "--root", str(wh["root"]), "--source-status"]) == 0
    assert json.loads(capsys.readouterr().out)["needed"] is True
    wheel = make_wheel(wh["tmp"] / "built", "ext", "2.0")
    assert bw.main([str(wh["spec"]), "--root", str(wh["root"]), "--add-built", str(wheel), "--built-on", "n1"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "added"
    bad = make_wheel(wh["tmp"] / "bad", "ext", "3.0")
    assert bw.main([str(wh["spec"]), "--root", str(wh["root"]), "--add-built", str(bad)]) == 1
    assert "built wheel ext-3.0-cp311-cp311-linux_x86_64.whl: version 3.0 is not the required 2.0" in capsys.readouterr().err
    shutil.rmtree(wh["out"])
