"""One host's plan (plugins/module_utils/cluster_plan.py): tables of inventories and what each host gets."""
import os

import pytest
import yaml

from ansible_collections.llmfleet.cluster.plugins.module_utils import cluster_plan as cp
from ansible_collections.llmfleet.cluster.plugins.module_utils import serve_groups as sg

HOSTS = ["spark1", "spark2", "thor1", "thor2"]
GROUPS = {"all": HOSTS, "ray_head": ["spark1"], "ray_workers": ["spark2", "thor1", "thor2"],
          "gb10": ["spark1", "spark2"], "thor": ["thor1", "thor2"], "serve_nodes": ["spark1", "spark2"]}
IPS = {"spark1": "10.1.0.1", "spark2": "10.1.0.2", "thor1": "10.1.0.3", "thor2": "10.1.0.4"}
PROFILES = {
    "vl": {"name": "vl", "engine": "vllm", "backend": "mp", "device": "cpu", "served_model_name": "tiny",
           "model": "/m", "tensor_parallel_size": 2, "pipeline_parallel_size": 1},
    "vr": {"name": "vr", "engine": "vllm", "backend": "ray", "device": "cpu", "served_model_name": "tiny-ray",
           "model": "/m", "tensor_parallel_size": 2, "pipeline_parallel_size": 1},
    "sg": {"name": "sg", "engine": "sglang", "backend": "native", "device": "cpu", "served_model_name": "tiny-sg",
           "model": "/m2", "tensor_parallel_size": 2, "pipeline_parallel_size": 1},
    "v1": {"name": "v1", "engine": "vllm", "backend": "mp", "device": "cpu", "served_model_name": "small",
           "model": "/m3", "tensor_parallel_size": 1, "pipeline_parallel_size": 1},
    "vg": {"name": "vg", "engine": "vllm", "backend": "mp", "device": "gpu", "served_model_name": "big",
           "model": "/m4", "tensor_parallel_size": 2, "pipeline_parallel_size": 1},
}
TWO = {"sparks": {"group": "serve_nodes"}, "thors": {"group": "thor", "profile": "sg", "port": 8001, "release": "r-sg"}}


def hostvars(**extra):
    """{host: inventory values}; extra: {host or 'all': {var: value}}."""
    out = {}
    for h in HOSTS:
        out[h] = {"llmfleet_fabric_ip": IPS[h], "llmfleet_gpu_arch": "sm_121" if h.startswith("spark") else "sm_110",
                  "llmfleet_release": "r-vl", "llmfleet_cluster": "sim"}
        out[h].update(extra.get("all", {}))
        out[h].update(extra.get(h, {}))
    return out


def serve_groups(spec, hv, host, default_members, profiles):
    """serve_groups.plan() with the inputs the cluster_plan filter gives it (plugin_utils/serve_group_inputs.py):
    the API addresses, the host's unit prefix and the inventory's unit names."""
    default = {"profile": "vl", "port": hv[host].get("serve_port"), "release": hv[host].get("llmfleet_release"),
               "unit_prefix": hv[host].get("serve_unit_prefix")}
    addresses = {h: hv[h].get("serve_host") or hv[h].get("llmfleet_fabric_ip") for h in HOSTS}
    names = {h: hv[h]["serve_unit_name"] for h in HOSTS if hv[h].get("serve_unit_name")}
    return sg.plan(spec, HOSTS, GROUPS, default_members, profiles, default, addresses, names)


def plan_of(host, spec=None, **extra):
    hv = hostvars(**extra)
    groups = serve_groups(spec, hv, host, ["spark1", "spark2"] if not spec else [], PROFILES)
    group = sg.group_of(groups, host)
    return cp.host_plan(host, GROUPS, hv, groups, PROFILES[group["profile"]] if group else None, "v-" + host,
                        grouped=bool(spec))


