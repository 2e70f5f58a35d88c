"""Interpreting ray.nodes() (Ray 2.60, captured from the sim lab's 4 CPU nodes)."""
import json

import pytest

from ansible_collections.llmfleet.cluster.plugins.module_utils import ray_state as rs

NODES = [
    {"ip": "10.231.1.12", "node_id": "b", "hostname": "spark2", "alive": True,
     "resources": {"CPU": 2.0, "memory": 1.6e10, "object_store_memory": 268435456.0,
                   "node:10.231.1.12": 1.0, "arch_sm_121": 1.0}},
    {"ip": "10.231.1.11", "node_id": "a", "hostname": "spark1", "alive": True,
     "resources": {"CPU": 2.0, "GPU": 0.0, "memory": 1.6e10, "object_store_memory": 268435456.0,
                   "node:10.231.1.11": 1.0, "node:__internal_head__": 1.0, "arch_sm_121": 1.0}},
    {"ip": "10.231.1.13", "node_id": "c", "hostname": "thor1", "alive": True,
     "resources": {"CPU": 2.0, "node:10.231.1.13": 1.0, "arch_sm_110": 1.0}},
    {"ip": "10.231.1.14", "node_id": "d", "hostname": "thor2", "alive": False, "resources": {}},
]
EXPECTED = {"spark1": "10.231.1.11", "spark2": "10.231.1.12", "thor1": "10.231.1.13", "thor2": "10.231.1.14"}


def test_summarize_keeps_alive_nodes_sorted_with_custom_resources():
    out = rs.summarize(NODES)
    assert [n["ip"] for n in out] == ["10.231.1.11", "10.231.1.12", "10.231.1.13"]
    assert out[0]["custom"] == {"arch_sm_121": 1.0}
    assert out[2]["custom"] == {"arch_sm_110": 1.0}
    assert out[0]["object_store_bytes"] == 268435456


def test_missing_hosts_names_the_dead_node():
    assert rs.missing_hosts(EXPECTED, rs.summarize(NODES)) == ["thor2"]


def test_node_registered_with_lan_ip_is_unexpected():
    nodes = rs.summarize([dict(NODES[0], ip="192.168.1.51")] + NODES[1:3])
    assert rs.unexpected_ips(EXPECTED, nodes) == ["192.168.1.51"]
    assert rs.missing_hosts(EXPECTED, nodes) == ["spark2", "thor2"]


@pytest.mark.parametrize("actual,expected_drift", [
    ({"10.231.1.11": {"VLLM_HOST_IP": "10.231.1.11", "NCCL_IB_DISABLE": "1"}}, []),
    # the head's value copied to a worker: the drift this audit exists for
    ({"10.231.1.11": {"VLLM_HOST_IP": "10.231.1.12", "NCCL_IB_DISABLE": "1"}},
     [{"host": "spark1", "ip": "10.231.1.11", "var": "VLLM_HOST_IP", "expected": "10.231.1.11", "actual": "10.231.1.12"}]),
    ({"10.231.1.11": {"VLLM_HOST_IP": "10.231.1.11", "NCCL_IB_DISABLE": None}},
     [{"host": "spark1", "ip": "10.231.1.11", "var": "NCCL_IB_DISABLE", "expected": "1", "actual": None}]),
    ({}, [{"host": "spark1", "ip": "10.231.1.11", "var": "*", "expected": "a Ray worker on this node", "actual": None}]),
])
def test_env_drift(actual, expected_drift):
    want = {"10.231.1.11": {"VLLM_HOST_IP": "10.231.1.11", "NCCL_IB_DISABLE": "1"}}
    assert rs.env_drift(want, actual, {"10.231.1.11": "spark1"}) == expected_drift


def test_parse_probe_output_ignores_ray_noise():
    doc = {"nodes": NODES}
    out = "2026-11-22 INFO worker.py:1 -- Connecting to existing Ray cluster\nLLMFLEET_RAY_STATE " + json.dumps(doc) + "\n"
    assert rs.parse_probe_output(out) == doc
    with pytest.raises(ValueError):
        rs.parse_probe_output("no state here\n")
