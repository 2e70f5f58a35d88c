"""validate.yml and the host-side preflight against a converged simulated lab (real Ray, vLLM CPU, gloo).

    python3 tools/simlab/simlab.py up --nodes 2 --name val
    ansible-playbook site.yml -i .lab/val/hosts.yml
    LLMFLEET_LAB_INVENTORY=.lab/val/hosts.yml .venv/bin/pytest tests/integration/validate -q -s

Skips without LLMFLEET_LAB_INVENTORY. What it does to the lab, each undone before the test ends:
stops llmfleet-ray on one Ray worker (validate must fail naming it), copies one node's
/etc/machine-id onto another and sets one node's fabric NIC (the NIC holding its llmfleet_fabric_ip)
to MTU 1500 (preflight must report each with the host and the fix). Talks only to the lab's nodes
(ansible, over their management network) and to the serving head's API on the fabric network.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
COLLECTIONS = ROOT / ".build" / "collections"
BIN = Path(sys.executable).parent
LINE_RE = re.compile(r"^\s*(PASS|WARN|FAIL) (\S+): ([^:]+): (.+)$", re.M)

INVENTORY = os.environ.get("LLMFLEET_LAB_INVENTORY", "")
pytestmark = pytest.mark.skipif(not INVENTORY, reason="LLMFLEET_LAB_INVENTORY is not set (a converged simlab inventory)")


# ----------------------------------------------------------------------------- helpers
def lab():
    """Hosts, groups and fabric IPs of the lab inventory (the file simlab writes)."""
    doc = yaml.safe_load(Path(INVENTORY).read_text())["all"]
    hosts, groups = {}, {}

    def walk(name, node):
        node = node or {}
        for h, hv in (node.get("hosts") or {}).items():
            groups.setdefault(name, []).append(h)
            if hv:
                hosts.setdefault(h, {}).update(hv)
            else:
                hosts.setdefault(h, {})
        for child, sub in (node.get("children") or {}).items():
            walk(child, sub)

    walk("all", doc)
    head = groups["ray_head"][0]
    workers = [h for h in groups.get("ray_workers", []) if h != head]
    serving = groups.get("serve_nodes") or [head] + workers
    return {"hosts": hosts, "groups": groups, "head": head, "workers": workers, "serving": serving,
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


def playbook(work: Path, name: str, *args: str, timeout: int = 900) -> dict:
    proc = subprocess.run([str(BIN / "ansible-playbook"), str(ROOT / "playbooks" / name), "-i", INVENTORY, *args],
                          cwd=ROOT, env=env(work), capture_output=True, text=True, timeout=timeout, check=False)
    out = proc.stdout + proc.stderr
    return {"rc": proc.returncode, "raw": out, "flat": " ".join(out.split()),
            "lines": [m.groups() for m in LINE_RE.finditer(proc.stdout)]}


def sh(work: Path, host: str, cmd: str) -> str:
    """Run a shell command as root on a lab node (ansible ad hoc, the lab's own ssh settings)."""
    proc = subprocess.run([str(BIN / "ansible"), host, "-i", INVENTORY, "-b", "-o", "-m", "ansible.builtin.shell",
                           "-a", cmd], cwd=ROOT, env=env(work), capture_output=True, text=True, timeout=600, check=False)
    if proc.returncode != 0:
        raise AssertionError(f"{host}: {cmd} failed: {proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    # -o: "host | CHANGED | rc=0 | (stdout) text\ntext"
    return proc.stdout.split("(stdout) ", 1)[1].replace("\\n", "\n").strip() if "(stdout) " in proc.stdout else ""


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


def ray_alive_ips(work: Path, head_ip: str) -> list:
    probe = ("import json, ray; ray.init(address='%s:6379', logging_level='ERROR', log_to_driver=False); "
             "print('STATE', json.dumps(sorted(n['NodeManagerAddress'] for n in ray.nodes() if n['Alive'])))" % head_ip)
    out = sh(work, lab()["head"], f"runuser -u llmfleet -- /opt/llmfleet/venvs/current/bin/python -c \"{probe}\" 2>/dev/null | grep ^STATE")
    return json.loads(out.split(" ", 1)[1])


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("validate-lab")


# ----------------------------------------------------------------------------- validate.yml
@pytest.fixture(scope="module")
def healthy(work):
    reports = work / "reports"
    t0 = time.monotonic()
    res = playbook(work, "validate.yml", "-e", f"validate_report_dir={reports}")
    res["seconds"] = time.monotonic() - t0
    res["json"] = json.loads((reports / "validate.json").read_text()) if (reports / "validate.json").exists() else None
    res["md"] = (reports / "validate.md").read_text() if (reports / "validate.md").exists() else ""
    print(f"\nvalidate.yml on the healthy lab: rc={res['rc']} in {res['seconds']:.0f}s")
    for line in res["lines"]:
        print("  " + " ".join(line[:1]) + " " + line[1] + ": " + line[2] + ": " + line[3])
    return res


def test_validate_passes_on_the_converged_lab(healthy):
    assert healthy["rc"] == 0, healthy["raw"][-6000:]
    statuses = [line[0] for line in healthy["lines"]]
    assert statuses and "FAIL" not in statuses
    checks = {(t, c) for _s, t, c, _d in healthy["lines"]}
    topo = lab()
    for h in topo["head"], *topo["workers"]:
        assert (h, "ray service") in checks and (h, "ray node") in checks and (h, "env audit") in checks
    for h in topo["serving"]:
        assert (h, "serve unit") in checks
    for name in ("ray cluster", "collective transport", "all-reduce", "serve smoke", "serve latency"):
        assert any(t.startswith("cluster/") and c == name for t, c in checks), name


def test_json_report_lists_every_node_and_a_measured_bandwidth(healthy):
    doc = healthy["json"]
    assert doc and doc["ok"] is True and doc["summary"]["FAIL"] == 0
    topo = lab()
    cl = doc["clusters"][0]
    nodes = {n["host"]: n for n in cl["nodes"]}
    assert set(nodes) == set(topo["fabric_ip"])
    for h, ip in topo["fabric_ip"].items():
        assert nodes[h]["fabric_ip"] == ip and nodes[h]["ray_alive"] is True
        assert nodes[h]["mtu"] >= 9000
    assert nodes[topo["head"]]["ray_role"] == "head"
    assert list(cl["serving"]) == topo["serving"]
    for h in topo["serving"]:
        assert nodes[h]["serves"] == [cl["model"]]
    assert cl["backend"] == "gloo" and cl["transport"] == "gloo/TCP"  # CPU sim: no GPU, no RDMA
    assert cl["busbw_gbps"] > 0
    assert cl["latency_p50_s"] > 0
    print(f"\nall-reduce busbw {cl['busbw_gbps']} Gbit/s over {', '.join(topo['fabric_ip'][h] for h in topo['serving'])}; "
          f"completion p50 {cl['latency_p50_s']} s")


def test_markdown_report_opens_with_the_topology(healthy):
    md = healthy["md"]
    lines = md.splitlines()
    assert lines[0].startswith("# ") and lines[2] == "```mermaid" and lines[3] == "flowchart LR"
    mermaid = md.split("```mermaid", 1)[1].split("```", 1)[0]
    topo = lab()
    for h, ip in topo["fabric_ip"].items():
        assert f"<b>{h}</b>" in mermaid and ip in mermaid
    assert "ray head" in mermaid and "serve rank 0 (API)" in mermaid and "serves tiny-llama" in mermaid
    assert '|"TCP (gloo)"|' in mermaid
    assert "| Node | Ray role | Serve rank | Fabric IP | NIC / MTU | RDMA | Transport |" in md
    m = re.search(r"busbw ([0-9.]+) Gbit/s", md)
    assert m and float(m.group(1)) > 0


def test_validate_fails_naming_a_stopped_worker(work):
    topo = lab()
    victim = topo["workers"][-1]
    head_ip = topo["fabric_ip"][topo["head"]]
    sh(work, victim, "systemctl stop llmfleet-ray")
    try:
        res = playbook(work, "validate.yml", "-e", f"validate_report_dir={work / 'stopped'}", "-e", "validate_format=json")
        assert res["rc"] != 0, res["raw"][-4000:]
        doc = json.loads((work / "stopped" / "validate.json").read_text())
        assert doc["ok"] is False and victim in doc["failed_targets"]
        fails = {(c["target"], c["check"]): c["detail"] for c in doc["checks"] if c["status"] == "FAIL"}
        assert "systemctl start llmfleet-ray" in fails[(victim, "ray service")]
        assert topo["fabric_ip"][victim] in fails[(victim, "ray node")]
        assert any(t.startswith("cluster/") and c == "ray cluster" and f"missing: {victim}" in d for (t, c), d in fails.items())
        assert "check(s) failed on" in res["flat"] and victim in res["flat"]
        # JSON mode prints the report document
        assert '"status": "FAIL"' in res["raw"] and f'"target": "{victim}"' in res["raw"]
        assert "style n_%s stroke:#d00" % re.sub(r"\W", "_", victim) in (work / "stopped" / "validate.md").read_text()
    finally:
        sh(work, victim, "systemctl start llmfleet-ray")
        took = wait_for(lambda: topo["fabric_ip"][victim] in ray_alive_ips(work, head_ip), 180)
        print(f"\n{victim} back in the Ray cluster {took:.0f}s after restart")


# ----------------------------------------------------------------------------- host-side preflight
def test_preflight_host_checks_pass(work):
    res = playbook(work, "preflight.yml", "--tags", "preflight", timeout=600)
    assert res["rc"] == 0, res["raw"][-6000:]
    assert "FAIL " not in res["flat"].replace("FAIL lines", "")


def test_preflight_reports_a_duplicate_machine_id(work):
    topo = lab()
    a, b = topo["head"], topo["workers"][0]
    original = sh(work, b, "cat /etc/machine-id")
    twin = sh(work, a, "cat /etc/machine-id")
    assert original and twin and original != twin
    try:
        sh(work, b, f"printf '%s\\n' {twin} > /etc/machine-id")
        res = playbook(work, "preflight.yml", "--tags", "preflight", timeout=600)
    finally:
        sh(work, b, f"printf '%s\\n' {original} > /etc/machine-id")
    assert sh(work, b, "cat /etc/machine-id") == original
    assert res["rc"] != 0, res["raw"][-4000:]
    for host, other in ((b, a), (a, b)):
        assert f"FAIL {host}: /etc/machine-id {twin} duplicates {other}'s" in res["flat"], res["raw"][-4000:]
    assert f"on all but one of {', '.join(sorted((a, b)))} run `rm /etc/machine-id && systemd-machine-id-setup`" in res["flat"]


def test_preflight_reports_a_fabric_nic_at_mtu_1500(work):
    topo = lab()
    host = topo["workers"][0]
    ip = topo["fabric_ip"][host]
    nic = sh(work, host, f"ip -o -4 addr show | awk '$4 ~ /^{re.escape(ip)}\\// {{print $2; exit}}'")
    assert nic, f"no NIC holds {ip} on {host}"
    mtu = sh(work, host, f"cat /sys/class/net/{nic}/mtu")
    try:
        sh(work, host, f"ip link set dev {nic} mtu 1500")
        res = playbook(work, "preflight.yml", "--tags", "preflight_host", "-e", "preflight_mtu_fatal=true", timeout=600)
        default = playbook(work, "preflight.yml", "--tags", "preflight_host", timeout=600)
        # after a deploy, validate.yml enforces the MTU
        val = playbook(work, "validate.yml", "-e", f"validate_report_dir={work / 'mtu'}")
    finally:
        sh(work, host, f"ip link set dev {nic} mtu {mtu}")
    assert sh(work, host, f"cat /sys/class/net/{nic}/mtu") == mtu
    want = f"{host}: fabric NIC {nic} ({ip}) has MTU 1500 < 9000 (preflight_fabric_mtu); the fabric role raises it"
    assert f"FAIL {want}" in res["flat"] and "(--tags fabric)" in res["flat"], res["raw"][-4000:]
    assert res["rc"] != 0
    # by default a low MTU only warns (the fabric role, later in site.yml, fixes it)
    assert f"WARN {want}" in default["flat"], default["raw"][-4000:]
    assert default["rc"] == 0
    assert val["rc"] != 0
    fails = {(t, c): d for st, t, c, d in val["lines"] if st == "FAIL"}
    # the engine's TCP connections, opened at MTU 9000, may stall too (serve smoke): the MTU line names the cause
    assert (host, "fabric MTU") in fails, val["raw"][-4000:]
    assert not [t for t, _c in fails if t not in (host, "cluster/sim")]
    assert fails[(host, "fabric MTU")].startswith(f"{nic} ({ip}) has MTU 1500 < 9000; fix: `ansible-playbook site.yml --tags fabric --limit {host}`")
