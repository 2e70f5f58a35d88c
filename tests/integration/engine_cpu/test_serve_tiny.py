"""Serve the tiny random Llama with the CPU vLLM of an installed engine venv, on loopback only.

    LLMFLEET_ENGINE_VENV=/path/to/venv .venv/bin/pytest tests/integration/engine_cpu -q

(a venv made by roles/python_env/files/install_from_wheelhouse.sh). Skips without it.
Two cases: one engine (TP=1), and native two-process tensor parallelism
(--tensor-parallel-size 2 --nnodes 2, rank 1 --headless) with gloo on lo. Each asserts
/health, /v1/models and one chat completion, and prints time-to-healthy and memory (PSS).
On a 2-core box expect ~20-120 s to healthy for TP=1 and ~50-150 s for TP=2, depending on
load; ~1.5 GiB PSS for a TP=1 engine. Every process started here is stopped here, by its
process group.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
MAKER = ROOT / "tools" / "tinymodel" / "make_tiny_llama.py"
HEALTH_TIMEOUT = float(os.environ.get("LLMFLEET_SERVE_TIMEOUT", "600"))
# What the serve role passes on the CPU variant (roles/python_env/vars/variants/cpu.yml).
ENV = {
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    "OMP_NUM_THREADS": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "VLLM_HOST_IP": "127.0.0.1",
    "GLOO_SOCKET_IFNAME": "lo",
}
ARGS = ["--dtype", "float32", "--enforce-eager", "--max-model-len", "256",
        "--kv-cache-memory-bytes", "64M", "--served-model-name", "tiny-llama"]


@pytest.fixture(scope="module")
def venv() -> Path:
    value = os.environ.get("LLMFLEET_ENGINE_VENV")
    if not value:
        pytest.skip("LLMFLEET_ENGINE_VENV is not set (a venv installed from the CPU wheelhouse)")
    path = Path(value)
    if not (path / "bin" / "vllm").exists():
        pytest.skip(f"{path} has no bin/vllm")
    return path


@pytest.fixture(scope="module")
def model(venv, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tiny") / "tiny-llama"
    subprocess.run([str(venv / "bin" / "python"), str(MAKER), str(out)], check=True,
                   capture_output=True, timeout=600)
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, timeout: float = 5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read().decode()


def _pss_mib(pid: int) -> float:
    """PSS of a process and all its descendants (MiB)."""
    total = 0
    pids = [pid]
    while pids:
        p = pids.pop()
        try:
            for line in open(f"/proc/{p}/smaps_rollup"):
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
            children = Path(f"/proc/{p}/task/{p}/children").read_text().split()
            pids += [int(c) for c in children]
        except OSError:
            pass
    return total / 1024


class Engines:
    def __init__(self, tmp: Path):
        self.tmp, self.procs = tmp, []

    def start(self, argv: list[str], name: str) -> subprocess.Popen:
        env = dict(os.environ, **ENV)
        log = open(self.tmp / f"{name}.log", "w")
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
        self.procs.append(proc)
        return proc

    def stop(self):
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 60
        for p in self.procs:
            try:
                p.wait(timeout=max(1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            try:  # stragglers of the group (workers) after the grace period
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def logs(self) -> str:
        return "\n".join(f"--- {f.name}\n" + f.read_text()[-3000:]
                         for f in sorted(self.tmp.glob("*.log")))


@pytest.fixture
def engines(tmp_path):
    e = Engines(tmp_path)
    yield e
    e.stop()


def _check_serving(port: int, procs, t0: float) -> dict:
    base = f"http://127.0.0.1:{port}"
    while True:
        for p in procs:
            assert p.poll() is None, f"engine exited with {p.returncode}"
        try:
            if _get(base + "/health")[0] == 200:
                break
        except OSError:
            pass
        assert time.monotonic() - t0 < HEALTH_TIMEOUT, "not healthy in time"
        time.sleep(1)
    healthy = time.monotonic() - t0
    models = json.loads(_get(base + "/v1/models")[1])
    assert [m["id"] for m in models["data"]] == ["tiny-llama"]
    body = json.dumps({"model": "tiny-llama", "max_tokens": 8, "temperature": 0,
                       "messages": [{"role": "user", "content": "Hello! How are you?"}]})
    req = urllib.request.Request(base + "/v1/chat/completions", data=body.encode(),
                                 headers={"Content-Type": "application/json"})
    t1 = time.monotonic()
    with urllib.request.urlopen(req, timeout=300) as r:  # first TP request: tens of seconds
        answer = json.loads(r.read())
    first = time.monotonic() - t1
    text = answer["choices"][0]["message"]["content"]
    assert isinstance(text, str) and text, answer
    assert answer["usage"]["completion_tokens"] > 0
    return {"healthy_s": round(healthy, 1), "first_chat_s": round(first, 2),
            "pss_mib": [round(_pss_mib(p.pid)) for p in procs]}


def test_serve_single(venv, model, engines):
    port = _free_port()
    t0 = time.monotonic()
    p = engines.start([str(venv / "bin" / "vllm"), "serve", str(model), *ARGS,
                       "--host", "127.0.0.1", "--port", str(port)], "single")
    try:
        info = _check_serving(port, [p], t0)
    except AssertionError:
        print(engines.logs())
        raise
    print("single:", info)


def test_serve_tp2_two_processes(venv, model, engines):
    port, master = _free_port(), _free_port()
    common = [str(venv / "bin" / "vllm"), "serve", str(model), *ARGS,
              "--tensor-parallel-size", "2", "--nnodes", "2",
              "--master-addr", "127.0.0.1", "--master-port", str(master)]
    t0 = time.monotonic()
    p0 = engines.start(common + ["--node-rank", "0", "--host", "127.0.0.1",
                                 "--port", str(port)], "rank0")
    p1 = engines.start(common + ["--node-rank", "1", "--headless"], "rank1")
    try:
        info = _check_serving(port, [p0, p1], t0)
    except AssertionError:
        print(engines.logs())
        raise
    print("tp2:", info)
