"""Prometheus scrape jobs from the cluster plan (plugins/module_utils/monitoring.py), on plans that
cluster_plan.host_plan computes from a 4-node inventory like the sim's."""
import pytest

from ansible_collections.llmfleet.cluster.plugins.module_utils import cluster_plan as cp
from ansible_collections.llmfleet.cluster.plugins.module_utils import monitoring as mon
from ansible_collections.llmfleet.cluster.plugins.module_utils import serve_groups as sg

HOSTS = ["spark1", "spark2", "thor1", "thor2"]
GROUPS = {"all": HOSTS, "ray_head": ["spark1"], "ray_workers": ["spark2", "thor1", "thor2"],
          "gb10": ["spark1", "spark2"], "thor": ["thor1", "thor2"], "serve_nodes": ["spark1", "spark2"]}
IPS = {"spark1": "10.1.0.1", "spark2": "10.1.0.2", "thor1": "10.1.0.3", "thor2": "10.1.0.4"}
VLLM = {"name": "vl", "engine": "vllm", "backend": "mp", "device": "cpu", "served_model_name": "tiny",
        "model": "/m", "tensor_parallel_size": 2, "pipeline_parallel_size": 1}
SGLANG = {"name": "sg", "engine": "sglang", "backend": "native", "device": "cpu", "served_model_name": "tiny-sg",
          "model": "/m2", "tensor_parallel_size": 2, "pipeline_parallel_size": 1, "args": {"--enable-metrics": True}}
SGLANG_QUIET = dict(SGLANG, name="sgq", args={})
TWO = {"sparks": {"group": "serve_nodes"}, "thors": {"group": "thor", "profile": "sg", "port": 8001, "release": "r-sg"}}


def plans(spec=None, profiles=None, extra=None):
    spec = TWO if spec is None else spec
    profiles = profiles or {"vl": VLLM, "sg": SGLANG, "sgq": SGLANG_QUIET}
    hv = {h: {"llmfleet_fabric_ip": IPS[h], "llmfleet_release": "r-vl", "llmfleet_cluster": "sim",
              "llmfleet_gpu_arch": "sm_121" if h.startswith("spark") else "sm_110"} | (extra or {}).get(h, {})
          for h in HOSTS}
    groups = sg.plan(spec, HOSTS, GROUPS, [], profiles, {"profile": "vl", "port": None, "release": "r-vl"}, IPS)
    out = {}
    for host in HOSTS:
        group = sg.group_of(groups, host)
        out[host] = cp.host_plan(host, GROUPS, hv, groups, profiles[group["profile"]] if group else None, "v",
                                 grouped=True)
    return out


def job(configs, name):
    return next(c for c in configs if c["job_name"] == name)


def test_every_engine_ray_and_node_target_labelled():
    # a node's own Ray metrics port comes from its plan (ray_ports), as the Ray unit reads it
    configs = mon.scrape_configs(plans(extra={"thor2": {"ray_node_metrics_port": 7000}}), "spark1")
    assert [c["job_name"] for c in configs] == ["engine", "ray", "node", "gateway", "prometheus"]
    assert job(configs, "engine")["static_configs"] == [
        {"targets": ["10.1.0.1:8000"],
         "labels": {"cluster": "sim", "node": "spark1", "group": "sparks", "rank": "0", "engine": "vllm"}},
        {"targets": ["10.1.0.3:8001"],
         "labels": {"cluster": "sim", "node": "thor1", "group": "thors", "rank": "0", "engine": "sglang"}},
    ]
    ray = job(configs, "ray")["static_configs"]
    assert [s["targets"] for s in ray] == [["10.1.0.1:6382"], ["10.1.0.2:6382"], ["10.1.0.3:6382"], ["10.1.0.4:7000"]]
    assert [s["labels"]["ray_role"] for s in ray] == ["head", "worker", "worker", "worker"]
    node = job(configs, "node")["static_configs"]
    assert node[3] == {"targets": ["10.1.0.4:9100"],
                       "labels": {"cluster": "sim", "node": "thor2", "group": "thors", "rank": "1", "engine": "sglang"}}
    # the gateway on the Ray head, at its fabric address
    assert job(configs, "gateway")["static_configs"] == [
        {"targets": ["10.1.0.1:29000"], "labels": {"cluster": "sim", "node": "spark1"}}]
    assert job(configs, "prometheus")["static_configs"] == [
        {"targets": ["127.0.0.1:9090"], "labels": {"cluster": "sim", "node": "spark1"}}]
    assert all(c["scrape_interval"] == "10s" for c in configs)
    # SGLang's OpenMetrics names (sglang_x) become the documented sglang:x; nothing else is renamed
    assert job(configs, "engine")["metric_relabel_configs"] == [
        {"source_labels": ["__name__"], "regex": "sglang_(.+)", "target_label": "__name__", "replacement": "sglang:$1"}]
    assert all("metric_relabel_configs" not in c for c in configs if c["job_name"] != "engine")


