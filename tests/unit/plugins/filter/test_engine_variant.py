"""The engine_variant filter on the sim's inventory shape: each node's variant file follows its serving group's
engine and device, its arch, and the engine version its release names (module_utils/engine_release.py)."""
import os

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.llmfleet.cluster.plugins.plugin_utils.serve_group_inputs import engine_variant

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
with open(os.path.join(ROOT, "inventories", "sim", "group_vars", "all.yml"), encoding="utf-8") as _handle:
    SIM = yaml.safe_load(_handle)
HOSTS = ["spark1", "spark2", "thor1", "thor2", "spark3", "thor3"]
GROUPS = {"all": HOSTS, "gb10": ["spark1", "spark2", "spark3"], "thor": ["thor1", "thor2", "thor3"], "ray_head": ["spark1"],
          "ray_workers": HOSTS[1:], "serve_nodes": ["spark1", "spark2"]}
KEYS = ("llmfleet_cluster", "llmfleet_engine", "llmfleet_release", "llmfleet_serve_profile", "llmfleet_serve_groups")


def sim(**changes):
    common = {k: SIM[k] for k in KEYS}
    arch = {h: "sm_121" if h.startswith("spark") else "sm_110" for h in HOSTS}
    return {h: {**common, "llmfleet_gpu_arch": arch[h], **changes} for h in HOSTS}


@pytest.mark.parametrize("changes, release, variants", [
    # the sim as it is: vLLM 0.32.0 on the Sparks and the real model's replicas (cpu.yml), SGLang on the
    # Thors (their group's own release)
    ({}, None, {"spark1": "cpu", "spark2": "cpu", "thor1": "sglang_cpu", "thor2": "sglang_cpu", "spark3": "cpu",
                "thor3": "cpu"}),
    # -e llmfleet_release=sim-vllm-0.31.0-cpu: the Sparks install 0.31.0, the Thors keep their group's release
    ({"llmfleet_release": "sim-vllm-0.31.0-cpu"}, None,
     {"spark1": "cpu-vllm-0.31.0", "spark2": "cpu-vllm-0.31.0", "thor1": "sglang_cpu", "thor2": "sglang_cpu",
      "thor3": "cpu-vllm-0.31.0"}),
    # the release to install given by the caller (upgrade staging)
    ({}, "sim-vllm-0.31.0-cpu", {"spark1": "cpu-vllm-0.31.0", "spark2": "cpu-vllm-0.31.0"}),
    ({"llmfleet_release": "sim-vllm-0.31.0-cpu"}, "sim-vllm-0.32.0-cpu-broken", {"spark1": "cpu"}),
])
def test_the_release_picks_the_engine_version(changes, release, variants):
    hostvars = sim(**changes)
    got = {h: engine_variant(h, GROUPS, hostvars, release=release) for h in variants}
    assert got == variants


def test_a_version_no_file_provides_fails_naming_host_variable_and_versions():
    with pytest.raises(AnsibleFilterError) as err:
        engine_variant("spark2", GROUPS, sim(llmfleet_release="sim-vllm-0.30.0-cpu"), None)
    assert str(err.value).startswith("spark2: llmfleet_release 'sim-vllm-0.30.0-cpu' names vllm 0.30.0, which no "
                                     "python_env variant for cpu provides (available: vllm 0.31.0 "
                                     "(cpu-vllm-0.31.0.yml), vllm 0.32.0 (cpu.yml)); fix: ")


def test_a_groups_own_release_is_named_as_such():
    hostvars = sim()
    for h in HOSTS:
        hostvars[h]["llmfleet_serve_groups"] = {"sparks": {"group": "serve_nodes"},
                                                "thors": {"group": "thor", "profile": "sim-tiny-llama-sglang",
                                                          "release": "sim-sglang-0.4.0-cpu"}}
    with pytest.raises(AnsibleFilterError, match=r"^thor1: llmfleet_serve_groups.thors.release 'sim-sglang-0.4.0-cpu'"):
        engine_variant("thor1", GROUPS, hostvars)


def test_a_site_variant_dir(tmp_path):
    """llmfleet_variants_dir (argument, else the inventory's) holds the files chosen from."""
    for name, release in (("cpu", "vllm-0.40.0"), ("cpu-vllm-0.41.0", "vllm-0.41.0")):
        (tmp_path / (name + ".yml")).write_text(yaml.safe_dump({"python_env_variant": {"release": release}}))
    hostvars = sim(llmfleet_release="site-vllm-0.41.0")
    assert engine_variant("spark1", GROUPS, hostvars, variant_dir=str(tmp_path)) == "cpu-vllm-0.41.0"
    hostvars["spark1"]["llmfleet_variants_dir"] = str(tmp_path)
    assert engine_variant("spark1", GROUPS, hostvars) == "cpu-vllm-0.41.0"
    with pytest.raises(AnsibleFilterError, match="available: vllm 0.31.0"):
        engine_variant("spark2", GROUPS, hostvars)  # spark2 reads the shipped files: no 0.41.0 there
    with pytest.raises(AnsibleFilterError, match="cannot read the variants directory"):
        engine_variant("spark1", GROUPS, hostvars, variant_dir=str(tmp_path / "nope"))
