"""Mutation test of the controller gate: every shipped inventory, broken one way at a time, must stop.

For each inventory under inventories/ (overlays on top of their base, as test_shipped_inventories.py
runs them) the table MUTATIONS says how to break it so that one rule of the gate must fire: a
variable set on a host (or on every host, as group_vars/all would), a host moved between groups.
Each mutation is applied alone to a freshly loaded inventory, and the gate runs in-process: the action
plugin llmfleet.cluster.inventory_check over Ansible's own InventoryManager/VariableManager/HostVars,
with a connection that records every call (none may happen: the gate contacts no host). A mutation is
caught when the gate fails with a finding of that rule naming the mutated host and variable (and,
where the table says so, the cause in the words given).

The score (caught / applicable, and per rule) is printed; anything below 100 % fails, and so does a
rule of the gate without a mutation that catches it somewhere (adding a rule means adding its
mutations here). A mutation that cannot apply to an inventory (a one-host inventory has no second
node to disagree with) says why and does not count.
    .venv/bin/pytest -q -s tests/integration/preflight/test_gate_mutations.py
"""

from __future__ import annotations

import collections
import dataclasses
import sys
import typing as t
from pathlib import Path
from unittest.mock import MagicMock

import pytest
import yaml
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.vars.hostvars import HostVars
from ansible.vars.manager import VariableManager

from test_controller_preflight import collection_link  # same dir: pytest puts it on sys.path

collection_link()
# the gate runs in this process: the collection imports from the checkout's link (make link)
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / ".build" / "collections"))

from ansible_collections.llmfleet.cluster.plugins.action import inventory_check  # noqa: E402
from ansible_collections.llmfleet.cluster.plugins.module_utils import platforms, serve_groups  # noqa: E402
from ansible_collections.llmfleet.cluster.plugins.plugin_utils import inventory_checks, profile_files  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
INVENTORIES = ROOT / "inventories"
# Overlay inventories complete a base inventory and are checked only on top of it.
OVERLAYS = {"lab-twin": ["lab", "lab-twin"]}
STANDALONE = sorted(p.name for p in INVENTORIES.iterdir() if (p / "hosts.yml").is_file() and p.name not in OVERLAYS)
COMBOS = {name: [name] for name in STANDALONE} | {"+".join(v): v for v in OVERLAYS.values()}


