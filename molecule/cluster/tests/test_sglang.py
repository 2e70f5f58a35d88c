"""SGLang on the Thors (serving group `thors` of the sim): TP=2 over --nnodes, from a container image
(runtime: container, docs/containers.md) built once on thor1 and copied to thor2, its own endpoint, the
official `openai` client with the API key, and the key in no process's command line."""
import os

import pytest
from openai import AuthenticationError, OpenAI

from conftest import FABRIC_IP, ROOT, node

UNIT = "llmfleet-serve-tiny-llama-sglang"
MODEL = "tiny-llama-sglang"
BASE_URL = f"http://{FABRIC_IP['thor1']}:8000/v1"


def unit_key():
    """The key the API rank's unit runs with (its 0600 env file), '' when the fleet has none."""
    text = node("thor1").file(f"/etc/llmfleet/{UNIT}.env").content_string
    for line in text.splitlines():
        if line.startswith("LLMFLEET_API_KEY="):
            return line.split("=", 1)[1].strip("'\"")
    return ""


def exec_start(name):
    unit = node(name).file(f"/etc/systemd/system/{UNIT}.service").content_string
    return next(line for line in unit.splitlines() if line.startswith("ExecStart="))


@pytest.fixture(scope="module")
def client():
    return OpenAI(base_url=BASE_URL, api_key=unit_key() or "unset", timeout=120, max_retries=0)


def test_thors_run_the_sglang_release_and_ranks():
    for name, rank in (("thor1", "0"), ("thor2", "1")):
        host = node(name)
        assert "sglang" in host.file("/opt/llmfleet/venvs/current").linked_to
        assert host.service(UNIT).is_running
        unit = host.file(f"/etc/systemd/system/{UNIT}.service").content_string
        assert "llmfleet_sglang_launch.py" in unit and "--device cpu" in unit
        assert f"--nnodes 2 --node-rank {rank} --dist-init-addr {FABRIC_IP['thor1']}:" in unit
    for name in ("spark1", "spark2"):
        assert "sglang" not in node(name).file("/opt/llmfleet/venvs/current").linked_to


def test_both_ranks_run_in_one_image_built_on_thor1_and_copied_to_thor2():
    """thor1, the group's first node in inventory order, built the release's image; thor2 has the same
    image ID, so it copied it (two builds of one release differ: benchmarks/RESULTS.md, 2026-12-06 21:56).
    Each rank is the first process of its own container, as the service user."""
    release = node("thor1").file("/opt/llmfleet/venvs/current").linked_to.rsplit("/", 1)[-1]
    built = node("thor1").check_output(f"podman image inspect --format '{{{{.Id}}}}' localhost/llmfleet-engine:{release}")
    for name in ("thor1", "thor2"):
        h = node(name)
        line = exec_start(name)
        assert line.startswith("ExecStart=/usr/bin/podman run") and "--network host" in line and "--ipc host" in line
        assert f"sha256:{built}" in line.split(), (name, line)
        pid = h.check_output(f"podman inspect --format '{{{{.State.Pid}}}}' {UNIT}")
        assert pid.isdigit() and int(pid) > 1, (name, pid)
        assert h.check_output(f"stat -Lc %u /proc/{pid}") == h.check_output("id -u llmfleet")
        assert h.check_output(f"grep '^NSpid:' /proc/{pid}/status").split()[1:] == [pid, "1"]


def test_the_summary_names_the_container_runtime():
    """The converge's summary (playbooks/summary.yml) says how the Thors' endpoint runs."""
    with open(os.path.join(ROOT, "reports", "summary-sim.txt"), encoding="utf-8") as fh:
        lines = [line for line in fh.read().splitlines() if f" model {MODEL} engine sglang" in line]
    assert len(lines) == 1 and lines[0].startswith(f"Endpoint: {BASE_URL} ") and lines[0].endswith(" runtime container"), lines


def test_chat_plain_and_streamed_and_completions(client):
    assert [m.id for m in client.models.list().data] == [MODEL]
    chat = client.chat.completions.create(model=MODEL, max_tokens=8, temperature=0,
                                          messages=[{"role": "user", "content": "hello"}])
    assert chat.usage.completion_tokens == 8 and chat.choices[0].message.content
    stream = client.chat.completions.create(model=MODEL, max_tokens=8, temperature=0, stream=True,
                                            messages=[{"role": "user", "content": "hello"}])
    streamed = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert streamed == chat.choices[0].message.content  # greedy: the same tokens either way
    completion = client.completions.create(model=MODEL, prompt="hello", max_tokens=8, temperature=0)
    assert completion.usage.completion_tokens == 8 and completion.choices[0].text


def test_a_wrong_key_is_refused_when_the_fleet_has_one():
    key = unit_key()
    wrong = OpenAI(base_url=BASE_URL, api_key=key + "-wrong", timeout=60, max_retries=0)
    if key:
        with pytest.raises(AuthenticationError):
            wrong.models.list()
    else:  # an open endpoint (no LLMFLEET_API_KEY at converge) answers anyone
        assert wrong.models.list().data[0].id == MODEL


def test_no_process_holds_the_key_on_its_command_line():
    key = unit_key()
    for name in ("thor1", "thor2"):
        cmdlines = node(name).check_output(
            "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done")
        assert "llmfleet_sglang_launch.py" in cmdlines
        assert "--api-key" not in cmdlines
        if key:
            assert key not in cmdlines
            assert key not in node(name).check_output(f"journalctl -u {UNIT} --no-pager -o cat | tail -n 2000")
