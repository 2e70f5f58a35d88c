"""Run this collection's playbooks on this machine from a controller-side integration test.

What it is for: the tests under tests/integration that drive ansible-playbook with connection
local (memory_fit, models, python_env_source, engine_patches) all need the same plumbing: the
collection reachable as llmfleet.cluster, an environment that points ansible at this checkout,
one subprocess call, and (with the ansible.posix.json callback) the per-task results. What a test
needs beyond that (another callback, proxies off, a longer timeout) is an argument here.

Import it from a test file as
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import localplay
(pytest's default import mode puts only the test file's own folder on sys.path).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

# The checkout these tests belong to (found from this file, not the cwd), so a worktree tests its own code.
ROOT = Path(__file__).resolve().parents[2]
COLLECTIONS = ROOT / ".build" / "collections"
# The ansible-playbook of the venv running pytest, not whatever is first on PATH.
ANSIBLE_PLAYBOOK = Path(sys.executable).with_name("ansible-playbook")
PROXY_VARS = ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY")


def link_collection() -> Path:
    """Make `llmfleet.cluster` resolve to ROOT (what `make link` does), so FQCN roles load from here."""
    link = COLLECTIONS / "ansible_collections" / "llmfleet" / "cluster"
    if not link.is_symlink():
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(ROOT)
    return link


def serve_pair(work: Path) -> Path:
    """`work` with hosts.yml (two local nodes, a Ray head and a worker, GB10: RoCE by its platform) and
    preflight_only.yml (the serve role's preflight alone): what the serve role's local tests play."""
    import yaml  # pylint: disable=import-outside-toplevel
    (work / "hosts.yml").write_text(yaml.safe_dump({"all": {
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                 "llmfleet_fabric_ip": "127.0.0.1", "llmfleet_gpu_arch": "sm_121"},
        "hosts": {"nodea": None, "nodeb": None},
        "children": {"ray_head": {"hosts": {"nodea": None}}, "ray_workers": {"hosts": {"nodeb": None}}},
    }}))
    (work / "preflight_only.yml").write_text(yaml.safe_dump([{
        "name": "Serve preflight", "hosts": "ray_head:ray_workers", "gather_facts": False,
        "tasks": [{"name": "Preflight", "ansible.builtin.include_role": {
            "name": "llmfleet.cluster.serve", "tasks_from": "preflight.yml"}}]}]))
    return work


def ansible_env(work: Path, no_proxy: bool = False, **overrides: str) -> dict[str, str]:
    """os.environ plus the ansible settings every local run needs; overrides are added last.

    ANSIBLE_LOCAL_TEMP sits under the test's work dir so runs leave nothing in ~/.ansible.
    no_proxy=True drops the proxy variables and sets NO_PROXY for loopback: a test serving files
    on 127.0.0.1 must not have its downloads sent to a proxy that cannot reach this machine.
    """
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS),
           "ANSIBLE_LOCAL_TEMP": str(work / "tmp"), "ANSIBLE_NOCOLOR": "1"}
    if no_proxy:
        for var in PROXY_VARS:
            env.pop(var, None)
        env.update(NO_PROXY="127.0.0.1", no_proxy="127.0.0.1")
    env.update(overrides)
    return env


def run_playbook(playbook: Path, inventory: Path, extra_vars: dict, *args: str,
                 env: dict[str, str], timeout: int = 900) -> tuple[int, str]:
    """ansible-playbook PLAYBOOK -i INVENTORY -e EXTRA_VARS ARGS..., from ROOT; returns (rc, stdout + stderr).

    timeout is a guard against a hang, not a time limit: `make test` runs these plays in a low-weight
    lane beside the lab's converge, where a models play that takes about a minute alone once ran past 300 s.

    cwd is ROOT because ansible.cfg names its paths (roles, fact cache) relative to it. stdout comes
    first in the output, so json_tasks can read the json callback's document from its start.
    """
    proc = subprocess.run(
        [str(ANSIBLE_PLAYBOOK), str(playbook), "-i", str(inventory), "-e", json.dumps(extra_vars), *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    return proc.returncode, proc.stdout + proc.stderr


def json_tasks(out: str, rc: int | None = None) -> tuple[dict[str, dict[str, dict]], dict[str, dict]]:
    """The ansible.posix.json callback's output as ({task name: {host: result}}, {host: stats}).

    Task names lose their "role : " prefix; a name met again (several plays) merges its hosts.
    Whatever follows the document (stderr) is ignored. No document: AssertionError with the tail.
    """
    try:
        doc, _end = json.JSONDecoder().raw_decode(out, out.index("{"))
    except ValueError as exc:
        raise AssertionError("no JSON from ansible-playbook (rc %s):\n%s" % (rc, out[-4000:])) from exc
    tasks: dict[str, dict[str, dict]] = {}
    for play in doc["plays"]:
        for task in play["tasks"]:
            # "llmfleet.cluster.engine_patches : Apply ..." -> "Apply ..."
            tasks.setdefault(task["task"]["name"].split(" : ", 1)[-1], {}).update(task["hosts"])
    return tasks, doc["stats"]
