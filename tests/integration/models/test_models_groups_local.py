"""The models role with two serving groups on this machine (connection local): a re-run where one
group's copy drifted repairs that group and leaves the other alone.

nodea + nodeb serve one profile (group `sparks`), nodec + noded another (group `thors`), as the sim's
vLLM and SGLang groups do; each host has its own models_path. CI found the bug this guards: on a
re-run only the drifted group runs the role's tasks, and the task choosing the group's manifest
reader read `models_source_host` of every play host, which the other group had never set.

Run: .venv/bin/pytest tests/integration/models/test_models_groups_local.py -q
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import localplay  # noqa: E402  (tests/integration, shared with the other local-play tests)

ROOT = localplay.ROOT
HOSTS = ("nodea", "nodeb", "nodec", "noded")
FILES = {"config.json": b'{"architectures": ["LlamaForCausalLM"]}', "model.safetensors": bytes(range(256)) * 400}


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    localplay.link_collection()
    work = tmp_path_factory.mktemp("models-groups")
    profile = {"engine": "vllm", "model": "/opt/llmfleet/models/tiny-test", "tensor_parallel_size": 2,
               "pipeline_parallel_size": 1, "backend": "mp", "device": "cpu"}
    nodes = {h: {"models_path": str(work / h / "models" / "tiny-test"), "models_files_dir": str(work / h / "files")}
             for h in HOSTS}
    for head in ("nodea", "nodec"):  # models_source path: the weights are on each group's first node
        Path(nodes[head]["models_path"]).mkdir(parents=True)
        for rel, data in FILES.items():
            (Path(nodes[head]["models_path"]) / rel).write_bytes(data)
    (work / "hosts.yml").write_text(yaml.safe_dump({"all": {
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                 "llmfleet_fabric_ip": "127.0.0.1", "llmfleet_gpu_arch": "sm_121",
                 "llmfleet_serve_profile": "tiny-test",
                 "llmfleet_serve_profiles_extra": {"tiny-test": profile, "tiny-test-b": dict(profile)},
                 "llmfleet_serve_groups": {"sparks": {"group": "serve_nodes"},
                                           "thors": {"group": "thor", "profile": "tiny-test-b"}}},
        "hosts": nodes,
        "children": {"ray_head": {"hosts": {"nodea": None}},
                     "ray_workers": {"hosts": {"nodeb": None, "nodec": None, "noded": None}},
                     "serve_nodes": {"hosts": {"nodea": None, "nodeb": None}},
                     "thor": {"hosts": {"nodec": None, "noded": None}}},
    }}))
    return {"work": work, "nodes": nodes}


def run(lab) -> tuple[int, str]:
    work = lab["work"]
    # path: each group's first node holds the weights, the others copy them through the controller's
    # cache (a node-side source: the group's manifest is read on its source node)
    extra = {"common_applied": True, "ansible_become": False, "models_distribution": "controller",
             "models_source": "path", "models_cache": str(work / "cache")}
    return localplay.run_playbook(ROOT / "playbooks" / "models.yml", work / "hosts.yml", extra,
                                  env=localplay.ansible_env(work))


def recap(out: str) -> dict[str, int]:
    """host -> changed, from the play recap."""
    found = {h: int(c) for h, c in re.findall(r"^(node[a-d])\s+:.*?changed=(\d+)", out, re.M)}
    assert set(found) == set(HOSTS), out[-3000:]
    return found


def weights(lab, host) -> Path:
    return Path(lab["nodes"][host]["models_path"]) / "model.safetensors"


def test_one_groups_drift_is_repaired_and_the_other_group_is_left_alone(lab):
    rc, out = run(lab)
    assert rc == 0, out[-4000:]
    assert all(weights(lab, h).read_bytes() == FILES["model.safetensors"] for h in HOSTS)
    rc, out = run(lab)
    assert rc == 0 and not any(recap(out).values()), out[-3000:]
    data = bytearray(weights(lab, "nodeb").read_bytes())
    data[1000] ^= 0xFF  # same size, other content
    weights(lab, "nodeb").write_bytes(bytes(data))
    rc, out = run(lab)
    assert rc == 0, out[-4000:]
    changed = recap(out)
    assert changed["nodeb"] >= 1 and changed["nodec"] == changed["noded"] == 0, changed
    assert weights(lab, "nodeb").read_bytes() == FILES["model.safetensors"]
