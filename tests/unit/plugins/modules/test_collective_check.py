"""collective_check module: env files reach the probe, NCCL output is judged, failures are reported.

A stand-in venv Python (a shell script) prints what the real probe prints on a node: NCCL INFO lines
and the result line, with the environment it was started with."""
import json

import pytest


from ansible_collections.llmfleet.cluster.plugins.modules import collective_check
from uthelper import run_module


def fake_venv(tmp_path, backend, nccl_lines="", error=""):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    doc = {"backend": backend, "rank": 0, "world_size": 2, "times": [0.2, 0.1, 0.3], "size_bytes": 1048576,
           "correct": not error, "init_s": 0.5}
    if error:
        doc = {"backend": backend, "rank": 0, "world_size": 2, "error": error}
    script = "#!/bin/sh\n"
    for line in nccl_lines.splitlines():
        script += "echo '%s'\n" % line
    # the env the module gave the probe ends up in the result, as in the real probe
    script += ("printf 'LLMFLEET_COLLECTIVE %%s\\n' \"$(echo '%s' | sed \"s/}$/, \\\"gloo_ifname\\\": \\\"$GLOO_SOCKET_IFNAME\\\"}/\")\"\n"
               % json.dumps(doc))
    py = venv / "bin" / "python"
    py.write_text(script)
    py.chmod(0o755)
    return str(venv)


def run(monkeypatch, tmp_path, args):
    env_file = tmp_path / "comm.env"
    env_file.write_text("# comm\nGLOO_SOCKET_IFNAME=eth1\nNCCL_IB_DISABLE=1\n")
    base = {"run_as": "", "master_addr": "10.231.79.11", "rank": 0, "world_size": 2,
            "env_files": [str(env_file), "-" + str(tmp_path / "absent.env")]}
    base.update(args)
    return run_module(monkeypatch, collective_check, base)


SOCKET = ("spark2:2211:2290 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.\n"
          "spark2:2211:2290 [0] NCCL INFO NET/Socket : Using [0]enp1s0f1np1:192.168.100.11<0>\n"
          "spark2:2211:2290 [0] NCCL INFO Using network Socket\n")
ROCE = ("spark-153d:7:19 [0] NCCL INFO NET/IB : Using [0]rocep1s0f0:1/RoCE [RO]; OOB enp1s0f0np0:192.168.100.10<0>\n"
        "spark-153d:7:19 [0] NCCL INFO Using network IB\n")

# backend, NCCL output, rdma expected -> transport, status, words in the detail
CASES = [
    ("gloo", "", False, "gloo/TCP", "PASS", "gloo over TCP on eth1"),
    ("gloo", "", True, "gloo/TCP", "WARN", "NCCL and RDMA cannot be exercised"),
    ("nccl", SOCKET, True, "Socket", "FAIL", "NCCL_IB_DISABLE=1"),
    ("nccl", SOCKET, False, "Socket", "PASS", "NET/Socket"),
    ("nccl", ROCE, True, "IB", "PASS", "RoCE"),
    ("nccl", "", True, None, "WARN", "NCCL_DEBUG=INFO"),
]


@pytest.mark.parametrize("backend,lines,rdma,transport,status,words", CASES)
def test_transport_verdicts(monkeypatch, tmp_path, backend, lines, rdma, transport, status, words):
    res = run(monkeypatch, tmp_path, {"venv": fake_venv(tmp_path, backend, lines), "rdma_expected": rdma})
    assert not res.failed, res.result
    r = res.result
    assert r["transport"] == transport and r["transport_status"] == status
    assert words in r["transport_detail"]
    assert r["gloo_ifname"] == "eth1"  # the env file reached the probe
    assert r["time_s"] == 0.2 and r["busbw_gbps"] == pytest.approx(1048576 * 8 / 0.2 / 1e9, abs=1e-3)
    assert r["changed"] is False


def test_failed_rendezvous_is_a_result_not_a_module_failure(monkeypatch, tmp_path):
    res = run(monkeypatch, tmp_path, {"venv": fake_venv(tmp_path, "gloo", error="DistStoreError: Timed out")})
    assert not res.failed and "Timed out" in res.result["error"] and not res.result["correct"]


def test_missing_env_file_fails(monkeypatch, tmp_path):
    res = run(monkeypatch, tmp_path, {"venv": fake_venv(tmp_path, "gloo"), "env_files": [str(tmp_path / "nope.env")]})
    assert res.failed and "nope.env" in res.result["msg"]


def test_missing_venv_fails(monkeypatch, tmp_path):
    res = run(monkeypatch, tmp_path, {"venv": str(tmp_path / "none")})
    assert res.failed and "engine venv" in res.result["msg"]


def test_bad_rank_fails(monkeypatch, tmp_path):
    res = run(monkeypatch, tmp_path, {"venv": fake_venv(tmp_path, "gloo"), "rank": 3})
    assert res.failed and "rank 3" in res.result["msg"]