# --------------------------------------------------------------------------- the inventory under test
class Fleet:
    """One shipped inventory, loaded afresh: what a mutation reads (the gate's own view of hosts, clusters
    and serving groups) and changes (host variables, group membership) before the gate runs."""

    def __init__(self, sources: list[Path], work: Path):
        self.work = work
        self.loader = DataLoader()
        self.inventory = InventoryManager(loader=self.loader, sources=[str(s) for s in sources])
        self.variables = VariableManager(loader=self.loader, inventory=self.inventory)
        values = inventory_check.extract_hostvars(self.hostvars(), self.groups()["all"], self.spec_names())
        self.view = inventory_checks.GateInventory(values, self.groups())  # the gate's view, for choosing targets
        self.values = values

    @staticmethod
    def spec_names() -> set[str]:
        return inventory_check.gate_inputs(inventory_check.load_role_specs(inventory_check.ROLES_DIR))

    def hostvars(self) -> HostVars:
        return HostVars(inventory=self.inventory, variable_manager=self.variables, loader=self.loader)

    def groups(self) -> dict[str, list[str]]:
        return {g: [h.name for h in grp.get_hosts()] for g, grp in self.inventory.groups.items()}

    # targets
    def head(self) -> str:
        return self.view.head[0]

    def cluster_of(self, host: str) -> str:
        return self.view.cluster[host]

    def others(self, host: str) -> list[str]:
        """The other members of host's cluster."""
        return [h for h in self.view.in_cluster(self.view.members, self.cluster_of(host)) if h != host]

    def group(self, which: int = 0):
        """A serving group of the head's cluster (inventory_checks.ServingGroup): the first, or the last (-1)."""
        groups = self.view.serving_groups(self.cluster_of(self.head()))
        if which and len(groups) < 2:
            raise NotApplicable("one serving group: the mutations of the first group cover it")
        return groups[which]

    def group_profile(self, which: int = 0) -> tuple[str, dict[str, t.Any]]:
        profiles = profile_files.load_profile_dir()
        name, _raw = inventory_checks.group_profile(self.view, self.group(which), profiles)
        extras = self.values[self.head()].get("llmfleet_serve_profiles_extra") or {}
        return name, inventory_checks.resolve_extra(profiles, extras, name)[0]

    def value(self, host: str, name: str) -> t.Any:
        return self.values[host].get(name)

    # changes
    def set(self, host: str, name: str, value: t.Any) -> None:
        self.inventory.get_host(host).set_variable(name, value)

    def set_all(self, name: str, value: t.Any) -> None:
        for host in self.groups()["all"]:
            self.set(host, name, value)

    def move(self, host: str, from_group: str | None, to_group: str | None) -> None:
        if from_group:
            self.inventory.groups[from_group].remove_host(self.inventory.get_host(host))
        if to_group:
            self.inventory.add_group(to_group)
            self.inventory.add_host(host, group=to_group)

    def gate(self) -> tuple[dict[str, t.Any], MagicMock]:
        """The action plugin's result on the inventory as it is now, and the connection it was given."""
        task = MagicMock(args={}, async_val=0, check_mode=False, action="llmfleet.cluster.inventory_check")
        connection = MagicMock()
        connection._shell.tmpdir = None
        action = inventory_check.ActionModule(task, connection, MagicMock(), self.loader, None, None)
        return action.run(task_vars={"hostvars": self.hostvars(), "groups": self.groups()}), connection


# --------------------------------------------------------------------------- the mutations
class NotApplicable(Exception):
    """This mutation has nothing to break in this inventory (the message says why)."""


@dataclasses.dataclass(frozen=True)
class Mutation:
    rule: str  # the gate check or rule that must fire (its key in the report)
    what: str  # how the inventory is broken, for the score table
    apply: t.Callable[[Fleet], tuple[str, str]]  # breaks the fleet; returns (host, variable) to be named
    says: str = ""  # words the finding must contain (the cause, where the wording matters)


def _second(fleet: Fleet) -> str:
    others = fleet.others(fleet.head())
    if not others:
        raise NotApplicable("a cluster of one host: no second node")
    return others[0]


def _group_rank(fleet: Fleet) -> str:
    hosts = fleet.group().hosts
    if len(hosts) < 2:
        raise NotApplicable("a serving group of one node: nothing to differ across it")
    return hosts[1]


def _ssh_host(fleet: Fleet, host: str) -> str:
    if fleet.value(host, "ansible_connection") == "local" or not fleet.value(host, "ansible_host"):
        raise NotApplicable(f"{host} is run locally: no management address")
    return host


def second_ray_head(f: Fleet):
    host = _second(f)
    f.move(host, "ray_workers" if host in f.groups().get("ray_workers", []) else None, "ray_head")
    return host, "ray_head"


def no_ray_head(f: Fleet):
    head = f.head()
    f.move(head, "ray_head", "ray_workers")
    return head, "ray_head"


def duplicate_fabric_ip(f: Fleet):
    host = _second(f)
    f.set(host, "llmfleet_fabric_ip", f.value(f.head(), "llmfleet_fabric_ip"))
    return host, "llmfleet_fabric_ip"


def fabric_ip_typo(f: Fleet):
    f.set(f.head(), "llmfleet_fabric_ip", "10.0.0.300")
    return f.head(), "llmfleet_fabric_ip"


def fabric_ip_is_another_management_address(f: Fleet):
    host = _second(f)
    owner = _ssh_host(f, f.head())
    f.set(host, "llmfleet_fabric_ip", f.value(owner, "ansible_host"))
    return host, "llmfleet_fabric_ip"


