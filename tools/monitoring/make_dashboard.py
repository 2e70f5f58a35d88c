# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Write docs/monitoring/llmfleet-dashboard.json: the Grafana dashboard of a cluster (engine, Ray and node
rows), importable into Grafana (it asks for a Prometheus data source: __inputs DS_PROMETHEUS).

The panels are a table here (PANELS: row, title, unit, queries) so the JSON stays consistent; the cluster
check molecule/cluster/tests/test_monitoring.py sends every query to the sim's Prometheus.

    .venv/bin/python tools/monitoring/make_dashboard.py          # rewrite the JSON
    .venv/bin/python tools/monitoring/make_dashboard.py --check  # exit 1 if the file is stale
"""

import argparse
import json
import os
import sys

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "monitoring", "llmfleet-dashboard.json")
DS = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
C = 'cluster="$cluster"'
# (row, title, unit, [(legend, expr)])
PANELS = [
    ("Engines", "Running requests", "short",
     [("{{group}} {{engine}}", f"llmfleet:engine_requests_running{{{C}}}")]),
    ("Engines", "Waiting requests", "short",
     [("{{group}} {{engine}}", f"llmfleet:engine_requests_waiting{{{C}}}")]),
    ("Engines", "KV cache in use", "percentunit",
     [("{{group}} {{engine}}", f"llmfleet:engine_kv_cache_usage_ratio{{{C}}}")]),
    ("Engines", "Generated tokens per second", "short",
     [("{{group}} {{engine}}", f"llmfleet:engine_generation_tokens:rate1m{{{C}}}")]),
    ("Engines", "Time to first token p95 (5 min)", "s",
     [("{{group}} {{engine}}", f"llmfleet:engine_ttft_seconds:p95_5m{{{C}}}")]),
    ("Engines", "Ranks up (engine unit active)", "short",
     [("{{group}} rank {{rank}} ({{node}})", f"llmfleet:engine_rank_up{{{C}}}")]),
    ("Engines", "Scrape targets up", "short",
     [("{{job}}", f"sum by (job) (up{{{C}}})")]),
    ("Ray", "Ray nodes alive (GCS)", "short",
     [("alive", f"llmfleet:ray_active_nodes{{{C}}}"), ("Ray nodes in the plan", f"count(up{{job=\"ray\", {C}}})")]),
    ("Ray", "Ray node CPU", "percent",
     [("{{node}}", f"max by (node) (ray_node_cpu_utilization{{{C}}})")]),
    ("Ray", "Ray node memory used", "bytes",
     [("{{node}}", f"max by (node) (ray_node_mem_used{{{C}}})")]),
    ("Ray", "Ray object store memory", "bytes",
     [("{{node}}", f"sum by (node) (ray_object_store_memory{{{C}}})")]),
    ("Nodes", "Memory available", "percentunit",
     [("{{node}}", f"llmfleet:node_memory_available_ratio{{{C}}}")]),
    ("Nodes", "Swap pages in + out per second (5 min)", "short",
     [("{{node}}", f"llmfleet:node_swap_pages:rate5m{{{C}}}")]),
    ("Nodes", "CPU busy", "percentunit",
     [("{{node}}", f"1 - avg by (node) (rate(node_cpu_seconds_total{{mode=\"idle\", {C}}}[$__rate_interval]))")]),
    ("Nodes", "Load average (1 min)", "short",
     [("{{node}}", f"node_load1{{{C}}}")]),
]


def dashboard():
    panels, y, pid = [], 0, 1
    for row in dict.fromkeys(p[0] for p in PANELS):
        panels.append({"type": "row", "title": row, "id": pid, "collapsed": False,
                       "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": []})
        pid, y = pid + 1, y + 1
        for i, (_row, title, unit, queries) in enumerate(p for p in PANELS if p[0] == row):
            panels.append({
                "type": "timeseries", "title": title, "id": pid, "datasource": DS,
                "gridPos": {"h": 8, "w": 8, "x": (i % 3) * 8, "y": y + (i // 3) * 8},
                "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                "options": {"legend": {"displayMode": "list", "placement": "bottom"}},
                "targets": [{"refId": chr(ord("A") + n), "datasource": DS, "expr": expr, "legendFormat": legend}
                            for n, (legend, expr) in enumerate(queries)],
            })
            pid += 1
        y += 8 * ((sum(1 for p in PANELS if p[0] == row) + 2) // 3)
    return {
        "__inputs": [{"name": "DS_PROMETHEUS", "label": "Prometheus", "type": "datasource", "pluginId": "prometheus",
                      "pluginName": "Prometheus"}],
        "__requires": [{"type": "grafana", "id": "grafana", "name": "Grafana", "version": "9.0.0"},
                       {"type": "datasource", "id": "prometheus", "name": "Prometheus", "version": "1.0.0"},
                       {"type": "panel", "id": "timeseries", "name": "Time series", "version": ""}],
        "title": "llmfleet cluster", "uid": "llmfleet-cluster", "tags": ["llmfleet", "vllm", "sglang", "ray"],
        "timezone": "utc", "schemaVersion": 36, "version": 1, "editable": True, "refresh": "10s",
        "time": {"from": "now-30m", "to": "now"},
        "templating": {"list": [{
            "name": "cluster", "label": "cluster", "type": "query", "datasource": DS,
            "query": {"query": "label_values(up, cluster)", "refId": "cluster"}, "definition": "label_values(up, cluster)",
            "refresh": 1, "includeAll": False, "multi": False, "current": {}}]},
        "annotations": {"list": [{"builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"}, "enable": True,
                                  "hide": True, "name": "Annotations & Alerts", "type": "dashboard"}]},
        "panels": panels,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    text = json.dumps(dashboard(), indent=2) + "\n"
    path = os.path.normpath(OUT)
    if args.check:
        with open(path, encoding="utf-8") as fh:
            if fh.read() != text:
                print(f"{path} is stale: run tools/monitoring/make_dashboard.py", file=sys.stderr)
                return 1
        return 0
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
