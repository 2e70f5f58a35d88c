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


def test_health_probe_tells_a_hung_api_from_a_refused_one():
    """A frozen API process (its socket listens, nothing reads) times out after the connection was
    accepted: hung. Nothing listening (an engine still loading: vLLM and SGLang listen only once
    loaded) is refused: not hung."""
    import socket
    wd = load_watchdog()
    with socket.socket() as frozen:
        frozen.bind(("127.0.0.1", 0))
        frozen.listen(1)
        ok, why, hung = wd.healthy("http://127.0.0.1:%d/health" % frozen.getsockname()[1], 0.5)
    assert (ok, hung) == (False, True) and "accepted" in why
    ok, why, hung = wd.healthy("http://127.0.0.1:9/health", 2)
    assert (ok, hung) == (False, False) and "refused" in why


@pytest.mark.parametrize("hung, want_rc, want_failures", [
    (False, 0, 0),  # refused: still loading, nothing counted
    (True, 1, 0),   # accepted, no answer: the group loaded in this invocation; the 3rd failure restarts
])
def test_probe_of_a_rank_that_never_saw_its_group_healthy(tmp_path, monkeypatch, hung, want_rc, want_failures):
    """A rank whose group recovered and hung again between two of its probes: without the hung
    rule it waited load_timeout (1800 s) while the API rank, restarted by its own watchdog, waited
    for it (seen in CI: the sim's TP 2 group down for the rest of the run)."""
    wd = load_watchdog()
    monkeypatch.setattr(wd, "STATE_DIR", str(tmp_path))
    monkeypatch.setattr(wd, "load_config", lambda unit: {"health_url": "http://x/health", "failures": 3})
    monkeypatch.setattr(wd, "unit_state", lambda unit: ("active", "inv-2", 120.0))
    monkeypatch.setattr(wd, "healthy", lambda *a: (False, "probe result", hung))
    rcs = [wd.probe("u") for attempt in range(3)]
    state = json.loads((tmp_path / "u.json").read_text())
    assert rcs[-1] == want_rc and rcs[:2] == [0, 0]
    assert state["failures"] == want_failures and state["invocation"] == "inv-2" and not state["healthy_once"]
    assert (tmp_path / "u.restart").exists() is hung
