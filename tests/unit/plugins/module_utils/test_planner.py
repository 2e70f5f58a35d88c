"""Planner: TP/PP fill-in and checks against the serving group, as data tables."""
import json
import os

import pytest

from ansible_collections.llmfleet.cluster.plugins.module_utils import planner

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "fixtures")


def spark(name, transport="roce"):
    return {"name": name, "gpu_arch": "sm_121", "gpus_per_node": 1, "transport": transport}


def thor(name):
    return {"name": name, "gpu_arch": "sm_110", "gpus_per_node": 1, "transport": "socket"}


def h100(name, gpus=8):
    return {"name": name, "gpu_arch": "sm_90", "gpus_per_node": gpus, "transport": "roce"}


TWO_SPARKS = [spark("spark-ea8e"), spark("spark-4080")]
LAB = [spark("spark-ea8e"), spark("spark-4080"), thor("jetson-thor"), thor("thorx")]   # notes 000/001
SIM = [{"name": "sim-1", "gpu_arch": "cpu", "transport": "socket"}, {"name": "sim-2", "gpu_arch": "cpu", "transport": "socket"}]


def prof(tp=None, pp=None, engine="vllm", backend="ray", device="gpu"):
    return {"name": "p", "engine": engine, "backend": backend, "device": device,
            "tensor_parallel_size": tp, "pipeline_parallel_size": pp}


@pytest.mark.parametrize("profile, hosts, tp, pp, cross", [
    # both open: TP across nodes over RoCE (notes 003/004), PP across the mixed lab (notes 000)
    (prof(), TWO_SPARKS, 2, 1, True),
    (prof(), LAB, 1, 4, False),
    (prof(), [spark("s1", "socket"), spark("s2", "socket")], 1, 2, False),   # Sparks with IB disabled
    (prof(), [spark("s1")], 1, 1, False),
    (prof(), [h100("a"), h100("b")], 16, 1, True),
    (prof(), [h100("a"), {**h100("b"), "transport": "socket"}], 8, 2, False),
    # one open, filled from the other
    (prof(tp=1), LAB, 1, 4, False),
    (prof(pp=2), TWO_SPARKS, 1, 2, False),
    (prof(tp=2), TWO_SPARKS, 2, 1, True),
    (prof(tp=8), [h100("a"), h100("b")], 8, 2, False),
    # pinned and consistent
    (prof(tp=1, pp=4), LAB, 1, 4, False),
    (prof(tp=2, pp=1), TWO_SPARKS, 2, 1, True),
    # the sim: CPU over TCP, TP across nodes is allowed
    (prof(tp=2, pp=1, backend="mp", device="cpu"), SIM, 2, 1, True),
    (prof(backend="mp", device="cpu"), SIM, 2, 1, True),
])
def test_plan(profile, hosts, tp, pp, cross):
    out = planner.plan(profile, hosts)
    assert (out["tensor_parallel_size"], out["pipeline_parallel_size"], out["cross_node_tp"]) == (tp, pp, cross)
    assert out["nnodes"] == len(hosts)
    assert out["head"] == hosts[0]["name"]
    assert [r["node_rank"] for r in out["ranks"]] == list(range(len(hosts)))


