"""upgrade.yml's batching on the controller: one batch per cluster, in a stable order, every host
in exactly one batch, and no host contacted (the inventory's addresses are TEST-NET, unroutable)."""
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
        "vars": {"ansible_connection": "ssh", "llmfleet_engine": "vllm", "llmfleet_release": "r2"},
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


def test_one_batch_per_cluster_in_order_without_contacting_hosts(tmp_path):
    inv = tmp_path / "hosts.json"
    inv.write_text(json.dumps(INVENTORY))
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=str(ROOT / ".build" / "collections"), ANSIBLE_FORCE_COLOR="0")
    proc = subprocess.run([str(BIN / "ansible-playbook"), "-i", str(inv), str(ROOT / "playbooks" / "upgrade.yml"),
                           "-e", "upgrade_plan_only=true"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    batches = re.findall(r"batch (\d): cluster (\w+): ([\w, -]+) -> (\w+)", out)
    assert [(b, c) for b, c, _hosts, _target in batches] == [("1", "alpha"), ("2", "beta")]
    assert sorted(batches[0][2].split(", ")) == ["a-spark1", "a-spark2"]
    assert sorted(batches[1][2].split(", ")) == ["b-spark1", "b-thor1"]
    assert all(t == "r2" for *_rest, t in batches)
    assert "unreachable=1" not in out and "UNREACHABLE" not in out
