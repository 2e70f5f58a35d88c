"""The python_env role's build-from-source path (build: source variants) on this machine.

Two inventory hosts, nodea and nodeb, are both this machine (connection local) with their own
prefixes under a temp dir: venvs, wheelhouse copy and build dir per host, one controller cache.
The variant is written here: its binary part is uv + setuptools (wheels taken from a local
wheelhouse, else downloaded from PyPI once), resolved with --no-index; its source package is
tests/integration/python_env_source/testext, a real C extension packed as an sdist and compiled
by gcc on the build node with the variant's build_env (TORCH_CUDA_ARCH_LIST and MAX_JOBS are
compiled into it; PATH_PREPEND puts a compiler wrapper first, and CC names it).

Checked: the build runs once, on nodea (first host sorted), the wheel comes back into the
controller's wheelhouse and its lock, both nodes install it offline and end byte-identical with
the lock's hashes; a second run changes nothing and does not rebuild; check mode with a changed
build_env builds nothing; python_env_build_host outside the play is refused; a broken build fails
fast naming the build host with its log's tail, and the other node fails naming the build node.
About 5 ansible-playbook runs, 60-120 s. Run: .venv/bin/pytest tests/integration/python_env_source -q
"""
from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import localplay  # noqa: E402  (tests/integration, shared with the other local-play tests)

ROOT = localplay.ROOT
PLAYBOOK = ROOT / "playbooks" / "python_env.yml"
TESTEXT = Path(__file__).resolve().parent / "testext"
HOSTS = ("nodea", "nodeb")
UV_VERSION = "0.13.9"
SETUPTOOLS = "78.1.1"
NAME = "llmfleet-testext"

# Per dist of a venv: {relative path: sha256} of every installed file (bytecode and the
# installer's own records left out: they are written at install time, not taken from the wheel).
LIST_FILES = r"""
import hashlib, importlib.metadata as md, json, sys
out = {}
for d in md.distributions():
    files = {}
    for f in d.files or []:
        p = str(f)
        if "__pycache__" in p or p.endswith((".dist-info/RECORD", ".dist-info/INSTALLER",
                                              ".dist-info/direct_url.json", ".dist-info/REQUESTED",
                                              ".dist-info/uv_cache.json")):
            continue
        files[p] = hashlib.sha256(f.locate().read_bytes()).hexdigest()
    out[d.metadata["Name"].lower().replace("_", "-")] = {"version": d.version, "files": files}
print(json.dumps(out))
"""


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def seed_wheels(dest: Path) -> None:
    """uv and setuptools wheels for the binary part: from a local wheelhouse, else from PyPI."""
    dest.mkdir(parents=True, exist_ok=True)
    caches = [os.environ.get("LLMFLEET_CACHE", ""), str(Path.home() / ".cache" / "llmfleet"), str(ROOT / ".cache")]
    for pattern in (f"uv-{UV_VERSION}-*manylinux*x86_64*.whl", f"setuptools-{SETUPTOOLS}-py3-none-any.whl"):
        found = [f for c in caches if c for f in glob.glob(os.path.join(c, "wheelhouse", "*", pattern))]
        if found:
            shutil.copyfile(found[0], dest / os.path.basename(found[0]))
    if len(list(dest.glob("*.whl"))) < 2:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q",
                        "--platform", "manylinux2014_x86_64", "-d", str(dest),
                        f"uv=={UV_VERSION}", f"setuptools=={SETUPTOOLS}"], check=True, timeout=300)


def make_sdist(dest: Path) -> Path:
    path = dest / "llmfleet_testext-1.0.tar.gz"
    with tarfile.open(path, "w:gz") as tf:
        for f in sorted(TESTEXT.rglob("*")):
            if f.is_file() and "__pycache__" not in f.parts:
                tf.add(f, arcname=f"llmfleet_testext-1.0/{f.relative_to(TESTEXT)}")
    return path


