"""The cluster_plan filter on the shipped inventories, loaded with Ansible's own InventoryManager /
VariableManager / HostVars (real variable precedence and templating), against what the roles used to
compute themselves from the same inventory (serve_group_of, engine_variant, serving_group)."""
from pathlib import Path

import pytest
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.vars.hostvars import HostVars
from ansible.vars.manager import VariableManager

from ansible_collections.llmfleet.cluster.plugins.filter.cluster_plan import cluster_plan, cluster_plans
from ansible_collections.llmfleet.cluster.plugins.module_utils import topology
from ansible_collections.llmfleet.cluster.plugins.plugin_utils.serve_group_inputs import (
    VARIANTS_DIR, engine_variant, serve_group_members, serve_group_of)

INVENTORIES = Path(__file__).resolve().parents[4] / "inventories"
SHIPPED = sorted(p.name for p in INVENTORIES.iterdir() if (p / "hosts.yml").is_file() and p.name != "lab-twin")


def serving_group(host, groups, hostvars):
    """The hosts serving with `host`: its serving group (llmfleet_serve_groups), or, for a host that
    serves nothing, every serving host of its cluster: read from the inventory apart from the plan,
    which the checks below compare with it."""
    if not (hostvars.get(host) or {}).get('llmfleet_serve_groups'):
        return topology.Inventory(groups, hostvars).serving_group(topology.cluster_of(hostvars, host))
    by_group = serve_group_members(host, groups, hostvars)
    for hosts in by_group.values():
        if host in hosts:
            return hosts
    order = list(groups.get('all') or [])
    return sorted({h for hosts in by_group.values() for h in hosts}, key=order.index)


def load(*names):
    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources=[str(INVENTORIES / n) for n in names])
    variables = VariableManager(loader=loader, inventory=inventory)
    groups = {g: [h.name for h in grp.get_hosts()] for g, grp in inventory.groups.items()}
    return HostVars(inventory=inventory, variable_manager=variables, loader=loader), groups


def test_sim_two_groups_two_engines():
    hostvars, groups = load("sim")
    spark2, thor1 = cluster_plan("spark2", groups, hostvars), cluster_plan("thor1", groups, hostvars)
    assert (spark2["cluster"]["name"], spark2["cluster"]["ray_head"], spark2["cluster"]["ray_address"]) == \
        ("sim", "spark1", "10.231.1.11:6379")
    assert (spark2["serve"]["name"], spark2["serve"]["node_rank"], spark2["serve"]["engine"], spark2["variant"]) == \
        ("sparks", 1, "vllm", "cpu")
    assert spark2["serve"]["url"] == "http://10.231.1.11:8000" and spark2["release"] == "sim-vllm-0.32.0-cpu"
    assert (thor1["serve"]["name"], thor1["serve"]["is_head"], thor1["serve"]["engine"], thor1["variant"]) == \
        ("thors", True, "sglang", "sglang_cpu")
    assert thor1["release"] == "sim-sglang-0.5.21-cpu"
    assert thor1["paths"]["release_venv"] == "/opt/llmfleet/venvs/sim-sglang-0.5.21-cpu"
    assert thor1["env_files"]["serve"] == "/etc/llmfleet/%s.env" % thor1["serve"]["unit"]
    assert thor1["serve"]["profile_spec"]["name"] == "sim-tiny-llama-sglang"
    assert Path(thor1["variant_file"]).is_file() and Path(spark2["variant_file"]).name == "cpu.yml"


def test_sim_thors_run_one_image_that_thor1_builds_and_authorizes_thor2_to_copy():
    """The sim's container group through the filter (only the plan's INPUTS pass it): the sim's own
    authorized_keys file (its nodes' /root/.ssh/authorized_keys is the controller's key, read-only)."""
    hostvars, groups = load("sim")
    thor1, thor2 = cluster_plan("thor1", groups, hostvars), cluster_plan("thor2", groups, hostvars)
    container = thor2["serve"]["container"]
    assert (container["ref"], container["source"], container["source_ip"]) == \
        ("localhost/llmfleet-engine:sim-sglang-0.5.21-cpu", "thor1", "10.231.1.13")
    assert container["source_authorized_keys"] == "/root/.ssh/authorized_keys2"
    assert thor1["owned"]["image_keys"] == {"file": "/root/.ssh/authorized_keys2", "hosts": ["thor2"]}
    assert thor2["owned"]["image_keys"]["hosts"] == [] and cluster_plan("spark1", groups, hostvars)["serve"]["container"] == {}