def unknown_arch(f: Fleet):
    f.set(f.head(), "llmfleet_gpu_arch", "sm_999")
    return f.head(), "llmfleet_gpu_arch"


def unknown_profile(f: Fleet):
    f.set_all("llmfleet_serve_profile", "no-such-profile")
    return f.head(), "llmfleet_serve_profile"


def engine_typo(f: Fleet):
    f.set_all("llmfleet_engine", "vlm")
    return f.head(), "llmfleet_engine"


def tp_pp_product(f: Fleet):
    gpus = sum(int(f.value(h, "llmfleet_gpus_per_node") or 1) for h in f.group().hosts)
    f.set_all("llmfleet_tensor_parallel_size", gpus + 1)
    f.set_all("llmfleet_pipeline_parallel_size", 1)
    return f.group().hosts[0], "llmfleet_tensor_parallel_size"


def release_differs(f: Fleet):
    host = _group_rank(f)
    f.set(host, "llmfleet_release", f"{f.value(host, 'llmfleet_release')}-rc1")
    return host, "llmfleet_release"


def refused_choice(f: Fleet):
    f.set(f.head(), "fabric_transport", "infiniband")
    return f.head(), "fabric_transport"


def ray_auth_typo(f: Fleet):
    host = (f.others(f.head()) or [f.head()])[-1]
    f.set(host, "ray_node_auth", "tokens")
    return host, "ray_node_auth"


def relative_node_path(f: Fleet):
    f.set(f.head(), "ray_node_temp_dir", "tmp/ray")
    return f.head(), "ray_node_temp_dir"


def unsafe_user(f: Fleet):
    f.set(f.head(), "common_service_user", "LLM Fleet")
    return f.head(), "common_service_user"


def vault_key_by_its_old_name(f: Fleet):
    f.set_all("serve_api_key", "a-key-from-the-vault")
    return f.head(), "serve_api_key"


def port_out_of_range(f: Fleet):
    f.set(f.head(), "ray_node_port", 70000)
    return f.head(), "ray_node_port"


def _loopback_fabric(f: Fleet) -> bool:
    """Whether the head's cluster already runs on loopback (emulated nodes of one machine)."""
    hosts = [f.head()] + f.others(f.head())
    return all(str(f.value(h, "llmfleet_fabric_ip") or "").startswith("127.") for h in hosts)


def loopback_fabric(f: Fleet):
    if f.others(f.head()) and not _loopback_fabric(f):
        host = _second(f)
        f.set(host, "llmfleet_fabric_ip", "127.0.0.9")  # unreachable from the other nodes
        return host, "llmfleet_fabric_ip"
    host = _second(f) if f.others(f.head()) else f.head()
    f.set(host, "llmfleet_fabric_ip", "127.0.0.1")  # one machine: Ray rewrites this one address
    return host, "llmfleet_fabric_ip"


def link_local_api(f: Fleet):
    host = _ssh_host(f, f.head())
    f.set(host, "serve_host", "169.254.10.10")
    return host, "serve_host"


def fabric_on_management_nic(f: Fleet):
    host = _ssh_host(f, f.head())
    f.set(host, "llmfleet_fabric_ip", f.value(host, "ansible_host"))
    f.set(host, "fabric_netplan_manage", True)
    return host, "fabric_netplan_manage"


def duplicate_management_address(f: Fleet):
    host = _ssh_host(f, _second(f))
    f.set(host, "ansible_host", f.value(_ssh_host(f, f.head()), "ansible_host"))
    return host, "ansible_host"


def second_fabric_subnet(f: Fleet):
    if _loopback_fabric(f):
        raise NotApplicable("emulated nodes of one machine: a loopback fabric has no subnets to split")
    host = _second(f)
    f.set(host, "llmfleet_fabric_ip", "10.99.7.5")
    return host, "llmfleet_fabric_ip"


def mtu_differs(f: Fleet):
    host = _second(f)
    f.set(host, "fabric_mtu", 4000)
    return host, "fabric_mtu"


