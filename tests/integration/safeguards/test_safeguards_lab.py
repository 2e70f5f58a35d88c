"""Memory safeguards and teardown against a converged simulated lab (real systemd, earlyoom, vLLM CPU).

    python3 tools/simlab/simlab.py up --nodes 2 --name sg
    ansible-playbook site.yml -i .lab/sg/hosts.yml
    LLMFLEET_LAB_INVENTORY=.lab/sg/hosts.yml .venv/bin/pytest tests/integration/safeguards -q -s

Skips without LLMFLEET_LAB_INVENTORY. The tests run in file order and change the lab: the
engine's API process on the serving head is frozen with SIGSTOP (the watchdog must restart the
unit), then teardown.yml removes every llmfleet unit and site.yml converges the lab again, so the
lab ends converged and serving. On a 2-core box the whole file takes ~20 min (two engine loads of
~5 min each). Talks only to the lab's nodes (ansible ad hoc over their management network) and to
the serving head's API on the fabric network.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
COLLECTIONS = ROOT / ".build" / "collections"
BIN = Path(sys.executable).parent
RECAP_RE = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)
DEFAULTS = yaml.safe_load((ROOT / "roles" / "safeguards" / "defaults" / "main.yml").read_text())
UNIT = "llmfleet-serve-tiny-llama"  # the sim profile's served model (profiles/sim-tiny-llama.yml)

INVENTORY = os.environ.get("LLMFLEET_LAB_INVENTORY", "")
pytestmark = pytest.mark.skipif(not INVENTORY, reason="LLMFLEET_LAB_INVENTORY is not set (a converged simlab inventory)")


# ----------------------------------------------------------------------------- helpers
def lab():
    """Hosts, serving group, head and fabric IPs of the lab inventory (the file simlab writes)."""
    doc = yaml.safe_load(Path(INVENTORY).read_text())["all"]
    hosts, groups = {}, {}

    def walk(name, node):
        node = node or {}
        for h, hv in (node.get("hosts") or {}).items():
            groups.setdefault(name, []).append(h)
            hosts.setdefault(h, {}).update(hv or {})
        for child, sub in (node.get("children") or {}).items():
            walk(child, sub)

    walk("all", doc)
    head = groups["ray_head"][0]
    workers = [h for h in groups.get("ray_workers", []) if h != head]
    serving = groups.get("serve_nodes") or [head] + workers
    return {"hosts": sorted(hosts), "head": head, "serving": serving, "api": serving[0],
            "fabric_ip": {h: v["llmfleet_fabric_ip"] for h, v in hosts.items() if "llmfleet_fabric_ip" in v}}


def env(work: Path) -> dict:
    link = COLLECTIONS / "ansible_collections" / "llmfleet" / "cluster"
    if not link.is_symlink():
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(ROOT)
    return {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS),
            # a fact cache of its own: the lab's host names are the same as the lead's sim lab's
            "ANSIBLE_CACHE_PLUGIN_CONNECTION": str(work / "facts"), "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_FORCE_COLOR": "0", "PATH": f"{BIN}:{os.environ.get('PATH', '')}"}


def playbook(work: Path, path: str, *args: str, timeout: int = 1800) -> dict:
    t0 = time.monotonic()
    proc = subprocess.run([str(BIN / "ansible-playbook"), str(ROOT / path), "-i", INVENTORY, *args],
                          cwd=ROOT, env=env(work), capture_output=True, text=True, timeout=timeout, check=False)
    out = proc.stdout + proc.stderr
    recap = {m.group(1): {"ok": int(m.group(2)), "changed": int(m.group(3)), "unreachable": int(m.group(4)),
                          "failed": int(m.group(5))} for m in RECAP_RE.finditer(proc.stdout)}
    return {"rc": proc.returncode, "raw": out, "recap": recap, "seconds": time.monotonic() - t0}


def sh(work: Path, host: str, cmd: str) -> str:
    """Run a shell command as root on a lab node (ansible ad hoc, the lab's own ssh settings)."""
    proc = subprocess.run([str(BIN / "ansible"), host, "-i", INVENTORY, "-b", "-o", "-m", "ansible.builtin.shell",
                           "-a", cmd], cwd=ROOT, env=env(work), capture_output=True, text=True, timeout=180, check=False)
    if proc.returncode != 0:
        raise AssertionError(f"{host}: {cmd} failed: {proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return proc.stdout.split("(stdout) ", 1)[1].replace("\\n", "\n").strip() if "(stdout) " in proc.stdout else ""


def props(work: Path, host: str, unit: str, *names: str) -> dict:
    out = sh(work, host, f"systemctl show {unit} " + " ".join(f"-p {n}" for n in names))
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def health(ip: str, timeout: float = 5) -> bool:
    try:
        with urllib.request.urlopen(f"http://{ip}:8000/health", timeout=timeout) as resp:
            return resp.status == 200
    except OSError:
        return False


def completion(ip: str) -> dict:
    body = json.dumps({"model": "tiny-llama", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}).encode()
    req = urllib.request.Request(f"http://{ip}:8000/v1/chat/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as resp:
        return json.loads(resp.read())


def wait_for(predicate, timeout, step=5):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        try:
            if predicate():
                return time.monotonic() - t0
        except AssertionError:
            pass
        time.sleep(step)
    raise AssertionError(f"condition not met within {timeout}s")


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("safeguards-lab")


# ----------------------------------------------------------------------------- the role
@pytest.fixture(scope="module")
def converged(work):
    first = playbook(work, "playbooks/safeguards.yml")
    assert first["rc"] == 0, first["raw"][-6000:]
    second = playbook(work, "playbooks/safeguards.yml")
    print(f"\nsafeguards.yml: {first['seconds']:.0f}s, again {second['seconds']:.0f}s")
    return first, second


def test_second_run_changes_nothing(converged):
    _first, second = converged
    assert second["rc"] == 0, second["raw"][-6000:]
    assert set(second["recap"]) >= set(lab()["hosts"])
    changed = {h: r["changed"] for h, r in second["recap"].items() if r["changed"]}
    assert not changed, second["raw"][-6000:]


def test_check_diff_on_a_converged_lab_changes_nothing(work, converged):
    res = playbook(work, "playbooks/safeguards.yml", "--check", "--diff")
    assert res["rc"] == 0, res["raw"][-6000:]
    assert all(r["changed"] == 0 for r in res["recap"].values()), res["raw"][-6000:]


def test_sshd_never_an_oom_victim(work, converged):
    for host in lab()["hosts"]:
        assert props(work, host, "ssh", "OOMScoreAdjust")["OOMScoreAdjust"] == "-1000", host
        assert sh(work, host, "sshd -t && echo ok") == "ok"


def test_earlyoom_runs_with_prefer_and_avoid(work, converged):
    topo = lab()
    for host in topo["hosts"]:
        assert sh(work, host, "systemctl is-active earlyoom") == "active", host
        argv = sh(work, host, "tr '\\0' '\\n' < /proc/$(systemctl show -p MainPID --value earlyoom)/cmdline").splitlines()
        prefer, avoid = argv[argv.index("--prefer") + 1], argv[argv.index("--avoid") + 1]
        assert prefer == DEFAULTS["safeguards_earlyoom_prefer"] and avoid == DEFAULTS["safeguards_earlyoom_avoid"]
    # the regexes against the real process names (/proc/PID/comm) of the running lab
    head = topo["api"]
    engine = sh(work, head, f"for p in $(cat /sys/fs/cgroup/systemd/system.slice/{UNIT}.service/cgroup.procs "
                            f"2>/dev/null || systemctl show -p MainPID --value {UNIT}); do cat /proc/$p/comm; done").split()
    keep = sh(work, head, "for p in $(pgrep -x sshd) $(pgrep -x gcs_server) $(pgrep -x raylet) 1 "
                          "$(pgrep -x systemd-journal); do cat /proc/$p/comm; done").split()
    ray_workers = sh(work, head, "for p in $(pgrep '^ray::'); do cat /proc/$p/comm; done").split()
    print(f"\nengine processes: {sorted(set(engine))}; Ray workers: {sorted(set(ray_workers))}; protected: {sorted(set(keep))}")
    assert engine and {"sshd", "gcs_server", "systemd"} <= set(keep)
    for comm in engine + ray_workers:
        assert re.search(prefer, comm) and not re.search(avoid, comm), comm
    for comm in keep:
        assert re.search(avoid, comm) and not re.search(prefer, comm), comm


def test_serve_units_capped(work, converged):
    for host in lab()["serving"]:
        p = props(work, host, UNIT, "MemoryMax", "OOMScoreAdjust", "DropInPaths")
        total = int(sh(work, host, "awk '/MemTotal/ {print $2 * 1024}' /proc/meminfo"))
        assert p["MemoryMax"].isdigit() and 0 < int(p["MemoryMax"]) < total, p
        assert p["OOMScoreAdjust"] == str(DEFAULTS["safeguards_serve_oom_score_adjust"])
        assert f"/etc/systemd/system/{UNIT}.service.d/50-llmfleet-safeguards.conf" in p["DropInPaths"]
        # the serve role's unit file itself is untouched
        assert "MemoryMax" not in sh(work, host, f"cat /etc/systemd/system/{UNIT}.service")


def test_watchdog_timer_on_every_rank(work, converged):
    """Every rank probes the API on the head (a restarted rank 0 alone waits for its old peers)."""
    topo = lab()
    for host in topo["serving"]:
        assert sh(work, host, f"systemctl is-active llmfleet-watchdog@{UNIT}.timer") == "active", host
        cfg = json.loads(sh(work, host, f"cat /etc/llmfleet/safeguards/{UNIT}.json"))
        assert cfg["health_url"] == f"http://{topo['fabric_ip'][topo['api']]}:8000/health"
        assert cfg["failures"] == DEFAULTS["safeguards_watchdog_failures"]
    user = props(work, topo["api"], f"llmfleet-watchdog@{UNIT}.service", "User", "NoNewPrivileges", "ProtectSystem")
    assert user == {"User": "llmfleet", "NoNewPrivileges": "yes", "ProtectSystem": "strict"}


def test_watchdog_restarts_a_hung_engine(work, converged):
    """SIGSTOP the API process: after N failed probes the unit restarts and /health answers again."""
    topo = lab()
    head, ip = topo["api"], topo["fabric_ip"][topo["api"]]
    interval, failures = DEFAULTS["safeguards_watchdog_interval"], DEFAULTS["safeguards_watchdog_failures"]
    assert wait_for(lambda: health(ip), 900) is not None
    # a first probe must have seen it healthy (a never-healthy engine counts as loading)
    wait_for(lambda: "healthy" in sh(work, head, f"journalctl -u llmfleet-watchdog@{UNIT} -o cat --no-pager | tail -50"),
             interval * 2 + 30)
    before = props(work, head, UNIT, "MainPID", "InvocationID", "ActiveEnterTimestampMonotonic")
    other_before = {h: props(work, h, UNIT, "ActiveEnterTimestampMonotonic")["ActiveEnterTimestampMonotonic"]
                    for h in topo["serving"] if h != head}
    sh(work, head, f"kill -STOP {before['MainPID']}")
    t0 = time.monotonic()
    try:
        assert not health(ip, timeout=5)
        bound = interval * (failures + 1) + 30 + 60  # probes, timer slack, stop timeout (TimeoutStopSec)

        def restarted():
            now = props(work, head, UNIT, "MainPID", "InvocationID", "ActiveState")
            return now["InvocationID"] != before["InvocationID"] and now["ActiveState"] == "active"
        took_restart = wait_for(restarted, bound)
    finally:
        # never leave a frozen process behind, whatever happened
        sh(work, head, f"kill -CONT {before['MainPID']} 2>/dev/null || true")
    after = props(work, head, UNIT, "MainPID", "InvocationID", "ActiveEnterTimestampMonotonic")
    assert after["MainPID"] != before["MainPID"]
    assert int(after["ActiveEnterTimestampMonotonic"]) > int(before["ActiveEnterTimestampMonotonic"])
    journal = sh(work, head, f"journalctl -u llmfleet-watchdog@{UNIT} -u llmfleet-watchdog-restart@{UNIT} "
                             f"-o cat --no-pager --since '-{int(time.monotonic() - t0) + 120}s'")
    assert f"failed {failures} consecutive health probes: restarting it" in journal, journal[-3000:]
    assert f"({failures}/{failures})" in journal
    for host in topo["serving"]:
        if host != head:
            # the other ranks probed the same API and restarted their own units
            assert wait_for(lambda h=host: props(work, h, UNIT, "ActiveEnterTimestampMonotonic")["ActiveEnterTimestampMonotonic"]
                            != other_before[h], bound) is not None, host
    took_healthy = wait_for(lambda: health(ip), 900)
    doc = completion(ip)
    assert doc["usage"]["completion_tokens"] >= 1
    # the restarted engine runs with the drop-in's OOM score; its load was logged with MemAvailable
    assert sh(work, head, f"cat /proc/{after['MainPID']}/oom_score_adj") == str(DEFAULTS["safeguards_serve_oom_score_adjust"])
    headroom = sh(work, head, f"journalctl -u llmfleet-headroom@{UNIT} -o cat --no-pager | tail -5")
    assert "lowest MemAvailable during load" in headroom, headroom
    print(f"\nrestarted {took_restart:.0f}s after SIGSTOP (bound {bound}s), healthy again {took_healthy:.0f}s later; "
          f"{headroom.splitlines()[-1]}")


# ----------------------------------------------------------------------------- teardown
def unit_files(work, host):
    return sh(work, host, "systemctl list-unit-files --no-legend --no-pager 'llmfleet*' || true")


def test_teardown_check_mode_removes_nothing(work):
    res = playbook(work, "playbooks/teardown.yml", "--check", "--diff")
    assert res["rc"] == 0, res["raw"][-6000:]
    assert all(r["changed"] > 0 for r in res["recap"].values())
    assert UNIT in unit_files(work, lab()["api"])
    assert health(lab()["fabric_ip"][lab()["api"]])


def test_teardown_leaves_no_unit_and_keeps_venvs(work):
    topo = lab()
    res = playbook(work, "playbooks/teardown.yml")
    assert res["rc"] == 0, res["raw"][-6000:]
    print(f"\nteardown.yml: {res['seconds']:.0f}s")
    for host in topo["hosts"]:
        assert unit_files(work, host) == "", host
        assert sh(work, host, "systemctl list-units --all --no-legend --plain --no-pager 'llmfleet*' || true") == ""
        left = sh(work, host, "ls -d /etc/systemd/system/llmfleet-* /etc/systemd/system/*/llmfleet-* "
                              "/etc/llmfleet/ray.env /etc/llmfleet/llmfleet-serve-*.env /etc/llmfleet/safeguards 2>/dev/null || true")
        assert left == "", (host, left)
        assert sh(work, host, "nft list table inet llmfleet_ray >/dev/null 2>&1 && echo present || echo gone") == "gone"
        assert sh(work, host, "pgrep -u llmfleet -l || true") == "", host
        # kept: release venvs, wheelhouse, models; host protection
        assert sh(work, host, "test -x /opt/llmfleet/venvs/current/bin/python && test -d /opt/llmfleet/wheelhouse && echo kept") == "kept"
        assert sh(work, host, "systemctl is-active earlyoom") == "active"
    assert not health(topo["fabric_ip"][topo["api"]], timeout=3)
    again = playbook(work, "playbooks/teardown.yml")
    assert again["rc"] == 0 and all(r["changed"] == 0 for r in again["recap"].values()), again["raw"][-6000:]


def test_purge_would_remove_venvs_wheelhouse_models(work):
    # no --diff: the diff of a directory removal lists every file of it (70k lines for a venv)
    res = playbook(work, "playbooks/teardown.yml", "-e", "purge=true", "--check")
    assert res["rc"] == 0, res["raw"][-6000:]
    for host in lab()["hosts"]:
        for path in ("/opt/llmfleet/venvs", "/opt/llmfleet/wheelhouse", "/opt/llmfleet/models", "/var/lib/llmfleet/ray"):
            assert f"changed: [{host}] => (item={path})" in res["raw"], (host, path)
    assert sh(work, lab()["api"], "test -d /opt/llmfleet/venvs && echo kept") == "kept"


def test_reconverge_after_teardown(work):
    topo = lab()
    res = playbook(work, "site.yml", timeout=3600)
    assert res["rc"] == 0, res["raw"][-8000:]
    print(f"\nsite.yml after teardown: {res['seconds']:.0f}s")
    ip = topo["fabric_ip"][topo["api"]]
    assert health(ip)
    assert completion(ip)["usage"]["completion_tokens"] >= 1
    assert UNIT in unit_files(work, topo["api"])
    assert sh(work, topo["api"], f"systemctl is-active llmfleet-watchdog@{UNIT}.timer") == "active"
    again = playbook(work, "playbooks/safeguards.yml")
    assert again["rc"] == 0 and all(r["changed"] == 0 for r in again["recap"].values()), again["raw"][-6000:]