# host, serving-group spec, inventory extras, {dotted path in the plan: expected value}
CASES = [
    ("spark1", None, {}, {
        "cluster.name": "sim", "cluster.hosts": HOSTS, "cluster.ray_head": "spark1",
        "cluster.ray_head_address": "10.1.0.1", "cluster.ray_address": "10.1.0.1:6379",
        "cluster.ray_nodes": HOSTS, "cluster.serving_hosts": ["spark1", "spark2"],
        "serving_group": ["spark1", "spark2"],
        "serve.name": "default", "serve.node_rank": 0, "serve.is_head": True, "serve.nnodes": 2,
        "serve.engine": "vllm", "serve.backend": "mp", "serve.port": 8000, "serve.unit": "llmfleet-serve-tiny",
        "serve.url": "http://10.1.0.1:8000", "serve.api_url": "http://10.1.0.1:8000/v1",
        "serve.profile": "vl", "serve.profile_spec.model": "/m", "release": "r-vl", "variant": "v-spark1",
        "paths.current": "/opt/llmfleet/venvs/current", "paths.release_venv": "/opt/llmfleet/venvs/r-vl",
        "paths.wheelhouse": "/opt/llmfleet/wheelhouse", "paths.models": "/opt/llmfleet/models",
        "env_files.engine": "/etc/llmfleet/engine.env", "env_files.serve": "/etc/llmfleet/llmfleet-serve-tiny.env",
        "env_files.engine_unit": ["/etc/llmfleet/comm.env", "-/etc/llmfleet/engine.env", "-/etc/llmfleet/nccl.env"],
        "service": {"user": "llmfleet", "group": "llmfleet", "home": "/var/lib/llmfleet"}, "firewall": True,
        # the engine unit's firewall, as the owned set names it
        "serve.firewall": {"unit": "llmfleet-firewall-serve-tiny", "table": "llmfleet_serve_tiny",
                           "file": "/etc/llmfleet/firewall-llmfleet-serve-tiny.nft"}}),
    # a worker of the same group: rank 1, the head's URL
    ("spark2", None, {}, {"serve.node_rank": 1, "serve.is_head": False, "serve.head": "spark1",
                          "serve.runs_unit": True, "serve.unit_hosts": ["spark1", "spark2"],
                          "serve.url": "http://10.1.0.1:8000", "fabric_ip": "10.1.0.2",
                          "fabric.mtu": 9000, "fabric.transport": "auto",
                          # its communication settings agree with its serving group's; it reaches every Ray node
                          "fabric.group": ["spark1", "spark2"], "fabric.peers": ["spark1", "thor1", "thor2"],
                          "fabric.peer_ips": ["10.1.0.1", "10.1.0.3", "10.1.0.4"]}),
    # the inventory's fabric settings (validate reads them from the plan)
    ("spark2", None, {"all": {"fabric_mtu": 8000, "fabric_transport": "socket"}},
     {"fabric.mtu": 8000, "fabric.transport": "socket"}),
    # a Ray worker outside the serving group: no serve part, no API-key file, the llmfleet_release;
    # its communication settings agree with the Ray nodes'
    ("thor1", None, {}, {"serve": {}, "env_files.serve": "", "release": "r-vl", "cluster.ray_head": "spark1",
                         "fabric.group": HOSTS, "fabric.peers": ["spark1", "spark2", "thor2"]}),
    # two groups: thor2 serves SGLang on 8001 under its group's release, the API on thor1
    ("thor2", TWO, {}, {"serve.name": "thors", "serve.engine": "sglang", "serve.port": 8001, "serve.node_rank": 1,
                        "serve.url": "http://10.1.0.3:8001", "serve.unit": "llmfleet-serve-tiny-sg", "release": "r-sg",
                        "paths.release_venv": "/opt/llmfleet/venvs/r-sg",
                        "cluster.serving_hosts": HOSTS, "serving_group": ["thor1", "thor2"]}),
    # serve_host moves the API address (summary.yml used to ignore it)
    ("spark2", None, {"spark1": {"serve_host": "0.0.0.0"}},
     {"serve.url": "http://0.0.0.0:8000", "serve.head_address": "0.0.0.0"}),
    # one prefix moves every path; one config dir every env file
    ("spark1", None, {"all": {"common_prefix": "/srv/fleet/", "common_config_dir": "/etc/fleet"}}, {
        "paths.prefix": "/srv/fleet", "paths.current": "/srv/fleet/venvs/current", "paths.nccl": "/srv/fleet/nccl",
        "paths.lib": "/srv/fleet/lib", "env_files.comm": "/etc/fleet/comm.env",
        "env_files.serve": "/etc/fleet/llmfleet-serve-tiny.env"}),
    # another unit prefix renames the unit as the serve role does
    ("spark1", None, {"all": {"serve_unit_prefix": "acme"}},
     {"serve.unit": "acme-tiny", "serve.unit_prefix": "acme", "units.serve_prefix": "acme", "units.ray": "llmfleet-ray"}),
    # the Ray unit's name, also on a node that serves nothing
    ("thor1", None, {"all": {"ray_node_unit": "ray-node"}}, {"units": {"ray": "ray-node", "serve_prefix": "llmfleet-serve"}}),
    # serve_unit_name names the unit the serve and safeguards roles run and its env file
    ("spark1", None, {"all": {"serve_unit_name": "llm-api"}},
     {"serve.unit": "llm-api", "env_files.serve": "/etc/llmfleet/llm-api.env"}),
    # ports, service account and firewall follow the inventory
    ("spark1", None, {"all": {"ray_node_port": 7000, "common_service_user": "svc", "ray_node_firewall": "false"}},
     {"cluster.ray_address": "10.1.0.1:7000", "service.user": "svc", "service.group": "llmfleet", "firewall": False}),
    # no release anywhere: no release venv
    ("spark1", None, {"all": {"llmfleet_release": ""}}, {"release": "", "paths.release_venv": ""}),
]


def dig(data, dotted):
    for key in dotted.split("."):
        data = data[key]
    return data


@pytest.mark.parametrize("host, spec, extra, want", CASES)
def test_host_plan(host, spec, extra, want):
    got = plan_of(host, spec, **extra)
    assert {k: dig(got, k) for k in want} == want


# serving_group, as the serving_group filter names it: with llmfleet_serve_groups the host's own group
# (a host in none: every group's hosts); without, serve_nodes (a Ray-only host included)
@pytest.mark.parametrize("host, spec, want", [
    ("spark2", None, ["spark1", "spark2"]),
    ("thor1", None, ["spark1", "spark2"]),
    ("spark1", TWO, ["spark1", "spark2"]),
    ("thor1", TWO, ["thor1", "thor2"]),
    ("thor1", {"sparks": {"group": "serve_nodes"}}, ["spark1", "spark2"]),
])
def test_serving_group(host, spec, want):
    assert plan_of(host, spec)["serving_group"] == want


@pytest.mark.parametrize("host, runs_unit", [("spark1", True), ("spark2", False)])
def test_with_the_ray_backend_only_node_rank_0_runs_the_engine_unit(host, runs_unit):
    got = plan_of(host, {"sparks": {"group": "serve_nodes", "profile": "vr"}})["serve"]
    assert (got["runs_unit"], got["unit_hosts"], got["backend"]) == (runs_unit, ["spark1"], "ray")


def test_serving_group_without_serve_nodes_is_the_ray_nodes():
    groups = {k: v for k, v in GROUPS.items() if k != "serve_nodes"}
    got = cp.host_plan("thor2", groups, hostvars(), [], None, "")
    assert got["serving_group"] == HOSTS


def test_every_group_of_the_cluster_is_listed_without_host_specific_keys():
    got = plan_of("spark1", TWO)
    assert [g["name"] for g in got["cluster"]["serve_groups"]] == ["sparks", "thors"]
    assert all("node_rank" not in g and "profile_spec" not in g for g in got["cluster"]["serve_groups"])
    assert got["cluster"]["serve_groups"][1]["url"] == "http://10.1.0.3:8001"


