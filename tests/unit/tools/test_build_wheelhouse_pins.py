"""A rebuilt wheelhouse is compared with the lock committed for its release, package by package."""
import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
BUILDER = ROOT / "roles" / "python_env" / "files" / "build_wheelhouse.py"
_spec = importlib.util.spec_from_file_location("build_wheelhouse_pins_test", BUILDER)
bw = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bw)

A = "a" * 64
B = "b" * 64
LOCK = f"# header\nTorch==2.13.0+cpu --hash=sha256:{A}\nray==2.60.0 --hash=sha256:{B}\n"


def test_lock_entries_parses_names_versions_hashes():
    assert bw.lock_entries(LOCK) == {"torch": ("2.13.0+cpu", A), "ray": ("2.60.0", B)}


@pytest.mark.parametrize("actual, expected", [
    ({"torch": ("2.13.0+cpu", A), "ray": ("2.60.0", B)}, []),
    ({"torch": ("2.13.0+cpu", B), "ray": ("2.60.0", B)}, ["torch 2.13.0+cpu: sha256 bbbbbbbbbbbbbbbb..., pinned aaaaaaaaaaaaaaaa..."]),
    ({"torch": ("2.13.1+cpu", A), "ray": ("2.60.0", B)}, ["torch: version 2.13.1+cpu, pinned 2.13.0+cpu"]),
    ({"torch": ("2.13.0+cpu", A)}, ["ray: pinned 2.60.0 but not in the wheelhouse"]),
    ({"torch": ("2.13.0+cpu", A), "ray": ("2.60.0", B), "evil": ("1.0", A)}, ["evil 1.0: in the wheelhouse but not pinned"]),
])
def test_pin_problems_name_each_package(actual, expected):
    assert bw.pin_problems(bw.lock_entries(LOCK), actual) == expected


def _wheelhouse(tmp_path, lock_text):
    spec = tmp_path / "v.json"
    spec.write_text(json.dumps({"arch": "cpu", "release": "r1", "python": "3.11", "python_platform": "x",
                                "build": "wheelhouse", "packages": ["ray==2.60.0"]}))
    out = tmp_path / "wh" / "cpu-r1"
    out.mkdir(parents=True)
    (out / "lock.txt").write_text(lock_text)
    pins = tmp_path / "locks"
    pins.mkdir()
    return spec, pins


def test_check_pinned_fails_loudly_naming_the_package(tmp_path):
    spec, pins = _wheelhouse(tmp_path, LOCK.replace(B, A))
    (pins / "cpu-r1.txt").write_text(LOCK)
    with pytest.raises(bw.WheelhouseError, match=r"ray 2\.60\.0: sha256 aaaa.*pinned bbbb"):
        bw.check_pinned(spec, None, tmp_path / "wh", pins)


def test_check_pinned_passes_or_reports_unpinned(tmp_path):
    spec, pins = _wheelhouse(tmp_path, LOCK)
    assert bw.check_pinned(spec, None, tmp_path / "wh", pins) == "unpinned"
    (pins / "cpu-r1.txt").write_text(LOCK)
    assert bw.check_pinned(spec, None, tmp_path / "wh", pins) == "pinned"


def test_the_committed_pins_are_locks():
    for pin in (ROOT / "roles" / "python_env" / "vars" / "locks").glob("*.txt"):
        entries = bw.lock_entries(pin.read_text())
        assert entries and all(len(h) == 64 for _v, h in entries.values()), pin


def test_a_newer_release_on_the_index_still_builds_the_locked_version(tmp_path, monkeypatch):
    """An index that gained dep 1.1 after the release's lock (dep 1.0) was committed: the build
    resolves within the lock, so the check after it passes; without a lock it takes the newest."""
    import os
    import sys
    import yaml
    uv = os.environ.get("UV") or str(Path(sys.executable).with_name("uv"))
    if not os.access(uv, os.X_OK):
        pytest.skip("no uv next to this interpreter")
    monkeypatch.setenv("UV", uv)
    monkeypatch.delenv("LLMFLEET_WHEEL_FIND_LINKS", raising=False)
    links = tmp_path / "links"
    for version in ("1.0", "1.1"):
        bw.build_alias_wheel("dep", version, [], links)
    spec = tmp_path / "v.yml"
    spec.write_text(yaml.safe_dump({"python_env_variant": {
        "name": "t", "arch": "testarch", "release": "r1", "build": "wheelhouse", "python": "3.11",
        "python_platform": "x86_64-manylinux_2_36", "no_index": True, "find_links": [str(links)],
        "packages": ["dep"]}}))
    unpinned = bw.build(spec, None, tmp_path / "a", force=False, verify=False, dry_run=False)
    assert [(e["name"], e["version"]) for e in unpinned["wheels"]] == [("dep", "1.1")]
    pins = tmp_path / "locks"
    pins.mkdir()
    lock = (tmp_path / "a" / "testarch-r1" / "lock.txt").read_text()
    sha10 = bw.sha256_file(next(links.glob("dep-1.0-*.whl")))
    (pins / "testarch-r1.txt").write_text(lock.replace("dep==1.1", "dep==1.0").split("--hash=sha256:")[0]
                                          + f"--hash=sha256:{sha10}\n")
    pinned = bw.build(spec, None, tmp_path / "b", force=False, verify=False, dry_run=False, pinned_dir=pins)
    assert [(e["name"], e["version"]) for e in pinned["wheels"]] == [("dep", "1.0")]
    assert bw.check_pinned(spec, None, tmp_path / "b", pins) == "pinned"