def port_collision(f: Fleet):
    f.set(f.head(), "serve_master_port", 6379)  # Ray's GCS port (ray_node_port's default)
    return f.head(), "serve_master_port"


def variant_of_the_other_engine(f: Fleet):
    engine = f.value(f.head(), "llmfleet_engine") or "vllm"
    f.set(f.head(), "python_env_variant_name", "sglang_cpu" if engine == "vllm" else "cpu")
    return f.head(), "python_env_variant_name"


def uncovered_patch(f: Fleet):
    """A site's own variant (llmfleet_variants_dir) pinning a vLLM the sm_121 patch was not written for."""
    host = next((h for h in f.view.members if f.value(h, "llmfleet_gpu_arch") == "sm_121"), None)
    if host is None:
        raise NotApplicable("no sm_121 host: the shipped GPU patch is for sm_121")
    directory = f.work / "variants"
    directory.mkdir(exist_ok=True)
    (directory / "site_sm_121.yml").write_text(yaml.safe_dump({"python_env_variant": {
        "engine": "vllm", "arch": "sm_121", "release": "vllm-0.11.0", "packages": ["vllm==0.11.0"]}}))
    f.set(host, "llmfleet_variants_dir", str(directory))
    f.set(host, "python_env_variant_name", "site_sm_121")
    f.set(host, "llmfleet_release", "vllm-0.11.0")
    return host, "python_env_variant_name"


def more_gpus_than_the_platform(f: Fleet):
    host = f.head()
    names = [g for g, hosts in f.groups().items() if host in hosts]
    platform = platforms.platform_of(names, f.value(host, "llmfleet_gpu_arch"))
    if not platform:
        raise NotApplicable(f"{host} names no platform")
    f.set(host, "llmfleet_gpus_per_node", platforms.PLATFORMS[platform]["gpus_per_node"] + 1)
    return host, "llmfleet_gpus_per_node"


def tp_across_a_socket_node(f: Fleet):
    hosts = f.group().hosts
    _name, profile = f.group_profile()
    if len(hosts) < 2:
        raise NotApplicable("a serving group of one node: TP never spans nodes")
    if (profile or {}).get("device") == "cpu":
        raise NotApplicable("a CPU profile: gloo over TCP has no transport rule")
    f.set_all("llmfleet_tensor_parallel_size", len(hosts))
    f.set_all("llmfleet_pipeline_parallel_size", 1)
    f.set(hosts[1], "fabric_transport", "socket")
    return hosts[1], "fabric_transport"


def _override_profile(f: Fleet, name: str, override: dict[str, t.Any]) -> None:
    """llmfleet_serve_profiles_extra with `override` merged over profile `name` (the inventory's own
    profiles kept, as a user adds to group_vars/all.yml)."""
    extras = dict(f.value(f.head(), "llmfleet_serve_profiles_extra") or {})
    entry = dict(extras.get(name) or {})
    for key, value in override.items():
        entry[key] = {**(entry.get(key) or {}), **value} if isinstance(value, dict) else value
    extras[name] = entry
    f.set_all("llmfleet_serve_profiles_extra", extras)


def ray_gpus_outside_the_ray_group(f: Fleet):
    """The default serving group narrowed to all its nodes but the last (serve_nodes), which stays a Ray
    node offering its GPU: a Ray-backend group's ranks could be placed there."""
    group = f.group()
    _name, profile = f.group_profile()
    if (profile or {}).get("backend") != "ray" or (profile or {}).get("device") == "cpu":
        raise NotApplicable("the group is not a GPU group on the Ray backend: Ray places none of its ranks")
    if group.name is not None:
        raise NotApplicable("the group is one of llmfleet_serve_groups: serve_nodes does not choose its hosts")
    if len(group.hosts) < 2:
        raise NotApplicable("a serving group of one node: no node to leave out")
    for host in group.hosts[:-1]:
        if host not in f.groups().get("serve_nodes", []):
            f.move(host, None, "serve_nodes")
    if group.hosts[-1] in f.groups().get("serve_nodes", []):
        f.move(group.hosts[-1], "serve_nodes", None)
    return group.hosts[-1], "ray_node_num_gpus"


