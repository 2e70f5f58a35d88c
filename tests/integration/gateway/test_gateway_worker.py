"""llmfleet.cluster.gateway_worker against the real gateway: sglang-router 0.2.4 (the wheel the gateway
role installs, started by the role's own launcher, roles/gateway/files/llmfleet_gateway.py) on loopback.

The two engines behind it are STAND-INS (no engine runs in the controller lane): tiny HTTP servers
answering /health, /v1/models and chat completions with their own name, and a /metrics whose
vllm:num_requests_running gauge the test sets. Real engines behind the gateway are checked on the
converged sim (molecule/cluster/tests/test_gateway.py).

Checked: check mode reports the removal and changes nothing; a drain removes one replica from the
rotation (every request then reaches the other) and waits until its engine runs no request; a second
drain changes nothing; putting it back brings round robin back; a drain whose engine keeps running
fails after drain_timeout, naming the worker and the count.

    .venv/bin/pytest -q tests/integration/gateway/test_gateway_worker.py
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import localplay  # noqa: E402

ROOT = localplay.ROOT
VERSION = "0.2.4"  # roles/gateway/defaults/main.yml gateway_router_version
CACHE = Path(os.environ.get("LLMFLEET_CACHE") or Path.home() / ".cache" / "llmfleet") / "gateway"
KEY = "test-gateway-key"
MODEL = "m"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class StandIn:
    """A stand-in engine: its name as every answer, a running-requests gauge the test sets."""

    def __init__(self, name: str):
        self.name, self.running, self.port = name, 0, free_port()
        self.finish_after = None  # /metrics reads after which the running requests end (None: never)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _send(self, code, body, ctype="application/json"):
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):  # noqa: N802 - http.server's name
                if self.path.startswith("/health"):
                    return self._send(200, {})
                if self.path.startswith("/v1/models"):
                    return self._send(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
                if self.path.startswith("/metrics"):
                    if outer.finish_after is not None:
                        outer.finish_after -= 1
                        if outer.finish_after <= 0:
                            outer.running, outer.finish_after = 0, None
                    text = ('# TYPE vllm:num_requests_running gauge\n'
                            f'vllm:num_requests_running{{engine="0",model_name="{MODEL}"}} {outer.running}.0\n')
                    return self._send(200, text.encode(), "text/plain")
                return self._send(404, {})

            def do_POST(self):  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self._send(200, {"id": "c", "object": "chat.completion", "model": MODEL,
                                 "choices": [{"index": 0, "finish_reason": "stop",
                                              "message": {"role": "assistant", "content": outer.name}}],
                                 "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The router wheel, unpacked without dependencies as the gateway role unpacks it."""
    CACHE.mkdir(parents=True, exist_ok=True)
    wheels = sorted(CACHE.glob(f"sglang_router-{VERSION}-*x86_64*.whl"))
    if not wheels:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                        "--platform", "manylinux2014_x86_64", "--python-version", "3.11", "-d", str(CACHE),
                        f"sglang-router=={VERSION}"], check=True, timeout=600)
        wheels = sorted(CACHE.glob(f"sglang_router-{VERSION}-*x86_64*.whl"))
    out = tmp_path_factory.mktemp("router")
    with zipfile.ZipFile(wheels[-1]) as whl:
        whl.extractall(out)
    return out


