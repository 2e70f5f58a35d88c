"""upgrade.yml on the controller: its gate refuses a release naming an engine version no variant
provides; its batching is one batch per cluster, in a stable order, every host in exactly one batch;
no host contacted (the inventory's addresses are TEST-NET, unroutable)."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent

INVENTORY = {
    "all": {
        "vars": {"ansible_connection": "ssh", "llmfleet_engine": "vllm", "llmfleet_release": "lab-vllm-0.32.0"},
        "children": {
            "gb10": {"hosts": {
                "a-spark1": {"ansible_host": "192.0.2.11", "llmfleet_cluster": "alpha", "llmfleet_fabric_ip": "198.51.100.11"},
                "a-spark2": {"ansible_host": "192.0.2.12", "llmfleet_cluster": "alpha", "llmfleet_fabric_ip": "198.51.100.12"},
                "b-spark1": {"ansible_host": "192.0.2.21", "llmfleet_cluster": "beta", "llmfleet_fabric_ip": "198.51.100.21"},
            }, "vars": {"llmfleet_gpu_arch": "sm_121"}},
            "thor": {"hosts": {
                "b-thor1": {"ansible_host": "192.0.2.22", "llmfleet_cluster": "beta", "llmfleet_fabric_ip": "198.51.100.22"},
            }, "vars": {"llmfleet_gpu_arch": "sm_110"}},
            "ray_head": {"hosts": {"b-spark1": None, "a-spark1": None}},
            "ray_workers": {"hosts": {"a-spark2": None, "b-thor1": None}},
        },
    }
}


def upgrade(tmp_path, extra):
    """upgrade.yml on INVENTORY with `-e extra` from the controller (no host is reachable)."""
    inv = tmp_path / "hosts.json"
    inv.write_text(json.dumps(INVENTORY))
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=str(ROOT / ".build" / "collections"), ANSIBLE_FORCE_COLOR="0")
    return subprocess.run([str(BIN / "ansible-playbook"), "-i", str(inv), str(ROOT / "playbooks" / "upgrade.yml"),
                           "-e", extra], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)


def test_one_batch_per_cluster_in_order_without_contacting_hosts(tmp_path):
    proc = upgrade(tmp_path, "upgrade_plan_only=true")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    batches = re.findall(r"batch (\d): cluster (\w+): ([\w, -]+) -> ([\w.-]+)", out)
    assert [(b, c) for b, c, _hosts, _target in batches] == [("1", "alpha"), ("2", "beta")]
    assert sorted(batches[0][2].split(", ")) == ["a-spark1", "a-spark2"]
    assert sorted(batches[1][2].split(", ")) == ["b-spark1", "b-thor1"]
    assert all(t == "lab-vllm-0.32.0" for *_rest, t in batches)
    assert "unreachable=1" not in out and "UNREACHABLE" not in out


def test_a_release_of_a_version_no_variant_provides_stops_in_the_gate(tmp_path):
    proc = upgrade(tmp_path, "llmfleet_release=lab-vllm-0.30.0")
    out = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode != 0, out
    assert ("FAIL a-spark1, a-spark2, b-spark1: llmfleet_release 'lab-vllm-0.30.0' names vllm 0.30.0, which no "
            "python_env variant for sm_121 provides (available: vllm 0.32.0 (sm_121.yml)); set llmfleet_release to "
            "a release of an available version (e.g. lab-vllm-0.32.0)") in out, out
    assert "b-thor1: llmfleet_release 'lab-vllm-0.30.0' names vllm 0.30.0, which no python_env variant for sm_110" in out
    assert "PLAY [Upgrade | plan the batches" not in out  # stopped before any play that targets hosts
    assert "UNREACHABLE" not in out