class Lab:
    """The temp tree, the variant files and one ansible-playbook runner."""

    def __init__(self, work: Path):
        self.work = work
        self.cache = work / "cache"
        self.variants = work / "variants"
        self.variants.mkdir()
        (work / "tmp").mkdir()
        seed_wheels(work / "wheels")
        self.sdist = make_sdist(work)
        self.toolbin = work / "toolbin"
        self.toolbin.mkdir()
        cc = self.toolbin / "llmfleet-cc"
        cc.write_text('#!/bin/sh\nexec gcc -DLLMFLEET_VIA_WRAPPER=1 "$@"\n')
        cc.chmod(0o755)
        hosts = {h: {"python_env_prefix": str(work / h / "venvs"),
                     "python_env_wheelhouse_dir": str(work / h / "wheelhouse"),
                     "python_env_build_dir": str(work / h / "build")} for h in HOSTS}
        self.inventory = work / "hosts.yml"
        self.inventory.write_text(yaml.safe_dump({"all": {
            "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                     "llmfleet_fabric_ip": "127.0.0.1", "llmfleet_gpu_arch": "testext"},
            "hosts": hosts,
            "children": {"ray_head": {"hosts": {"nodea": None}}, "ray_workers": {"hosts": {"nodeb": None}}},
        }}))

    def variant(self, name: str, release: str, **build_env) -> Path:
        env = {"TORCH_CUDA_ARCH_LIST": "11.0a", "MAX_JOBS": "1", "NVCC_THREADS": "1",
               "PATH_PREPEND": str(self.toolbin), "CC": "llmfleet-cc", **build_env}
        path = self.variants / f"{name}.yml"
        path.write_text(yaml.safe_dump({"python_env_variant": {
            "name": name, "engine": NAME, "arch": "testext", "release": release, "build": "source",
            "python": "3.11", "python_platform": "x86_64-manylinux_2_36", "no_index": True,
            "find_links": [str(self.work / "wheels")], "index_strategy": "first-index",
            "packages": [f"uv=={UV_VERSION}", f"setuptools=={SETUPTOOLS}"],
            "source": {"name": NAME, "requirement": str(self.sdist), "version": "1.0", "resolve_deps": False},
            "build_env": env, "build_system_packages": ["build-essential"], "system_packages": [],
            "runtime_env": {}}}))
        return path

    def wheelhouse(self, release: str) -> Path:
        return self.cache / "wheelhouse" / f"testext-{release}"

    def run(self, variant: str, release: str, *args: str, tags: str = "python_env_install,python_env_run", **extra) -> dict:
        env = localplay.ansible_env(self.work, ANSIBLE_CACHE_PLUGIN="memory",
                                    ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
        extra = {"ansible_become": False, "python_env_variant_name": variant,
                 "llmfleet_variants_dir": str(self.variants), "llmfleet_release": release,
                 "python_env_controller_cache": str(self.cache), "python_env_system_packages": False,
                 "python_env_build_poll": 1, **extra}
        t0 = time.monotonic()
        rc, raw = localplay.run_playbook(PLAYBOOK, self.inventory, extra, "--tags", tags,
                                         "--skip-tags", "common", *args, env=env, timeout=600)
        tasks, stats = localplay.json_tasks(raw, rc)
        return {"rc": rc, "tasks": tasks, "stats": stats, "raw": raw, "seconds": time.monotonic() - t0}


def explain(res: dict) -> str:
    """The failed tasks of a run (task, host, message), for assertion messages."""
    lines = []
    for name, per_host in res["tasks"].items():
        for host, r in per_host.items():
            for item in r.get("results", []):
                if item.get("failed"):
                    lines.append("%s | %s | item %s | %s" % (name, host, item.get("item"),
                                                             (item.get("stderr") or item.get("msg") or "")[-2000:]))
            if r.get("failed"):
                lines.append("%s | %s | %s %s" % (name, host, r.get("msg", ""), (r.get("stderr") or "")[-2000:]))
    return "\n".join(lines) or res["raw"][-3000:]


def ran(res: dict, task_prefix: str) -> list[str]:
    """Hosts on which a task (name starting with task_prefix) ran, not skipped."""
    hosts = set()
    for name, per_host in res["tasks"].items():
        if name.startswith(task_prefix):
            hosts |= {h for h, r in per_host.items() if not r.get("skipped")}
    return sorted(hosts)


def lock_entries(path: Path) -> dict[str, tuple[str, str]]:
    out = {}
    for line in path.read_text().splitlines():
        m = re.match(r"^(\S+)==(\S+) --hash=sha256:([0-9a-f]{64})$", line)
        if m:
            out[m.group(1)] = (m.group(2), m.group(3))
    return out


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    localplay.link_collection()
    for tool in ("gcc", "rsync"):
        if subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True, check=False).returncode:
            pytest.skip(f"{tool} is not installed")
    if not Path("/usr/bin/python3").exists():
        pytest.skip("no /usr/bin/python3 (the nodes' interpreter)")
    lab = Lab(tmp_path_factory.mktemp("python-env-source"))
    lab.variant("testext", "testext-1.0")
    lab.first = lab.run("testext", "testext-1.0")
    return lab


def test_built_once_on_the_build_node(lab):
    res = lab.first
    assert res["rc"] == 0, explain(res)
    assert ran(res, "Start the source build") == ["nodea"]
    assert ran(res, "Lock the built wheel into the wheelhouse") == ["nodea"]
    log = (lab.work / "nodea" / "build" / "testext-testext-1.0" / "build.log").read_text()
    assert "build_env TORCH_CUDA_ARCH_LIST=11.0a" in log and "build_env MAX_JOBS=1" in log
    assert re.search(r"llmfleet-cc .*-DLLMFLEET_ARCH_LIST=", log), log[-3000:]   # pip -v shows the compile line
    assert not (lab.work / "nodeb" / "build").exists()


