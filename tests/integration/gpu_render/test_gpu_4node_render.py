"""The four emulated GPU nodes (inventories/gpu-4node) rendered on this machine, as the GPU runner
renders them on a lent 4-GPU host (tests/gpu/render.sh: the roles' own task files in check mode,
every node's files staged under <stage>/<node>/). No GPU, no engine: this keeps the layout from
rotting between GPU runs.

Asserted from the rendered files, per node: its own Ray ports (no two nodes of the machine bind
one port: Ray binds them on every address), its own GPU (CUDA_VISIBLE_DEVICES, one each, none
shared), its own NCCL host identity, the socket transport on lo; the head's engine command carries
the lab profile's flags (profiles/nemotron-super-nvfp4-vllm-pp4.yml) less the ones the inventory
says it drops and plus the ones it adds. The file checks must fail on a stage where one node's port
or GPU was made to collide, and the render itself must stop at the plan, naming the node and the
variable, when the inventory makes them collide.

Run: .venv/bin/pytest tests/integration/gpu_render -q
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
INVENTORY = ROOT / "inventories" / "gpu-4node"
NODES = ["node1", "node2", "node3", "node4"]
RAY_UNIT = "etc/systemd/system/llmfleet-ray.service"
PORT_FLAGS = ("--node-manager-port", "--object-manager-port", "--metrics-export-port",
              "--dashboard-agent-listen-port", "--dashboard-agent-grpc-port", "--runtime-env-agent-port")


def render(stage: Path, inventory: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH="%s:%s" % (Path(sys.executable).parent, os.environ.get("PATH", "")),
               ANSIBLE_COLLECTIONS_PATH=str(ROOT / ".build" / "collections"))
    return subprocess.run(["bash", str(ROOT / "tests" / "gpu" / "render.sh"), str(stage), str(inventory)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False)


def env_file(path: Path) -> dict:
    out = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            out[key] = value.strip("'\"")
    return out


def exec_start(unit: Path) -> list[str]:
    text = unit.read_text().replace("\\\n", " ")
    line = next(ln for ln in text.splitlines() if ln.startswith("ExecStart="))
    return shlex.split(line[len("ExecStart="):])


def ray_ports(argv: list[str]) -> set[int]:
    ports = set()
    for arg in argv:
        name, value = (arg.split("=", 1) + [""])[:2]
        if name in PORT_FLAGS + ("--port", "--ray-client-server-port"):
            ports.add(int(value))
        elif name == "--min-worker-port":
            low = int(value)
        elif name == "--max-worker-port":
            ports |= set(range(low, int(value) + 1))
    return ports


def node_problems(stage: Path) -> list[str]:
    """What is wrong with the rendered nodes of one machine: shared ports, shared or several GPUs
    per node, a NCCL host identity twice, a transport other than sockets on lo."""
    problems, ports, gpus, hostids = [], {}, {}, {}
    for node in NODES:
        comm = env_file(stage / node / "etc" / "llmfleet" / "nodes" / node / "comm.env")
        ports[node] = ray_ports(exec_start(stage / node / RAY_UNIT))
        gpus[node] = comm.get("CUDA_VISIBLE_DEVICES", "")
        hostids[node] = comm.get("NCCL_HOSTID", "")
        if len(gpus[node].split(",")) != 1 or not gpus[node]:
            problems.append("%s: CUDA_VISIBLE_DEVICES %r is not one GPU" % (node, gpus[node]))
        for key, want in (("NCCL_SOCKET_IFNAME", "lo"), ("GLOO_SOCKET_IFNAME", "lo"), ("NCCL_IB_DISABLE", "1"),
                          ("NCCL_P2P_DISABLE", "1"), ("NCCL_SHM_DISABLE", "1")):
            if comm.get(key) != want:
                problems.append("%s: %s=%r, not %s" % (node, key, comm.get(key), want))
    for i, a in enumerate(NODES):
        for b in NODES[i + 1:]:
            if ports[a] & ports[b]:
                problems.append("%s and %s share Ray port(s) %s" % (a, b, sorted(ports[a] & ports[b])[:5]))
            if gpus[a] == gpus[b]:
                problems.append("%s and %s share GPU %s" % (a, b, gpus[a]))
            if hostids[a] == hostids[b]:
                problems.append("%s and %s share NCCL_HOSTID %r" % (a, b, hostids[a]))
    return problems


@pytest.fixture(scope="module")
def stage(tmp_path_factory):
    path = tmp_path_factory.mktemp("gpu4") / "stage"
    proc = render(path, INVENTORY)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    return path


def test_each_node_has_its_own_ports_gpu_and_socket_transport(stage):
    assert node_problems(stage) == []
    heads = [n for n in NODES if "--head" in exec_start(stage / n / RAY_UNIT)]
    assert heads == ["node1"]
    for node in NODES[1:]:
        assert "--address=127.0.0.2:6379" in exec_start(stage / node / RAY_UNIT)


def test_each_node_runs_ray_with_token_auth_from_its_own_token_file(stage):
    """Ray's authentication (the plan's ray_auth): each node's Ray unit loads RAY_AUTH_MODE=token and its
    own config directory's token file; the token's text is written no_log, so the stage has none of it."""
    for node in NODES:
        ray_env = env_file(stage / node / "etc" / "llmfleet" / "nodes" / node / "ray.env")
        token_file = "/etc/llmfleet/nodes/%s/ray-auth-token" % node
        assert ray_env.get("RAY_AUTH_MODE") == "token" and ray_env.get("RAY_AUTH_TOKEN_PATH") == token_file, (node, ray_env)
        assert not (stage / node / token_file.lstrip("/")).exists()


def test_the_head_serves_the_lab_profiles_flags(stage):
    """The PP 4 command: the lab profile's flags, less those the inventory drops (null), plus its own."""
    lab = yaml.safe_load((ROOT / "profiles" / "nemotron-super-nvfp4-vllm-pp4.yml").read_text())["args"]
    ours = yaml.safe_load((INVENTORY / "group_vars" / "hopper.yml").read_text())
    ours = ours["llmfleet_serve_profiles_extra"]["gpu4-vllm-pp4"]["args"]
    expected = ({flag for flag in lab if flag not in ours} | {f for f, v in ours.items() if v is not None})
    expected |= {"--disable-custom-all-reduce"}  # what the emulation adds (the plan's emulation.engine_args)
    argv = exec_start(stage / "node1" / "etc" / "systemd" / "system" / "llmfleet-serve-tiny-llama.service")
    flags = {a for a in argv if a.startswith("--")}
    layout = {"--served-model-name", "--tensor-parallel-size", "--pipeline-parallel-size",
              "--distributed-executor-backend", "--host", "--port"}
    assert flags - layout == expected
    assert argv[argv.index("--pipeline-parallel-size") + 1] == "4"
    assert argv[argv.index("--distributed-executor-backend") + 1] == "ray"


