"""The serve role's GPU access for a container group (roles/serve/tasks/container_gpu.yml), run on this
machine (connection local) with the role's own tasks.

STAND-IN: `nvidia-ctk` and `docker` here are shell scripts standing in for the NVIDIA container toolkit's
CLI and docker's `info`: the toolkit cannot be installed on this machine (NVIDIA's apt repository is not
reachable, and there is no GPU), and the GPU hosts of tests/gpu have no container engine. They answer as
the real ones do (`nvidia-ctk cdi list` prints one CDI device name per line; `cdi generate --output=F`
writes F; `docker info --format '{{json .Runtimes}}'` prints the runtimes as JSON) and log each call.
What is checked: the node without the toolkit stops naming host, group and package; podman gets the
spec written once when the toolkit lists no nvidia.com/gpu=all, and nothing when it does (a toolkit
>= 1.18 writes it at boot); docker with the nvidia runtime is left as it is.

Run: .venv/bin/pytest tests/integration/container_gpu -q
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import localplay  # noqa: E402  (tests/integration, shared with the other local-play tests)

NVIDIA_CTK = r"""#!/bin/sh
# STAND-IN for the NVIDIA container toolkit's CLI (see this test's docstring)
echo "nvidia-ctk $*" >> "$STANDIN_LOG"
case "$1 $2" in
  "cdi list")
    echo 'INFO[0000] Found 2 CDI devices' >&2
    if [ -f "$STANDIN_SPEC" ] || [ -f "$STANDIN_RUN_SPEC" ]; then printf 'nvidia.com/gpu=0\nnvidia.com/gpu=all\n'; fi ;;
  "cdi generate")
    out=${3#--output=}; mkdir -p "$(dirname "$out")"; printf 'cdiVersion: 0.5.0\nkind: nvidia.com/gpu\n' > "$out" ;;
  *) echo "stand-in: unexpected $*" >&2; exit 3 ;;
esac
"""
DOCKER = r"""#!/bin/sh
# STAND-IN for `docker info` (see this test's docstring)
echo "docker $*" >> "$STANDIN_LOG"
echo '{"io.containerd.runc.v2":{"path":"runc"},"nvidia":{"path":"nvidia-container-runtime"},"runc":{"path":"runc"}}'
"""


@pytest.fixture
def node(tmp_path):
    localplay.link_collection()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": {"nodea": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
        "llmfleet_fabric_ip": "127.0.0.1", "llmfleet_gpu_arch": "sm_121"}}}}))
    (tmp_path / "play.yml").write_text(yaml.safe_dump([{
        "name": "GPU access of a container group", "hosts": "nodea", "gather_facts": False,
        "tasks": [{"name": "The role's tasks", "ansible.builtin.include_role": {
            "name": "llmfleet.cluster.serve", "tasks_from": "container_gpu.yml"}}]}]))
    return tmp_path


def play(work: Path, engine: str, toolkit: bool = True, booted_spec: bool = False, *args: str):
    bin_dir = work / "bin"
    for name, text in (("nvidia-ctk", NVIDIA_CTK if toolkit else None), ("docker", DOCKER)):
        path = bin_dir / name
        if text is None:
            path.unlink(missing_ok=True)
            continue
        path.write_text(text)
        path.chmod(0o755)
    run_spec = work / "run-cdi" / "nvidia.yaml"
    if booted_spec:
        run_spec.parent.mkdir(exist_ok=True)
        run_spec.write_text("cdiVersion: 0.5.0\n")
    spec = work / "cdi" / "nvidia.yaml"
    env = localplay.ansible_env(work, PATH=f"{bin_dir}:{os.environ['PATH']}", STANDIN_LOG=str(work / "calls.log"),
                                STANDIN_SPEC=str(spec), STANDIN_RUN_SPEC=str(run_spec))
    # common_applied: the serve role's dependency on common (the node's base) is not this test's
    extra = {"serve_cdi_spec": str(spec), "ansible_become": False, "common_applied": True,
             "serve_assignment": {"name": "nemotron", "container": {"engine": engine}},
             "serve_profile": {"engine": "vllm", "device": "gpu"}}
    rc, out = localplay.run_playbook(work / "play.yml", work / "hosts.yml", extra, *args, env=env)
    calls = (work / "calls.log").read_text().splitlines() if (work / "calls.log").exists() else []
    return rc, out, calls, spec


def test_a_node_without_the_toolkit_stops_naming_host_group_and_package(node):
    rc, out, _calls, spec = play(node, "podman", toolkit=False)
    assert rc != 0
    assert "nodea: serving group nemotron runs vllm on GPUs in containers (podman)" in out
    assert "install the NVIDIA container toolkit (package nvidia-container-toolkit" in out
    assert not spec.exists()


def test_podman_gets_the_spec_written_once_when_the_toolkit_lists_no_gpu_all(node):
    rc, out, calls, spec = play(node, "podman")
    assert rc == 0, out[-3000:]
    assert calls == ["nvidia-ctk cdi list", f"nvidia-ctk cdi generate --output={spec}"]
    assert spec.read_text().startswith("cdiVersion:")
    assert "changed=1" in out
    rc, out, calls, _spec = play(node, "podman")
    assert rc == 0 and "changed=0" in out, out[-3000:]
    assert calls[2:] == ["nvidia-ctk cdi list"]


def test_podman_with_the_spec_the_toolkit_wrote_at_boot_writes_none(node):
    rc, out, calls, spec = play(node, "podman", True, True)
    assert rc == 0 and "changed=0" in out, out[-3000:]
    assert calls == ["nvidia-ctk cdi list"] and not spec.exists()


def test_check_mode_writes_nothing(node):
    rc, out, calls, spec = play(node, "podman", True, False, "--check")
    assert rc == 0, out[-3000:]
    assert calls == ["nvidia-ctk cdi list"] and not spec.exists()


def test_docker_with_the_nvidia_runtime_is_left_as_it_is(node):
    rc, out, calls, spec = play(node, "docker")
    assert rc == 0 and "changed=0" in out, out[-3000:]
    assert calls == ["nvidia-ctk cdi list", "docker info --format {{json .Runtimes}}"] and not spec.exists()
