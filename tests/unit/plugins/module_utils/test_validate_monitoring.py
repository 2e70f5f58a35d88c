"""validate_report's monitoring lines (issue 40): every scrape target up, the engine counter the smoke
completions moved, on test_validate_report's healthy two-node serving group."""
import pytest

from ansible_collections.llmfleet.cluster.plugins.module_utils import validate_report as vr

from test_validate_report import base, find

URL = "http://10.231.0.11:9090"
TARGETS = [{"job": "engine", "instance": "10.231.1.11:8000", "node": "spark1", "health": "up", "error": ""}] + [
    {"job": job, "instance": "10.231.1.%d:%d" % (11 + i, port), "node": h, "health": "up", "error": ""}
    for job, port in (("ray", 6382), ("node", 9100)) for i, h in enumerate(("spark1", "spark2", "thor1"))]
QUERY = 'sum(vllm:generation_tokens_total{cluster="sim",group="sparks"})'


def monitored(targets=None, counter=None):
    raw = base()
    raw["params"]["monitoring"] = True
    raw["results"]["spark1"]["monitoring"] = {"url": URL, "error": "", "targets": TARGETS if targets is None else targets}
    raw["results"]["spark1"]["counter"] = counter if counter is not None else {
        "query": QUERY, "url": URL, "before": "48", "after": "96", "error": ""}
    return raw


def test_every_target_up_and_the_counter_moved():
    rep = vr.evaluate(monitored())
    assert rep["ok"], rep["lines"]
    assert vr.line(find(rep, "cluster/sim", "scrape targets")) == (
        "PASS cluster/sim: scrape targets: all 7 up at http://10.231.0.11:9090 (engine 1, node 3, ray 3)")
    assert vr.line(find(rep, "cluster/sim", "engine counter")) == (
        "PASS cluster/sim: engine counter: " + QUERY + ": 48 before the smoke, 96 after")


def test_without_monitoring_no_lines():
    raw = monitored()
    raw["params"]["monitoring"] = False
    assert not [c for c in vr.evaluate(raw)["checks"] if c["check"] in ("scrape targets", "engine counter")]


def _down(targets):
    out = [dict(t) for t in targets]
    out[2].update(health="down", error='Get "http://10.231.1.12:6382/metrics": connection refused')
    return out


@pytest.mark.parametrize("raw, name, words", [
    (monitored(targets=_down(TARGETS)), "scrape targets",
     '1 of 7 down at http://10.231.0.11:9090: ray 10.231.1.12:6382 (spark2): Get "http://10.231.1.12:6382/metrics": '
     "connection refused"),
    (monitored(targets=[]), "scrape targets", "no targets; fix: ansible-playbook playbooks/monitoring.yml"),
    (monitored(counter={"query": QUERY, "url": URL, "before": "96", "after": "96", "error": ""}), "engine counter",
     QUERY + ": 96 before the smoke, 96 after (not moved)"),
    (monitored(counter={"query": QUERY, "url": URL, "before": None, "after": None, "error": "Status code was -1"}),
     "engine counter", "none before the smoke, none after (Status code was -1)"),
])
def test_a_down_target_or_a_still_counter_fails(raw, name, words):
    rep = vr.evaluate(raw)
    assert not rep["ok"]
    c = find(rep, "cluster/sim", name)
    assert c["status"] == "FAIL" and words in c["detail"], c


def test_no_answer_from_prometheus_fails():
    raw = monitored()
    error = "Status code was -1 and not [200]: connection refused"
    raw["results"]["spark1"]["monitoring"] = {"url": URL, "error": error, "targets": []}
    c = find(vr.evaluate(raw), "cluster/sim", "scrape targets")
    assert c["status"] == "FAIL" and "http://10.231.0.11:9090: Status code was -1" in c["detail"], c