def model_too_big(f: Fleet):
    """The group's profile, overridden in the inventory with the facts of a 2-trillion-parameter model."""
    name, profile = f.group_profile()
    _override_profile(f, name, {"model_facts": {"params": 2_000_000_000_000, "weight_bits": 16}})
    head = f.group().hosts[0]
    names = [g for g, hosts in f.groups().items() if head in hosts]
    platform = platforms.platform_of(names, f.value(head, "llmfleet_gpu_arch"), (profile or {}).get("device", "gpu"))
    if not platforms.PLATFORMS.get(platform or "", {}).get("unified_memory") or platform == "cpu":
        f.set_all("serve_memory_fit_node_memory_gib", 64)  # memory the controller cannot know: declared
    return head, "llmfleet_serve_profiles_extra"


def _flag_version(f: Fleet) -> None:
    """Raises NotApplicable where the gate cannot know the engine version (no variant pins it)."""
    result, _connection = f.gate()
    check = next(c for c in result["checks"] if c["name"] == "engine_flags")
    warned = [x["message"] for x in check["findings"] if x["severity"] == "warn"]
    variants = next(c for c in result["checks"] if c["name"] == "engine_variant")
    if warned or any("does not exist" in x["message"] for x in variants["findings"]):
        raise NotApplicable("no variant pins the engine version, or its --help is not captured: "
                            + "; ".join(warned or [x["message"] for x in variants["findings"]])[:160])


def misspelled_flag_in_inventory_profile(f: Fleet, which: int = 0):
    """An inventory-defined profile (extends the group's) with a flag the pinned engine does not know."""
    group = f.group(which)
    _flag_version(f)
    name, profile = f.group_profile(which)
    flag = "--gpu-memory-utilisation" if profile["engine"] == "vllm" else "--mem-fraction-statik"
    _override_profile(f, "site-profile", {"extends": name, "args": {flag: 0.8}})
    if group.profile_var == "llmfleet_serve_profile":
        f.set_all("llmfleet_serve_profile", "site-profile")
    else:
        spec = dict(f.value(f.head(), "llmfleet_serve_groups"))
        key = serve_groups.entry(spec, group.name)[0]  # a replica (smol-1) reads its group's entry (smol)
        spec[key] = dict(spec[key], profile="site-profile")
        f.set_all("llmfleet_serve_groups", spec)
    return group.hosts[0], "llmfleet_serve_profiles_extra"


def misspelled_flag_in_the_last_group(f: Fleet):
    return misspelled_flag_in_inventory_profile(f, -1)


def utilisation_above_one(f: Fleet):
    """An inventory override of the group's (shipped) profile raising the memory share to 1.5."""
    _flag_version(f)
    name, profile = f.group_profile()
    flag = "--gpu-memory-utilization" if profile["engine"] == "vllm" else "--mem-fraction-static"
    _override_profile(f, name, {"args": {flag: 1.5}})
    return f.group().hosts[0], "llmfleet_serve_profiles_extra"


def model_dir_differs(f: Fleet):
    host = _group_rank(f)
    f.set(host, "models_dir", "/srv/models")
    return host, "models_dir"


def two_networks_in_one_entry(f: Fleet):
    f.set(f.head(), "serve_allow_extra", ["192.168.1.0/24, 10.8.0.0/16"])  # one string, not a list of two
    return f.head(), "serve_allow_extra"


def monitoring_elsewhere(f: Fleet):
    f.set_all("monitoring_server", "no-such-node")
    return f.head(), "monitoring_server"


def _gateway_head(f: Fleet) -> str:
    if not f.view.serving_groups(f.cluster_of(f.head())):
        raise NotApplicable("the head's cluster serves nothing: no gateway")
    return f.head()