def test_sglang_without_enable_metrics_has_no_engine_target():
    spec = {"sparks": {"group": "serve_nodes"}, "thors": {"group": "thor", "profile": "sgq", "port": 8001, "release": "r-sg"}}
    engine = job(mon.scrape_configs(plans(spec), "spark1"), "engine")["static_configs"]
    assert [s["labels"]["group"] for s in engine] == ["sparks"]


def test_a_node_that_serves_nothing_has_no_group_labels():
    spec = {"sparks": {"group": "serve_nodes"}}
    node = job(mon.scrape_configs(plans(spec), "thor1"), "node")["static_configs"]
    assert node[2]["labels"] == {"cluster": "sim", "node": "thor1"}
    assert mon.unit_include(plans(spec)["thor1"]) == ""


@pytest.mark.parametrize("server, missing, message", [
    ("gpu9", [], "monitoring node 'gpu9' has no plan in this play"),
    ("spark1", ["thor2"], "hosts of cluster sim without a plan in this play: thor2"),
])
def test_refuses_a_server_or_cluster_it_cannot_see(server, missing, message):
    ps = {h: p for h, p in plans().items() if h not in missing}
    with pytest.raises(mon.MonitoringError, match=message):
        mon.scrape_configs(ps, server)


def test_unit_include_matches_the_engine_unit_only():
    assert mon.unit_include(plans()["spark2"]) == r"llmfleet-serve-tiny\.service"


@pytest.mark.parametrize("size, expected", [
    ("2GB", 2 * 1024 ** 3), ("512MB", 512 * 1024 ** 2), (" 1TB ", 1024 ** 4), ("100B", 100),
])
def test_retention_bytes(size, expected):
    assert mon.retention_bytes(size) == expected


@pytest.mark.parametrize("size", ["2G", "2.5GB", "", "GB", "-1GB", None])
def test_retention_bytes_refuses_what_prometheus_would(size):
    with pytest.raises(mon.MonitoringError, match="not a size Prometheus reads"):
        mon.retention_bytes(size)


def _dashboard_tool():
    import importlib.util
    import os
    path = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "tools", "monitoring", "make_dashboard.py")
    spec = importlib.util.spec_from_file_location("make_dashboard", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_dashboard_is_what_its_table_generates():
    """docs/monitoring/llmfleet-dashboard.json is tools/monitoring/make_dashboard.py's output, every
    panel queries the Prometheus data source input, and the recordings it reads are in the shipped rules."""
    import json
    import os
    import yaml
    tool = _dashboard_tool()
    with open(os.path.normpath(tool.OUT), encoding="utf-8") as fh:
        committed = fh.read()
    assert committed == json.dumps(tool.dashboard(), indent=2) + "\n", "run tools/monitoring/make_dashboard.py"
    rules = os.path.join(os.path.dirname(os.path.normpath(tool.OUT)), "..", "..", "roles", "monitoring", "files",
                         "llmfleet-rules.yml")
    with open(rules, encoding="utf-8") as fh:
        recorded = {r["record"] for g in yaml.safe_load(fh)["groups"] for r in g["rules"] if "record" in r}
    dash = json.loads(committed)
    used = set()
    for panel in dash["panels"]:
        for target in panel.get("targets", []):
            assert target["datasource"] == {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
            assert 'cluster="$cluster"' in target["expr"]
            used |= {w for w in target["expr"].replace("{", " ").replace("(", " ").split() if w.startswith("llmfleet:")}
    assert used and used <= recorded, used - recorded
    assert dash["__inputs"][0]["name"] == "DS_PROMETHEUS"


def test_no_gateway_job_where_the_gateway_is_off():
    configs = mon.scrape_configs(plans(extra={h: {"gateway_enabled": False} for h in HOSTS}), "spark1")
    assert "gateway" not in [c["job_name"] for c in configs]
