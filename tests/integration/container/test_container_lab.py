"""The container runtime (llmfleet_serve_groups.<group>.runtime: container) on the sim, opt-in:

    make integration-container     # = LLMFLEET_SIM_NESTED=1 lab-up, then LLMFLEET_CONTAINER_LAB=1 pytest -s this file

The sim's SmolLM2 replicas written out as two container groups of one release, smol-1 on spark3 and smol-2
on thor3: spark3 (the first of them in inventory order: the image's source) builds the image from the
release's venv, thor3 copies it from spark3 over the fabric. Both run podman inside
(tools/simlab/simlab.py, NESTED_CONTAINER_NODES). Checked: one build, one copy with the source's image
ID, the engine really runs in a container as the service user, answers the official `openai` client, a
serve.yml re-run with the same image ID leaves it running, a new image ID restarts it and the old one
brings it back; the flag check reads each image's own --help; at the end serve.yml puts both back on
their venvs."""
import os
import sys
from pathlib import Path

import pytest
import yaml
from openai import OpenAI

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lib"))
from lab import FABRIC_IP, ROOT, api_key, failures, node, recap, run_playbook, task_hosts  # noqa: E402 (tests/lib: the one lab helper)

pytestmark = pytest.mark.skipif(os.environ.get("LLMFLEET_CONTAINER_LAB") != "1",
                                reason="opt-in lab test: make integration-container (LLMFLEET_CONTAINER_LAB=1)")

UNIT = "llmfleet-serve-smollm2"
HOST = "thor3"
SOURCE = "spark3"
GROUP = "smol-2"
PODMAN = "podman"
SERVE = "llmfleet.cluster.serve : "


def sim_groups(image=None):
    """The sim's serving groups with its smollm2 replicas written out, both on the container runtime
    (both pinned to `image` when given, else on the image their release builds)."""
    with open(os.path.join(ROOT, "inventories", "sim", "group_vars", "all.yml"), encoding="utf-8") as fh:
        groups = yaml.safe_load(fh)["llmfleet_serve_groups"]
    smol = groups.pop("smol")
    pin = {"image": image} if image else {}
    groups["smol-1"] = dict({"hosts": smol["hosts"][:1], "profile": smol["profile"], "runtime": "container"}, **pin)
    groups[GROUP] = dict({"hosts": smol["hosts"][1:], "profile": smol["profile"], "runtime": "container"}, **pin)
    return groups


RUNS = {}


@pytest.fixture(scope="module", autouse=True)
def container_group():
    """smol-1 and smol-2 moved to the container runtime (one build on spark3, a copy on thor3), and back
    to their venvs after."""
    rc, out, _secs = run_playbook("playbooks/serve.yml", extra_vars={"llmfleet_serve_groups": sim_groups()}, timeout=1800)
    assert rc == 0, failures(out)
    RUNS["first"] = out
    yield
    rc, out, _secs = run_playbook("playbooks/serve.yml", timeout=1800)
    assert rc == 0, failures(out)


def exec_start(h):
    unit = h.file(f"/etc/systemd/system/{UNIT}.service").content_string
    return next(line for line in unit.splitlines() if line.startswith("ExecStart=")), unit


def image_of_unit(h):
    line, _unit = exec_start(h)
    return next(a for a in line.split() if a.startswith("sha256:"))


def started_at(h):
    return h.check_output(f"systemctl show -P ExecMainStartTimestampMonotonic {UNIT}")


def ask(model="smollm2"):
    client = OpenAI(base_url=f"http://{FABRIC_IP[HOST]}:8000/v1", api_key=api_key(), timeout=120, max_retries=0)
    return client.chat.completions.create(
        model=model, max_tokens=16, temperature=0,
        messages=[{"role": "user", "content": "What is the capital of France? Answer in one word."}]).choices[0].message.content


def test_the_image_is_built_once_on_its_source_and_copied_over_the_fabric():
    """A fresh lab (make integration-container recreates both nodes): spark3 builds, thor3 copies."""
    out = RUNS["first"]
    built = task_hosts(out, SERVE + "Build the engine image from the release's venv")
    copied = task_hosts(out, SERVE + "Copy the image from the source node over the fabric")
    if not built and not copied:
        pytest.skip("both nodes had the image before this run (a re-run on the same lab)")
    assert built == {SOURCE} and copied == {HOST}, (built, copied)
    assert image_of_unit(node(HOST)) == image_of_unit(node(SOURCE))
    # thor3's key opens nothing on spark3 but the export of a built image
    key = "/etc/llmfleet/image-key/id_ed25519"
    h = node(HOST)
    ssh = f"ssh -i {key} -o BatchMode=yes -o UserKnownHostsFile=/etc/llmfleet/image-key/known_hosts root@{FABRIC_IP[SOURCE]}"
    refused = h.run(f"{ssh} cat /etc/shadow")
    assert refused.rc == 2 and "refused: only 'save" in refused.stderr and "root:" not in refused.stdout
    assert h.run(f"{ssh} save localhost/other:1").rc == 2


