"""Two clusters in one inventory upgraded one after the other, for real, on the 4-node sim (issue 10).

Opt-in (20-35 min of lab time on the 2-core box, too much for `make test`):

    make integration-two-clusters      # = LLMFLEET_TWO_CLUSTERS=1 pytest -s tests/integration/upgrade/test_two_clusters_lab.py

Needs the converged sim lab (`make demo`). The test re-partitions it by llmfleet_cluster with an
inventory written from inventories/sim (same hosts and group_vars, host variables added):

    sim-a: spark1 (Ray head, API, rank 0) + spark2 (Ray worker, rank 1): vLLM TP=2, as the sim serves today
    sim-b: thor1 (Ray head, API) + thor2 (Ray worker): vLLM TP=1 on thor1

converges it (site.yml), upgrades both clusters with one upgrade.yml run (release A, vLLM 0.32.0 -> B, vLLM 0.31.0) while a
thread on the controller sends a completion to each API every second, and checks: sim-a's switch
ends before sim-b's starts; every completion sent to the other cluster during a cluster's switch
window (its report's stopped_at..serving_at) is answered; each cluster reports its downtime. Then it
upgrades both back to A and restores the one-cluster sim (teardown.yml on the thors, site.yml with
inventories/sim), so the lab ends as `make demo` leaves it.

Measured (2026-11-23 run): see benchmarks/RESULTS.md, "Two clusters upgraded one after the other".
"""
import json
import os
import shutil
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lib"))
import lab  # noqa: E402  (tests/lib: the one lab helper)

ROOT = Path(__file__).resolve().parents[3]
SIM = ROOT / "inventories" / "sim"
RELEASE_A = yaml.safe_load((SIM / "group_vars" / "all.yml").read_text())["llmfleet_release"]
# B installs the other real vLLM CPU release (cpu-vllm-0.31.0.yml; A is cpu.yml's 0.32.0): docs/upgrades.md
RELEASE_B = RELEASE_A.replace("vllm-0.32.0", "vllm-0.31.0")
CLUSTERS = {"sim-a": {"head": "spark1", "workers": ["spark2"], "serve": ["spark1", "spark2"], "tp": 2},
            "sim-b": {"head": "thor1", "workers": ["thor2"], "serve": ["thor1"], "tp": 1}}
HOSTS = ("spark1", "spark2", "thor1", "thor2")

pytestmark = pytest.mark.skipif(os.environ.get("LLMFLEET_TWO_CLUSTERS") != "1",
                                reason="opt-in lab test: make integration-two-clusters (LLMFLEET_TWO_CLUSTERS=1)")


def two_cluster_inventory(target: Path) -> Path:
    """inventories/sim re-grouped into sim-a and sim-b (hosts, addresses and group_vars unchanged)."""
    doc = yaml.safe_load((SIM / "hosts.yml").read_text())
    children = doc["all"]["children"]
    hostvars = {h: dict(v or {}) for g in ("gb10", "thor") for h, v in children[g]["hosts"].items()}
    for name, cl in CLUSTERS.items():
        for h in [cl["head"]] + cl["workers"]:
            hostvars[h].update(llmfleet_cluster=name, llmfleet_tensor_parallel_size=cl["tp"])
    for g in ("gb10", "thor"):
        children[g]["hosts"] = {h: hostvars[h] for h in children[g]["hosts"]}
    children["ray_head"] = {"hosts": {cl["head"]: None for cl in CLUSTERS.values()}}
    children["ray_workers"] = {"hosts": {h: None for cl in CLUSTERS.values() for h in cl["workers"]}}
    children["serve_nodes"] = {"hosts": {h: None for cl in CLUSTERS.values() for h in cl["serve"]}}
    target.mkdir(parents=True, exist_ok=True)
    (target / "hosts.yml").write_text("# two clusters on the sim lab: written by test_two_clusters_lab.py\n---\n"
                                      + yaml.safe_dump(doc, sort_keys=False))
    if not (target / "group_vars").exists():
        (target / "group_vars").symlink_to(SIM / "group_vars")
    return target


def playbook(inventory, path, *args, timeout=3600):
    return lab.run_playbook(path, *args, inventory=inventory, timeout=timeout, tail=6000)


def api(cluster):
    doc = yaml.safe_load((SIM / "hosts.yml").read_text())["all"]["children"]
    head = CLUSTERS[cluster]["serve"][0]
    group = "gb10" if head in doc["gb10"]["hosts"] else "thor"
    return f"http://{doc[group]['hosts'][head]['llmfleet_fabric_ip']}:8000"


def complete(url, timeout=60, cluster=None):
    body = json.dumps({"model": "tiny-llama", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}).encode()
    req = urllib.request.Request(f"{url}/v1/chat/completions", data=body, headers=lab.api_headers(cluster))
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())["usage"]["completion_tokens"] >= 1


