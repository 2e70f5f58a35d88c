"""The gate's monitoring rule (plugin_utils/gate_rules.py rule_monitoring, issue 40) on the real role
specs: the monitoring node is a host of its cluster, its ports collide with no other service, and
the TSDB's size bound fits the free disk the preflight asks for."""

from __future__ import annotations

import pytest

from ansible_collections.llmfleet.cluster.plugins.plugin_utils.inventory_checks import check_inventory

# test_gate_rules' good 4-node lab (spark1/spark2 gb10, thor1/thor2 thor, head spark1) on the real specs
from test_gate_rules import GROUPS, PROFILES, SPECS, VARIANTS, lab

# two clusters: the Sparks (head spark1) and the Thors (head thor1)
TWO = {"ray_head": ["spark1", "thor1"], "ray_workers": ["spark2", "thor2"]}


def two_clusters(**hosts):
    hostvars = lab(**hosts)
    for h in ("thor1", "thor2"):
        hostvars[h]["llmfleet_cluster"] = "thors"
    return hostvars


CASES = [
    # (id, hostvars, groups override, present, absent)
    ("good: defaults (the Ray head, 9090/9100, 2GB of the default 50 GB)", lab(), None,
     ["ok   monitoring node, ports and retention"], ["FAIL", "WARN"]),
    ("good: a worker as the monitoring node", lab(common={"monitoring_server": "thor2"}), None,
     ["ok   monitoring node, ports and retention"], ["FAIL", "WARN"]),
    ("a node outside the inventory", lab(common={"monitoring_server": "grafana1"}), None,
     ["FAIL spark1, spark2, thor1, thor2: monitoring_server 'grafana1' is not a node of any cluster in this inventory, "
      "not of cluster 'default'", "name one of spark1, spark2, thor1, thor2 (default: the Ray head)"], []),
    ("a node of the other cluster", two_clusters(spark1={"monitoring_server": "thor1"}, spark2={"monitoring_server": "thor1"}),
     TWO, ["FAIL spark1, spark2: monitoring_server 'thor1' is a host of cluster 'thors', not of cluster 'default'"],
     ["thor2: monitoring"]),
    ("two monitoring nodes in one cluster", lab(spark2={"monitoring_server": "spark2"}), None,
     ["FAIL spark1, spark2, thor1, thor2: monitoring_server differs within cluster 'default' (spark1=spark1, "
      "spark2=spark2, thor1=spark1, thor2=spark1): one Prometheus scrapes a cluster"], []),
    ("Prometheus on the API port", lab(common={"serve_port": 8000, "monitoring_prometheus_port": 8000}), None,
     ["FAIL spark1: monitoring_prometheus_port 8000 is also used by OpenAI API (serve_port)"], ["FAIL spark2"]),
    ("node exporter on Ray's metrics port", lab(common={"monitoring_node_exporter_port": 6382}), None,
     ["FAIL spark1, spark2, thor1, thor2: monitoring_node_exporter_port 6382 is also used by Ray metrics "
      "(ray_node_metrics_port)"], []),
    ("node exporter in Ray's worker ports", lab(thor1={"monitoring_node_exporter_port": 10500}), None,
     ["FAIL thor1: monitoring_node_exporter_port 10500 is also used by Ray workers "
      "(ray_node_min_worker_port..ray_node_max_worker_port = 10002..10999)"], ["FAIL spark1"]),
    ("Prometheus and node exporter on one port", lab(common={"monitoring_prometheus_port": 9100}), None,
     ["FAIL spark1: monitoring_node_exporter_port 9100 is also used by Prometheus (monitoring_prometheus_port)"],
     ["FAIL spark2"]),
    ("retention over the disk the preflight asks", lab(common={"monitoring_retention_size": "60GB"}), None,
     ["FAIL spark1: monitoring_retention_size '60GB' does not fit the 50 GB of free disk the preflight asks of the node"],
     []),
    ("the sim's small disk", lab(common={"preflight_min_disk_gb": 5, "monitoring_retention_size": "6GB"}), None,
     ["FAIL spark1: monitoring_retention_size '6GB' does not fit the 5 GB"], []),
    ("good: the sim's 2GB in 5 GB", lab(common={"preflight_min_disk_gb": 5}), None,
     ["ok   monitoring node, ports and retention"], ["FAIL"]),
    ("a size Prometheus does not read", lab(common={"monitoring_retention_size": "2G"}), None,
     ["FAIL spark1: retention size '2G' is not a size Prometheus reads"], []),
]


@pytest.mark.parametrize("hostvars, groups, present, absent", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_monitoring_rule(hostvars, groups, present, absent):
    report = check_inventory(hostvars, {**GROUPS, **(groups or {})}, profiles=PROFILES, role_specs=SPECS,
                             variants=VARIANTS)
    lines = report.lines()
    for want in present:
        assert any(want in line for line in lines), f"{want!r} not in:\n" + "\n".join(lines)
    for unwanted in absent:
        assert not [ln for ln in lines if ln.startswith(("FAIL", "WARN")) and unwanted in ln], "\n".join(lines)
