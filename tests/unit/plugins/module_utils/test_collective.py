"""collective: probe arguments, its output line, bandwidth as nccl-tests computes it."""
import json

import pytest

from ansible_collections.llmfleet.cluster.plugins.module_utils import collective

# size bytes, seconds, ranks -> algbw, busbw (Gbit/s)
BANDWIDTH = [
    (64 * 2**20, 0.1, 2, 5.369, 5.369),          # 2 ranks: busbw == algbw
    (64 * 2**20, 0.1, 4, 5.369, 8.053),          # 4 ranks: x 2(n-1)/n = 1.5
    (2**30, 0.08, 8, 107.374, 187.905),          # 8 ranks: x 1.75
    (1024, 0.001, 1, 0.008, 0.008),              # one rank: nothing crosses a link
    (1024, 0, 2, 0.0, 0.0),                      # no time measured
    (1024, None, 2, 0.0, 0.0),
]


@pytest.mark.parametrize("size,seconds,ranks,alg,bus", BANDWIDTH)
def test_bandwidth(size, seconds, ranks, alg, bus):
    assert collective.bandwidth(size, seconds, ranks) == {"algbw_gbps": alg, "busbw_gbps": bus}


@pytest.mark.parametrize("values,want", [([3, 1, 2], 2), ([4, 1, 2, 3], 2.5), ([], None), ([0.5], 0.5)])
def test_median(values, want):
    assert collective.median(values) == want


def test_probe_args_and_rejections():
    a = collective.probe_args(1, 2, "10.231.79.11", 29533, 1024)
    assert a["rank"] == 1 and a["world_size"] == 2 and a["backend"] == "auto"
    json.dumps(a)
    with pytest.raises(ValueError):
        collective.probe_args(2, 2, "10.0.0.1", 1, 1)
    with pytest.raises(ValueError):
        collective.probe_args(0, 2, "10.0.0.1", 1, 1, backend="mpi")


# What the probe printed on the sim (gloo, 2 ranks), with torch noise around it.
GLOO_OUT = ("[W1122 04:40:01.123456 ProcessGroupGloo.cpp:514] Warning: Unable to resolve hostname\n"
            'LLMFLEET_COLLECTIVE {"backend": "gloo", "rank": 0, "world_size": 2, "host": "spark1", "torch": "2.9.0+cpu", '
            '"gloo_ifname": "eth1", "nccl_ifname": "eth1", "nccl_ib_disable": "1", "init_s": 0.41, "times": [0.5, 0.4, 0.45], '
            '"size_bytes": 67108864, "correct": true, "value": 3.0, "want": 3.0}\n')


def test_parse_and_result_of_a_gloo_run():
    res = collective.result(collective.parse_output(GLOO_OUT))
    assert res["backend"] == "gloo" and res["correct"] and res["error"] == ""
    assert res["time_s"] == 0.45
    assert res["algbw_gbps"] == pytest.approx(67108864 * 8 / 0.45 / 1e9, abs=1e-3)
    assert res["busbw_gbps"] == res["algbw_gbps"]  # two ranks
    assert res["gloo_ifname"] == "eth1"


def test_result_of_a_failed_rendezvous():
    out = 'LLMFLEET_COLLECTIVE {"backend": "gloo", "rank": 1, "world_size": 2, "error": "DistStoreError: Timed out after 61 seconds"}'
    res = collective.result(collective.parse_output(out))
    assert "Timed out" in res["error"] and not res["correct"]
    assert res["busbw_gbps"] == 0.0 and res["time_s"] is None


def test_no_result_line():
    with pytest.raises(ValueError):
        collective.parse_output("Traceback (most recent call last):\nModuleNotFoundError: No module named 'torch'\n")


def test_probe_script_compiles():
    compile(collective.PROBE, "<probe>", "exec")
