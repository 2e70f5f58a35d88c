"""Controller-side preflight through ansible-playbook, one run per fixture inventory.

For every tests/unit/fixtures/inventories/<case>/hosts.yml this runs

    ansible-playbook playbooks/preflight.yml -i <case>/hosts.yml --tags preflight_controller

and checks the exit status, the report lines of <case>/expected.yml in the output (host, variable,
fix) and that no host was contacted: the fixture hosts have TEST-NET addresses and
``ansible_connection: ssh``, and ssh/scp/sftp (by option and on PATH) are a recorder script that
logs each call and fails, so any contact attempt shows up in the log. A positive control runs the
host play against the same inventory and expects the recorder to see the attempts.

The runs go in parallel (the table takes a few seconds). Run:
    .venv/bin/pytest tests/integration/preflight -q
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "unit" / "fixtures" / "inventories"
PLAYBOOK = ROOT / "playbooks" / "preflight.yml"
COLLECTIONS = ROOT / ".build" / "collections"
ANSIBLE_PLAYBOOK = Path(sys.executable).with_name("ansible-playbook")
CASES = sorted(p.name for p in FIXTURES.iterdir() if (p / "hosts.yml").is_file())
CONTROL = "host_play_contacts_hosts"  # positive control for the recorder
LIMITED = "limit_without_localhost"  # --limit leaves out localhost: the host play checks the inventory first
# name: (fixture inventory, extra ansible-playbook arguments)
SPECIAL = {
    CONTROL: ("good", ["--tags", "preflight_host"]),
    LIMITED: ("duplicate_fabric_ip", ["--limit", "spark2"]),
}

RECORDER = """#!/bin/sh
# Stands in for ssh/scp/sftp: record the attempt, reach nothing.
echo "$(basename "$0") $*" >> "${PREFLIGHT_CONTACT_LOG:?}"
echo "preflight test: contact attempt recorded, refused" >&2
exit 255
"""


def collection_link() -> None:
    link = COLLECTIONS / "ansible_collections" / "llmfleet" / "cluster"
    if not link.is_symlink():
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(ROOT)


def recorder_env(bin_dir: Path, work: Path, log: Path) -> dict:
    """The environment of an ansible run that must contact no host: ssh/scp/sftp are the recorder
    (it logs each attempt to `log` and refuses it), with this checkout's config and collection and
    a fact cache, control sockets and temp dir of the run's own under `work`."""
    return {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS),
        "ANSIBLE_SSH_EXECUTABLE": str(bin_dir / "ssh"),
        "ANSIBLE_SCP_EXECUTABLE": str(bin_dir / "scp"),
        "ANSIBLE_SFTP_EXECUTABLE": str(bin_dir / "sftp"),
        "ANSIBLE_SSH_CONTROL_PATH_DIR": str(work / "cp"),
        "ANSIBLE_CACHE_PLUGIN_CONNECTION": str(work / "facts"),
        "ANSIBLE_LOCAL_TEMP": str(work / "tmp"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_TIMEOUT": "5",
        "PREFLIGHT_CONTACT_LOG": str(log),
    }


def normalize(text: str) -> str:
    return " ".join(text.split())


def run_case(case: str, work: Path, bin_dir: Path) -> dict:
    log = work / f"{case}.contacts"
    report = work / f"{case}.json"
    inventory_case, args = SPECIAL.get(case, (case, ["--tags", "preflight_controller"]))
    env = recorder_env(bin_dir, work / case, log)
    cmd = [str(ANSIBLE_PLAYBOOK), str(PLAYBOOK), "-i", str(FIXTURES / inventory_case / "hosts.yml"),
           *args, "-e", f"preflight_report_json={report}"]
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    return {
        "rc": proc.returncode,
        "out": proc.stdout + proc.stderr,
        "seconds": time.monotonic() - start,
        "contacts": log.read_text() if log.exists() else "",
        "report": json.loads(report.read_text()) if report.exists() else None,
    }


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """All cases (and the control) run in parallel once; tests then read the results."""
    collection_link()
    work = tmp_path_factory.mktemp("preflight")
    bin_dir = work / "bin"
    bin_dir.mkdir()
    for name in ("ssh", "scp", "sftp"):
        path = bin_dir / name
        path.write_text(RECORDER)
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    names = CASES + list(SPECIAL)
    workers = max(2, min(8, (os.cpu_count() or 2) * 2))
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        results = dict(zip(names, pool.map(lambda c: run_case(c, work, bin_dir), names)))
    return results


