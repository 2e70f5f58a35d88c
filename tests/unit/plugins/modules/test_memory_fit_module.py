"""Tests for the llmfleet.cluster.memory_fit module: the node's memory and the model's config.json
read from files the test writes, the verdict and the one-line numbers."""
import json

import pytest

from ansible_collections.llmfleet.cluster.plugins.filter.serving import serve_profile
from ansible_collections.llmfleet.cluster.plugins.modules import memory_fit
from uthelper import run_module

# the sim's shipped profile, resolved as the plan resolves it
SIM = serve_profile("sim-tiny-llama")
LAYOUT = {"tensor_parallel_size": 2, "pipeline_parallel_size": 1, "gpus_per_node": 1}
MEMINFO = "MemTotal:       24576000 kB\nMemFree:        1000 kB\n"
GIB = 1 << 30


@pytest.fixture
def node(tmp_path, monkeypatch):
    """A node whose /proc/meminfo and cgroup limit are files of the test."""
    meminfo, limit = tmp_path / "meminfo", tmp_path / "memory.max"
    meminfo.write_text(MEMINFO)
    monkeypatch.setattr(memory_fit, "MEMINFO", str(meminfo))
    monkeypatch.setattr(memory_fit, "CGROUP_LIMITS", (str(limit), str(tmp_path / "absent")))
    return tmp_path, limit


def run(monkeypatch, **args):
    return run_module(monkeypatch, memory_fit, dict({"profile": SIM, "layout": LAYOUT, "label": "spark1"}, **args))


# the cgroup limit's text, the GiB the check uses (MemTotal 24576000 kB = 23.44 GiB)
@pytest.mark.parametrize("limit, gib", [
    (None, 23.44),                        # no cgroup file: MemTotal
    ("max\n", 23.44),                     # no limit
    ("%d\n" % (8 * GIB), 8.0),            # a container's limit below MemTotal
    ("%d\n" % (64 * GIB), 23.44),         # a limit above MemTotal does not raise it
])
def test_the_node_memory_is_memtotal_or_a_lower_cgroup_limit(monkeypatch, node, limit, gib):
    if limit is not None:
        node[1].write_text(limit)
    out = run(monkeypatch)
    assert not out.failed, out.result
    assert out.result["node_memory_gib"] == gib
    assert out.result["line"].startswith("MEMFIT fit spark1: sim-tiny-llama TP=2 PP=1 max-model-len=512 x1: node %s GiB" % gib)
    assert out.result["source"] == "profile model_facts" and out.result["changed"] is False


def test_a_layout_that_cannot_fit_fails_naming_host_profile_and_fix(monkeypatch, node):
    out = run(monkeypatch, node_memory_gib=3.0)
    assert out.failed
    assert out.result["verdict"] == "refuse"
    assert out.result["line"].startswith("MEMFIT refuse spark1: sim-tiny-llama")
    assert out.result["msg"].startswith("spark1: profile sim-tiny-llama (TP=2, PP=1, --max-model-len 512) does not fit 3.0 GiB: ")
    assert "under the 1.0 GiB floor" in out.result["msg"]
    assert "Nothing was stopped or started. Fix: lower --max-model-len" in out.result["msg"]


def test_a_discrete_gpu_without_its_memory_is_skipped(monkeypatch, node):
    out = run(monkeypatch, profile=dict(SIM, device="gpu"), gpu_arch="sm_90")
    assert not out.failed and out.result["verdict"] == "skip"
    assert out.result["line"] == ("MEMFIT skip spark1: sm_90 has its own GPU memory; set serve_memory_fit_node_memory_gib "
                                  "(memory per GPU x GPUs per node) to check profile sim-tiny-llama")


@pytest.mark.parametrize("arch", ["sm_121", "sm_110"])
def test_a_unified_memory_gpu_reads_the_node(monkeypatch, node, arch):
    out = run(monkeypatch, profile=dict(SIM, device="gpu"), gpu_arch=arch)
    assert out.result["node_memory_gib"] == 23.44 and out.result["verdict"] != "skip"
    # a GPU profile's host floor is 6 GiB (the CPU build's 1)
    assert "(floor 6.0)" in out.result["line"]


def test_the_node_copys_config_json_wins_over_model_facts(monkeypatch, node):
    config = node[0] / "config.json"
    config.write_text(json.dumps({"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                                  "hidden_size": 256, "intermediate_size": 512, "vocab_size": 1000,
                                  "torch_dtype": "float32"}))
    out = run(monkeypatch, config_path=str(config))
    assert not out.failed, out.result
    assert out.result["source"] == str(config) and ("dims from %s" % config) in out.result["line"]


@pytest.mark.parametrize("kind", ["missing", "directory"])
def test_no_config_json_falls_back_to_model_facts(monkeypatch, node, kind):
    path = node[0] / "config.json"
    if kind == "directory":
        path.mkdir()
    out = run(monkeypatch, config_path=str(path))
    assert not out.failed and out.result["source"] == "profile model_facts"


def test_an_unreadable_config_json_fails_naming_it(monkeypatch, node):
    path = node[0] / "config.json"
    path.write_text("{not json")
    out = run(monkeypatch, config_path=str(path))
    assert out.failed and out.result["msg"].startswith("spark1: cannot read the model config %s: " % path)


def test_check_mode_checks_the_same(monkeypatch, node):
    out = run_module(monkeypatch, memory_fit, {"profile": SIM, "layout": LAYOUT, "label": "spark1",
                                               "node_memory_gib": 3.0}, check_mode=True)
    assert out.failed and out.result["verdict"] == "refuse"