def test_the_engine_runs_inside_the_image_as_the_service_user():
    h = node(HOST)
    line, unit = exec_start(h)
    assert line.startswith("ExecStart=/usr/bin/podman run") and "--network host" in line and "--ipc host" in line
    uid = h.check_output("id -u llmfleet")
    assert f"--user {uid}:" in line
    # no value, no secret in the unit's argv: the env travels by name
    assert "VLLM_API_KEY" in line and api_key() not in unit
    listed = h.check_output(f"{PODMAN} ps --filter name=^{UNIT}$ --format '{{{{.ImageID}}}} {{{{.Status}}}}'")
    assert listed.split()[0] in image_of_unit(h) and "Up" in listed
    # the engine is the container's first process, as the service user: PID 1 of its own PID namespace
    # (NSpid), running the engine. Read from /proc/<pid>/status and cmdline, which any user may read: on
    # the sim's nodes (no CAP_SYS_PTRACE) root cannot read another uid's fds or namespace links, so
    # neither `ss -p` nor /proc/<pid>/ns/* answer
    pid = h.check_output(f"{PODMAN} inspect --format '{{{{.State.Pid}}}}' {UNIT}")
    assert pid.isdigit() and int(pid) > 1, pid
    assert h.check_output(f"stat -Lc %u /proc/{pid}") == uid
    assert h.check_output(f"grep '^NSpid:' /proc/{pid}/status").split()[1:] == [pid, "1"]
    assert " serve " in h.check_output(f"tr '\\0' ' ' < /proc/{pid}/cmdline")
    # the other replica runs in the same image on spark3
    assert exec_start(node(SOURCE))[0].startswith("ExecStart=/usr/bin/podman run")


def test_the_flag_check_read_the_images_own_help():
    """engine_flags ran the version read and --help inside the image: its cache file names the image."""
    h = node(HOST)
    short = image_of_unit(h)[len("sha256:"):][:12]
    cached = h.check_output(f"ls /var/lib/llmfleet/cache | grep -- '-{short}-help.txt$'")
    assert cached.startswith("vllm-") and "--max-model-len" in h.file(f"/var/lib/llmfleet/cache/{cached}").content_string


def test_the_container_replica_answers_the_official_client():
    assert "Paris" in ask()


def test_same_image_keeps_it_running_a_pinned_image_moves_by_its_id_and_the_built_one_returns():
    h, src = node(HOST), node(SOURCE)
    built = image_of_unit(h)
    ref = h.check_output(f"{PODMAN} image inspect --format '{{{{index .RepoTags 0}}}}' {built}")
    before = started_at(h)
    rc, out, _secs = run_playbook("playbooks/serve.yml", "--limit", HOST, extra_vars={"llmfleet_serve_groups": sim_groups()})
    assert rc == 0, failures(out)
    assert recap(out)[HOST]["changed"] == 0 and started_at(h) == before, "an unchanged image restarted the engine"
    # a second image of the same engine on the source node (one label more: a new ID), pinned by its ID
    # as an inventory pins a registry's image: the source has it, thor3 copies it by that ID
    src.check_output(f"printf 'FROM {built}\\nLABEL org.llmfleet.test=second\\n' | {PODMAN} build -q -t localhost/llmfleet-engine:test-second -f - /tmp")
    second = "sha256:" + src.check_output(f"{PODMAN} image inspect --format '{{{{.Id}}}}' localhost/llmfleet-engine:test-second").strip()
    try:
        rc, out, _secs = run_playbook("playbooks/serve.yml", extra_vars={"llmfleet_serve_groups": sim_groups(second)})
        assert rc == 0, failures(out)
        assert task_hosts(out, SERVE + "Copy the image from the source node over the fabric") == {HOST}
        assert not task_hosts(out, SERVE + "Pull the pinned image here (its source node has none)")
        assert image_of_unit(h) == second == image_of_unit(src) and started_at(h) != before
        # an image named in the inventory runs the engine from its own PATH, not the release venv's path
        line, _unit = exec_start(h)
        assert line.split(second, 1)[1].split()[:2] == ["vllm", "serve"], line
        assert h.check_output(f"ls /var/lib/llmfleet/cache | grep -c -- '-{second[len('sha256:'):][:12]}-help.txt$'") == "1"
        assert "Paris" in ask()
        # the same pin again: thor3 finds its copy by the ID (a loaded image has no registry digest)
        moved = started_at(h)
        rc, out, _secs = run_playbook("playbooks/serve.yml", "--limit", HOST,
                                      extra_vars={"llmfleet_serve_groups": sim_groups(second)})
        assert rc == 0, failures(out)
        assert recap(out)[HOST]["changed"] == 0 and started_at(h) == moved
    finally:
        rc, out, _secs = run_playbook("playbooks/serve.yml", extra_vars={"llmfleet_serve_groups": sim_groups()})
        h.run(f"{PODMAN} rmi {second}")
        src.run(f"{PODMAN} rmi localhost/llmfleet-engine:test-second")
    assert rc == 0, failures(out)
    assert image_of_unit(h) == built and ref.startswith("localhost/llmfleet-engine:")
    assert "Paris" in ask()