@pytest.fixture(scope="module")
def gateway(site, tmp_path_factory):
    work = tmp_path_factory.mktemp("gateway")
    engines = [StandIn("A"), StandIn("B")]
    (work / "workers.json").write_text(json.dumps([{"url": e.url, "model_id": MODEL} for e in engines]))
    port, metrics = free_port(), free_port()
    log = (work / "gateway.log").open("w")
    proc = subprocess.Popen(  # pylint: disable=consider-using-with
        [sys.executable, str(ROOT / "roles/gateway/files/llmfleet_gateway.py"), "--site", str(site), "--host",
         "127.0.0.1", "--port", str(port), "--workers", str(work / "workers.json"), "--prometheus-port", str(metrics),
         "--register-retry", "1", "--health-check-interval", "1"],
        env={**os.environ, "LLMFLEET_API_KEY": KEY}, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while len(listed(base)) < 2:
            assert proc.poll() is None and time.monotonic() < deadline, (work / "gateway.log").read_text()[-3000:]
            time.sleep(0.5)
        yield base, engines, work
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
        for e in engines:
            e.server.shutdown()


def call(base: str, path: str, body: dict | None = None):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode() if body else None,
                                 headers={"Authorization": "Bearer " + KEY, "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


def listed(base: str) -> list[str]:
    try:
        return [w["url"] for w in call(base, "/workers")["workers"] if w.get("is_healthy")]
    except OSError:
        return []


def answers(base: str, n: int) -> list[str]:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
    return [call(base, "/v1/chat/completions", body)["choices"][0]["message"]["content"] for _i in range(n)]


def module(work: Path, args: dict, *flags: str, timeout: int = 180) -> tuple[int, dict]:
    """One gateway_worker task on localhost (the json callback's result)."""
    localplay.link_collection()
    play = [{"name": "gateway_worker", "hosts": "localhost", "gather_facts": False,
             "tasks": [{"name": "Worker", "llmfleet.cluster.gateway_worker": args}]}]
    (work / "play.yml").write_text(json.dumps(play))
    env = localplay.ansible_env(work, no_proxy=True, ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    rc, out = localplay.run_playbook(work / "play.yml", Path("localhost,"), {"ansible_connection": "local",
                                     "ansible_python_interpreter": sys.executable}, *flags, env=env, timeout=timeout)
    tasks, _stats = localplay.json_tasks(out, rc)
    return rc, tasks["Worker"]["localhost"]


def test_drain_takes_a_replica_out_waits_for_its_requests_and_puts_it_back(gateway):
    base, (a, b), work = gateway
    assert sorted(answers(base, 4)) == ["A", "A", "B", "B"]  # round robin over the two replicas
    drain = {"gateway_url": base + "/v1", "url": a.url, "state": "absent", "api_key": KEY, "poll": 0.2}

    rc, res = module(work, drain, "--check")
    assert rc == 0 and res["changed"] and res["change"] == "remove", res
    assert sorted(listed(base)) == sorted([a.url, b.url])  # check mode removed nothing

    # two requests still running on A when the drain starts; they end after the module's 6th look
    a.running, a.finish_after = 2, 6
    rc, res = module(work, drain)
    assert rc == 0 and res["changed"] and res["change"] == "remove", res
    assert res["running"] == 0.0 and res["drained_s"] >= 1.0 and a.finish_after is None, res
    assert [w["url"] for w in res["workers"]] == [b.url]
    assert KEY not in json.dumps(res)  # api_key is no_log
    assert answers(base, 4) == ["B"] * 4  # nothing reaches the drained replica

    rc, res = module(work, drain)
    assert rc == 0 and not res["changed"] and res["change"] == "", res  # drained already

    back = {"gateway_url": base, "url": a.url, "model_id": MODEL, "api_key": KEY, "poll": 0.2}
    rc, res = module(work, back)
    assert rc == 0 and res["changed"] and res["change"] == "add", res
    assert sorted(answers(base, 4)) == ["A", "A", "B", "B"]
    rc, res = module(work, back)
    assert rc == 0 and not res["changed"], res


def test_a_drain_whose_engine_keeps_running_fails_naming_it(gateway):
    base, (_a, b), work = gateway
    b.running = 3
    try:
        rc, res = module(work, {"gateway_url": base, "url": b.url, "state": "absent", "api_key": KEY,
                                "drain_timeout": 2, "poll": 0.2})
    finally:
        b.running = 0
        module(work, {"gateway_url": base, "url": b.url, "model_id": MODEL, "api_key": KEY, "poll": 0.2})
    assert rc != 0 and res.get("failed"), res
    assert f"{b.url} still runs 3 request(s) 2 s after the gateway stopped sending to it" in res["msg"]
    assert KEY not in json.dumps(res)
