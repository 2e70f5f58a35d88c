"""Serving groups: membership, the per-group plan, engine variants and endpoint lines."""
import pytest

from ansible_collections.llmfleet.cluster.plugins.module_utils import serve_groups as sg

HOSTS = ["spark1", "spark2", "thor1", "thor2"]
GROUPS = {"all": HOSTS, "gb10": ["spark1", "spark2"], "thor": ["thor2", "thor1"], "serve_nodes": ["spark1", "spark2"]}
PROFILES = {
    "vl": {"name": "vl", "engine": "vllm", "backend": "mp", "device": "cpu", "served_model_name": "tiny-llama",
           "model": "/m", "tensor_parallel_size": 2, "pipeline_parallel_size": 1},
    "sg": {"name": "sg", "engine": "sglang", "backend": "native", "device": "cpu", "served_model_name": None,
           "model": "/opt/m/tiny", "tensor_parallel_size": 2, "pipeline_parallel_size": 1},
}
DEFAULTS = {"profile": "vl", "port": None, "release": "r-vllm"}
TWO = {"sparks": {"group": "serve_nodes"},
       "thors": {"hosts": ["thor2", "thor1"], "profile": "sg", "port": 8001, "release": "r-sglang"}}


def plan(spec, defaults=None):
    return sg.plan(spec, HOSTS, GROUPS, ["spark1", "spark2"], PROFILES, DEFAULTS if defaults is None else defaults)


def test_no_groups_is_one_default_group_as_before():
    (g,) = plan(None)
    assert g == {"name": "default", "hosts": ["spark1", "spark2"], "head": "spark1", "nnodes": 2, "profile": "vl",
                 "engine": "vllm", "backend": "mp", "device": "cpu", "served_model_name": "tiny-llama",
                 "tensor_parallel_size": 2, "pipeline_parallel_size": 1, "port": 8000,
                 "unit": "llmfleet-serve-tiny-llama", "release": "r-vllm", "url": "",
                 "replica": 1, "replicas": 1, "model": "/m", "runtime": "venv", "container": {}}


# ---- replicas: N copies of a layout on disjoint slices of the group's hosts
SMOL = {"name": "smol", "engine": "vllm", "backend": "mp", "device": "cpu", "served_model_name": "smol",
        "model": "/m/smol", "tensor_parallel_size": 1, "pipeline_parallel_size": 1}


def test_replicas_split_the_hosts_in_inventory_order_under_one_name():
    spec = {"smol": {"hosts": ["thor2", "spark2", "spark1", "thor1"], "profile": "smol", "replicas": 2}}
    one, two = sg.plan(spec, HOSTS, GROUPS, [], dict(PROFILES, smol=SMOL), DEFAULTS,
                       {h: "10.0.1.%d" % i for i, h in enumerate(HOSTS, 1)})
    assert (one["name"], one["hosts"], one["replica"], one["replicas"]) == ("smol-1", ["spark1", "spark2"], 1, 2)
    assert (two["name"], two["hosts"], two["head"], two["url"]) == ("smol-2", ["thor1", "thor2"], "thor1", "http://10.0.1.3:8000")
    assert one["unit"] == two["unit"] == "llmfleet-serve-smol" and one["served_model_name"] == two["served_model_name"]
    assert sg.entry(spec, "smol-2") == ("smol", spec["smol"], 2, 2) and sg.entry(spec, "smol") == ("smol", spec["smol"], 1, 1)
    assert sg.members({"solo": {"group": "gb10", "replicas": 1}}, HOSTS, GROUPS, []) == {"solo": ["spark1", "spark2"]}


@pytest.mark.parametrize("spec, message", [
    ({"a": {"hosts": ["spark1", "spark2", "thor1"], "replicas": 2}},
     "llmfleet_serve_groups.a.replicas: 2 replicas do not split its 3 host(s) (spark1, spark2, thor1) into equal slices"),
    ({"a": {"group": "gb10", "replicas": 0}}, "llmfleet_serve_groups.a.replicas: 0 is not a count"),
    ({"a": {"group": "gb10", "replicas": "two"}}, "llmfleet_serve_groups.a.replicas: 'two' is not a count"),
    ({"a": {"group": "gb10", "replicas": 2}, "a-1": {"hosts": ["thor1"]}}, "its replica a-1 has the name of another group"),
])
def test_replicas_that_cannot_split_stop_naming_group_and_value(spec, message):
    with pytest.raises(sg.ServeGroupError) as err:
        sg.members(spec, HOSTS, GROUPS, [])
    assert message in str(err.value)