def test_the_file_checks_catch_a_collision(stage, tmp_path):
    broken = tmp_path / "stage"
    shutil.copytree(stage, broken)
    unit = broken / "node2" / RAY_UNIT
    unit.write_text(re.sub(r"--node-manager-port=\d+", "--node-manager-port=6380", unit.read_text()))
    comm = broken / "node3" / "etc" / "llmfleet" / "nodes" / "node3" / "comm.env"
    comm.write_text(re.sub(r"CUDA_VISIBLE_DEVICES=\d+", "CUDA_VISIBLE_DEVICES=0", comm.read_text()))
    problems = node_problems(broken)
    assert "node1 and node2 share Ray port(s) [6380]" in problems
    assert "node1 and node3 share GPU 0" in problems


@pytest.mark.parametrize("var,value,words", [
    ("ray_node_node_manager_port", 6280, ["node2", "Ray ports", "node1"]),
    ("llmfleet_cuda_devices", [0], ["node2", "llmfleet_cuda_devices", "GPU(s) [0]", "node1"]),
])
def test_the_render_stops_at_the_plan_on_a_collision(tmp_path, var, value, words):
    """node2 moved onto node1's port (6280 + node2's 100) or GPU 0: the plan refuses, naming both."""
    inventory = tmp_path / "gpu-4node"
    shutil.copytree(INVENTORY, inventory, symlinks=False)
    hosts = yaml.safe_load((inventory / "hosts.yml").read_text())
    hosts["all"]["children"]["hopper"]["hosts"]["node2"][var] = value
    (inventory / "hosts.yml").write_text(yaml.safe_dump(hosts))
    proc = render(tmp_path / "stage", inventory)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    message = " ".join(out.split())
    for word in words:
        assert word in message, message[-2000:]