def test_a_second_cluster_has_its_own_head_and_members():
    hv = hostvars(thor1={"llmfleet_cluster": "b"}, thor2={"llmfleet_cluster": "b"})
    groups = dict(GROUPS, ray_head=["spark1", "thor1"], ray_workers=["spark2", "thor2"])
    got = cp.host_plan("thor2", groups, hv, [], None, "")
    assert (got["cluster"]["name"], got["cluster"]["hosts"], got["cluster"]["ray_head"]) == ("b", ["thor1", "thor2"], "thor1")
    assert got["cluster"]["ray_address"] == "10.1.0.3:6379" and got["serve"] == {} and got["variant"] == ""


@pytest.mark.parametrize("extra, message", [
    ({"common_prefix": "opt/llmfleet"}, "spark1: common_prefix 'opt/llmfleet' is not an absolute path"),
    ({"common_config_dir": 7}, "spark1: common_config_dir 7 is not an absolute path"),
])
def test_bad_paths_name_host_variable_value(extra, message):
    with pytest.raises(cp.PlanError) as err:
        plan_of("spark1", None, all=extra)
    assert message in str(err.value)


def test_a_cluster_without_a_head_has_no_ray_address():
    got = cp.host_plan("spark1", dict(GROUPS, ray_head=[]), hostvars(), [], None, "")
    assert (got["cluster"]["ray_head"], got["cluster"]["ray_address"]) == ("", "")


# the variants directory: the collection's (the filter hands it in), or the inventory's llmfleet_variants_dir
@pytest.mark.parametrize("extra, default, variant, error, want", [
    ({}, "/c/roles/python_env/vars/variants", "cpu", "",
     {"variants_dir": "/c/roles/python_env/vars/variants", "variant_file": "/c/roles/python_env/vars/variants/cpu.yml",
      "variant_error": ""}),
    ({"llmfleet_variants_dir": "/srv/site-variants/"}, "/c/v", "cpu-vllm-0.41.0", "",
     {"variants_dir": "/srv/site-variants", "variant_file": "/srv/site-variants/cpu-vllm-0.41.0.yml"}),
    # an empty value is unset: the collection's
    ({"llmfleet_variants_dir": ""}, "/c/v", "sm_121", "", {"variants_dir": "/c/v", "variant_file": "/c/v/sm_121.yml"}),
    # no variant: no file, and the reason the role stops with
    ({}, "/c/v", "", "spark1: no GPU arch", {"variant": "", "variant_file": "", "variant_error": "spark1: no GPU arch"}),
    # a variant named anyway carries no stale reason
    ({}, "/c/v", "cpu", "ignored", {"variant_error": ""}),
])
def test_variants_dir_and_file(extra, default, variant, error, want):
    got = cp.host_plan("spark1", GROUPS, hostvars(spark1=extra), [], None, variant, None, default, error)
    assert {k: got[k] for k in want} == want


def test_variants_dir_expands_home(monkeypatch):
    monkeypatch.setenv("HOME", "/home/op")
    assert cp.variants_dir({"h": {"llmfleet_variants_dir": "~/variants"}}, "h", "/c/v") == "/home/op/variants"
    assert cp.variants_dir({"h": {}}, "h", "/c/v") == "/c/v"


def test_a_variants_dir_that_is_no_path_names_host_and_variable():
    with pytest.raises(cp.PlanError) as err:
        cp.host_plan("spark1", GROUPS, hostvars(spark1={"llmfleet_variants_dir": ["/a"]}), [], None, "cpu", None, "/c/v")
    assert "spark1: llmfleet_variants_dir ['/a'] is not a directory path" in str(err.value)


# ---- node emulation: several inventory hosts on one machine (llmfleet_machine)
ONE_MACHINE = {"all": {"llmfleet_machine": "gpu4", "llmfleet_gpus_per_node": 1}}


@pytest.mark.parametrize("host, want", [
    ("spark1", {"emulation.index": 0, "emulation.cuda_devices": [0], "emulation.env.CUDA_VISIBLE_DEVICES": "0",
                "emulation.env.NCCL_HOSTID": "gpu4-spark1", "paths.config_dir": "/etc/llmfleet/nodes/spark1",
                "env_files.comm": "/etc/llmfleet/nodes/spark1/comm.env", "ray_ports.node_manager_port": 6380,
                "ray_ports.min_worker_port": 10002, "ray_ports.client_server_port": 10001}),
    ("thor2", {"emulation.index": 3, "emulation.cuda_devices": [3], "emulation.env.NCCL_HOSTID": "gpu4-thor2",
               "ray_ports.node_manager_port": 6680, "ray_ports.agent_ports": [6683, 6684, 6685],
               "ray_ports.min_worker_port": 13002, "ray_ports.max_worker_port": 13999,
               "ray_ports.client_server_port": 10001, "ray_ports.autoscaler_metrics_port": 44217}),
])
def test_an_emulated_node_gets_its_own_gpu_ports_and_config_dir(host, want):
    plan = plan_of(host, **ONE_MACHINE)
    for path, value in want.items():
        assert dig(plan, path) == value, path


def test_a_real_node_gets_no_emulation_and_the_default_ports():
    plan = plan_of("thor2")
    assert plan["emulation"] == {}
    assert plan["paths"]["config_dir"] == "/etc/llmfleet"
    assert plan["ray_ports"] == cp.DEFAULT_RAY_PORTS
    # one host naming a machine of its own is a real node too
    assert plan_of("thor2", thor2={"llmfleet_machine": "m"})["emulation"] == {}


