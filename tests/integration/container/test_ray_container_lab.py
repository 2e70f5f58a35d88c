"""Ray in containers (a Ray-backend serving group with runtime: container) on the sim, opt-in:

    make integration-container     # after test_container_lab.py, on the same nested lab

The sim's SmolLM2 replicas (spark3, thor3) give their nodes to one group `rayctr`: the tiny random Llama,
pipeline parallel 2 on vLLM's Ray executor (sim-tiny-llama-ray-pp2, written out as an inventory profile
whose ranks take the group's Ray resource), from the image its release builds. spark3 builds the
image before Ray starts (the ray_node role gets it through the serve role's container tasks), thor3
copies it, and both run their Ray node from it: the ranks are actors of the node's raylet, so they run
in the image. spark1 (the cluster's head) and the other nodes keep Ray in their venvs: one cluster,
one Ray version (the release venv's, which the image holds). Checked: the Ray units run the image by
its ID as the service user, each node's raylet and rank are in its container, the group answers the
official `openai` client, and a second run changes nothing. At the end site.yml puts the sim back.
"""
import os
import sys
from pathlib import Path

import pytest
import yaml
from openai import OpenAI

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lib"))
from lab import FABRIC_IP, ROOT, api_key, failures, node, recap, run_playbook, task_hosts, wait_for  # noqa: E402

pytestmark = pytest.mark.skipif(os.environ.get("LLMFLEET_CONTAINER_LAB") != "1",
                                reason="opt-in lab test: make integration-container (LLMFLEET_CONTAINER_LAB=1)")

HEAD, WORKER = "spark3", "thor3"
RAY_UNIT = "llmfleet-ray"
GROUP = "rayctr"
PROFILE = "sim-tiny-llama-ray-container"
SERVED = "tiny-llama-ray"
PODMAN = "podman"
SERVE = "llmfleet.cluster.serve : "


def overrides():
    """The sim's serving groups with smol's two nodes in one Ray-backend container group."""
    with open(os.path.join(ROOT, "inventories", "sim", "group_vars", "all.yml"), encoding="utf-8") as fh:
        groups = yaml.safe_load(fh)["llmfleet_serve_groups"]
    hosts = groups.pop("smol")["hosts"]
    assert hosts == [HEAD, WORKER], hosts
    groups[GROUP] = {"hosts": hosts, "profile": PROFILE, "runtime": "container"}
    # the shipped PP 2 profile takes the Ray resource of the Sparks' group; this one its own group's
    profile = {"extends": "sim-tiny-llama-ray-pp2", "served_model_name": SERVED,
               "env": {"LLMFLEET_SIM_RAY_RESOURCE": f"group_{GROUP}"}}
    return {"llmfleet_serve_groups": groups, "llmfleet_serve_profiles_extra": {PROFILE: profile}}


RUNS = {}


@pytest.fixture(scope="module", autouse=True)
def ray_container_group():
    rc, out, secs = run_playbook("site.yml", extra_vars=overrides(), timeout=3600, tail=20000)
    assert rc == 0, failures(out)
    RUNS["first"], RUNS["first_s"] = out, secs
    yield
    rc, out, _secs = run_playbook("site.yml", timeout=3600)
    assert rc == 0, failures(out)


def unit_text(h, unit):
    return h.file(f"/etc/systemd/system/{unit}.service").content_string


def exec_start(h, unit):
    return next(line for line in unit_text(h, unit).splitlines() if line.startswith("ExecStart="))


def image_in(line):
    return next(a for a in line.split() if a.startswith("sha256:"))


def in_own_pid_namespace(h, pid):
    """NSpid of /proc/<pid>/status: two entries where the process is in a PID namespace below the node's."""
    return len(h.check_output(f"grep '^NSpid:' /proc/{pid}/status").split()[1:]) == 2


def test_the_image_is_built_before_ray_and_each_node_runs_its_ray_from_it():
    out = RUNS["first"]
    built = task_hosts(out, SERVE + "Build the engine image from the release's venv")
    copied = task_hosts(out, SERVE + "Copy the image from the source node over the fabric")
    # a lab where test_container_lab.py ran first has the release's image on both nodes already
    assert built <= {HEAD} and copied <= {WORKER}, (built, copied)
    assert out.index("PLAY [Ray") < out.index("TASK [llmfleet.cluster.ray_node : Read the image's ID on this node]")
    head, worker = node(HEAD), node(WORKER)
    images = set()
    for h in (head, worker):
        line = exec_start(h, RAY_UNIT)
        assert line.startswith(f"ExecStart={PODMAN} run --rm --replace --name {RAY_UNIT} --network host --ipc host"), line
        assert f"--user {h.check_output('id -u llmfleet')}:" in line and " start --block" in line
        assert "User=root" in unit_text(h, RAY_UNIT)
        images.add(image_in(line))
    # one image: the engine unit's on spark3, copied to thor3
    assert images == {image_in(exec_start(head, "llmfleet-serve-" + SERVED))}, images
    # the cluster's head stays on its venv
    assert exec_start(node("spark1"), RAY_UNIT).startswith("ExecStart=/opt/llmfleet/venvs/current/bin/ray start")


def test_each_raylet_and_rank_runs_inside_the_container_as_the_service_user():
    for name in (HEAD, WORKER):
        h = node(name)
        uid = h.check_output("id -u llmfleet")
        pid = h.check_output(f"{PODMAN} inspect --format '{{{{.State.Pid}}}}' {RAY_UNIT}")
        assert pid.isdigit() and in_own_pid_namespace(h, pid), pid
        assert h.check_output(f"stat -Lc %u /proc/{pid}") == uid
        raylet = h.check_output("pgrep -u llmfleet -x raylet | head -1")
        assert raylet and in_own_pid_namespace(h, raylet), raylet
    # the ranks are Ray actors (vLLM's RayWorkerWrapper): one on each node, inside its container
    for name in (HEAD, WORKER):
        h = node(name)
        assert wait_for(lambda h=h: h.run("pgrep -u llmfleet -f '^ray::RayWorkerWrapper'").stdout.strip(), 60)
        rank = h.check_output("pgrep -u llmfleet -f '^ray::RayWorkerWrapper' | head -1")
        assert in_own_pid_namespace(h, rank), (name, rank)


def test_the_group_answers_the_official_client():
    client = OpenAI(base_url=f"http://{FABRIC_IP[HEAD]}:8000/v1", api_key=api_key(), timeout=120, max_retries=0)
    assert [m.id for m in client.models.list().data] == [SERVED]
    got = client.completions.create(model=SERVED, prompt="The capital of France is", max_tokens=8, temperature=0)
    assert got.usage.completion_tokens > 0 and got.choices[0].text
    bad = OpenAI(base_url=f"http://{FABRIC_IP[HEAD]}:8000/v1", api_key="wrong", timeout=30, max_retries=0)
    with pytest.raises(Exception, match="401"):
        bad.models.list()


def test_a_second_run_changes_nothing():
    before = {n: node(n).check_output(f"systemctl show -P ActiveEnterTimestampMonotonic {RAY_UNIT}") for n in (HEAD, WORKER)}
    rc, out, _secs = run_playbook("playbooks/ray.yml", extra_vars=overrides(), timeout=1800, tail=6000)
    assert rc == 0, failures(out)
    counts = recap(out)
    assert all(counts[n]["changed"] == 0 for n in counts), counts
    after = {n: node(n).check_output(f"systemctl show -P ActiveEnterTimestampMonotonic {RAY_UNIT}") for n in (HEAD, WORKER)}
    assert after == before
