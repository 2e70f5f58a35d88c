"""validate.yml and the host-side preflight on the converged 4-node sim (after test_cluster.py).

The serving group is spark1 (head, rank 0, API) + spark2 (rank 1); thor1/thor2 are Ray-only workers.
Each test that breaks something restores it before it ends: llmfleet-ray stopped on thor2, spark2's
/etc/machine-id replaced by spark1's, thor1's fabric NIC set to MTU 1500.
"""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FABRIC_IP, alive_ray_ips, failures, inventory_dir, node, wait_for

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
LINE_RE = re.compile(r"^\s*(PASS|WARN|FAIL) (\S+): ([^:]+): (.+)$", re.M)
ANSI_RE = re.compile(r"\x1b\[[0-9;]*m")


def playbook(tmp, name, *args, timeout=900):
    # molecule exports ANSIBLE_FORCE_COLOR=1 to its verifier, which beats ANSIBLE_NOCOLOR
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0",
           "ANSIBLE_CACHE_PLUGIN_CONNECTION": str(tmp / "facts"), "PATH": f"{BIN}:{os.environ.get('PATH', '')}"}
    proc = subprocess.run([str(BIN / "ansible-playbook"), str(ROOT / "playbooks" / name), "-i", inventory_dir(), *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    out = ANSI_RE.sub("", proc.stdout + proc.stderr)
    return {"rc": proc.returncode, "raw": out, "flat": " ".join(out.split()),
            "lines": [m.groups() for m in LINE_RE.finditer(ANSI_RE.sub("", proc.stdout))]}


@pytest.fixture(scope="module")
def tmp(tmp_path_factory):
    return tmp_path_factory.mktemp("validate")


@pytest.fixture(scope="module")
def healthy(tmp):
    res = playbook(tmp, "validate.yml", "-e", f"validate_report_dir={tmp / 'ok'}")
    res["json"] = json.loads((tmp / "ok" / "validate.json").read_text())
    res["md"] = (tmp / "ok" / "validate.md").read_text()
    for line in res["lines"]:
        print(" ".join(line))
    return res


# ----------------------------------------------------------------------------- validate.yml
def test_validate_passes(healthy):
    assert healthy["rc"] == 0, failures(healthy["raw"], 6000)
    assert healthy["lines"] and all(line[0] != "FAIL" for line in healthy["lines"])
    checks = {(t, c) for _s, t, c, _d in healthy["lines"]}
    for name in FABRIC_IP:
        assert (name, "ray service") in checks and (name, "ray node") in checks and (name, "env audit") in checks
        assert (name, "fabric MTU") in checks
    for name in ("spark1", "spark2"):
        assert (name, "serve unit") in checks
    for name in ("ray cluster", "env consistency", "collective transport", "all-reduce", "serve smoke", "serve latency"):
        assert ("cluster/sim", name) in checks


def test_json_report(healthy):
    doc = healthy["json"]
    assert doc["ok"] and doc["summary"]["FAIL"] == 0
    cl = doc["clusters"][0]
    assert cl["name"] == "sim" and cl["head"] == "spark1" and cl["serving"] == ["spark1", "spark2"]
    nodes = {n["host"]: n for n in cl["nodes"]}
    assert {h: n["fabric_ip"] for h, n in nodes.items()} == FABRIC_IP
    assert all(n["ray_alive"] and n["mtu"] >= 9000 for n in nodes.values())
    assert nodes["spark1"]["serves"] == ["tiny-llama"] and nodes["spark2"]["serves"] == ["tiny-llama"]
    # the Thors serve the SGLang group (llmfleet_serve_groups.thors)
    assert nodes["thor1"]["serves"] == ["tiny-llama-sglang"] and nodes["thor2"]["serves"] == ["tiny-llama-sglang"]
    assert cl["backend"] == "gloo" and cl["transport"] == "gloo/TCP" and cl["busbw_gbps"] > 0
    print(f"all-reduce busbw {cl['busbw_gbps']} Gbit/s spark1<->spark2, completion p50 {cl['latency_p50_s']} s")


def test_markdown_report(healthy):
    md = healthy["md"]
    lines = md.splitlines()
    assert lines[2] == "```mermaid" and lines[3] == "flowchart LR"
    mermaid = md.split("```mermaid", 1)[1].split("```", 1)[0]
    for name, ip in FABRIC_IP.items():
        assert f"<b>{name}</b>" in mermaid and ip in mermaid
    assert 'n_spark1 <-->|"TCP (gloo)"| n_spark2' in mermaid
    assert 'n_spark1 -.-|"Ray control (TCP)"| n_thor2' in mermaid
    assert "| Node | Ray role | Serve rank | Fabric IP | NIC / MTU | RDMA | Transport |" in md
    assert float(re.search(r"busbw ([0-9.]+) Gbit/s", md).group(1)) > 0


def test_validate_fails_naming_a_stopped_worker(tmp):
    node("thor2").check_output("systemctl stop llmfleet-ray")
    try:
        res = playbook(tmp, "validate.yml", "-e", f"validate_report_dir={tmp / 'stopped'}")
        assert res["rc"] != 0
        fails = {(t, c): d for s, t, c, d in res["lines"] if s == "FAIL"}
        assert "systemctl start llmfleet-ray" in fails[("thor2", "ray service")]
        assert FABRIC_IP["thor2"] in fails[("thor2", "ray node")]
        assert "missing: thor2 (%s)" % FABRIC_IP["thor2"] in fails[("cluster/sim", "ray cluster")]
        assert not [t for t, _c in fails if t not in ("thor2", "cluster/sim")]
        assert json.loads((tmp / "stopped" / "validate.json").read_text())["failed_targets"] == ["cluster/sim", "thor2"]
    finally:
        node("thor2").check_output("systemctl start llmfleet-ray")
        took = wait_for(lambda: alive_ray_ips(node("spark1")) == sorted(FABRIC_IP.values()), 180)
        print(f"thor2 back in the cluster {took:.0f}s after restart")


# ----------------------------------------------------------------------------- host-side preflight
def test_preflight_reports_duplicate_machine_id(tmp):
    original = node("spark2").check_output("cat /etc/machine-id").strip()
    twin = node("spark1").check_output("cat /etc/machine-id").strip()
    try:
        node("spark2").check_output(f"printf '%s\\n' {twin} > /etc/machine-id")
        res = playbook(tmp, "preflight.yml", "--tags", "preflight")
    finally:
        node("spark2").check_output(f"printf '%s\\n' {original} > /etc/machine-id")
    assert node("spark2").check_output("cat /etc/machine-id").strip() == original
    assert res["rc"] != 0
    assert f"FAIL spark2: /etc/machine-id {twin} duplicates spark1's" in res["flat"]
    assert f"FAIL spark1: /etc/machine-id {twin} duplicates spark2's" in res["flat"]
    assert "on all but one of spark1, spark2 run `rm /etc/machine-id && systemd-machine-id-setup`" in res["flat"]


def test_preflight_reports_fabric_mtu_1500(tmp):
    h = node("thor1")
    nic = h.check_output(f"ip -o -4 addr show | awk '$4 ~ /^{FABRIC_IP['thor1']}\\// {{print $2; exit}}'").strip()
    mtu = h.check_output(f"cat /sys/class/net/{nic}/mtu").strip()
    try:
        h.check_output(f"ip link set dev {nic} mtu 1500")
        res = playbook(tmp, "preflight.yml", "--tags", "preflight_host", "-e", "preflight_mtu_fatal=true")
        val = playbook(tmp, "validate.yml", "-e", f"validate_report_dir={tmp / 'mtu'}")
    finally:
        h.check_output(f"ip link set dev {nic} mtu {mtu}")
    assert h.check_output(f"cat /sys/class/net/{nic}/mtu").strip() == mtu
    assert res["rc"] != 0
    assert (f"FAIL thor1: fabric NIC {nic} ({FABRIC_IP['thor1']}) has MTU 1500 < 9000 (preflight_fabric_mtu); "
            "the fabric role raises it later in site.yml (--tags fabric)") in res["flat"]
    # after a deploy, validate.yml enforces the MTU (connections opened at 9000 may stall other checks too)
    assert val["rc"] != 0
    fails = {(t, c): d for st, t, c, d in val["lines"] if st == "FAIL"}
    assert ("thor1", "fabric MTU") in fails
    assert not [t for t, _c in fails if t not in ("thor1", "cluster/sim")]
    assert "has MTU 1500 < 9000; fix: `ansible-playbook site.yml --tags fabric --limit thor1`" in fails[("thor1", "fabric MTU")]