def test_the_emulation_adds_its_engine_flag_to_the_served_profile():
    assert plan_of("spark1", **ONE_MACHINE)["serve"]["profile_spec"]["args"] == {"--disable-custom-all-reduce": True}
    assert "args" not in plan_of("spark1")["serve"]["profile_spec"]


@pytest.mark.parametrize("extra, words", [
    (dict(ONE_MACHINE, spark2={"llmfleet_cuda_devices": [0]}), ["spark2", "llmfleet_cuda_devices", "[0]", "spark1"]),
    (dict(ONE_MACHINE, spark2={"ray_node_node_manager_port": 6280}), ["spark2", "Ray ports 6380", "spark1"]),
    (dict(ONE_MACHINE, thor1={"llmfleet_cuda_devices": "x"}), ["thor1", "llmfleet_cuda_devices", "'x'"]),
])
def test_colliding_emulated_nodes_are_refused_naming_both(extra, words):
    with pytest.raises(cp.PlanError) as err:
        plan_of("spark2" if "spark2" in extra else "thor1", **extra)
    for word in words:
        assert word in str(err.value)


ONE_GPU = {"all": {"llmfleet_machine": "gpu4", "llmfleet_gpus_per_node": 1, "llmfleet_machine_gpus": 1}}


@pytest.mark.parametrize("extra, host, devices, tenants, utilisation", [
    (ONE_GPU, "spark2", [0], 4, 0.2),
    ({"all": dict(ONE_GPU["all"], llmfleet_machine_gpus=2)}, "spark2", [1], 2, 0.4),
    ({"all": dict(ONE_GPU["all"], llmfleet_machine_gpus=4)}, "spark2", [1], 1, None),
])
def test_emulated_nodes_share_the_machines_gpus_each_vllm_rank_with_its_share(extra, host, devices, tenants, utilisation):
    plan = plan_of(host, **extra)
    assert plan["emulation"]["cuda_devices"] == devices and plan["emulation"]["gpu_tenants"] == tenants
    assert plan["emulation"]["env"]["CUDA_VISIBLE_DEVICES"] == ",".join(map(str, devices))
    assert plan["serve"]["profile_spec"]["args"].get("--gpu-memory-utilization") == utilisation


@pytest.mark.parametrize("extra, host, words", [
    ({"all": dict(ONE_GPU["all"], llmfleet_machine_gpus=0)}, "spark1", ["spark1", "llmfleet_machine_gpus 0", "GPU count"]),
    ({"all": dict(ONE_GPU["all"], llmfleet_machine_gpus="one")}, "spark1", ["llmfleet_machine_gpus 'one'"]),
])
def test_a_bad_machine_gpu_count_names_host_and_value(extra, host, words):
    with pytest.raises(cp.PlanError) as err:
        plan_of(host, **extra)
    for word in words:
        assert word in str(err.value)


def test_sglang_on_a_shared_gpu_keeps_the_whole_budget_and_a_token_cap():
    # SGLang's KV budget is what is free at its profile: a per-tenant share would leave the second
    # rank on the GPU none, so each keeps SHARED_GPU_MEMORY and --max-total-tokens bounds it
    args = plan_of("thor1", TWO, **ONE_GPU)["serve"]["profile_spec"]["args"]
    assert args["--mem-fraction-static"] == cp.SHARED_GPU_MEMORY
    assert args["--max-total-tokens"] == cp.SHARED_GPU_SGLANG_TOKENS
    assert args["--disable-custom-all-reduce"] is True
    alone = plan_of("thor1", TWO, **{"all": dict(ONE_GPU["all"], llmfleet_machine_gpus=4)})["serve"]["profile_spec"]["args"]
    assert "--max-total-tokens" not in alone and alone.get("--mem-fraction-static") != cp.SHARED_GPU_MEMORY


# ---- the owned set: what the plan assigns to a node's machine (the converge removes the rest)
SPARK_UNIT, SG_UNIT = "llmfleet-serve-tiny", "llmfleet-serve-tiny-sg"
RAY = ["llmfleet-ray-firewall.service", "llmfleet-ray.service"]
NODE_ENV = ["/etc/llmfleet/comm.env", "/etc/llmfleet/engine.env", "/etc/llmfleet/nccl.env"]
# the cluster's gateway (default: on the Ray head, spark1)
GATEWAY = ["llmfleet-gateway-firewall.service", "llmfleet-gateway.service"]
GATEWAY_ENV = ["/etc/llmfleet/llmfleet-gateway.env"]


def serving(unit, engine=True, table=None):
    """The units a node of `unit`'s group gets (engine=False: without the engine unit), the table, the files."""
    short = unit[len("llmfleet-"):]
    units = ["llmfleet-firewall-%s.service" % short, "llmfleet-watchdog@%s.timer" % unit]
    files = ["/etc/llmfleet/firewall-%s.nft" % unit, "/etc/llmfleet/safeguards/%s.json" % unit,
             "/etc/systemd/system/%s.service.d/50-llmfleet-safeguards.conf" % unit]
    if engine:
        units.append(unit + ".service")
        files.append("/etc/llmfleet/%s.env" % unit)
    return units, "inet llmfleet_serve_" + (table or short[len("serve-"):].replace("-", "_")), files


