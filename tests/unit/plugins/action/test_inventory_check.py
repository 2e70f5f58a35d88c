"""Action plugin llmfleet.cluster.inventory_check, in-process, on the fixture inventories.

The inventories under tests/unit/fixtures/inventories/<case>/hosts.yml are loaded with Ansible's own
InventoryManager/VariableManager/HostVars (real group/host variable precedence and templating), then
run through the action plugin's extraction and the pure checks; each case's expected.yml says whether
the preflight passes and which report lines must appear. The same fixtures drive
tests/integration/preflight/test_controller_preflight.py through ansible-playbook.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from unittest.mock import MagicMock

import pytest
import yaml

from ansible.errors import AnsibleActionFail
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.vars.hostvars import HostVars
from ansible.vars.manager import VariableManager

from ansible_collections.llmfleet.cluster.plugins.action import inventory_check
from ansible_collections.llmfleet.cluster.plugins.action.inventory_check import (
    ActionModule,
    extract_hostvars,
    write_report,
)
from ansible_collections.llmfleet.cluster.plugins.plugin_utils.profile_files import load_profile_dir
from ansible_collections.llmfleet.cluster.plugins.plugin_utils.inventory_checks import (
    ProfileError,
    Unevaluated,
)

FIXTURES = Path(__file__).resolve().parents[3] / "unit" / "fixtures" / "inventories"
CASES = sorted(p.name for p in FIXTURES.iterdir() if (p / "hosts.yml").is_file())


def load(source: Path | str):
    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources=[str(source)])
    variables = VariableManager(loader=loader, inventory=inventory)
    return loader, HostVars(inventory=inventory, variable_manager=variables, loader=loader), \
        {g: [h.name for h in grp.get_hosts()] for g, grp in inventory.groups.items()}


def expected(case: str) -> dict:
    return yaml.safe_load((FIXTURES / case / "expected.yml").read_text())


def test_fixture_table_is_complete():
    assert len(CASES) >= 12
    assert {"good", "good_two_clusters", "good_serve_nodes", "two_heads", "duplicate_fabric_ip",
            "malformed_fabric_ip", "missing_fabric_ip", "unknown_arch", "tp_pp_mismatch",
            "versions_differ", "serve_nodes_mismatch", "two_heads_one_cluster", "tp_pp_vars_mismatch"} <= set(CASES)
    for case in CASES:
        hosts = yaml.safe_load((FIXTURES / case / "hosts.yml").read_text())
        assert hosts["all"]["vars"]["ansible_connection"] == "ssh", case


@pytest.mark.parametrize("case", CASES)
def test_fixture_inventories(case):
    # the whole gate, as the preflight runs it: every rule and the plan of every host
    want = expected(case)
    result = run_action(case, fail_on_problems=False)
    lines = result["lines"]
    text = "\n".join(lines)
    assert result["ok"] is want["ok"], text
    for line in want.get("present", []):
        assert any(line in got for got in lines), f"{line!r} not in:\n{text}"
    for unwanted in want.get("absent", []):
        assert not any(unwanted in got for got in lines if got.startswith("FAIL")), f"{unwanted!r} in:\n{text}"


def test_extract_hostvars_templates_and_keeps_only_checked_vars(tmp_path):
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump({"all": {
        "vars": {"llmfleet_release": "vllm-{{ preflight_test_version }}", "preflight_test_version": "0.11.0",
                 "ansible_connection": "ssh", "some_password": "secret"},
        "hosts": {
            "n1": {"llmfleet_fabric_ip": "{{ '10.0.0.' ~ 11 }}", "llmfleet_gpus_per_node": 2},
            "n2": {"llmfleet_fabric_ip": "{{ ansible_facts.eth1.ipv4.address }}", "ray_node_version": "2.49"},
        }}}))
    _loader, hostvars, groups = load(tmp_path / "hosts.yml")
    values = extract_hostvars(hostvars, ["n1", "n2"])
    # ansible_connection: the address rules skip local connections
    assert values["n1"] == {"llmfleet_release": "vllm-0.11.0", "llmfleet_fabric_ip": "10.0.0.11",
                            "llmfleet_gpus_per_node": 2, "ansible_connection": "ssh"}
    assert isinstance(values["n1"]["llmfleet_release"], str)
    unevaluated = values["n2"]["llmfleet_fabric_ip"]
    assert isinstance(unevaluated, Unevaluated)
    assert unevaluated.raw == "{{ ansible_facts.eth1.ipv4.address }}"
    assert values["n2"]["ray_node_version"] == "2.49"
    assert "some_password" not in values["n1"]


def test_load_profile_dir(tmp_path):
    # the gate and the plan read profile files through this one function (plugin_utils/profile_files.py)
    assert load_profile_dir(str(tmp_path / "missing")) is None
    (tmp_path / "ok.yml").write_text("engine: vllm\ntensor_parallel_size: 2\n")
    (tmp_path / "list.yaml").write_text("- not a mapping\n")
    (tmp_path / "bad.yml").write_text("engine: [vllm\n")
    (tmp_path / "renamed.yml").write_text("name: other\nengine: vllm\n")
    (tmp_path / "README.md").write_text("not a profile\n")
    profiles = load_profile_dir(str(tmp_path))
    assert sorted(profiles) == ["bad", "list", "ok", "renamed"]
    assert profiles["ok"] == {"name": "ok", "engine": "vllm", "tensor_parallel_size": 2}
    assert all(isinstance(profiles[n], ProfileError) for n in ("list", "bad", "renamed"))
    assert "name 'other' does not match the file name 'renamed'" in str(profiles["renamed"])
    assert "expected a mapping" in str(profiles["list"]) and "not valid YAML" in str(profiles["bad"])


def test_write_report(tmp_path):
    path = write_report(str(tmp_path / "sub" / "report.json"), {"ok": True})
    assert json.loads(Path(path).read_text()) == {"ok": True}
    assert os.listdir(tmp_path / "sub") == ["report.json"]


def run_action(case: str, **args):
    loader, hostvars, groups = load(FIXTURES / case / "hosts.yml")
    task = MagicMock(args=args, async_val=0, check_mode=False,
                     action="llmfleet.cluster.inventory_check")
    connection = MagicMock()
    connection._shell.tmpdir = None
    action = ActionModule(task, connection, MagicMock(), loader, None, None)
    return action.run(task_vars={"hostvars": hostvars, "groups": groups})


def test_action_run_good_writes_report(tmp_path):
    result = run_action("good", report_json=str(tmp_path / "report.json"))
    assert not result.get("failed") and result["ok"] is True and result["changed"] is False
    assert result["problems"] == 0
    assert result["lines"][0] == "ok   one ray_head per cluster (default: spark1)"
    assert len(result["lines"]) == len(result["checks"])
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["ok"] is True and report["hosts"] == ["spark1", "spark2", "thor1", "thor2"]
    assert [c["name"] for c in report["checks"]][:6] == [
        "ray_head", "fabric_ip", "gpu_arch", "engine_profile", "parallelism", "versions"]


def test_action_run_bad_fails_with_every_line(tmp_path):
    result = run_action("duplicate_fabric_ip", report_json=str(tmp_path / "r.json"))
    assert result["failed"] is True and result["ok"] is False and result["problems"] == 1
    assert ("FAIL spark2: llmfleet_fabric_ip '198.51.100.11' duplicates spark1's; give each host its own "
            "data-plane IPv4 (the QSFP address)") in result["msg"].splitlines()
    report = json.loads((tmp_path / "r.json").read_text())
    finding = next(c for c in report["checks"] if c["name"] == "fabric_ip")["findings"][0]
    assert finding["hosts"] == ["spark2", "spark1"] and finding["variable"] == "llmfleet_fabric_ip"
    assert finding["value"] == "198.51.100.11"


def test_action_run_report_only():
    result = run_action("two_heads", fail_on_problems=False)
    assert result["failed"] is False and result["ok"] is False and result["problems"] == 1


def test_action_run_without_the_collections_profiles_says_so(tmp_path, monkeypatch):
    # a broken install (no profiles/): the inventory's own profile lacks what the engine base
    # (profiles/_vllm.yml) gives it, and the gate stops on it
    monkeypatch.setattr(inventory_check, "load_profile_dir", lambda: load_profile_dir(str(tmp_path / "none")))
    result = run_action("good", fail_on_problems=False)
    assert result["ok"] is False
    assert result["lines"][0].startswith("FAIL spark1, spark2, thor1, thor2: llmfleet_serve_profiles_extra profile 'pp4' "
                                         "is not valid: profile 'pp4': field 'backend'")


def test_action_run_rejects_unknown_option():
    with pytest.raises(AnsibleActionFail, match="bogus"):
        run_action("good", bogus=1)