def expected(case: str) -> dict:
    return yaml.safe_load((FIXTURES / case / "expected.yml").read_text())


@pytest.mark.parametrize("case", CASES)
def test_controller_preflight(runs, case):
    want = expected(case)
    res = runs[case]
    out = normalize(res["out"])
    tail = res["out"][-4000:]
    # exit status: 0 when the inventory is consistent, 2 (a failed task) when not
    assert res["rc"] == (0 if want["ok"] else 2), tail
    # every expected line, verbatim (modulo line wrapping), in the playbook output
    for line in want.get("present", []):
        assert normalize(line) in out, f"{line!r} not in output:\n{tail}"
    for unwanted in want.get("absent", []):
        assert not [line for line in res["out"].splitlines() if "FAIL" in line and unwanted in line], tail
    if not want["ok"]:
        assert "inventory problem(s), listed above as FAIL lines" in out
        assert "(no host was contacted)" in out
    # nothing tried to reach a host: no ssh/scp/sftp call; in the recap only localhost did anything
    # (the host play's --limit fallback shows as skipped on its first host)
    assert res["contacts"] == "", f"contact attempts:\n{res['contacts']}"
    recap = res["out"].split("PLAY RECAP", 1)[-1]
    stats = {h: dict(re.findall(r"(\w+)=(\d+)", rest)) for h, rest in re.findall(r"^(\S+)\s+:\s+(ok=.*)$", recap, re.M)}
    assert "localhost" in stats, recap
    for host, counts in stats.items():
        if host != "localhost":
            assert {k: counts[k] for k in ("ok", "changed", "unreachable", "failed")} == dict.fromkeys(
                ("ok", "changed", "unreachable", "failed"), "0"), recap
    # the JSON report says the same
    assert res["report"] is not None and res["report"]["ok"] is want["ok"]
    for line in want.get("present", []):
        assert any(line in got for got in res["report"]["lines"]), line


# Every bad-inventory case issue 9 lists, and the fixture(s) that cover it.
ISSUE_CASES = {
    "two heads in one cluster": ["two_heads", "two_heads_one_cluster"],
    "duplicate fabric IP": ["duplicate_fabric_ip"],
    "malformed fabric IP": ["malformed_fabric_ip"],
    "missing fabric IP": ["missing_fabric_ip"],
    "unknown arch": ["unknown_arch"],
    "TP x PP not matching the GPUs": ["tp_pp_mismatch", "tp_pp_vars_mismatch", "serve_nodes_mismatch"],
    "versions differing across the serving group": ["versions_differ"],
}
GOOD_CASES = ["good", "good_serve_nodes", "good_two_clusters"]


def test_table_covers_the_issue_cases():
    for case, fixtures in ISSUE_CASES.items():
        for name in fixtures:
            assert name in CASES, f"{case}: fixture {name} missing"
            assert expected(name)["ok"] is False, f"{case}: {name} must fail"
            assert any(line.startswith("FAIL ") for line in expected(name)["present"]), name
    for name in GOOD_CASES:
        assert name in CASES and expected(name)["ok"] is True, name


def test_recorder_sees_contact_attempts(runs):
    """Positive control: the host play does try to reach the fixture hosts, and the recorder logs it."""
    res = runs[CONTROL]
    assert res["rc"] != 0
    assert "192.0.2.10" in res["contacts"], res["out"][-3000:]
    assert "UNREACHABLE" in res["out"]


def test_limit_without_localhost_still_checks_first(runs):
    """--limit spark2 skips the localhost play; the host play runs the inventory check before any contact."""
    res = runs[LIMITED]
    assert res["rc"] == 2, res["out"][-3000:]
    assert normalize(expected("duplicate_fabric_ip")["present"][0]) in normalize(res["out"])
    assert res["contacts"] == "", f"contact attempts:\n{res['contacts']}"
    assert res["report"] is not None and res["report"]["ok"] is False
