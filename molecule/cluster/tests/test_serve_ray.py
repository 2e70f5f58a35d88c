"""vLLM over Ray and a reasoning parser on the sim (issue 20), through the official `openai` client.

The inventory serves sim-tiny-llama (TP=2, vLLM's native mp executor). The module serves
sim-tiny-llama-ray-tp2 once (one engine load): vLLM's CPU build with --distributed-executor-backend
ray (the SIM-ONLY engine patches make its CPU platform accept Ray), joining llmfleet-ray from spark1,
and --reasoning-parser deepseek_r1; then it puts the inventory's profile back (a second load),
unless the check that runs next replaces what serves anyway (conftest.py runs this file just before
test_serve_lifecycle.py, whose first check does: one engine load fewer).
PP=2 over Ray is one more engine load: opt-in (EXTENDED in conftest.py).
"""
import json
import re

import pytest
import yaml

from conftest import FABRIC_IP, RAY_CLIENT, VENV, api_key, failures, node, recap, run_module, run_playbook, serving_is_replaced_next

API = f"http://{FABRIC_IP['spark1']}:8000"
MODEL = "tiny-llama"
UNIT = "llmfleet-serve-tiny-llama"
# vLLM 0.32's rank actors: RayWorkerProc (RayExecutorV2, the default), RayWorkerWrapper (the older executor)
RANK_ACTORS = ("RayWorkerProc", "RayWorkerWrapper")
ACTORS = ("import json, ray; ray.init(address='10.231.1.11:6379', logging_level='ERROR', log_to_driver=False); "
          "from ray._private.state import actors; "
          "print('STATE', json.dumps([[a['ActorClassName'], a['Address']['IPAddress'], a['State']] "
          "for a in actors().values()]))")


def serve(profile=None):
    """serve.yml with `profile` (None: the inventory's). -> (output, seconds to healthy)."""
    rc, out, _secs = run_playbook("playbooks/serve.yml",
                                  extra_vars={"llmfleet_serve_profile": profile} if profile else None)
    assert rc == 0, failures(out)
    ready = re.search(r"ready ([0-9.]+) s after start", out)
    return out, float(ready.group(1)) if ready else None


def alive_vllm_workers():
    """[node IP] of the alive vLLM rank actors, as the Ray head's GCS lists them."""
    out = node("spark1").check_output(
        f"{RAY_CLIENT} {VENV}/bin/python -c \"{ACTORS}\" 2>/dev/null | grep ^STATE")
    return sorted(ip for cls, ip, state in json.loads(out.split(" ", 1)[1])
                  if state == "ALIVE" and cls in RANK_ACTORS)


def client():
    import openai  # requirements-dev.txt
    return openai.OpenAI(base_url=API + "/v1", api_key=api_key(), timeout=120, max_retries=0)


@pytest.fixture(scope="module")
def ray_tp2():
    out, ready = serve("sim-tiny-llama-ray-tp2")
    print(f"\nTIME TO HEALTHY ray TP=2: {ready} s")
    yield out
    if serving_is_replaced_next():
        print("\nRay TP=2 left serving: the next check replaces it (REPLACES_SERVING in conftest.py)")
        return
    _out, ready = serve()
    print(f"\nTIME TO HEALTHY mp TP=2 (restored): {ready} s")


def test_ray_places_one_rank_on_each_spark_and_no_unit_on_spark2(ray_tp2):
    assert recap(ray_tp2)["spark1"]["failed"] == 0
    assert alive_vllm_workers() == [FABRIC_IP["spark1"], FABRIC_IP["spark2"]]
    head = node("spark1")
    assert "--distributed-executor-backend ray" in head.check_output(f"systemctl show -P ExecStart {UNIT}")
    # the Ray backend starts no unit off rank 0: the mp layout's headless unit was removed
    assert not node("spark2").service(UNIT).is_running
    # the SIM-ONLY patch is in the serving venv, marked (engine_patches role, converge)
    platform = head.file(f"{VENV}/lib/python3.11/site-packages/vllm/platforms/cpu.py").content_string
    assert "llmfleet-patch: sim-cpu-ray-platform" in platform


def test_openai_client_chat_returns_reasoning(ray_tp2):
    chat = client().chat.completions.create(model=MODEL, max_tokens=8, temperature=0,
                                            messages=[{"role": "user", "content": "Think, then say hi."}])
    message = chat.choices[0].message
    reasoning = getattr(message, "reasoning", None) or getattr(message, "reasoning_content", None)
    assert chat.usage.completion_tokens > 0
    # deepseek_r1: everything before </think> is reasoning; the random model rarely closes it
    assert reasoning, chat.model_dump()
    print(f"\nchat: reasoning {reasoning!r}, content {message.content!r}")


def test_openai_client_stream_returns_reasoning_chunks(ray_tp2):
    parts = {"reasoning": [], "content": []}
    for chunk in client().chat.completions.create(model=MODEL, max_tokens=8, temperature=0, stream=True,
                                                  messages=[{"role": "user", "content": "Think, then say hi."}]):
        delta = chunk.choices[0].delta if chunk.choices else None
        for key, value in (("reasoning", getattr(delta, "reasoning", None) or getattr(delta, "reasoning_content", None)),
                           ("content", getattr(delta, "content", None))):
            if value:
                parts[key].append(value)
    assert parts["reasoning"], parts
    print(f"\nstream: {len(parts['reasoning'])} reasoning and {len(parts['content'])} content chunk(s)")


def test_openai_client_completion(ray_tp2):
    done = client().completions.create(model=MODEL, prompt="The quick brown fox", max_tokens=8, temperature=0)
    assert done.usage.completion_tokens > 0 and done.choices[0].finish_reason in ("length", "stop")


def test_serve_smoke_counts_reasoning_as_output(ray_tp2):
    rc, out = run_module("localhost", "llmfleet.cluster.serve_smoke",
                         {"url": API, "model": MODEL, "requests": 1, "max_tokens": 8, "stream": True,
                          # templated by ansible from the key file: the key stays out of argv
                          "api_key": "{{ lookup('llmfleet.cluster.api_key', 'sim') }}"})
    assert rc == 0, out
    res = yaml.safe_load(out.split(" => ", 1)[1])  # the callback prints results as YAML (ansible.cfg)
    assert res["ok"], res
    assert res["reasoning"] and res["stream"]["reasoning_chunks"] > 0


def test_ray_pipeline_parallel_two_stages():
    """PP=2 over Ray (notes 000's layout on 2 nodes): a stage of 2 layers on each Spark. Opt-in."""
    try:
        out, ready = serve("sim-tiny-llama-ray-pp2")
        print(f"\nTIME TO HEALTHY ray PP=2: {ready} s")
        assert recap(out)["spark1"]["failed"] == 0
        assert alive_vllm_workers() == [FABRIC_IP["spark1"], FABRIC_IP["spark2"]]
        done = client().completions.create(model=MODEL, prompt="One two three", max_tokens=8, temperature=0)
        assert done.usage.completion_tokens > 0
    finally:
        serve()
