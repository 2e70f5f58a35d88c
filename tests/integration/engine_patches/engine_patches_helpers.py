"""Run playbooks/engine_patches.yml on this machine (connection local) against a venv tree."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
COLLECTIONS = ROOT / ".build" / "collections"
ANSIBLE_PLAYBOOK = Path(sys.executable).with_name("ansible-playbook")
PLAYBOOK = ROOT / "playbooks" / "engine_patches.yml"
REL = "vllm/model_executor/layers/quantization/utils/w8a8_utils.py"


def run_role(work: Path, extra: dict, *args: str) -> dict:
    """ansible-playbook with the json callback; returns {rc, results (per task name), stats, raw}.

    Only the role's own tasks run (--tags engine_patches --skip-tags common): the common role (a
    dependency) would create the service account and /opt/llmfleet on this machine.
    """
    link = COLLECTIONS / "ansible_collections" / "llmfleet" / "cluster"
    if not link.is_symlink():
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(ROOT)
    inventory = work / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"hosts": {"gb10-test": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}))
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS),
           "ANSIBLE_CACHE_PLUGIN": "memory", "ANSIBLE_LOCAL_TEMP": str(work / "tmp"),
           "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json", "ANSIBLE_NOCOLOR": "1"}
    extra = {"ansible_become": False, "llmfleet_fabric_ip": "127.0.0.1", **extra}
    proc = subprocess.run(
        [str(ANSIBLE_PLAYBOOK), str(PLAYBOOK), "-i", str(inventory), "--tags", "engine_patches",
         "--skip-tags", "common", "-e", json.dumps(extra), *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    raw = proc.stdout + proc.stderr
    try:
        doc = json.loads(proc.stdout[proc.stdout.index("{"):])
    except ValueError as exc:
        raise AssertionError("no JSON from ansible-playbook (rc %d):\n%s" % (proc.returncode, raw[-4000:])) from exc
    results = {}
    for play in doc["plays"]:
        for task in play["tasks"]:
            name = task["task"]["name"].split(" : ", 1)[-1]    # "llmfleet.cluster.engine_patches : ..."
            results[name] = task["hosts"].get("gb10-test")
    return {"rc": proc.returncode, "results": results, "stats": doc["stats"].get("gb10-test", {}), "raw": raw}


APPLY_TASK = "Apply or revert the source patches for this host"


def patch_items(res: dict) -> list:
    """The per-patch results of the module task ([] when the loop was empty or skipped)."""
    task = res["results"].get(APPLY_TASK) or {}
    return task.get("results", [])