def gateway_elsewhere(f: Fleet):
    head = _gateway_head(f)
    f.set_all("gateway_host", "no-such-node")
    return head, "gateway_host"


def gateway_on_the_gcs_port(f: Fleet):
    head = _gateway_head(f)
    f.set_all("gateway_port", f.value(head, "ray_node_port") or 6379)
    return head, "gateway_port"


def gateway_on_a_group_api_port(f: Fleet):
    head = _gateway_head(f)
    group = next((g for g in f.view.serving_groups(f.cluster_of(head)) if head in g.hosts), None)
    if group is None:
        raise NotApplicable("the Ray head (the gateway's host) has no engine rank: no API port to take")
    spec = serve_groups.entry(f.value(head, "llmfleet_serve_groups"), group.name)[1]
    f.set_all("gateway_port", spec.get("port") or f.value(head, "serve_port") or 8000)
    return head, "gateway_port"


def replicas_that_do_not_split(f: Fleet):
    """The first serving group's replicas one more than its hosts: no equal slices."""
    spec = f.value(f.head(), "llmfleet_serve_groups")
    if not spec:
        raise NotApplicable("no llmfleet_serve_groups: no group to replicate")
    base = serve_groups.entry(spec, f.group().name)[0]  # a replica's group is its entry's key
    hosts = sum(len(g.hosts) for g in f.view.serving_groups(f.cluster_of(f.head()))
                if serve_groups.entry(spec, g.name)[0] == base)
    f.set_all("llmfleet_serve_groups", dict(spec, **{base: dict(spec[base], replicas=hosts + 1)}))
    return f.head(), "llmfleet_serve_groups"


def container_image_by_tag(f: Fleet):
    """The first serving group moved to the container runtime with an image named by a tag (NGC's, as its
    pages print it): a tag can move under a running cluster."""
    spec = f.value(f.head(), "llmfleet_serve_groups")
    if not spec:
        raise NotApplicable("no llmfleet_serve_groups: the runtime is a serving group's key")
    base = serve_groups.entry(spec, f.group().name)[0]
    moved = dict(spec[base], runtime="container", image="nvcr.io/nvidia/vllm:25.09-py3")
    f.set_all("llmfleet_serve_groups", dict(spec, **{base: moved}))
    return f.head(), "llmfleet_serve_groups"


def negative_ray_gpus(f: Fleet):
    """The head's Ray offering -1 GPUs: the numeric checks above read ray_node_num_gpus as a number, the
    plan (the gate's last check) as a GPU count."""
    f.set(f.head(), "ray_node_num_gpus", -1)
    return f.head(), "ray_node_num_gpus"


def two_agent_ports(f: Fleet):
    """Ray's agent ports as two where the plan needs three: no check above reads the list's length, the
    plan does (the gate's last check builds it)."""
    f.set(f.head(), "ray_node_agent_ports", [6383, 6384])
    return f.head(), "ray_node_agent_ports"


def variants_dir_not_a_path(f: Fleet):
    f.set(f.head(), "llmfleet_variants_dir", 5)
    return f.head(), "llmfleet_variants_dir"


def allow_list_typo(f: Fleet):
    f.set(f.head(), "serve_allow", ["10.0.0.0/33"])
    return f.head(), "serve_allow"