# host, serving-group spec, inventory extras, {key of plan.owned: expected value}
OWNED_CASES = [
    # the API node of the default group, a Ray node: engine, its firewall and watchdog, Ray and its firewall
    # (and the gateway: spark1 is the Ray head)
    ("spark1", None, {}, {
        "units": sorted(serving(SPARK_UNIT)[0] + RAY + GATEWAY),
        "nft_tables": ["inet llmfleet_gateway", "inet llmfleet_ray", "inet llmfleet_serve_tiny"],
        "files": sorted(serving(SPARK_UNIT)[2] + NODE_ENV + GATEWAY_ENV + ["/etc/llmfleet/ray.env", "/etc/llmfleet/ray.nft"]),
        "engine_units": [SPARK_UNIT], "patterns": ["llmfleet-*"], "complete": True}),
    # the gateway off: spark1 owns no gateway unit (a converge removes one it ran)
    ("spark1", None, {"all": {"gateway_enabled": False}}, {
        "units": sorted(serving(SPARK_UNIT)[0] + RAY), "nft_tables": ["inet llmfleet_ray", "inet llmfleet_serve_tiny"]}),
    # the gateway moved to thor1: thor1 owns it, and Ray
    ("thor1", None, {"all": {"gateway_host": "thor1"}}, {
        "units": sorted(RAY + GATEWAY), "nft_tables": ["inet llmfleet_gateway", "inet llmfleet_ray"],
        "files": sorted(NODE_ENV + GATEWAY_ENV + ["/etc/llmfleet/ray.env", "/etc/llmfleet/ray.nft"])}),
    # a Ray worker that serves nothing: Ray alone (a serve unit there is an orphan)
    ("thor1", None, {}, {"units": RAY, "nft_tables": ["inet llmfleet_ray"], "engine_units": [],
                         "files": sorted(NODE_ENV + ["/etc/llmfleet/ray.env", "/etc/llmfleet/ray.nft"])}),
    # two groups: thor2 owns the SGLang group's units, not the sparks'
    ("thor2", TWO, {}, {"units": sorted(serving(SG_UNIT)[0] + RAY), "engine_units": [SG_UNIT],
                        "nft_tables": ["inet llmfleet_ray", "inet llmfleet_serve_tiny_sg"]}),
    # another unit prefix: its units are listed too, by the firewall's naming
    ("spark1", None, {"all": {"serve_unit_prefix": "acme"}}, {
        "patterns": ["acme-*", "llmfleet-*"], "serve_prefixes": ["acme", "llmfleet-serve"], "engine_units": ["acme-tiny"],
        "nft_tables": ["inet llmfleet_gateway", "inet llmfleet_ray", "inet llmfleet_serve_tiny"]}),
    # the inventory renames the Ray unit, the engine unit (serve_unit_name: the one unit the serve role
    # runs and safeguards watches) and adds a watched unit
    ("spark1", None, {"all": {"ray_node_unit": "ray-head", "serve_unit_name": "my-engine",
                              "safeguards_serve_units": [{"name": "custom", "health_url": "http://x"}]}}, {
        "engine_units": ["my-engine"], "ray_units": ["llmfleet-ray", "ray-head"],
        "units": sorted(["llmfleet-firewall-my-engine.service", "llmfleet-watchdog@my-engine.timer",
                         "llmfleet-watchdog@custom.timer", "my-engine.service",
                         "ray-head-firewall.service", "ray-head.service"] + GATEWAY)}),
    # another configuration directory moves every owned file
    ("thor1", None, {"all": {"common_config_dir": "/etc/fleet"}},
     {"files": ["/etc/fleet/comm.env", "/etc/fleet/engine.env", "/etc/fleet/nccl.env", "/etc/fleet/ray.env",
                "/etc/fleet/ray.nft"]}),
]


@pytest.mark.parametrize("host, spec, extra, want", OWNED_CASES)
def test_the_owned_set(host, spec, extra, want):
    owned = plan_of(host, spec, **extra)["owned"]
    assert {k: owned[k] for k in want} == want


def test_a_node_that_left_the_ray_cluster_owns_no_ray_unit_table_or_env_file():
    groups = dict(GROUPS, ray_workers=["spark2", "thor2"])
    owned = cp.host_plan("thor1", groups, hostvars(), [], None, "v")["owned"]
    assert owned["units"] == [] and owned["nft_tables"] == [] and owned["files"] == NODE_ENV


def test_with_the_ray_backend_every_node_of_the_group_owns_its_engine_unit():
    # node rank 0 runs the unit; the serve role removes a worker's (from an earlier backend) in its own
    # order, the API rank drained first: the removal at the start of the run must not kill it before
    profiles = dict(PROFILES, vl=dict(PROFILES["vl"], backend="ray"))
    hv = hostvars()
    groups = serve_groups(None, hv, "spark1", ["spark1", "spark2"], profiles)
    head = cp.host_plan("spark1", GROUPS, hv, groups, profiles["vl"], "v")["owned"]
    worker = cp.host_plan("spark2", GROUPS, hv, groups, profiles["vl"], "v")["owned"]
    assert head["engine_units"] == worker["engine_units"] == [SPARK_UNIT]
    assert worker["units"] == sorted(serving(SPARK_UNIT)[0] + RAY)
    assert "/etc/llmfleet/%s.env" % SPARK_UNIT in worker["files"]


def test_an_emulated_machine_owns_the_units_of_all_its_nodes_and_only_its_own_files():
    owned = plan_of("thor1", TWO, **ONE_MACHINE)["owned"]
    assert owned["engine_units"] == [SPARK_UNIT, SG_UNIT]
    assert {SPARK_UNIT + ".service", SG_UNIT + ".service"} <= set(owned["units"])
    assert "/etc/llmfleet/nodes/thor1/%s.env" % SG_UNIT in owned["files"]
    assert not any(f.startswith("/etc/llmfleet/nodes/spark1") for f in owned["files"])
    assert owned["complete"] is True
    # a node of the machine in another cluster: this plan does not know its units (report only)
    other = dict(ONE_MACHINE, thor2={"llmfleet_cluster": "other"})
    assert plan_of("thor1", **other)["owned"]["complete"] is False