@pytest.mark.parametrize("profile, hosts, overrides, message", [
    # the 2-Spark PP=2 profile on the 4-node lab: numbers and both fixes
    (prof(1, 2), LAB, None,
     "profile 'p': TP x PP = 1 x 2 = 2 but the serving group has 4 GPUs (4 nodes x 1); "
     "set tensor_parallel_size: 1, pipeline_parallel_size: 4, or narrow the serving group (serve_nodes) to 2 nodes"),
    # TP=2 across a Spark and a Thor: sockets and mixed archs
    (prof(2, 1), [spark("spark-ea8e"), thor("thorx")], None,
     "TP=2 spans nodes but thorx talk(s) NCCL over sockets and the group mixes GPU archs (sm_110, sm_121); "
     "TP across nodes needs RoCE on every node and one GPU arch. Use tensor_parallel_size: 1, pipeline_parallel_size: 2"),
    (prof(4, 1), LAB, None, "TP=4 spans nodes but jetson-thor, thorx talk(s) NCCL over sockets"),
    (prof(2, 1), [spark("s1", "socket"), spark("s2")], None, "TP=2 spans nodes but s1 talk(s) NCCL over sockets"),
    (prof(tp=3), LAB, None, "tensor_parallel_size 3 does not divide the group's 4 GPUs (4 nodes x 1)"),
    (prof(pp=3), TWO_SPARKS, None, "pipeline_parallel_size 3 does not divide the group's 2 GPUs"),
    (prof(1, 1), TWO_SPARKS, None, "TP x PP = 1 x 1 = 1 but the serving group has 2 GPUs (2 nodes x 1); "
     "set tensor_parallel_size: 2, pipeline_parallel_size: 1 (RoCE) or tensor_parallel_size: 1, pipeline_parallel_size: 2"),
    # inventory overrides win over the profile, and are checked the same way
    (prof(1, 4), TWO_SPARKS, {"pipeline_parallel_size": 3}, "TP x PP = 1 x 3 = 3"),
    (prof(6, 2), [h100("a", 4), h100("b", 4), h100("c", 4)], None, "TP=6 does not split evenly over nodes of 4 GPUs"),
    (prof(12, 1), [h100("a"), h100("b")], None, "set tensor_parallel_size: 16, pipeline_parallel_size: 1 (RoCE) or "
     "tensor_parallel_size: 8, pipeline_parallel_size: 2"),
    (prof(), [h100("a", 8), h100("b", 4)], None,
     "every node must have the same GPU count (a=8, b=4)"),
    (prof(), [], None, "the serving group is empty"),
    (prof(), [{"name": "x", "transport": "ib"}], None, "x: transport 'ib' is not one of roce, socket"),
    (prof(), [{"name": "x", "gpus_per_node": 0}], None, "x: gpus_per_node must be a positive integer"),
])
def test_plan_errors(profile, hosts, overrides, message):
    with pytest.raises(planner.PlanError) as err:
        planner.plan(profile, hosts, overrides)
    assert message in str(err.value)


@pytest.mark.parametrize("fixture, profile, hosts, message", [
    ("llama-3.3-70b-instruct.json", prof(tp=3, pp=1), [h100("a", 3)], "TP=3 does not divide the model's 64 attention heads"),
    ("tiny-llama.json", prof(tp=1, pp=4), [spark(f"s{i}") for i in range(4)], "PP=4 exceeds the model's 2 layers"),
    ("qwen3.5-122b-a10b-fp8.json", prof(tp=2, pp=1), TWO_SPARKS, None),    # text_config is read
])
def test_plan_model_checks(fixture, profile, hosts, message):
    with open(os.path.join(FIXTURES, "model_configs", fixture), encoding="utf-8") as handle:
        config = json.load(handle)
    if message is None:
        assert planner.plan(profile, hosts, model_config=config)["tensor_parallel_size"] == 2
        return
    with pytest.raises(planner.PlanError) as err:
        planner.plan(profile, hosts, model_config=config)
    assert message in str(err.value)


def test_plan_notes_native_multinode_needs_vllm_012():
    out = planner.plan(prof(backend="mp", device="cpu"), SIM)
    assert "vLLM native multi-node (mp backend) needs vLLM >= 0.12" in out["notes"]


@pytest.mark.parametrize("profile, tp, pp, note", [
    (prof(pp=4), 1, 4, "filled in TP=1 from PP=4 and 4 GPUs"),
    (prof(tp=1), 1, 4, "filled in PP=4 from TP=1 and 4 GPUs"),
    (prof(pp=2), 2, 2, "filled in TP=2 from PP=2 and 4 GPUs"),
])
def test_one_size_given_the_other_is_what_the_gpus_leave(profile, tp, pp, note):
    hosts = [h100("a", 2), h100("b", 2)]
    out = planner.plan(profile, hosts)
    assert (out["tensor_parallel_size"], out["pipeline_parallel_size"]) == (tp, pp)
    assert note in out["notes"]


def test_tp_across_socket_nodes_only_where_the_inventory_allows_it():
    """llmfleet_allow_tp_over_sockets (serve_overrides tp_over_sockets): a layout test on nodes without RoCE."""
    prof = {"name": "tp2", "engine": "vllm", "tensor_parallel_size": 2, "pipeline_parallel_size": 1, "backend": "ray"}
    hosts = [{"name": h, "gpu_arch": "sm_90", "gpus_per_node": 1, "transport": "socket"} for h in ("node1", "node2")]
    with pytest.raises(planner.PlanError, match="needs RoCE"):
        planner.plan(prof, hosts)
    got = planner.plan(prof, hosts, {"tp_over_sockets": True})
    assert got["cross_node_tp"] is True and got["tensor_parallel_size"] == 2
    assert any("llmfleet_allow_tp_over_sockets" in note for note in got["notes"])