@pytest.mark.parametrize("names", [[n] for n in SHIPPED] + [["lab", "lab-twin"]], ids="+".join)
def test_every_shipped_inventory_plans_as_the_roles_resolved_it(names):
    hostvars, groups = load(*names)
    for host in groups["all"]:
        plan = cluster_plan(host, groups, hostvars)
        group = serve_group_of(host, groups, hostvars)
        assert plan["serve"].get("name") == group.get("name"), host
        assert plan["serve"].get("unit") == group.get("unit"), host
        # the roles read serving_group from the plan instead of the filter (which reads every host's
        # variables on every host): the same hosts in the same order, on every shipped inventory
        assert plan["serving_group"] == serving_group(host, groups, hostvars), host
        if group:
            assert plan["serve"]["hosts"] == serving_group(host, groups, hostvars), host
            assert plan["serve"]["profile_spec"]["name"] == group["profile"], host
            assert plan["serve"]["hosts"][plan["serve"]["node_rank"]] == host
        assert plan["variant"] == engine_variant(host, groups, hostvars), host
        # the file python_env loads: the chosen variant's, in the collection's directory
        assert plan["variant_file"] == "%s/%s.yml" % (VARIANTS_DIR, plan["variant"]), host
        assert plan["variants_dir"] == VARIANTS_DIR and plan["variant_error"] == "", host
        want_release = group.get("release") or hostvars[host].get("llmfleet_release") or ""
        assert plan["release"] == want_release, host
        assert plan["paths"]["current"] == "/opt/llmfleet/venvs/current", host
        assert plan["cluster"]["ray_head"] in plan["cluster"]["ray_nodes"], host


def test_a_site_variants_dir_chooses_and_locates_the_variant(tmp_path):
    """llmfleet_variants_dir in the inventory: the plan chooses among its files and points python_env at one."""
    hostvars, groups = load("sim")
    (tmp_path / "cpu.yml").write_text("python_env_variant: {name: cpu, engine: vllm, arch: cpu, release: vllm-0.32.0}\n")
    hostvars._inventory.get_host("spark1").set_variable("llmfleet_variants_dir", str(tmp_path))
    plan = cluster_plan("spark1", groups, hostvars)
    assert (plan["variant"], plan["variants_dir"], plan["variant_file"]) == ("cpu", str(tmp_path), str(tmp_path / "cpu.yml"))


@pytest.mark.parametrize("names", [[n] for n in SHIPPED] + [["lab", "lab-twin"]], ids="+".join)
def test_planning_every_host_at_once_gives_each_hosts_own_plan(names):
    hostvars, groups = load(*names)
    assert cluster_plans(groups["all"], groups, hostvars) == {h: cluster_plan(h, groups, hostvars) for h in groups["all"]}


class CountingHostvars(dict):
    """hostvars that count how often each (host, variable) is read, as Ansible templates each read."""

    reads = {}

    def get(self, host, default=None):
        values = super().get(host)
        if values is None:
            return default
        counts = self.reads

        class Vars(dict):
            def __getitem__(self, name):
                counts[(host, name)] = counts.get((host, name), 0) + 1
                return dict.__getitem__(self, name)

            def get(self, name, default=None):
                return self[name] if name in self else default
        return Vars(values)


def test_planning_every_host_at_once_reads_each_variable_once():
    hostvars, groups = load("sim")
    plain = CountingHostvars({h: {k: hostvars[h][k] for k in hostvars[h]} for h in groups["all"]})
    CountingHostvars.reads = {}
    cluster_plans(groups["all"], groups, plain)
    assert CountingHostvars.reads and max(CountingHostvars.reads.values()) == 1
    CountingHostvars.reads = {}
    for host in groups["all"]:
        cluster_plan(host, groups, plain)
    assert max(CountingHostvars.reads.values()) > 1  # the per-host filter reads them again: what the memo saves
