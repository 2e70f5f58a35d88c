"""The serve role's preflight, run on this machine (connection local): the flag check's one task and
the memory fit's config.json read, with the role's own tasks and the real module. No lab, no engine.

nodea (ray_head) and nodeb (ray_workers) are both this machine, GB10 with RoCE (as in
tests/integration/memory_fit). The engine cannot run here: its venv is a real venv holding only
an engine dist-info of the version under test (what the module reads the version from), and
serve_help_command is a stand-in that prints the real `vllm serve --help=all` capture of vLLM
0.32.0 (engine_help/vllm-0.32.0.txt, from its 'usage:' line) and logs each run.

Run: .venv/bin/pytest tests/integration/serve_preflight -q
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import localplay  # noqa: E402  (tests/integration, shared with the other local-play tests)

ROOT = localplay.ROOT
FIXTURES = ROOT / "tests" / "unit" / "fixtures"
VERSION = "0.32.0+cpu"
TASK = "Check the engine flags against this build's --help"


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    localplay.link_collection()
    work = tmp_path_factory.mktemp("serve_preflight")
    localplay.serve_pair(work)
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    info = Path(site) / f"vllm-{VERSION}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {VERSION}\n")
    return work


def play(work: Path, case: str, extra: dict, *args: str) -> tuple[int, str, dict]:
    """The preflight with the flag check on, its cache and models under work/<case>."""
    base = work / case
    base.mkdir(exist_ok=True)
    capture = ROOT / "engine_help" / "vllm-0.32.0.txt"
    help_argv = ["sh", "-c", f"echo ran >> {shlex.quote(str(base / 'help.log'))}; "
                             f"sed -n '/^usage:/,$p' {shlex.quote(str(capture))}"]
    variables = {"common_applied": True, "ansible_become": False, "serve_firewall": False,
                 "serve_state": "started", "serve_flag_check": True, "serve_venv": str(work / "venv"),
                 "serve_help_command": {"vllm": help_argv}, "serve_help_cache_dir": str(base / "cache"),
                 "llmfleet_serve_profile": "sim-tiny-llama", **extra}
    env = localplay.ansible_env(work, ANSIBLE_FORCE_COLOR="0", ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    rc, out = localplay.run_playbook(work / "preflight_only.yml", work / "hosts.yml", variables, *args, env=env)
    return rc, out, localplay.json_tasks(out, rc)[0]


def help_runs(work: Path, case: str) -> int:
    log = work / case / "help.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_flag_check_caches_the_help_once_and_check_mode_writes_nothing(work):
    rc, out, tasks = play(work, "cache", {}, "--check")
    assert rc == 0, out[-4000:]
    assert help_runs(work, "cache") == 2 and not (work / "cache" / "cache").exists()  # ran, wrote nothing
    assert all(r["changed"] and r["ok"] for r in tasks[TASK].values()), tasks[TASK]

    rc, out, tasks = play(work, "cache", {})
    assert rc == 0, out[-4000:]
    cache = work / "cache" / "cache" / f"vllm-{VERSION}-help.txt"
    assert cache.read_text().startswith("usage: vllm serve") and "--max-num-seqs" in cache.read_text()
    # nodea and nodeb share this machine: the first to write the cache may spare the other the run
    assert 1 <= help_runs(work, "cache") - 2 <= 2 and any(r["changed"] for r in tasks[TASK].values())
    for host, res in tasks[TASK].items():
        assert res["version"] == VERSION and res["help_cache"] == str(cache), (host, res)
        assert re.fullmatch(rf"1\d flags known to vllm {re.escape(VERSION)}", res["msg"]), res["msg"]
    runs = help_runs(work, "cache")

    rc, out, tasks = play(work, "cache", {})
    assert rc == 0, out[-4000:]
    assert help_runs(work, "cache") == runs  # the second run reads the cache
    assert all(not r["changed"] and r["cached"] for r in tasks[TASK].values()), tasks[TASK]


def test_a_removed_flag_stops_the_preflight_naming_host_flag_version(work):
    """What molecule/cluster's test_removed_flag_fails_before_anything_stops looks for, without the lab."""
    extra = {"llmfleet_serve_profile": "sim-tiny-llama-oldflag", "llmfleet_serve_profiles_extra": {
        "sim-tiny-llama-oldflag": {"extends": "sim-tiny-llama", "args": {"--swap-space": 4},
                                   "gates": {"--swap-space": None}}}}
    rc, out, tasks = play(work, "refuse", extra)
    assert rc == 2, out[-4000:]
    for host in ("nodea", "nodeb"):
        res = tasks[TASK][host]
        assert res["failed"] and res["errors"] == [
            f"vllm {VERSION}: unknown flag --swap-space: this build's --help does not list it"]
        assert res["msg"] == (
            f"{host}: vllm {VERSION} would refuse profile sim-tiny-llama-oldflag: vllm {VERSION}: unknown flag "
            "--swap-space: this build's --help does not list it. Nothing was stopped or started. Fix the "
            "profile's args/gates (or llmfleet_serve_profiles_extra), or install an engine release that has these flags.")


@pytest.mark.parametrize("layout, source", [
    ("file", "{models}/tiny-llama/config.json"),
    ("directory", "profile model_facts"),   # a directory named config.json is no config
    ("none", "profile model_facts"),
])
def test_memory_fit_reads_the_node_copy_of_config_json(work, layout, source):
    models = work / f"memfit-{layout}" / "models"
    (models / "tiny-llama").mkdir(parents=True)
    if layout == "file":
        shutil.copy(FIXTURES / "model_configs" / "tiny-llama.json", models / "tiny-llama" / "config.json")
    elif layout == "directory":
        (models / "tiny-llama" / "config.json").mkdir()
    # the sim profile names its model by path (the node copy): point it here
    extra = {"llmfleet_serve_profiles_extra": {"sim-tiny-llama": {"model": str(models / "tiny-llama")}}}
    rc, out, tasks = play(work, f"memfit-{layout}", extra)
    assert rc == 0, out[-4000:]
    line = json.dumps(tasks["Memory fit | the numbers (one line per node)"]["nodea"]["msg"])
    assert f"dims from {source.format(models=models)}" in line, line
