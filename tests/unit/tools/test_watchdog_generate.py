"""The safeguards watchdog's completion probe against a real HTTP server on loopback.

A vLLM multi-node engine whose headless rank was SIGKILLed answers /health 200 and every request
with HTTP 500 (seen on the sim): the probe must count that as a failure.
"""
import importlib.machinery
import importlib.util
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "roles" / "safeguards" / "files" / "llmfleet-watchdog"


def load_watchdog():
    loader = importlib.machinery.SourceFileLoader("llmfleet_watchdog", str(SCRIPT))
    spec = importlib.util.spec_from_loader("llmfleet_watchdog", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


class Engine(BaseHTTPRequestHandler):
    status = {"/health": 200, "/v1/chat/completions": 200}
    answer = {"choices": [{"message": {"content": "p"}}]}
    seen = []

    def do_GET(self):  # noqa: N802 - http.server's API
        self.send_response(self.status.get(self.path, 404))
        self.end_headers()

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Engine.seen.append((self.path, body, self.headers.get("Authorization")))
        code = self.status.get(self.path, 404)
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        if code == 200:
            self.wfile.write(Engine.answer if isinstance(Engine.answer, bytes) else json.dumps(Engine.answer).encode())

    def log_message(self, *args):
        pass


@pytest.fixture()
def engine():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Engine)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    Engine.seen = []
    Engine.answer = {"choices": [{"message": {"content": "p"}}]}
    yield "http://127.0.0.1:%d/health" % server.server_address[1]
    server.shutdown()


@pytest.mark.parametrize("health, completion, want_ok, why", [
    (200, 200, True, "completion HTTP 200"),
    (200, 500, False, "completion HTTP 500"),   # the dead-peer case: /health alone says fine
    (200, 404, False, "completion HTTP 404"),   # wrong model name must not pass silently
])
def test_completion_probe(engine, health, completion, want_ok, why):
    Engine.status = {"/health": health, "/v1/chat/completions": completion}
    wd = load_watchdog()
    assert wd.healthy(engine, 5)[0] is (health == 200)
    ok, reason = wd.generates(engine, "tiny-llama", 5, api_key="k")
    assert (ok, reason) == (want_ok, why)
    path, body, auth = Engine.seen[-1]
    assert path == "/v1/chat/completions" and body["model"] == "tiny-llama" and body["max_tokens"] == 1
    assert auth == "Bearer k"


def test_completion_probe_refused():
    wd = load_watchdog()
    ok, reason = wd.generates("http://127.0.0.1:9/health", "m", 2)
    assert not ok and reason.startswith("completion ")


# vLLM's reply shapes (0.32 with and without --reasoning-parser deepseek_r1; SGLang's field name):
# a reasoning model's 1-token answer is reasoning, its content null; it still generated.
@pytest.mark.parametrize("answer, want_ok, why", [
    ({"choices": [{"message": {"content": None, "reasoning": "Hm"}}],
      "usage": {"completion_tokens": 1}}, True, "completion HTTP 200"),
    ({"choices": [{"message": {"content": None, "reasoning_content": "Hm"}}]}, True, "completion HTTP 200"),
    ({"choices": [{"message": {"content": "", "reasoning": None}}],
      "usage": {"completion_tokens": 1}}, True, "completion HTTP 200"),   # EOS as the only token
    ({"choices": [{"message": {"content": None, "reasoning": None}}],
      "usage": {"completion_tokens": 0}}, False, "completion HTTP 200 without output (no token, content or reasoning)"),
    ({"choices": []}, False, "completion HTTP 200 without output (no token, content or reasoning)"),
    (b"<html>proxy</html>", False, "completion HTTP 200 without a JSON body"),
])
def test_completion_probe_output(engine, answer, want_ok, why):
    Engine.status = {"/health": 200, "/v1/chat/completions": 200}
    Engine.answer = answer
    assert load_watchdog().generates(engine, "tiny-llama", 5) == (want_ok, why)