def test_lock_lists_the_built_wheel(lab):
    wh = lab.wheelhouse("testext-1.0")
    (wheel,) = wh.glob("llmfleet_testext-1.0-*.whl")
    assert wheel.name.endswith("-cp311-cp311-linux_x86_64.whl"), wheel.name
    lock = lock_entries(wh / "lock.txt")
    assert lock[NAME] == ("1.0", sha256(wheel))
    assert set(lock) == {NAME, "uv", "setuptools"}
    assert lock_entries(wh / "build-lock.txt").keys() == {"uv", "setuptools"}
    sums = dict(reversed(line.split("  ")) for line in (wh / "SHA256SUMS").read_text().splitlines())
    assert sums[wheel.name] == sha256(wheel)
    manifest = json.loads((wh / "manifest.json").read_text())
    built = manifest["source_build"]
    assert (built["built_on"], built["sha256"], built["spec_digest"], manifest["complete"]) == \
        ("nodea", sha256(wheel), manifest["spec_digest"], True)
    assert built["build_env"]["TORCH_CUDA_ARCH_LIST"] == "11.0a"


def test_both_nodes_install_the_same_bytes_offline(lab):
    wh = lab.wheelhouse("testext-1.0")
    lock = lock_entries(wh / "lock.txt")
    # the sync runs as an async job; its wait returns the job's own result (the command's argv)
    sync = lab.first["tasks"]["Wait for the venv sync, printing progress (the venv's size so far)"]
    sets = {}
    for host in HOSTS:
        argv = sync[host]["cmd"]
        assert {"--offline", "--no-index", "--require-hashes"} <= set(argv), argv
        copy = lab.work / host / "wheelhouse" / "testext-testext-1.0"
        for whl in copy.glob("*.whl"):
            name = re.sub(r"[-_.]+", "-", whl.name.split("-")[0]).lower()
            assert sha256(whl) == lock[name][1], (host, whl.name)
        py = lab.work / host / "venvs" / "testext-1.0" / "bin" / "python"
        out = subprocess.run([str(py), "-c", "import llmfleet_testext as t; print(t.arch_list(), t.max_jobs(), "
                              "t.via_wrapper(), t.dot(10), t.__file__)"],
                             capture_output=True, text=True, check=True, timeout=60).stdout.split()
        assert out[:4] == ["11.0a", "1", "1", "385"], out
        assert out[4].startswith(str(lab.work / host / "venvs")), out
        sets[host] = json.loads(subprocess.run([str(py), "-c", LIST_FILES], capture_output=True, text=True,
                                               check=True, timeout=60).stdout)
        assert {n: d["version"] for n, d in sets[host].items()} == {n: v for n, (v, _h) in lock.items()}
    assert sets["nodea"] == sets["nodeb"]
    so = [p for p in sets["nodea"][NAME]["files"] if p.endswith(".so")]
    assert len(so) == 1, sets["nodea"][NAME]


@pytest.fixture(scope="module")
def second_run(lab):
    """The same run again (one run for the two no-op checks below): its result, and the built
    wheel's and build log's identity before and after it."""
    wheel = next(lab.wheelhouse("testext-1.0").glob("llmfleet_testext-*.whl"))
    log = lab.work / "nodea" / "build" / "testext-testext-1.0" / "build.log"

    def identity():
        return (wheel.stat().st_ino, wheel.stat().st_mtime_ns, log.stat().st_mtime_ns)
    before = identity()
    res = lab.run("testext", "testext-1.0")
    return res, before, identity()


def test_second_run_changes_nothing_and_does_not_rebuild(second_run):
    res, before, after = second_run
    assert res["rc"] == 0, explain(res)
    assert {h: res["stats"][h]["changed"] for h in HOSTS} == {"nodea": 0, "nodeb": 0}, explain(res)
    assert ran(res, "Start the source build") == []
    assert ran(res, "Ask the controller whether the wheelhouse holds") == ["nodea"]
    assert after == before


def test_a_no_op_run_reads_each_venv_once(second_run):
    """The install decision is one module call per node; a venv that holds its lock gets no install task,
    and the verify reuses that reading (no second listing)."""
    res = second_run[0]
    assert res["rc"] == 0, explain(res)
    assert ran(res, "Read the release venv against its lock") == list(HOSTS)
    assert ran(res, "Read the venv against its lock again") == []                     # the verify reuses it
    reads = [r for name, per_host in res["tasks"].items() if name == "Read the release venv against its lock"
             for r in per_host.values() if not r.get("skipped")]
    assert len(reads) == 2 and all(r["reason"] == "matches its lock" and r["listed"] for r in reads), reads
    assert ran(res, "Install the release venv as chosen") == []
    assert ran(res, "Stamp the venv") == [] and ran(res, "Check that the engine CLI answers") == []


