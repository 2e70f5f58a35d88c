"""A node that is in the Ray cluster but serves no model (a real fleet's spare or Ray-only node, the
scale lab's spark3-8) passes every role's argument-spec check in site.yml, no host contacted.

The sim inventory plus spark3, a Ray worker in no serving group, routed nowhere (ProxyCommand=false
and the recorder of test_controller_preflight.py for ssh/scp/sftp). `--tags` with a tag no task has
leaves only the `always` tasks: each play's plan and its roles' argument-spec checks, all on the
controller. Once the safeguards and serve specs read a serving group's port and profile from
spark3's empty plan and failed it.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import yaml

from test_controller_preflight import recorder_env
from test_shipped_inventories import ANSIBLE_PLAYBOOK, INVENTORIES, ROOT, bin_dir  # noqa: F401 pylint: disable=unused-import

# roles whose specs once failed a node that serves nothing, and the Ray role it is there for
MUST_CHECK = ("safeguards", "serve", "ray_node")


@pytest.fixture(scope="module")
def inventory(tmp_path_factory):
    inv = tmp_path_factory.mktemp("ray-only") / "sim-plus-ray-only"
    shutil.copytree(INVENTORIES / "sim", inv)
    hosts = yaml.safe_load((inv / "hosts.yml").read_text())
    children = hosts["all"]["children"]
    children["gb10"]["hosts"]["spark3"] = {"ansible_host": "10.231.0.15", "llmfleet_fabric_ip": "10.231.1.15"}
    children["ray_workers"]["hosts"]["spark3"] = None
    assert "spark3" not in children["serve_nodes"]["hosts"]
    (inv / "hosts.yml").write_text(yaml.safe_dump(hosts))
    return inv


def test_a_ray_only_node_passes_every_roles_argument_spec(inventory, bin_dir, tmp_path):  # noqa: F811
    log = tmp_path / "contacts.log"
    env = recorder_env(bin_dir, tmp_path, log)
    # A tag no task has: only the `always` tasks run, i.e. the plan and the argument-spec checks (the
    # roles' meta dependency `common` would contact the hosts first otherwise).
    cmd = [str(ANSIBLE_PLAYBOOK), "-i", str(inventory), str(ROOT / "site.yml"),
           "--tags", "argument-specs-only", "-e", "ansible_ssh_common_args='-o ProxyCommand=false'"]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False)  # a hang guard: the lane may be starved
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    checks = re.findall(r"^TASK \[llmfleet\.cluster\.(\w+) : Validating arguments against arg spec 'main'.*?\n(.*?)(?=^TASK|^PLAY)",
                        out, re.M | re.S)
    assert {check[0] for check in checks} >= set(MUST_CHECK), out[-3000:]
    for role, results in checks:
        assert "fatal:" not in results, f"{role}:\n{results}"
    for role in MUST_CHECK:
        assert any(re.search(r"^ok: \[spark3\]", results, re.M) for r, results in checks if r == role), \
            f"spark3's {role} arguments were not checked"
    assert not log.exists(), f"a host was contacted: {log.read_text()}"
