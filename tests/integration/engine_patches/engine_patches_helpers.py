"""Run playbooks/engine_patches.yml on this machine (connection local) against a venv tree."""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import localplay  # noqa: E402  (tests/integration, shared with the other local-play tests)

ROOT = localplay.ROOT
PLAYBOOK = ROOT / "playbooks" / "engine_patches.yml"
REL = "vllm/model_executor/layers/quantization/utils/w8a8_utils.py"


def run_role(work: Path, extra: dict, *args: str) -> dict:
    """ansible-playbook with the json callback; returns {rc, results (per task name), stats, raw}.

    Only the role's own tasks run (--tags engine_patches --skip-tags common): the common role (a
    dependency) would create the service account and /opt/llmfleet on this machine. Every run is a
    full one (llmfleet_full_run): these checks read the module's answer at each run, which the role's
    check would skip where the tree is as the last run left it.
    """
    localplay.link_collection()
    inventory = work / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"hosts": {"gb10-test": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}))
    env = localplay.ansible_env(work, ANSIBLE_CACHE_PLUGIN="memory", ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    extra = {"ansible_become": False, "llmfleet_fabric_ip": "127.0.0.1", "llmfleet_full_run": True, **extra}
    rc, raw = localplay.run_playbook(PLAYBOOK, inventory, extra, "--tags", "engine_patches", "--skip-tags", "common",
                                     *args, env=env)
    tasks, stats = localplay.json_tasks(raw, rc)
    results = {name: hosts.get("gb10-test") for name, hosts in tasks.items()}
    return {"rc": rc, "results": results, "stats": stats.get("gb10-test", {}), "raw": raw}


APPLY_TASK = "Apply or revert the source patches for this host"


def patch_items(res: dict) -> list:
    """The per-patch results of the module task ([] when the loop was empty or skipped)."""
    task = res["results"].get(APPLY_TASK) or {}
    return task.get("results", [])


def acted(res: dict) -> list:
    """The results of the patches this host wants applied, or that changed its tree (a revert): the
    role runs the module for every patch of the directory, the others report not_applicable."""
    return [i for i in patch_items(res) if i["item"]["state"] == "present" or i.get("changed")]