def test_planted_drift_is_caught_then_repaired(lab):
    """A package version changed by hand behind a good stamp: the verify fails naming it; the install
    re-syncs that node only (changed on it, nothing on the other) and ends on the locked version."""
    site = next((lab.work / "nodeb" / "venvs" / "testext-1.0" / "lib").glob("python3*/site-packages"))
    (meta,) = site.glob("llmfleet_testext-1.0.dist-info/METADATA")
    meta.write_text(meta.read_text().replace("Version: 1.0", "Version: 9.9"))
    res = lab.run("testext", "testext-1.0", tags="python_env_run")
    assert res["rc"] == 2, explain(res)
    msg = " ".join(res["tasks"]["Assert the venv holds exactly its lock"]["nodeb"]["msg"].split())
    assert "nodeb: %s/nodeb/venvs/testext-1.0 differs from its lock: llmfleet-testext locked 1.0 installed 9.9;" \
        % lab.work in msg, msg
    res = lab.run("testext", "testext-1.0")
    assert res["rc"] == 0, explain(res)
    report = " ".join(res["tasks"]["Report drift that the sync below repairs"]["nodeb"]["msg"].split())
    assert report == "nodeb: %s/nodeb/venvs/testext-1.0 drifted from its lock: llmfleet-testext locked 1.0 " \
        "installed 9.9; reinstalling it" % lab.work, report
    assert {h: res["stats"][h]["changed"] >= 1 for h in HOSTS} == {"nodea": False, "nodeb": True}, explain(res)
    versions = {h: subprocess.run([str(lab.work / h / "venvs" / "testext-1.0" / "bin" / "python"), "-c",
                                   "import importlib.metadata as m; print(m.version('llmfleet-testext'))"],
                                  capture_output=True, text=True, check=True, timeout=60).stdout.strip() for h in HOSTS}
    assert versions == {"nodea": "1.0", "nodeb": "1.0"}
    res = lab.run("testext", "testext-1.0")
    assert {h: res["stats"][h]["changed"] for h in HOSTS} == {"nodea": 0, "nodeb": 0}, explain(res)


def test_check_mode_with_a_changed_build_env_builds_nothing(lab):
    wh = lab.wheelhouse("testext-1.0")
    lock_before = (wh / "lock.txt").read_bytes()
    log = lab.work / "nodea" / "build" / "testext-testext-1.0" / "build.log"
    log_before = log.stat().st_mtime_ns
    lab.variant("testext-check", "testext-1.0", MAX_JOBS="2")
    try:
        res = lab.run("testext-check", "testext-1.0", "--check")
    finally:
        (lab.variants / "testext-check.yml").unlink()
    assert res["rc"] == 0, explain(res)
    report = res["tasks"]["Report a source build that check mode skips"]
    assert "nodea would build" in report["nodea"]["msg"] and report["nodeb"].get("skipped"), report
    assert ran(res, "Start the source build") == []
    assert (wh / "lock.txt").read_bytes() == lock_before and log.stat().st_mtime_ns == log_before


def test_build_host_outside_the_play_is_refused(lab):
    res = lab.run("testext", "testext-1.0", python_env_build_host="thor9")
    assert res["rc"] == 2, explain(res)
    msg = res["tasks"]["Assert the build node is one host of this play and arch"]["nodea"]["msg"]
    assert "nodea: python_env_build_host=thor9 for wheelhouse testext-testext-1.0" in msg
    assert "one of nodea, nodeb" in msg


def test_broken_build_fails_naming_the_host_and_its_log_tail(lab):
    lab.variant("testext-broken", "testext-broken", CFLAGS="-DLLMFLEET_TESTEXT_BREAK")
    res = lab.run("testext-broken", "testext-broken", python_env_build_host="nodeb")
    assert res["rc"] == 2, explain(res)
    fail = res["tasks"]["Fail with the build log"]["nodeb"]
    msg = fail["msg"]
    assert fail["failed"] and msg.startswith("nodeb: building %s from source for testext-testext-broken\nfailed (rc 1)"
                                             % lab.sdist), msg
    assert "LLMFLEET_TESTEXT_BREAK is set, this build fails on purpose" in msg          # the compiler's error, from the tail
    assert "%s/nodeb/build/testext-testext-broken/build.log" % lab.work in msg
    other = res["tasks"]["Fail when the source package was not built"]["nodea"]
    assert other["failed"] and "was not built. The build node is nodeb" in other["msg"], other
    assert not (lab.wheelhouse("testext-broken") / "lock.txt").exists()
    assert not (lab.work / "nodea" / "venvs" / "testext-broken").exists()
