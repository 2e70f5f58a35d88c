"""The gate's gateway rule (plugin_utils/gate_rules.py rule_gateway) on the real role specs: the
gateway runs on one host of the cluster it fronts (default its Ray head), and its port is no serving
group's API port there nor a Ray, monitoring or Ray worker port."""

from __future__ import annotations

import pytest

from ansible_collections.llmfleet.cluster.plugins.plugin_utils.inventory_checks import check_inventory

# test_gate_rules' good 4-node lab (spark1/spark2 gb10, thor1/thor2 thor, head spark1, profile pp4 on all four)
from test_gate_rules import GROUPS, PROFILES, SPECS, VARIANTS, lab

OK = "ok   gateway node and port"
CASES = [
    # (id, hostvars, present, absent)
    ("good: defaults (the Ray head, 8080)", lab(), [OK], ["FAIL", "WARN"]),
    ("good: a worker as the gateway", lab(common={"gateway_host": "thor2"}), [OK], ["FAIL", "WARN"]),
    ("good: turned off, a bad host is not read", lab(common={"gateway_enabled": False, "gateway_host": "nowhere"}),
     [OK], ["FAIL"]),
    ("a node outside the inventory", lab(common={"gateway_host": "nowhere"}),
     ["FAIL spark1, spark2, thor1, thor2: gateway_host 'nowhere' is not a node of any cluster in this inventory, "
      "not of cluster 'default'", "or set gateway_enabled: false"], []),
    ("two gateway hosts in one cluster", lab(spark2={"gateway_host": "spark2"}),
     ["FAIL spark1, spark2, thor1, thor2: gateway_host differs within cluster 'default' (spark1=spark1, "
      "spark2=spark2, thor1=spark1, thor2=spark1): one gateway fronts a cluster"], []),
    ("on the group's API port (serve_port's default, 8000)", lab(common={"gateway_port": 8000}),
     ["FAIL spark1: gateway_port 8000 on the gateway host spark1 is also used by the API of serving group "
      "the default group (its port)"], ["FAIL spark2"]),
    ("on Ray's GCS port", lab(common={"gateway_port": 6379}),
     ["FAIL spark1: gateway_port 6379 on the gateway host spark1 is also used by Ray GCS (ray_node_port)"], []),
    ("in Ray's worker ports", lab(common={"gateway_port": 10500}),
     ["FAIL spark1: gateway_port 10500 on the gateway host spark1 is also used by Ray workers "
      "(ray_node_min_worker_port..ray_node_max_worker_port = 10002..10999)"], []),
    ("on Prometheus' port", lab(common={"gateway_port": 9090}),
     ["FAIL spark1: gateway_port 9090 on the gateway host spark1 is also used by monitoring (monitoring_prometheus_port)"],
     []),
    ("metrics on Ray's metrics port", lab(common={"gateway_metrics_port": 6382}),
     ["FAIL spark1: gateway_metrics_port 6382 on the gateway host spark1 is also used by Ray metrics (ray_node_metrics_port)"],
     []),
    ("metrics on the gateway's own port", lab(common={"gateway_metrics_port": 8080}),
     ["FAIL spark1: gateway_metrics_port 8080 on the gateway host spark1 is also used by the gateway (gateway_port)"], []),
    ("good: on a port only another node uses", lab(thor1={"serve_port": 8081}, common={"gateway_port": 8081}),
     [OK], ["FAIL spark1: gateway_port"]),
]


@pytest.mark.parametrize("hostvars, present, absent", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_gateway_rule(hostvars, present, absent):
    report = check_inventory(hostvars, GROUPS, profiles=PROFILES, role_specs=SPECS, variants=VARIANTS)
    lines = report.lines()
    for want in present:
        assert any(want in line for line in lines), f"{want!r} not in:\n" + "\n".join(lines)
    for unwanted in absent:
        assert not [ln for ln in lines if ln.startswith(("FAIL", "WARN")) and unwanted in ln], "\n".join(lines)