MUTATIONS: tuple[Mutation, ...] = (
    Mutation("ray_head", "a second host in ray_head", second_ray_head),
    Mutation("ray_head", "the head moved to ray_workers", no_ray_head),
    Mutation("fabric_ip", "a worker's fabric IP = the head's", duplicate_fabric_ip),
    Mutation("fabric_ip", "fabric IP 10.0.0.300", fabric_ip_typo),
    Mutation("fabric_ip", "a fabric IP = another host's management address", fabric_ip_is_another_management_address,
             says="management address (ansible_host)"),
    Mutation("gpu_arch", "llmfleet_gpu_arch sm_999", unknown_arch),
    Mutation("engine_profile", "llmfleet_serve_profile no-such-profile", unknown_profile),
    Mutation("engine_profile", "llmfleet_engine vlm", engine_typo),
    Mutation("parallelism", "TP = the group's GPUs + 1", tp_pp_product),
    Mutation("versions", "one rank's llmfleet_release differs", release_differs),
    Mutation("role_args", "fabric_transport infiniband (not a choice)", refused_choice),
    Mutation("role_args", "one node's ray_node_auth tokens (not a choice)", ray_auth_typo),
    Mutation("paths", "ray_node_temp_dir relative", relative_node_path),
    Mutation("names", "common_service_user 'LLM Fleet'", unsafe_user),
    Mutation("retired", "the vault's API key as serve_api_key (now llmfleet_api_key)", vault_key_by_its_old_name,
             says="no longer reads it"),
    Mutation("ranges", "ray_node_port 70000", port_out_of_range),
    Mutation("fabric_address", "a loopback fabric IP on a node of several (127.0.0.1 on one)", loopback_fabric),
    Mutation("reachable_addresses", "serve_host link-local", link_local_api),
    Mutation("mgmt_vs_fabric", "fabric IP = own ansible_host with netplan managed", fabric_on_management_nic),
    Mutation("duplicate_mgmt", "two hosts share ansible_host", duplicate_management_address),
    Mutation("fabric_subnet", "a worker's fabric IP in another /24", second_fabric_subnet),
    Mutation("mtu", "one node's fabric_mtu 4000", mtu_differs),
    Mutation("ports", "serve_master_port = Ray's GCS port", port_collision),
    Mutation("engine_variant", "python_env_variant_name of the other engine", variant_of_the_other_engine),
    Mutation("engine_patches", "a site variant pinning vLLM 0.11.0 on sm_121", uncovered_patch),
    Mutation("platform", "llmfleet_gpus_per_node above the platform's", more_gpus_than_the_platform),
    Mutation("tp_transport", "TP across the group with one node on sockets", tp_across_a_socket_node,
             says="fabric_transport: socket"),
    Mutation("ray_placement", "a Ray-backend group narrowed to its nodes but one, which offers its GPU to Ray",
             ray_gpus_outside_the_ray_group, says="runs on the Ray backend"),
    Mutation("memory_fit", "the group's profile with a 2T-parameter model", model_too_big, says="does not fit"),
    Mutation("engine_flags", "an inventory profile with a misspelled flag", misspelled_flag_in_inventory_profile,
             says="unknown flag"),
    Mutation("engine_flags", "the last serving group's profile, inventory-defined, with a misspelled flag",
             misspelled_flag_in_the_last_group, says="unknown flag"),
    Mutation("engine_flags", "a shipped profile overridden to utilisation 1.5", utilisation_above_one,
             says="is outside 0 < x <= 1"),
    Mutation("group_values", "one rank's models_dir differs", model_dir_differs),
    Mutation("networks", "serve_allow 10.0.0.0/33", allow_list_typo, says="does not parse"),
    Mutation("networks", "two networks in one serve_allow_extra entry", two_networks_in_one_entry,
             says="does not parse"),
    Mutation("monitoring", "monitoring_server names no node of the cluster", monitoring_elsewhere),
    Mutation("engine_profile", "a group's replicas one more than its hosts", replicas_that_do_not_split,
             says="into equal slices"),
    Mutation("engine_profile", "a container group's image named by a tag", container_image_by_tag,
             says="is not pinned by digest"),
    Mutation("gateway", "gateway_host names no node of the cluster", gateway_elsewhere),
    Mutation("plan", "the head's ray_node_agent_ports with two ports", two_agent_ports, says="not a list of three ports"),
    Mutation("plan", "the head's ray_node_num_gpus -1", negative_ray_gpus, says="is not a GPU count"),
    Mutation("plan", "the head's llmfleet_variants_dir a number", variants_dir_not_a_path, says="is not a directory path"),
    Mutation("gateway", "gateway_port = Ray's GCS port", gateway_on_the_gcs_port),
    Mutation("gateway", "gateway_port = the API port of the gateway host's group", gateway_on_a_group_api_port,
             says="the API of serving group"),
)


