"""The gateway's worker list and the engines' running-requests gauge (module_utils/_gateway_workers.py),
on sglang-router 0.2.4's own GET /workers answer and the engines' own /metrics lines."""
import pytest

from ansible_collections.llmfleet.cluster.plugins.module_utils import _gateway_workers as gw

# sglang-router 0.2.4 (multi-model mode), GET /workers with two workers of one model (2026-12-02)
WORKERS = {
    "workers": [
        {"id": "http://127.0.0.1:18101", "url": "http://127.0.0.1:18101", "model_id": "m", "priority": 50, "cost": 1.0,
         "worker_type": "regular", "is_healthy": True, "load": 0, "connection_mode": "HTTP"},
        {"id": "http://127.0.0.1:18102", "url": "http://127.0.0.1:18102", "model_id": "m", "priority": 50, "cost": 1.0,
         "worker_type": "regular", "is_healthy": False, "load": 2, "connection_mode": "HTTP"},
    ],
    "total": 2, "stats": {"prefill_count": 0, "decode_count": 0, "regular_count": 2},
}
# the running gauges as the sim's engines export them (vLLM 0.32.0 CPU on spark1, SGLang 0.5.21 CPU on
# thor1, read 2026-12-02 with the engines idle; the counts here are set for the test)
VLLM = ('vllm:num_requests_running{engine="0",model_name="tiny-llama"} 2.0\n'
        'vllm:num_requests_waiting{engine="0",model_name="tiny-llama"} 5.0\n'
        'vllm:num_requests_waiting_by_reason{engine="0",model_name="tiny-llama",reason="capacity"} 0.0\n')
SGLANG = ('# HELP sglang:num_running_reqs The number of running requests.\n'
          '# TYPE sglang:num_running_reqs gauge\n'
          'sglang:num_running_reqs{engine_type="unified",model_name="tiny-llama-sglang",moe_ep_rank="0",pp_rank="0",'
          'tp_rank="0"} 1.0\n')


def test_workers_of_the_router_answer():
    got = gw.workers(WORKERS)
    assert got == [{"url": "http://127.0.0.1:18101", "model_id": "m", "healthy": True, "load": 0},
                   {"url": "http://127.0.0.1:18102", "model_id": "m", "healthy": False, "load": 2}]
    assert gw.registered(got, "http://127.0.0.1:18101/v1", "m")
    assert not gw.registered(got, "http://127.0.0.1:18102", "m")  # listed, not healthy
    with pytest.raises(gw.GatewayWorkersError, match="expected"):
        gw.workers({"error": "unauthorized"})


@pytest.mark.parametrize("url, model, state, action", [
    ("http://127.0.0.1:18101", "m", "absent", "remove"),
    ("http://127.0.0.1:18101/", "m", "present", ""),
    ("http://127.0.0.1:18101/v1", "other", "present", "readd"),
    ("http://127.0.0.1:18109", "m", "present", "add"),
    ("http://127.0.0.1:18109", None, "absent", ""),
])
def test_change(url, model, state, action):
    assert gw.change(gw.workers(WORKERS), url, model, state) == action


def test_running_requests_of_either_engine():
    assert gw.running_requests(VLLM) == 2.0  # the waiting gauge does not count
    assert gw.running_requests(SGLANG) == 1.0
    assert gw.running_requests(SGLANG + SGLANG.replace('tp_rank="0"', 'tp_rank="1"')) == 2.0  # summed over series
    assert gw.running_requests("vllm:num_requests_running 0.0\n") == 0.0
    assert gw.running_requests("# nothing of ours\nprocess_cpu_seconds_total 3.0\n") is None
    assert gw.base_url("http://h:8000/v1/") == "http://h:8000"
