"""The engine_patches role on vLLM installed from its real wheel (pip install --no-deps) into a
throw-away venv: the version comes from the real dist-info, the file is the installed one, the
recompile uses the venv's python, and the revert is checked against the wheel's own RECORD hash.

Needs a cached wheel (nothing is downloaded here); fetch one with
    .venv/bin/pip download --no-deps --only-binary=:all: --platform manylinux_2_31_$(uname -m) \
        --python-version 3.11 --implementation cp --abi abi3 vllm==0.18.1 --dest ~/.cache/llmfleet/vllm-wheels
LLMFLEET_VLLM_WHEELS overrides the directory. Each version: about 1.5 GB unpacked (removed afterwards), 15-60 s.
Run: .venv/bin/pytest tests/integration/engine_patches/test_real_wheel.py -q
"""
from __future__ import annotations

import base64
import csv
import hashlib
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from engine_patches_helpers import REL, patch_items, run_role

WHEELS = Path(os.environ.get("LLMFLEET_VLLM_WHEELS", "~/.cache/llmfleet/vllm-wheels")).expanduser()
PIP = Path(sys.executable).with_name("pip")


def record_hash(site: Path, version: str) -> str:
    with open(site / ("vllm-%s.dist-info" % version) / "RECORD", newline="") as handle:
        for row in csv.reader(handle):
            if row and row[0] == REL:
                return row[1]
    raise AssertionError("%s not in RECORD" % REL)


def file_hash(path: Path) -> str:
    digest = hashlib.sha256(path.read_bytes()).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


@pytest.mark.parametrize("version", ["0.17.1", "0.18.1"])
def test_real_wheel(tmp_path, version):
    wheel = WHEELS / ("vllm-%s-cp38-abi3-manylinux_2_31_%s.whl" % (version, platform.machine()))
    if not wheel.is_file():
        pytest.skip("no cached wheel %s" % wheel)
    work = tmp_path
    (work / "tmp").mkdir()
    venv = work / ("vllm-%s" % version)
    try:
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        subprocess.run([str(PIP), "--python", str(venv / "bin" / "python"), "install", "--quiet", "--no-deps",
                        "--no-compile", "--no-index", "--disable-pip-version-check", str(wheel)],
                       check=True, timeout=600)
        (site,) = (venv / "lib").glob("python*/site-packages")
        target = site / REL
        original = record_hash(site, version)
        assert file_hash(target) == original

        applied = run_role(work, {"engine_patches_venv": str(venv), "llmfleet_gpu_arch": "sm_121"})
        assert applied["rc"] == 0, applied["raw"][-4000:]
        (item,) = patch_items(applied)
        assert (item["status"], item["installed_version"], item["recompiled"]) == ("applied", version, True)
        assert item["path"] == str(target.resolve())
        assert target.read_text().count("# llmfleet-patch: cutlass-fp8-sm121") == 3
        assert file_hash(target) != original
        tag = subprocess.run([str(venv / "bin" / "python"), "-c", "import sys; print(sys.implementation.cache_tag)"],
                             capture_output=True, text=True, check=True).stdout.strip()
        assert (target.parent / "__pycache__" / ("w8a8_utils.%s.pyc" % tag)).is_file()

        again = run_role(work, {"engine_patches_venv": str(venv), "llmfleet_gpu_arch": "sm_121"})
        assert again["rc"] == 0 and again["stats"]["changed"] == 0, again["raw"][-4000:]

        back = run_role(work, {"engine_patches_venv": str(venv), "llmfleet_gpu_arch": "sm_121",
                               "engine_patches_state": "absent"})
        assert back["rc"] == 0, back["raw"][-4000:]
        assert patch_items(back)[0]["status"] == "reverted"
        assert file_hash(target) == original          # the wheel's own RECORD hash
    finally:
        shutil.rmtree(venv, ignore_errors=True)
