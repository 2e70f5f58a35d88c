"""The cluster's gateway (roles/gateway) on spark1: one URL for the sim's serving groups (vLLM on the
Sparks, SGLang on the Thors, the real SmolLM2 as two replicas on spark3 and thor3), checked with the
official `openai` client: every model listed and answering (chat, streamed chat, completions) through
the one URL, the real model's answer to a question with a known answer, both replicas taking requests,
the key checked at the gateway and in no process's command line."""

import json
import urllib.error
import urllib.request

import pytest
from openai import AuthenticationError, OpenAI

from conftest import FABRIC_IP, api_key, node

UNIT = "llmfleet-gateway"
BASE_URL = f"http://{FABRIC_IP['spark1']}:8080/v1"
# the sim's serving groups and their served model names (inventories/sim/group_vars/all.yml)
MODELS = {"tiny-llama", "tiny-llama-sglang", "smollm2"}
REPLICAS = ("spark3", "thor3")  # smol-1 and smol-2


@pytest.fixture(scope="module")
def client():
    return OpenAI(base_url=BASE_URL, api_key=api_key(), timeout=120, max_retries=0)


def test_the_gateway_runs_unprivileged_on_the_ray_head_only():
    spark1 = node("spark1")
    assert spark1.service(UNIT).is_running and spark1.service(UNIT + "-firewall").is_running
    unit = spark1.file(f"/etc/systemd/system/{UNIT}.service").content_string
    assert "User=llmfleet" in unit and "llmfleet_gateway.py" in unit
    env = spark1.file(f"/etc/llmfleet/{UNIT}.env")
    assert env.mode == 0o600 and "LLMFLEET_API_KEY=" in env.content_string
    workers = json.loads(spark1.file("/etc/llmfleet/gateway-workers.json").content_string)
    assert {w["model_id"] for w in workers} == MODELS
    assert sorted(w["url"] for w in workers if w["model_id"] == "smollm2") == [
        f"http://{FABRIC_IP[h]}:8000" for h in REPLICAS]
    for name in ("spark2", "thor1", "thor2") + REPLICAS:
        assert not node(name).service(UNIT).is_running


def test_every_model_is_listed_and_answers_through_the_one_url(client):
    assert {m.id for m in client.models.list().data} >= MODELS
    for model in sorted(MODELS):
        chat = client.chat.completions.create(model=model, max_tokens=8, temperature=0,
                                              messages=[{"role": "user", "content": "Hello"}])
        assert chat.model == model and chat.usage.completion_tokens > 0
        chunks = list(client.chat.completions.create(model=model, max_tokens=8, stream=True,
                                                     messages=[{"role": "user", "content": "Hello"}]))
        assert sum(1 for c in chunks if c.choices and c.choices[0].delta.content) > 0
        text = client.completions.create(model=model, prompt="Hello", max_tokens=8)
        assert text.choices and text.usage.completion_tokens > 0


def test_the_real_model_answers_paris_from_both_replicas(client):
    def served():
        return {h: int(float(node(h).check_output(
            f"curl -s http://{FABRIC_IP[h]}:8000/metrics | awk '/^vllm:request_success_total/ {{s += $2}} END {{print s + 0}}'")))
            for h in REPLICAS}
    before = served()
    answers = [client.chat.completions.create(
        model="smollm2", max_tokens=16, temperature=0,
        messages=[{"role": "user", "content": "What is the capital of France? Answer in one word."}]).choices[0].message.content
        for _attempt in range(4)]
    assert all("Paris" in a for a in answers), answers
    after = served()
    # round robin across the two replicas: each answered some of the four
    assert all(after[h] > before[h] for h in REPLICAS), (before, after)


def test_a_request_without_the_key_or_for_an_unknown_model_is_refused():
    with pytest.raises(AuthenticationError):
        OpenAI(base_url=BASE_URL, api_key="wrong", max_retries=0).chat.completions.create(
            model="tiny-llama", max_tokens=4, messages=[{"role": "user", "content": "Hello"}])
    req = urllib.request.Request(BASE_URL + "/chat/completions", method="POST",
                                 data=json.dumps({"model": "no-such-model", "max_tokens": 4,
                                                  "messages": [{"role": "user", "content": "Hi"}]}).encode(),
                                 headers={"Content-Type": "application/json", "Authorization": "Bearer " + api_key()})
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=30)
    assert err.value.code in (404, 503)


def test_the_key_is_in_no_command_line():
    ps = node("spark1").run("ps -eo args").stdout
    assert api_key() not in ps
    assert any("llmfleet_gateway.py" in line for line in ps.splitlines())
