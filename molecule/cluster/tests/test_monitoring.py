"""Monitoring on the sim (issue 40): Prometheus on spark1 (the Ray head) lists every target of the
cluster plan up, both engines' series are there, the firewall keeps node exporter to the nodes, a
killed engine rank fires its alert within a bound, and every panel of the Grafana dashboard returns
data. Everything goes through Prometheus' HTTP API on the sim's management network."""
import concurrent.futures
import json
import os
import socket
import time
import urllib.parse
import urllib.request

from conftest import FABRIC_IP, MGMT_IP, ROOT, api_headers, node, wait_for

PROM = f"http://{MGMT_IP['spark1']}:9090"
DASHBOARD = os.path.join(ROOT, "docs", "monitoring", "llmfleet-dashboard.json")
UNIT = "llmfleet-serve-tiny-llama"
HOSTS = tuple(FABRIC_IP)  # every node of the sim (inventories/sim/hosts.yml)
# the sim's groups and what serves them (inventories/sim/group_vars/all.yml)
ENDPOINTS = {"sparks": (f"http://{FABRIC_IP['spark1']}:8000", "tiny-llama"),
             "thors": (f"http://{FABRIC_IP['thor1']}:8000", "tiny-llama-sglang")}
# killed rank -> alert firing: the rank's unit leaves `active` and systemd's restart count of it goes up
# (node exporter's systemd collector), the next scrape (10 s) and rule evaluation (10 s) see it; 60 s leaves room for a busy machine
ALERT_BOUND_S = 60


def api(path, **params):
    url = f"{PROM}/api/v1/{path}" + ("?" + urllib.parse.urlencode(params) if params else "")
    with urllib.request.urlopen(url, timeout=10) as resp:
        doc = json.loads(resp.read())
    assert doc["status"] == "success", doc
    return doc["data"]


def query(expr):
    return api("query", query=expr)["result"]


def complete(group, max_tokens=8):
    url, model = ENDPOINTS[group]
    body = json.dumps({"model": model, "max_tokens": max_tokens,
                       "messages": [{"role": "user", "content": "hello"}]}).encode()
    req = urllib.request.Request(f"{url}/v1/chat/completions", data=body, headers=api_headers())
    with urllib.request.urlopen(req, timeout=120) as resp:
        return json.loads(resp.read())["usage"]["completion_tokens"]


def targets():
    return api("targets", state="active")["activeTargets"]


def test_prometheus_lists_every_target_of_the_plan_up():
    def all_up():
        return all(t["health"] == "up" for t in targets())
    wait_for(all_up, 90, step=5)
    got = {(t["labels"]["job"], t["labels"]["node"]): t["labels"] for t in targets()}
    want = {("engine", "spark1"), ("engine", "thor1"), ("engine", "spark3"), ("engine", "thor3"),
            ("prometheus", "spark1"), ("gateway", "spark1")} | {(job, h) for job in ("ray", "node") for h in HOSTS}
    assert set(got) == want, sorted(got)
    assert all(labels["cluster"] == "sim" for labels in got.values())
    want_thor1 = {"group": "thors", "rank": "0", "engine": "sglang", "instance": f"{FABRIC_IP['thor1']}:8000"}
    assert got[("engine", "thor1")].items() >= want_thor1.items()
    assert got[("node", "spark2")].items() >= {"group": "sparks", "rank": "1", "engine": "vllm"}.items()
    assert got[("ray", "spark1")]["ray_role"] == "head"


def test_both_engines_series_ray_and_node_are_there():
    for group in ENDPOINTS:
        assert complete(group) > 0
    for expr in ('count({__name__=~"vllm:.+", group="sparks"})', 'count({__name__=~"sglang:.+", group="thors"})',
                 'count({__name__=~"ray_.+", job="ray"}) by (node)', 'llmfleet:engine_rank_up'):
        assert query(expr), expr
    assert len(query('count({__name__=~"ray_.+", job="ray"}) by (node)')) == len(HOSTS)
    # the gateway's router: its own series, scraped on the Ray head (roles/gateway, job gateway)
    assert query('count({__name__=~"sgl_router_.+", job="gateway", node="spark1"})')
    ranks = {(r["metric"]["group"], r["metric"]["rank"]): r["value"][1] for r in query("llmfleet:engine_rank_up")}
    assert ranks == {("sparks", "0"): "1", ("sparks", "1"): "1", ("thors", "0"): "1", ("thors", "1"): "1",
                     ("smol-1", "0"): "1", ("smol-2", "0"): "1"}