class Prober(threading.Thread):
    """A completion to one API every second: [(sent, answered_or_failed, ok)] in wall-clock seconds."""

    def __init__(self, url, cluster):
        super().__init__(daemon=True)
        self.url, self.cluster, self.log, self.stop = url, cluster, [], threading.Event()

    def run(self):
        while not self.stop.is_set():
            t0 = time.time()
            try:
                ok = complete(self.url, timeout=30, cluster=self.cluster)
            except Exception:  # noqa: BLE001 - any failure is a failed completion
                ok = False
            self.log.append((t0, time.time(), ok))
            self.stop.wait(max(0.0, 1.0 - (time.time() - t0)))


def current(inventory, host):
    rc, out = lab.run_module(host, "ansible.builtin.command", {"cmd": "readlink /opt/llmfleet/venvs/current"},
                             inventory=inventory)
    return os.path.basename(out.strip().split()[-1]) if rc == 0 else "?"


def upgrade_both(inventory, reports, release):
    """upgrade.yml to `release` with probers on both APIs; -> (rc, output, {cluster: report}, {cluster: probe log})."""
    probers = {name: Prober(api(name), name) for name in CLUSTERS}
    for p in probers.values():
        p.start()
    try:
        rc, out, _secs = playbook(inventory, "playbooks/upgrade.yml", "-e", f"llmfleet_release={release}",
                                  "-e", f"upgrade_report_dir={reports}")
    finally:
        for p in probers.values():
            p.stop.set()
        for p in probers.values():
            p.join(60)
    docs = {name: json.loads((reports / f"upgrade-{name}.json").read_text()) for name in CLUSTERS
            if (reports / f"upgrade-{name}.json").exists()}
    return rc, out, docs, {name: p.log for name, p in probers.items()}


def check_one_after_the_other(rc, out, docs, logs, release_from, release_to, inventory):
    assert rc == 0, out[-6000:]
    assert {h: current(inventory, h) for h in HOSTS} == {h: release_to for h in HOSTS}
    assert set(docs) == set(CLUSTERS)
    a, b = docs["sim-a"], docs["sim-b"]
    for name, doc in docs.items():
        assert doc["from"] == release_from and doc["to"] == release_to and doc["cluster"] == name
        assert sorted(doc["hosts"]) == sorted([CLUSTERS[name]["head"]] + CLUSTERS[name]["workers"])
        assert 0 < doc["downtime_s"] < 600
        assert f"cluster {name} upgraded {release_from} -> {release_to}; serving downtime {doc['downtime_s']} s" in " ".join(out.split())
    # one after the other: sim-a (batch 1) is serving again before sim-b stops
    assert a["serving_at"] <= b["stopped_at"], (a, b)
    result = {}
    for name, other in (("sim-a", "sim-b"), ("sim-b", "sim-a")):
        win = docs[name]
        during = [(t0, t1, ok) for t0, t1, ok in logs[other] if win["stopped_at"] <= t0 and t1 <= win["serving_at"]]
        # the other cluster kept answering through this cluster's whole switch
        assert len(during) >= 5, (name, other, len(during), win)
        assert all(ok for _t0, _t1, ok in during), (name, other, [d for d in during if not d[2]])
        own = [ok for t0, _t1, ok in logs[name] if win["stopped_at"] <= t0 <= win["serving_at"]]
        result[name] = {"downtime_s": win["downtime_s"], "other_answered": len(during), "own_failed": own.count(False)}
    return result


def test_two_clusters_upgraded_one_after_the_other(tmp_path):
    inv = two_cluster_inventory(tmp_path / "inventory")
    reports = tmp_path / "reports"
    results = {}
    try:
        rc, out, secs = playbook(inv, "site.yml")
        assert rc == 0, out[-6000:]
        results["converge two clusters (s)"] = round(secs)
        for name in CLUSTERS:
            assert complete(api(name), cluster=name), name
        t0 = time.monotonic()
        rc, out, docs, logs = upgrade_both(inv, reports, RELEASE_B)
        results[f"upgrade {RELEASE_A} -> {RELEASE_B} (s)"] = round(time.monotonic() - t0)
        results["to B"] = check_one_after_the_other(rc, out, docs, logs, RELEASE_A, RELEASE_B, inv)
        shutil.rmtree(reports)
        t0 = time.monotonic()
        rc, out, docs, logs = upgrade_both(inv, reports, RELEASE_A)
        results[f"upgrade {RELEASE_B} -> {RELEASE_A} (s)"] = round(time.monotonic() - t0)
        results["back to A"] = check_one_after_the_other(rc, out, docs, logs, RELEASE_B, RELEASE_A, inv)
    finally:
        # back to the one-cluster sim: the thors' units go (thor1 served sim-b), site.yml regroups all four
        rc_t, out_t, _s = playbook(inv, "playbooks/teardown.yml", "--limit", "thor1,thor2")
        rc_s, out_s, secs = playbook(SIM, "site.yml")
        results["restore one-cluster sim (s)"] = round(secs)
        print("\ntwo clusters: " + json.dumps(results, indent=1))
    assert rc_t == 0, out_t[-4000:]
    assert rc_s == 0, out_s[-6000:]
    assert complete(api("sim-a"), cluster="sim-a")
