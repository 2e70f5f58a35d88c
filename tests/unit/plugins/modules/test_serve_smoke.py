"""serve_smoke module against a small OpenAI-compatible stand-in on loopback."""
import json

import pytest

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.llmfleet.cluster.plugins.modules import serve_smoke
from loopback_http import JsonHandler, serving


class ModuleExit(Exception):
    def __init__(self, result):
        super().__init__(result)
        self.result = result


class Handler(JsonHandler):
    key = "sekret"
    tokens = 16

    def _authorized(self):
        if self.headers.get("Authorization") != "Bearer " + self.key:
            self.send_json(401, {"error": "Unauthorized"})
            return False
        return True

    def do_GET(self):  # noqa: N802
        if self._authorized():
            models = [{"id": m, "object": "model"} for m in ("tiny-llama", "cut", "think", "think-sglang", "mute")]
            self.send_json(200, {"object": "list", "data": models})

    def _stream(self, req):
        # what vLLM sends: a role chunk, content chunks, a finish chunk, then [DONE] (unless the model is "cut")
        chunks = [{"role": "assistant", "content": ""}] + [{"content": "hi "}] * min(3, req["max_tokens"]) + [{}]
        if req["model"] in REASONING:
            # vLLM 0.32 with --reasoning-parser deepseek_r1 and no </think> yet: every delta is reasoning
            chunks = [{"role": "assistant", "content": ""}] + [{REASONING[req["model"]]: "hm "}] * 3 + [{}]
        elif req["model"] == "mute":
            chunks = [{"role": "assistant", "content": ""}, {}]
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for delta in chunks:
            doc = {"model": req["model"], "choices": [{"index": 0, "delta": delta}]}
            self.wfile.write(("data: %s\n\n" % json.dumps(doc)).encode())
        if req["model"] != "cut":
            self.wfile.write(b"data: [DONE]\n\n")
        self.close_connection = True

    def do_POST(self):  # noqa: N802
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if req.get("stream") and self._authorized():
            self._stream(req)
        elif self._authorized():
            message = {"role": "assistant", "content": "hi " * 3}
            if req["model"] in REASONING:
                message = {"role": "assistant", "content": None, REASONING[req["model"]]: "hm " * 3}
            self.send_json(200, {"model": req["model"], "choices": [{"message": message}],
                                 "usage": {"completion_tokens": min(self.tokens, req["max_tokens"])}})


# served name -> the field a reasoning parser fills (vLLM >= 0.13: reasoning; SGLang: reasoning_content)
REASONING = {"think": "reasoning", "think-sglang": "reasoning_content"}


@pytest.fixture(scope="module")
def server():
    with serving(Handler) as port:
        yield "http://127.0.0.1:%d" % port


def run(monkeypatch, args):
    def exit_json(self, **kw):
        raise ModuleExit(kw)

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    with patch_module_args(args):
        with pytest.raises(ModuleExit) as exc:
            serve_smoke.main()
    return exc.value.result


# args -> ok, words in the error
CASES = [
    ({"model": "tiny-llama", "api_key": "sekret", "requests": 3, "max_tokens": 8}, True, ""),
    ({"model": "tiny-llama", "api_key": "wrong"}, False, "401"),
    ({"model": "tiny-llama"}, False, "401"),
    ({"model": "other", "api_key": "sekret"}, False, "'other' is not served"),
]


@pytest.mark.parametrize("args,ok,words", CASES)
def test_smoke(monkeypatch, server, args, ok, words):
    res = run(monkeypatch, dict(args, url=server + "/"))
    assert res["ok"] is ok, res
    assert words in res["error"]
    if ok:
        assert res["models"][:2] == ["tiny-llama", "cut"] and len(res["latencies_s"]) == 3
        assert res["completion_tokens"] == [8, 8, 8] and res["p50_s"] > 0 and res["max_s"] >= res["p50_s"]
        assert res["text"].startswith("hi") and res["reasoning"] == ""


def test_unreachable_endpoint(monkeypatch):
    res = run(monkeypatch, {"url": "http://127.0.0.1:9", "model": "x", "timeout": 3})
    assert not res["ok"] and "/v1/models" in res["error"]


# streamed completion: chunks counted, [DONE] required
@pytest.mark.parametrize("model, ok, chunks, words", [
    ("tiny-llama", True, 3, ""),
    ("cut", False, 3, "without data: [DONE]"),
])
def test_stream(monkeypatch, server, model, ok, chunks, words):
    res = run(monkeypatch, {"url": server, "model": model, "api_key": "sekret", "requests": 1, "max_tokens": 8,
                            "stream": True})
    assert res["ok"] is ok, res
    assert res["stream"]["content_chunks"] == chunks
    assert res["stream"]["done"] is ok
    assert res["stream"]["first_chunk_s"] is not None
    assert words in res["error"]


# a reasoning parser moves the output out of content: it still counts, and comes back apart
@pytest.mark.parametrize("model", sorted(REASONING))
def test_reasoning_counts_as_output(monkeypatch, server, model):
    res = run(monkeypatch, {"url": server, "model": model, "api_key": "sekret", "requests": 2, "max_tokens": 8,
                            "stream": True})
    assert res["ok"], res
    assert res["text"] == "" and res["reasoning"] == "hm hm hm "
    assert res["stream"]["content_chunks"] == 0 and res["stream"]["reasoning_chunks"] == 3
    assert res["stream"]["reasoning"] == "hm hm hm " and res["stream"]["text"] == ""
    assert res["stream"]["first_chunk_s"] is not None


def test_stream_without_any_output_fails(monkeypatch, server):
    res = run(monkeypatch, {"url": server, "model": "mute", "api_key": "sekret", "requests": 1, "stream": True})
    assert not res["ok"] and "no content or reasoning chunk" in res["error"]
    assert res["stream"]["first_chunk_s"] is None


def test_no_stream_by_default(monkeypatch, server):
    res = run(monkeypatch, {"url": server, "model": "tiny-llama", "api_key": "sekret", "requests": 1})
    assert res["ok"] and res["stream"] == {}