def test_the_firewall_keeps_node_exporter_to_the_nodes():
    """The controller reaches Prometheus (its network is admitted) but not node exporter (nodes only);
    spark2 reaches thor2's node exporter as Prometheus on spark1 does."""
    with socket.create_connection((MGMT_IP["spark1"], 9090), timeout=5):
        pass
    try:
        socket.create_connection((FABRIC_IP["thor2"], 9100), timeout=5).close()
        reached = True
    except OSError:  # reset by the table's reject
        reached = False
    assert not reached, "node exporter answered the controller"
    out = node("spark2").check_output(f"python3 -c \"import urllib.request; print(urllib.request.urlopen("
                                      f"'http://{FABRIC_IP['thor2']}:9100/metrics', timeout=5).status)\"")
    assert out.strip() == "200"
    for h in ("spark1", "thor2"):
        assert node(h).user("prometheus").exists
        assert node(h).check_output("ps -o user= -C prometheus-node-exporter").split() == ["prometheus"]


def alerts(name):
    return [a for a in api("alerts")["alerts"] if a["labels"]["alertname"] == name]


def test_a_killed_engine_rank_fires_its_alert_within_the_bound():
    """SIGKILL of spark2's headless vLLM rank: EngineRankRestarted names spark2's rank 1 within
    ALERT_BOUND_S, whatever the group does next. Three outcomes were seen on the sim: the API rank's
    engine stops with its peer and systemd restarts both, serving again in ~40 s (too short for
    EngineTargetDown's 30 s `for:`); or that restart is slower and EngineTargetDown names the API node
    too; or systemd restarts the rank alone while the API rank keeps its dead session, and
    ServingGroupRankDown names spark2 until the safeguards watchdog restarts every rank
    (test_serve_lifecycle.py's bound, 420 s). In each the group serves again and its group alerts resolve."""
    group_alerts = ("ServingGroupRankDown", "EngineTargetDown")
    spark2 = node("spark2")

    def firing(*names):
        return [a for name in names for a in alerts(name)
                if a["state"] == "firing" and a["labels"]["group"] == "sparks"]

    def spark2_restarted():
        return [a for a in firing("EngineRankRestarted") if a["labels"]["node"] == "spark2"]

    def serves():
        try:
            return complete("sparks") == 8
        except OSError:
            return False
    # an earlier check's restart may still be in EngineRankRestarted's 2 min window
    wait_for(lambda: not firing(*group_alerts, "EngineRankRestarted"), 150, step=5)
    pid = spark2.check_output(f"systemctl show -P MainPID {UNIT}")
    assert int(pid) > 0
    t0 = time.monotonic()
    spark2.run_expect([0], f"kill -9 {pid}")
    try:
        took = wait_for(spark2_restarted, ALERT_BOUND_S, step=1)
        alert = spark2_restarted()[0]
        assert alert["labels"]["rank"] == "1" and alert["labels"]["engine"] == "vllm", alert
        others = sorted({(a["labels"]["alertname"], a["labels"]["node"]) for a in firing(*group_alerts)})
        print(f"\nspark2 rank killed: EngineRankRestarted firing after {took:.0f}s; group alerts so far {others}")
    finally:
        # the next checks need the group serving, whatever this one found
        wait_for(serves, 420, step=5)
    cleared = wait_for(lambda: not firing(*group_alerts), 120, step=5)
    print(f"serving again after {time.monotonic() - t0:.0f}s, group alerts clear {cleared:.0f}s later")


def panel_queries():
    with open(DASHBOARD, encoding="utf-8") as fh:
        dash = json.load(fh)
    for panel in dash["panels"]:
        for target in panel.get("targets", []):
            # the dashboard's variables as Grafana substitutes them for cluster sim
            expr = target["expr"].replace("$cluster", "sim").replace("$__rate_interval", "1m")
            yield panel["title"], expr


def test_every_dashboard_panel_returns_data():
    """Each panel's query, as Grafana would send it, returns at least one series from the sim's
    Prometheus. Time to first token and token rates need traffic in their window: a short bounded
    load on both engines first, then at most 60 s for the scrapes and rules to see it."""
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        assert all(n > 0 for n in pool.map(lambda g: complete(g, 16), list(ENDPOINTS) * 4))
    queries = list(panel_queries())
    assert len(queries) >= 10
    missing = []

    def every_panel():
        missing[:] = [(title, expr) for title, expr in queries if not query(expr)]
        return not missing
    try:
        wait_for(every_panel, 60, step=5)
    except AssertionError:
        pass
    assert not missing, f"panels without data: {missing}"