@pytest.mark.parametrize("extra, want", [
    ({}, {"mode": "token", "token_file": "/etc/llmfleet/ray-auth-token",
          "env": {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": "/etc/llmfleet/ray-auth-token"}}),
    ({"common_config_dir": "/srv/cfg/"}, {"mode": "token", "token_file": "/srv/cfg/ray-auth-token",
                                          "env": {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": "/srv/cfg/ray-auth-token"}}),
    ({"ray_node_auth": "Disabled"}, {"mode": "disabled", "token_file": "", "env": {"RAY_AUTH_MODE": "disabled"}}),
])
def test_ray_auth_is_token_by_default_with_the_nodes_token_file(extra, want):
    assert plan_of("spark2", None, all=extra)["ray_auth"] == want


def test_a_bad_ray_auth_mode_names_host_variable_value_and_fix():
    with pytest.raises(cp.PlanError) as err:
        plan_of("spark1", None, spark1={"ray_node_auth": "tokens"})
    assert "spark1: ray_node_auth 'tokens' is not one of token, disabled; set token" in str(err.value)


# ---- the gateway: one endpoint in front of every serving group (roles/gateway)
def test_the_gateway_fronts_every_group_from_the_ray_head():
    gw = plan_of("thor2", TWO)["cluster"]["gateway"]
    assert gw == {"host": "spark1", "port": 8080, "metrics_port": 29000, "url": "http://10.1.0.1:8080",
                  "unit": "llmfleet-gateway",
                  "workers": [{"url": "http://10.1.0.1:8000", "model_id": "tiny", "group": "sparks"},
                              {"url": "http://10.1.0.3:8001", "model_id": "tiny-sg", "group": "thors"}],
                  "models": ["tiny", "tiny-sg"], "rolling": []}


@pytest.mark.parametrize("spec, want", [
    # two replicas of small on the Thors: both roll, the first is the canary
    ({"sparks": {"group": "serve_nodes"}, "pair": {"hosts": ["thor1", "thor2"], "profile": "v1", "replicas": 2}},
     [("pair-1", ["thor1"], "small"), ("pair-2", ["thor2"], "small")]),
    # a replica on the Ray head stays with the staged switch (restarting the head's Ray restarts every node's)
    ({"sparks": {"hosts": ["spark1", "spark2"], "profile": "v1", "replicas": 2}}, [("sparks-2", ["spark2"], "small")]),
    # one group per model: nothing rolls
    (TWO, []),
])
def test_the_gateway_names_the_replicas_that_roll_one_at_a_time(spec, want):
    rolling = plan_of("thor2", spec)["cluster"]["gateway"]["rolling"]
    assert [(r["group"], r["hosts"], r["model_id"]) for r in rolling] == want
    assert all(r["url"].startswith("http://10.1.0.") for r in rolling)


def test_no_gateway_where_it_is_off():
    assert plan_of("spark1", None, all={"gateway_enabled": False})["cluster"]["gateway"] == {}


@pytest.mark.parametrize("extra, words", [
    ({"gateway_host": "nowhere"}, ["gateway_host 'nowhere' is not a host of cluster 'sim'",
                                   "fix: name one of them (default: the Ray head spark1)"]),
    # the plan's one port check (_int), as for the Ray ports
    ({"gateway_port": "http"}, ["gateway_port 'http' is not a port number", "set an integer from 1 to 65535"]),
    # spark1 serves the sparks' group on 8000 itself
    ({"gateway_port": 8000}, ["gateway_port 8000 on spark1 is also the API port of serving group sparks",
                              "fix: another gateway_port (default 8080)"]),
    ({"gateway_metrics_port": 8080}, ["gateway_metrics_port 8080 is also gateway_port", "fix: two ports"]),
    ({"gateway_metrics_port": 0}, ["gateway_metrics_port 0 is not a port number"]),
])
def test_a_gateway_the_plan_cannot_place_stops_naming_host_variable_and_fix(extra, words):
    with pytest.raises(cp.PlanError) as err:
        plan_of("thor1", TWO, all=extra)
    for w in words:
        assert w in str(err.value)
    assert str(err.value).startswith("thor1: ")


# The layout the serve role starts: the planner's, on the transport the nodes' platforms imply.
GPU = {"name": "g", "engine": "vllm", "backend": "ray", "served_model_name": "g", "model": "/m"}
LAB = {"all": HOSTS, "ray_head": ["spark1"], "ray_workers": ["spark2", "thor1", "thor2"],
       "gb10": ["spark1", "spark2"], "thor": ["thor1", "thor2"]}


# group hosts, profile sizes, inventory extras, (TP, PP), the planned transport
@pytest.mark.parametrize("hosts, sizes, extra, want, transport", [
    (HOSTS, {"pipeline_parallel_size": 4}, {}, (1, 4), "socket"),                 # the lab: Thors have no RoCE
    (["spark1", "spark2"], {}, {}, (2, 1), "roce"),                                # two Sparks: TP across RoCE
    (["spark1", "spark2"], {}, {"all": {"fabric_transport": "socket"}}, (1, 2), "socket"),  # pinned: TP stays in a node
    (["thor1", "thor2"], {}, {}, (1, 2), "socket"),
    (["spark1", "spark2"], {}, {"all": {"llmfleet_machine": "m1"}}, (1, 2), "socket"),     # emulated nodes
    (["spark1", "spark2"], {}, {"all": {"llmfleet_tensor_parallel_size": "1"}}, (1, 2), "roce"),  # -e gives strings
    (["spark1", "spark2"], {"device": "cpu", "tensor_parallel_size": 2}, {}, (2, 1), ""),   # gloo: no transport
])
def test_the_serving_groups_layout_and_its_transport(hosts, sizes, extra, want, transport):
    profile = dict(GPU, **sizes)
    layout, planned = cp.serve_layout(hosts[0], {"hosts": hosts}, profile, LAB, hostvars(**extra), HOSTS)
    assert (layout["tensor_parallel_size"], layout["pipeline_parallel_size"]) == want
    assert [r["host"] for r in layout["ranks"]] == hosts
    assert planned == transport


def test_a_layout_that_cannot_be_planned_names_the_host():
    with pytest.raises(cp.PlanError, match=r"^thor1: profile 'g': TP=2 spans nodes but thor1, thor2 talk"):
        cp.serve_layout("thor1", {"hosts": ["thor1", "thor2"]}, dict(GPU, tensor_parallel_size=2), LAB, hostvars(), HOSTS)


def test_the_plan_of_a_serving_host_holds_its_layout():
    plan = plan_of("spark2")
    assert plan["serve"]["layout"]["tensor_parallel_size"] == 2
    assert plan["serve"]["layout"]["head"] == "spark1"
    assert plan["serve"]["transport"] == ""                                       # the CPU profiles of this table
    assert plan_of("thor1")["serve"] == {}                                         # serves nothing: no layout


@pytest.mark.parametrize("extra, want", [
    ({}, {}),
    ({"llmfleet_tensor_parallel_size": "2", "llmfleet_allow_tp_over_sockets": "true"},   # -e gives strings
     {"tensor_parallel_size": 2, "tp_over_sockets": True}),
    ({"llmfleet_pipeline_parallel_size": 1}, {"pipeline_parallel_size": 1}),
])
def test_the_plan_holds_the_inventorys_layout_overrides_as_the_planner_read_them(extra, want):
    # the serve role's memory fit reads them from here (serve_overrides), not from the inventory again
    assert plan_of("spark2", **{"all": extra})["serve"]["layout_overrides"] == want


def test_each_node_offers_the_ray_resource_of_its_serving_group_only():
    # a Ray-backend layout places its ranks by this resource: another group's node must not offer it
    spec = {"a": {"hosts": ["spark1", "spark2"], "profile": "vr"}, "b": {"hosts": ["thor1"], "profile": "v1"}}
    assert plan_of("spark2", spec)["ray_resources"] == {"group_a": 1}
    assert plan_of("thor1", spec)["ray_resources"] == {"group_b": 1}
    assert plan_of("thor2", spec)["ray_resources"] == {}


PINNED = "nvcr.io/nvidia/vllm@sha256:" + "c" * 64


@pytest.mark.parametrize("spec, host, want", [
    # two replicas of one release on the container runtime: thor1 builds the image, thor2 copies it from thor1
    ({"sparks": {"group": "serve_nodes"}, "pair": {"hosts": ["thor1", "thor2"], "profile": "v1", "replicas": 2,
                                                   "runtime": "container"}},
     "thor2", {"ref": "localhost/llmfleet-engine:r-vl", "build": True, "source": "thor1", "source_ip": "10.1.0.3",
               "python": "/opt/llmfleet/venvs/current/bin/python"}),
    # one group over two nodes: its first node (inventory order) is the source, also of itself
    ({"pair": {"hosts": ["thor2", "thor1"], "profile": "vl", "runtime": "container"}},
     "thor1", {"source": "thor1", "source_ip": "10.1.0.3"}),
    # another release is another image: each group builds its own
    ({"a": {"hosts": ["thor1"], "profile": "v1", "runtime": "container"},
      "b": {"hosts": ["thor2"], "profile": "v1", "runtime": "container", "release": "r-2"}},
     "thor2", {"ref": "localhost/llmfleet-engine:r-2", "source": "thor2", "source_ip": "10.1.0.4"}),
    # the same release on another container engine is another store: not copied across
    ({"a": {"hosts": ["thor1"], "profile": "v1", "runtime": "container"},
      "b": {"hosts": ["thor2"], "profile": "v1", "runtime": "container", "container_engine": "docker"}},
     "thor2", {"engine": "docker", "source": "thor2", "source_ip": "10.1.0.4"}),
    # a pinned image is pulled once, by its source, and copied as a built one; the engine on the image's PATH
    ({"pair": {"hosts": ["thor1", "thor2"], "profile": "v1", "replicas": 2, "runtime": "container", "image": PINNED}},
     "thor2", {"ref": PINNED, "build": False, "source": "thor1", "source_ip": "10.1.0.3", "python": "python3",
               "commands": {"vllm": {"executable": "vllm", "help": ["vllm", "serve", "--help=all"]},
                            "sglang": {"executable": "python3", "help": ["python3", "-m", "sglang.launch_server", "--help"]}}}),
])
def test_a_built_image_has_one_source_per_cluster_that_its_peers_copy_from(spec, host, want):
    container = plan_of(host, spec)["serve"]["container"]
    assert {k: container[k] for k in want} == want


def test_a_venv_group_has_no_container_part():
    assert plan_of("spark1", TWO)["serve"]["container"] == {}


@pytest.mark.parametrize("hosts, want", [
    # TP 2 over the Sparks' RoCE: NCCL's IB verbs need the RDMA devices inside the container
    (["spark1", "spark2"], ["/dev/infiniband"]),
    # the Thors have no RoCE (platforms.py): a TP 2 group there runs over sockets, no device
    (["thor1", "thor2"], []),
])
def test_a_container_group_on_roce_gets_the_rdma_devices(hosts, want):
    spec = {"g": {"hosts": hosts, "profile": "vg", "runtime": "container", "image": PINNED}}
    extra = {"all": {"llmfleet_allow_tp_over_sockets": True}}
    container = plan_of(hosts[1], spec, **extra)["serve"]["container"]
    assert container["devices"] == want


@pytest.mark.parametrize("spec, extra, host, want", [
    # the source of a built image authorizes its copiers' keys, in its own authorized_keys file
    ({"pair": {"hosts": ["thor1", "thor2"], "profile": "v1", "replicas": 2, "runtime": "container"}}, {},
     "thor1", {"file": "/root/.ssh/authorized_keys", "hosts": ["thor2"]}),
    # a copier authorizes none; the inventory names the file (the sim: authorized_keys2)
    ({"pair": {"hosts": ["thor1", "thor2"], "profile": "v1", "replicas": 2, "runtime": "container"}},
     {"all": {"serve_image_authorized_keys": "/root/.ssh/authorized_keys2"}},
     "thor2", {"file": "/root/.ssh/authorized_keys2", "hosts": []}),
    # two groups of one release and engine: one source for both; another release is another source
    ({"a": {"hosts": ["thor2"], "profile": "v1", "runtime": "container"},
      "b": {"hosts": ["thor1"], "profile": "v1", "runtime": "container"},
      "c": {"hosts": ["spark1"], "profile": "v1", "runtime": "container", "release": "r-2"}}, {},
     "thor1", {"file": "/root/.ssh/authorized_keys", "hosts": ["thor2"]}),
    # venv groups only: nobody copies
    (None, {}, "spark1", {"file": "/root/.ssh/authorized_keys", "hosts": []}),
])
def test_the_owned_image_keys_are_the_nodes_that_copy_from_this_one(spec, extra, host, want):
    assert plan_of(host, spec, **extra)["owned"]["image_keys"] == want


def test_a_copier_writes_its_key_into_the_sources_authorized_keys_file():
    spec = {"pair": {"hosts": ["thor1", "thor2"], "profile": "v1", "replicas": 2, "runtime": "container"}}
    plan = plan_of("thor2", spec, thor1={"serve_image_authorized_keys": "/root/.ssh/keys-of-thor1"})
    assert plan["serve"]["container"]["source_authorized_keys"] == "/root/.ssh/keys-of-thor1"


def test_emulated_nodes_of_one_machine_share_its_authorized_keys_so_each_keeps_every_copier():
    """thor1 and thor2 emulated on one machine: one authorized_keys file, so thor2's sweep must keep the
    key thor1 authorizes for thor2 (a per-node set would have each node remove the other's)."""
    spec = {"pair": {"hosts": ["thor1", "thor2"], "profile": "v1", "replicas": 2, "runtime": "container"}}
    for host in ("thor1", "thor2"):
        assert plan_of(host, spec, **ONE_MACHINE)["owned"]["image_keys"]["hosts"] == ["thor2"], host


@pytest.mark.parametrize("extra, want", [
    ({}, 1),                                                            # llmfleet_gpus_per_node's default
    ({"all": {"llmfleet_gpus_per_node": 4}}, 4),
    ({"all": {"llmfleet_gpus_per_node": 4, "ray_node_num_gpus": 0}}, 0),  # engines outside Ray: Ray offers none
    ({"all": {"ray_node_num_gpus": "2"}}, 2),                            # -e gives strings
])
def test_the_gpus_a_nodes_ray_offers(extra, want):
    assert plan_of("thor1", **extra)["ray_num_gpus"] == want  # a Ray node that serves nothing (no layout to fit)


def test_a_gpu_count_that_is_not_one_stops_naming_host_and_variable():
    with pytest.raises(cp.PlanError, match=r"^spark2: ray_node_num_gpus -1 is not a GPU count"):
        plan_of("spark2", all={"ray_node_num_gpus": -1})


def test_the_audit_regex_is_the_inventorys_else_the_default():
    assert plan_of("spark2")["ray_audit_vars_regex"] == cp.DEFAULT_RAY_AUDIT_VARS_REGEX
    assert plan_of("spark2", all={"ray_node_audit_vars_regex": "^NCCL_"})["ray_audit_vars_regex"] == "^NCCL_"


@pytest.mark.parametrize("extra, want", [
    # the Ray head at its management address, Prometheus's default port
    ({"spark1": {"ansible_host": "192.0.2.1"}},
     {"server": "spark1", "prometheus_port": 9090, "prometheus_url": "http://192.0.2.1:9090"}),
    ({"all": {"monitoring_server": "thor2", "monitoring_prometheus_port": "9091"}},
     {"server": "thor2", "prometheus_port": 9091, "prometheus_url": "http://thor2:9091"}),
    # the role's default, empty: the Ray head
    ({"all": {"monitoring_server": ""}}, {"server": "spark1", "prometheus_port": 9090, "prometheus_url": "http://spark1:9090"}),
    # a node outside the cluster: no URL (the monitoring role stops on it)
    ({"all": {"monitoring_server": "elsewhere"}}, {"server": "elsewhere", "prometheus_port": 9090, "prometheus_url": ""}),
])
def test_the_clusters_prometheus(extra, want):
    assert plan_of("thor1", **extra)["monitoring"] == want


def test_rays_temp_dir_is_the_inventorys_else_the_default():
    # ray_node's --temp-dir and preflight's stale-session check read it
    assert plan_of("spark2")["ray_temp_dir"] == "/var/lib/llmfleet/ray"
    assert plan_of("spark2", all={"ray_node_temp_dir": "/srv/ray"})["ray_temp_dir"] == "/srv/ray"


@pytest.mark.parametrize("role, name, default", [
    ("ray_node", "ray_node_temp_dir", cp.DEFAULT_RAY_TEMP_DIR),
    ("ray_node", "ray_node_audit_vars_regex", cp.DEFAULT_RAY_AUDIT_VARS_REGEX),
    ("monitoring", "monitoring_prometheus_port", cp.DEFAULT_PROMETHEUS_PORT),
    ("monitoring", "monitoring_server", ""),  # empty: the plan's fallback, the Ray head
])
def test_a_roles_documented_default_is_the_plans(role, name, default):
    # the roles read these through the plan; their defaults/main.yml keeps the value an operator reads
    # (and the argument specs): both must say the same, or the docs lie (validate's copy of the audit
    # pattern had drifted)
    root = os.path.dirname(os.path.dirname(os.path.abspath(cp.__file__)))
    with open(os.path.join(os.path.dirname(root), 'roles', role, 'defaults', 'main.yml'), encoding='utf-8') as fh:
        assert yaml.safe_load(fh)[name] == default