def test_groups_sharing_a_served_name_must_serve_one_model_on_one_engine():
    other = dict(SMOL, model="/m/other")
    spec = {"a": {"group": "gb10", "profile": "smol"}, "b": {"group": "thor", "profile": "other", "release": "r2"}}
    with pytest.raises(sg.ServeGroupError) as err:
        sg.plan(spec, HOSTS, GROUPS, [], dict(PROFILES, smol=SMOL, other=other), DEFAULTS)
    assert "groups a, b serve one model name 'smol' but a: /m/smol on vllm, b: /m/other on vllm" in str(err.value)
    # the same model by hand in two groups: two workers of one name behind the gateway
    ok = sg.plan(dict(spec, b=dict(spec["b"], profile="smol")), HOSTS, GROUPS, [], dict(PROFILES, smol=SMOL), DEFAULTS)
    assert [g["served_model_name"] for g in ok] == ["smol", "smol"]


@pytest.mark.parametrize("prefix,names,want", [
    # the group's own unit (its served name under the shipped prefix)
    (None, {}, ("llmfleet-serve-tiny-llama", "llmfleet-serve--opt-m-tiny")),
    # serve_unit_prefix renames every unit named after its served model
    ("lab-engine", {}, ("lab-engine-tiny-llama", "lab-engine--opt-m-tiny")),
    # serve_unit_name of a group's head names that group's unit (and only that group's)
    ("lab-engine", {"thor1": "my-api", "spark2": "not-a-head"}, ("lab-engine-tiny-llama", "my-api")),
])
def test_the_unit_is_named_once_here(prefix, names, want):
    sparks, thors = sg.plan(TWO, HOSTS, GROUPS, [], PROFILES, dict(DEFAULTS, unit_prefix=prefix), None, names)
    assert (sparks["unit"], thors["unit"]) == want


def test_two_groups_two_engines():
    sparks, thors = sg.plan(TWO, HOSTS, GROUPS, [], PROFILES, DEFAULTS, {"spark1": "10.0.1.1", "thor1": "10.0.1.3"})
    assert (sparks["url"], thors["url"]) == ("http://10.0.1.1:8000", "http://10.0.1.3:8001")
    assert (sparks["name"], sparks["engine"], sparks["port"], sparks["release"]) == ("sparks", "vllm", 8000, "r-vllm")
    # inventory order, head first; the served name falls back to the model; unit from it
    assert (thors["hosts"], thors["head"], thors["engine"], thors["port"]) == (["thor1", "thor2"], "thor1", "sglang", 8001)
    assert thors["unit"] == "llmfleet-serve--opt-m-tiny" and thors["release"] == "r-sglang"
    assert sg.group_of([sparks, thors], "thor2") is thors and sg.group_of([sparks, thors], "nobody") is None


@pytest.mark.parametrize("spec, message", [
    ({"a": {"hosts": ["spark1"], "group": "gb10"}}, "llmfleet_serve_groups.a: give exactly one of hosts"),
    ({"a": {"profile": "vl"}}, "llmfleet_serve_groups.a: give exactly one of hosts"),
    ({"a": {"group": "nope"}}, "llmfleet_serve_groups.a.group: no inventory group 'nope'"),
    ({"a": {"hosts": ["spark9"]}}, "llmfleet_serve_groups.a.hosts: spark9 not in this cluster"),
    ({"a": {"hosts": []}}, "expected a non-empty list of host names"),
    ({"a": {"group": "gb10"}, "b": {"hosts": ["spark2", "thor1"]}},
     "llmfleet_serve_groups.b: host spark2 is already in group a (a node serves one group)"),
    ({"a": {"group": "gb10", "size": 2}}, "unknown key(s) size"),
    ({"a b": {"group": "gb10"}}, "llmfleet_serve_groups.a b: the name must be"),
    (["gb10"], "llmfleet_serve_groups: expected a mapping"),
])
def test_membership_errors_name_group_key_and_fix(spec, message):
    with pytest.raises(sg.ServeGroupError) as err:
        sg.members(spec, HOSTS, GROUPS, [])
    assert message in str(err.value) and "fix llmfleet_serve_groups" in str(err.value)