# --------------------------------------------------------------------------- running the table
@dataclasses.dataclass
class Outcome:
    inventory: str
    mutation: Mutation
    status: str  # caught | MISSED | n/a
    detail: str


def _caught(result: dict[str, t.Any], mutation: Mutation, host: str, variable: str) -> str | None:
    """The finding that catches the mutation (its message), or None."""
    for check in result.get("checks") or []:
        if check["name"] != mutation.rule:
            continue
        for finding in check["findings"]:
            named = finding["variable"] == variable or variable in finding["message"]
            if (finding["severity"] == "fail" and host in finding["hosts"] and named
                    and mutation.says in finding["message"]):
                return finding["message"]
    return None


def run_one(label: str, mutation: Mutation, work: Path) -> Outcome:
    fleet = Fleet([INVENTORIES / n for n in COMBOS[label]], work)
    try:
        host, variable = mutation.apply(fleet)
    except NotApplicable as exc:
        return Outcome(label, mutation, "n/a", str(exc))
    result, connection = fleet.gate()
    assert not connection.method_calls, f"{label}: the gate used the connection: {connection.method_calls}"
    message = _caught(result, mutation, host, variable) if result.get("failed") else None
    if message:
        return Outcome(label, mutation, "caught", message)
    fails = [line for line in result.get("lines") or [] if line.startswith("FAIL")]
    return Outcome(label, mutation, "MISSED", f"expected a {mutation.rule} finding naming {host} and {variable}"
                   f"{' saying ' + repr(mutation.says) if mutation.says else ''}; the gate said: "
                   + ("; ".join(fails) or "nothing (it passed)"))


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> list[Outcome]:
    out = []
    for label in sorted(COMBOS):
        for i, mutation in enumerate(MUTATIONS):
            out.append(run_one(label, mutation, tmp_path_factory.mktemp(f"{label.replace('+', '_')}-{i}")))
    return out


def test_every_shipped_inventory_passes_before_it_is_mutated(tmp_path):
    for label in sorted(COMBOS):
        result, connection = Fleet([INVENTORIES / n for n in COMBOS[label]], tmp_path).gate()
        assert result["ok"] and not result.get("failed"), f"{label}: " + "\n".join(result["lines"])
        assert not connection.method_calls


def test_the_mutation_score_is_100_percent(outcomes):
    applicable = [o for o in outcomes if o.status != "n/a"]
    caught = [o for o in applicable if o.status == "caught"]
    per_rule: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    for o in applicable:
        per_rule[o.mutation.rule][1] += 1
        per_rule[o.mutation.rule][0] += o.status == "caught"
    lines = [f"gate mutation score: {len(caught)}/{len(applicable)} caught "
             f"({100 * len(caught) // max(1, len(applicable))} %), {len(outcomes) - len(applicable)} not applicable"]
    lines += [f"  {rule:<20} {c}/{n}" for rule, (c, n) in sorted(per_rule.items())]
    lines += [f"  n/a {o.inventory}: {o.mutation.what}: {o.detail}" for o in outcomes if o.status == "n/a"]
    print("\n" + "\n".join(lines))
    missed = [f"{o.inventory}: {o.mutation.rule}: {o.mutation.what}: {o.detail}" for o in applicable
              if o.status != "caught"]
    assert not missed, "\n".join(lines[:1] + missed)
    assert len(applicable) >= 5 * len(COMBOS), "too few mutations apply: the table no longer fits the inventories"


def test_every_rule_of_the_gate_has_a_mutation_that_catches_it(outcomes, tmp_path):
    result, _connection = Fleet([INVENTORIES / "sim"], tmp_path).gate()
    rules = {c["name"] for c in result["checks"]}
    caught = {o.mutation.rule for o in outcomes if o.status == "caught"}
    assert rules - caught == set(), f"rules no mutation catches in any shipped inventory: {sorted(rules - caught)}"