@pytest.mark.parametrize("spec, message", [
    ({"a": {"group": "gb10", "engine": "sglang"}},
     "llmfleet_serve_groups.a.engine: 'sglang', but profile vl is served by vllm"),
    ({"a": {"group": "gb10", "port": 70000}}, "llmfleet_serve_groups.a.port: 70000 is not a TCP port"),
    ({"a": {"group": "gb10", "unit": "bad unit"}}, "llmfleet_serve_groups.a.unit: 'bad unit' is not a systemd unit name"),
    ({"a": {"group": "gb10", "profile": "zz"}}, "llmfleet_serve_groups.a.profile: 'zz' was not resolved"),
    # one release directory cannot hold two engines
    ({"a": {"group": "gb10"}, "b": {"group": "thor", "profile": "sg"}},
     "groups a, b run sglang and vllm under one release 'r-vllm'"),
])
def test_plan_errors(spec, message):
    with pytest.raises(sg.ServeGroupError) as err:
        plan(spec)
    assert message in str(err.value)


def test_no_profile_anywhere():
    with pytest.raises(sg.ServeGroupError) as err:
        plan(None, {"profile": None})
    assert "llmfleet_serve_profile: no profile" in str(err.value)


@pytest.mark.parametrize("engine, device, arch, variant", [
    ("vllm", "cpu", "sm_121", "cpu"),
    ("vllm", "gpu", "sm_121", "sm_121"),
    ("vllm", "gpu", "sm_110", "sm_110"),
    ("sglang", "cpu", "sm_110", "sglang_cpu"),
    ("sglang", "gpu", "sm_121", "sglang_sm_121"),
    ("sglang", "gpu", "sm_110", "sglang_sm_110"),
])
def test_variant_follows_engine_and_arch(engine, device, arch, variant):
    assert sg.variant_name(engine, device, arch) == variant


def test_every_variant_named_by_the_rule_exists():
    import os
    here = os.path.dirname(os.path.abspath(sg.__file__))
    variants = os.path.join(here, "..", "..", "roles", "python_env", "vars", "variants")
    for engine, device, arch in [("vllm", "cpu", None), ("sglang", "cpu", None), ("vllm", "gpu", "sm_121"),
                                 ("vllm", "gpu", "sm_110"), ("sglang", "gpu", "sm_121"), ("sglang", "gpu", "sm_110")]:
        assert os.path.isfile(os.path.join(variants, sg.variant_name(engine, device, arch) + ".yml"))


def test_variant_needs_an_arch_on_gpu():
    with pytest.raises(sg.ServeGroupError, match="set llmfleet_gpu_arch"):
        sg.variant_name("sglang", "gpu", None)


# ---- runtime: venv (default) or container
DIGEST = "nvcr.io/nvidia/vllm@sha256:" + "0f" * 32
RAY = dict(PROFILES["vl"], name="ray", backend="ray")


@pytest.mark.parametrize("entry, container", [
    ({"runtime": "container"}, {"engine": "podman", "image": "", "build": True}),
    ({"runtime": "container", "image": DIGEST, "container_engine": "docker"},
     {"engine": "docker", "image": DIGEST, "build": False}),
    ({"runtime": "venv"}, {}),
])
def test_a_group_runs_from_its_venv_or_a_container(entry, container):
    (g,) = plan({"sparks": dict({"group": "gb10"}, **entry)})
    assert g["container"] == container and g["runtime"] == ("container" if container else "venv")


@pytest.mark.parametrize("entry, message", [
    ({"runtime": "docker"}, "llmfleet_serve_groups.a.runtime: 'docker' is not a runtime (one of: venv, container)"),
    ({"runtime": "container", "image": "nvcr.io/nvidia/vllm:25.09-py3"},
     "llmfleet_serve_groups.a.image: 'nvcr.io/nvidia/vllm:25.09-py3' is not pinned by digest"),
    ({"runtime": "container", "container_engine": "lxc"}, "llmfleet_serve_groups.a.container_engine: 'lxc' is not one of"),
    ({"image": DIGEST}, "llmfleet_serve_groups.a: image set, but runtime is venv"),
    ({"runtime": "container", "profile": "ray"}, "profile ray runs on the Ray backend"),
])
def test_a_container_group_that_cannot_run_stops_naming_group_key_and_value(entry, message):
    with pytest.raises(sg.ServeGroupError) as err:
        sg.plan({"a": dict({"group": "gb10"}, **entry)}, HOSTS, GROUPS, ["spark1", "spark2"], dict(PROFILES, ray=RAY), DEFAULTS)
    assert message in str(err.value)
