"""Data table for the gate's rule table (plugin_utils/gate_rules.py), on the real role specs and variants.

Each case starts from a good 4-node lab (spark1/spark2 gb10, thor1/thor2 thor, head spark1, release
vllm-0.32.0, profile pp4) and changes variables; ``present`` are substrings of the report's lines,
``absent`` must appear in no FAIL/WARN line.
"""

from __future__ import annotations

import copy
import os

import pytest

from ansible_collections.llmfleet.cluster.plugins.action.inventory_check import (
    PATCHES_DIR,
    ROLES_DIR,
    VARIANTS_DIR,
    load_patches,
    load_role_specs,
    load_variants,
)
from ansible_collections.llmfleet.cluster.plugins.plugin_utils import gate_rules
from ansible_collections.llmfleet.cluster.plugins.plugin_utils.inventory_checks import check_inventory

SPECS = load_role_specs(ROLES_DIR)
VARIANTS = load_variants(VARIANTS_DIR)
PATCHES = load_patches(PATCHES_DIR)
PROFILES = {"pp4": {"engine": "vllm", "tensor_parallel_size": 1, "pipeline_parallel_size": 4},
            "sg-pp4": {"engine": "sglang", "tensor_parallel_size": 1, "pipeline_parallel_size": 4}}
BASE = {
    "spark1": {"ansible_host": "192.0.2.11", "llmfleet_fabric_ip": "10.9.0.11", "llmfleet_gpu_arch": "sm_121"},
    "spark2": {"ansible_host": "192.0.2.12", "llmfleet_fabric_ip": "10.9.0.12", "llmfleet_gpu_arch": "sm_121"},
    "thor1": {"ansible_host": "192.0.2.13", "llmfleet_fabric_ip": "10.9.0.13", "llmfleet_gpu_arch": "sm_110"},
    "thor2": {"ansible_host": "192.0.2.14", "llmfleet_fabric_ip": "10.9.0.14", "llmfleet_gpu_arch": "sm_110"},
}
COMMON = {"llmfleet_engine": "vllm", "llmfleet_release": "vllm-0.32.0", "llmfleet_serve_profile": "pp4"}
GROUPS = {"gb10": ["spark1", "spark2"], "thor": ["thor1", "thor2"], "ray_head": ["spark1"],
          "ray_workers": ["spark2", "thor1", "thor2"]}
ALL = list(BASE)


def lab(common=None, **hosts):
    hostvars = {h: {**COMMON, **(common or {}), **v} for h, v in copy.deepcopy(BASE).items()}
    for host, changes in hosts.items():
        hostvars[host].update(changes)
    return hostvars


CASES = [
    # (id, hostvars, groups override, present, absent)
    ("good", lab(), None, ["ok   role argument specs", "ok   no port collisions on a node",
                           "ok   engine, python_env variant and profile agree"], ["FAIL", "WARN"]),
    # role argument specs (ansible-core's ArgumentSpecValidator on the real specs)
    ("spec choices", lab(thor1={"fabric_transport": "rdma"}), None,
     ["FAIL thor1: fabric_transport 'rdma' is refused by role fabric's argument spec",
      "set fabric_transport to one of auto, roce, socket"], []),
    ("spec type", lab(common={"serve_port": "eight thousand"}), None,
     ["FAIL spark1, spark2, thor1, thor2: serve_port 'eight thousand' is refused by role serve's argument spec",
      "set serve_port to a int"], []),
    ("spec list elements", lab(spark2={"ray_node_agent_ports": ["a"]}), None,
     ["FAIL spark2: ray_node_agent_ports"], []),
    # paths, names, ranges
    ("relative node path", lab(spark1={"common_prefix": "opt/llmfleet"}), None,
     ["FAIL spark1: common_prefix 'opt/llmfleet' is not an absolute path"], []),
    ("controller path may use ~", lab(common={"python_env_controller_cache": "~/.cache/llmfleet"}), None,
     [], ["FAIL"]),
    ("unsafe user", lab(common={"common_service_user": "LLM Fleet"}), None,
     ["common_service_user 'LLM Fleet' is not a safe name: it is used as a Linux account name"], []),
    ("unsafe release", lab(common={"llmfleet_release": "vllm 0.32.0"}), None,
     ["llmfleet_release 'vllm 0.32.0' is not a safe name: it is used as a venv directory name"], []),
    ("port out of range", lab(spark1={"serve_port": 70000}), None,
     ["FAIL spark1: serve_port 70000 is out of range for a TCP port; set an integer from 1 to 65535"], []),
    ("mtu out of range", lab(common={"fabric_mtu": 12000}), None,
     ["fabric_mtu 12000 is out of range for an Ethernet MTU"], []),
    # addresses
    ("link-local fabric accepted", lab(**{h: {"llmfleet_fabric_ip": f"169.254.7.{i}"} for i, h in enumerate(ALL, 1)}),
     None, ["ok   fabric IPs valid and unique", "ok   one fabric subnet per cluster"], ["FAIL"]),
    ("link-local management refused", lab(thor2={"ansible_host": "169.254.1.2"}), None,
     ["FAIL thor2: ansible_host '169.254.1.2' is link-local (169.254/16): the controller's SSH (management) "
      "address must be routable; a link-local address is valid only on its own cable"], []),
    ("link-local API bind refused", lab(common={"serve_host": "169.254.9.9"}), None,
     ["serve_host '169.254.9.9' is link-local"], []),
    ("duplicate management address", lab(thor2={"ansible_host": "192.0.2.13"}), None,
     ["FAIL thor2: ansible_host '192.0.2.13' duplicates thor1's"], []),
    ("fabric on the management NIC", lab(spark1={"llmfleet_fabric_ip": "192.0.2.11"}), None,
     ["FAIL spark1: llmfleet_fabric_ip '192.0.2.11' is also ansible_host", "fabric_netplan_manage: false"], []),
    # inventories/lab today: the fabric is the LAN, so the fabric role keeps its hands off that NIC
    ("fabric on the LAN, netplan off", lab(common={"fabric_netplan_manage": False},
                                           **{h: {"llmfleet_fabric_ip": v["ansible_host"]} for h, v in BASE.items()}),
     None, ["ok   fabric NIC is not the management NIC"], ["FAIL"]),
    ("two fabric subnets", lab(thor2={"llmfleet_fabric_ip": "10.9.1.14"}), None,
     ["FAIL cluster 'default': llmfleet_fabric_ip spans 2 subnets (10.9.0.0/24: spark1, spark2, thor1; "
      "10.9.1.0/24: thor2)"], []),
    ("two fabric subnets, routed", lab(common={"llmfleet_fabric_routed": True},
                                       thor2={"llmfleet_fabric_ip": "10.9.1.14"}), None, [], ["FAIL"]),
    ("loopback fabric, several hosts", lab(spark1={"llmfleet_fabric_ip": "127.0.0.2"}), None,
     ["FAIL spark1: llmfleet_fabric_ip '127.0.0.2' is a loopback address in cluster 'default' of 4 hosts"], []),
    ("loopback fabric, one host", lab(spark1={"llmfleet_fabric_ip": "127.0.0.2",
                                              "llmfleet_serve_profile": None}),
     {"ray_head": ["spark1"], "ray_workers": []}, ["ok   loopback fabric only on one host"], ["FAIL"]),
    ("127.0.0.1 on one host", lab(spark1={"llmfleet_fabric_ip": "127.0.0.1"}),
     {"ray_head": ["spark1"], "ray_workers": []}, ["Ray replaces --node-ip-address=127.0.0.1"], []),
    # MTU, ports
    ("mtu differs", lab(thor1={"fabric_mtu": 1500}), None,
     ["FAIL spark1, spark2, thor1, thor2: fabric_mtu differs along the fabric of cluster 'default' "
      "(spark1=9000, spark2=9000, thor1=1500, thor2=9000)"], []),
    ("API on Ray's port", lab(spark2={"serve_port": 6379}), None,
     ["FAIL spark2: port 6379 is used by OpenAI API (serve_port) and Ray GCS (ray_node_port)"], []),
    ("rendezvous inside Ray's worker range", lab(common={"serve_master_port": 10500}), None,
     ["port 10500 is used by engine rendezvous (serve_master_port) and Ray workers "
      "(ray_node_min_worker_port..ray_node_max_worker_port = 10002..10999)"], []),
    ("alias differs", lab(spark1={"ray_node_port": 6390, "serve_ray_port": 6379}), None,
     ["FAIL spark1: serve_ray_port 6379 differs from ray_node_port 6390"], []),
    # engine / variant / profile
    # the release selects the engine version: a version no variant file provides fails, listing those there are
    ("release names a version no variant provides", lab(common={"llmfleet_release": "vllm-0.18.1"}), None,
     ["FAIL spark1, spark2: llmfleet_release 'vllm-0.18.1' names vllm 0.18.1, which no python_env variant for "
      "sm_121 provides (available: vllm 0.32.0 (sm_121.yml)); set llmfleet_release to a release of an available "
      "version (e.g. vllm-0.32.0), or add the variant file sm_121-vllm-0.18.1.yml",
      "FAIL thor1, thor2: llmfleet_release 'vllm-0.18.1' names vllm 0.18.1, which no python_env variant for sm_110"],
     []),
    ("release names no version", lab(common={"llmfleet_release": "prod-2026-11"}), None,
     ["llmfleet_release 'prod-2026-11' does not name what variant 'sm_121' installs (vllm-0.32.0)"], []),
    ("release with a version of the default file", lab(common={"llmfleet_release": "site-vllm-0.32.0-fix1"}), None,
     ["ok   engine, python_env variant and profile agree"], ["FAIL"]),
    ("engine sglang picks the sglang variant", lab(common={"llmfleet_engine": "sglang", "llmfleet_serve_profile": "sg-pp4",
                                                           "llmfleet_release": "sglang-0.5.17"}), None,
     ["ok   engine, python_env variant and profile agree"], ["variant"]),
    ("engine sglang with a vLLM profile", lab(common={"llmfleet_engine": "sglang", "llmfleet_release": "sglang-0.5.17"}),
     None, ["llmfleet_engine 'sglang' but serve profile 'pp4' is for vllm"], []),
    ("variant of another engine", lab(common={"python_env_variant_name": "sglang_sm_121",
                                              "llmfleet_release": "sglang-0.5.17"}), None,
     ["llmfleet_engine 'vllm' but python_env variant 'sglang_sm_121' installs sglang"], []),
    ("missing variant warns", lab(common={"python_env_variant_name": "sm_90"}), None,
     ["WARN spark1, spark2, thor1, thor2: python_env variant 'sm_90' does not exist"], ["FAIL"]),
]


@pytest.mark.parametrize("hostvars, groups, present, absent", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_gate_rules(hostvars, groups, present, absent):
    report = check_inventory(hostvars, {**GROUPS, **(groups or {})}, profiles=PROFILES,
                             role_specs=SPECS, variants=VARIANTS, patches=PATCHES)
    lines = report.lines()
    for want in present:
        assert any(want in line for line in lines), f"{want!r} not in:\n" + "\n".join(lines)
    for unwanted in absent:
        assert not [ln for ln in lines if ln.startswith(("FAIL", "WARN")) and unwanted in ln], "\n".join(lines)


def test_cpu_profile_needs_the_cpu_variant():
    """The sim's real profile (device cpu): the variant follows the profile's device (cpu) as the
    python_env role chooses it; a GPU variant named by hand is refused (profiles read like the serve role)."""
    from ansible_collections.llmfleet.cluster.plugins.plugin_utils.profile_files import load_profile_dir
    profiles = load_profile_dir()
    hostvars = lab(common={"llmfleet_serve_profile": "sim-tiny-llama", "python_env_variant_name": "sm_121"})
    groups = {**GROUPS, "serve_nodes": ["spark1", "spark2"]}
    lines = check_inventory(hostvars, groups, profiles=profiles, role_specs=SPECS, variants=VARIANTS).lines()
    assert any("serve profile 'sim-tiny-llama' is for cpu but python_env variant 'sm_121' is a GPU build" in line
               for line in lines), lines
    for variant in ({}, {"python_env_variant_name": "cpu"}):
        hostvars = lab(common={"llmfleet_serve_profile": "sim-tiny-llama", **variant})
        lines = check_inventory(hostvars, groups, profiles=profiles, role_specs=SPECS, variants=VARIANTS).lines()
        assert not [line for line in lines if line.startswith("FAIL")], lines


@pytest.mark.parametrize("release, variant_name, present", [
    # the sim's releases (profile sim-tiny-llama, device cpu): each real engine version its own file
    ("sim-vllm-0.32.0-cpu", None, []),
    ("sim-vllm-0.31.0-cpu", None, []),
    ("sim-vllm-0.32.0-cpu-broken", None, []),
    ("sim-vllm-0.30.0-cpu", None,
     ["FAIL spark1, spark2, thor1, thor2: llmfleet_release 'sim-vllm-0.30.0-cpu' names vllm 0.30.0, which no "
      "python_env variant for cpu provides (available: vllm 0.31.0 (cpu-vllm-0.31.0.yml), vllm 0.32.0 (cpu.yml)); "
      "set llmfleet_release to a release of an available version (e.g. sim-vllm-0.32.0-cpu), or add the variant "
      "file cpu-vllm-0.30.0.yml"]),
    # a variant named by hand stays that file: a release of another version does not name what it installs
    ("sim-vllm-0.31.0-cpu", "cpu",
     ["llmfleet_release 'sim-vllm-0.31.0-cpu' does not name what variant 'cpu' installs (vllm-0.32.0): the venv "
      "would be called one version and hold another; set llmfleet_release: vllm-0.32.0 (or a name containing it, "
      "e.g. site-vllm-0.32.0), or another version: vllm-0.31.0 (cpu-vllm-0.31.0)"]),
    ("sim-vllm-0.31.0-cpu", "cpu-vllm-0.31.0", []),
])
def test_the_release_selects_the_cpu_engine_version(release, variant_name, present):
    from ansible_collections.llmfleet.cluster.plugins.plugin_utils.profile_files import load_profile_dir
    common = {"llmfleet_serve_profile": "sim-tiny-llama", "llmfleet_release": release}
    if variant_name:
        common["python_env_variant_name"] = variant_name
    lines = check_inventory(lab(common=common), {**GROUPS, "serve_nodes": ["spark1", "spark2"]},
                            profiles=load_profile_dir(), role_specs=SPECS, variants=VARIANTS,
                            patches=PATCHES).lines()
    for want in present:
        assert any(want in line for line in lines), f"{want!r} not in:\n" + "\n".join(lines)
    if not present:
        assert "ok   engine, python_env variant and profile agree" in lines, lines
        assert not [line for line in lines if line.startswith(("FAIL", "WARN"))], lines


def test_a_site_variant_dir_is_where_the_release_picks_from(tmp_path):
    """llmfleet_variants_dir set in the inventory: the gate reads the versions there, as the plan does."""
    from ansible_collections.llmfleet.cluster.plugins.action.inventory_check import load_variant_dirs
    for name, release in (("sm_121", "vllm-0.40.0"), ("sm_121-vllm-0.41.0", "vllm-0.41.0")):
        (tmp_path / f"{name}.yml").write_text(
            f"python_env_variant: {{name: {name}, engine: vllm, arch: sm_121, release: {release}}}\n")
    hostvars = lab(common={"llmfleet_release": "site-vllm-0.41.0"},
                   spark1={"llmfleet_variants_dir": str(tmp_path)}, spark2={"llmfleet_variants_dir": str(tmp_path)})
    report = check_inventory(hostvars, GROUPS, profiles=PROFILES, role_specs=SPECS, variants=VARIANTS,
                             patches=PATCHES, variant_dirs=load_variant_dirs(hostvars))
    lines = report.lines()
    assert not [ln for ln in lines if ln.startswith("FAIL") and "spark" in ln.split(":")[0]], lines
    # the Thors choose from the shipped files, which have no 0.41.0
    assert any(ln.startswith("FAIL thor1, thor2: llmfleet_release 'site-vllm-0.41.0' names vllm 0.41.0, which no "
                             "python_env variant for sm_110 provides") for ln in lines), lines


def test_inventory_profiles_are_read_like_shipped_ones():
    from ansible_collections.llmfleet.cluster.plugins.plugin_utils.profile_files import load_profile_dir
    profiles = load_profile_dir()
    groups = {**GROUPS, "serve_nodes": ["spark1", "spark2"]}
    good = {"mine": {"extends": "qwen3.5-122b-fp8-vllm-tp2", "args": {"--max-model-len": 8192}}}
    bad = {"mine": {"extends": "qwen3.5-122b-fp8-vllm-tp2", "args": {"--host": "0.0.0.0"}}}
    # the Thors stay Ray workers without offering their GPUs: TP 2 over Ray places on the Sparks only
    no_gpus = {"ray_node_num_gpus": 0}
    lines = check_inventory(lab(common={"llmfleet_serve_profile": "mine", "llmfleet_serve_profiles_extra": good},
                                thor1=no_gpus, thor2=no_gpus),
                            groups, profiles=profiles, role_specs=SPECS, variants=VARIANTS).lines()
    assert "ok   TP x PP matches the serving group's GPUs (default: TP 2 x PP 1 = 2 GPUs on spark1, spark2)" in lines
    assert not [line for line in lines if line.startswith("FAIL")], lines
    lines = check_inventory(lab(common={"llmfleet_serve_profile": "mine", "llmfleet_serve_profiles_extra": bad}),
                            groups, profiles=profiles, role_specs=SPECS, variants=VARIANTS).lines()
    assert any(line.startswith("FAIL spark1, spark2, thor1, thor2: llmfleet_serve_profiles_extra profile 'mine' is "
                               "not valid: profile 'mine': field 'args.--host': set by llmfleet") for line in lines), lines


def test_every_rule_is_documented_and_in_the_generated_table():
    keys = [r.key for r in gate_rules.RULES]
    assert len(keys) == len(set(keys))
    doc = os.path.join(os.path.dirname(ROLES_DIR), "docs", "gate-rules.md")
    with open(doc, encoding="utf-8") as handle:
        text = handle.read()
    for rule in gate_rules.RULES:
        assert rule.checks and f"`{rule.key}`" in text, f"{rule.key}: run tools/gate_rules_table.py"
    # README.md's short table, between its markers, names every rule by its title
    with open(os.path.join(os.path.dirname(ROLES_DIR), "README.md"), encoding="utf-8") as handle:
        readme = handle.read()
    block = readme.split("<!-- gate-rules: generated by tools/gate_rules_table.py -->", 1)[1].split("<!-- /gate-rules -->")[0]
    for rule in gate_rules.RULES:
        assert f"| {rule.title} |" in block, f"{rule.key}: run tools/gate_rules_table.py (README.md)"


def test_a_secret_value_is_never_shown():
    """The validator quotes values ('got: ...'): for no_log or secret-named options the gate hides it."""
    specs = {"demo": {"demo_api_key": {"type": "str", "choices": ["a"]}, "demo_token": {"type": "int", "no_log": True}}}
    report = check_inventory(lab(common={"demo_api_key": "sk-do-not-print", "demo_token": "tok-do-not-print"}),
                             GROUPS, profiles=PROFILES, role_specs=specs, variants=VARIANTS)
    text = "\n".join(report.lines()) + str(report.to_dict())
    assert "demo_api_key (a secret, value hidden) is refused by role demo's argument spec" in text
    assert "demo_token (a secret, value hidden)" in text
    assert "do-not-print" not in text


def test_a_retired_variable_names_its_successor_and_hides_the_key():
    """A vault key set by its old name would reach no role: the gate names llmfleet_api_key, never the key."""
    report = check_inventory(lab(thor2={"serve_api_key": "sk-do-not-print"}), GROUPS, profiles=PROFILES,
                             role_specs=SPECS, variants=VARIANTS, patches=PATCHES)
    lines = report.lines()
    assert any(ln.startswith("FAIL thor2: serve_api_key is set, but the collection no longer reads it")
               and "rename serve_api_key to llmfleet_api_key" in ln for ln in lines), "\n".join(lines)
    assert "do-not-print" not in "\n".join(lines) + str(report.to_dict())
    clean = check_inventory(lab(common={"llmfleet_api_key": "sk-new-name"}), GROUPS, profiles=PROFILES,
                            role_specs=SPECS, variants=VARIANTS, patches=PATCHES)
    assert not [ln for ln in clean.lines() if ln.startswith("FAIL")], "\n".join(clean.lines())


def _variants_pinning(version):
    """The shipped variants with sm_121's vLLM pinned at ``version`` (release name to match)."""
    out = copy.deepcopy(VARIANTS)
    out["sm_121"]["packages"] = ["vllm==%s" % version if str(p).startswith("vllm==") else p
                                 for p in out["sm_121"]["packages"]]
    out["sm_121"]["release"] = "vllm-%s" % version
    return out


@pytest.mark.parametrize("version, fails", [("0.32.0", False), ("0.18.1", False), ("0.19.1", True), ("0.16.0", True)])
def test_a_pinned_engine_the_sm121_patch_must_cover_but_does_not_fails(version, fails):
    """cutlass-fp8-sm121 is needed below 0.20 (sm_120a-only kernels) and written for 0.17-0.18."""
    report = check_inventory(lab(common={"llmfleet_release": "vllm-%s" % version}), GROUPS, profiles=PROFILES,
                             role_specs=SPECS, variants=_variants_pinning(version), patches=PATCHES)
    bad = [ln for ln in report.lines() if ln.startswith("FAIL") and "needs patch cutlass-fp8-sm121" in ln]
    assert bool(bad) is fails, "\n".join(report.lines())
    if fails:
        assert bad[0].startswith("FAIL spark1, spark2:") and "vllm %s" % version in bad[0]


def test_a_ray_group_beside_nodes_offering_gpus_to_ray_fails_naming_them():
    from ansible_collections.llmfleet.cluster.plugins.plugin_utils.profile_files import load_profile_dir
    profiles = load_profile_dir()
    groups = {**GROUPS, "serve_nodes": ["spark1", "spark2"]}
    report = check_inventory(lab(common={"llmfleet_serve_profile": "qwen3.5-122b-fp8-vllm-tp2"}), groups,
                             profiles=profiles, role_specs=SPECS, variants=VARIANTS)
    found = [f for c in report.to_dict()["checks"] if c["name"] == "ray_placement" for f in c["findings"]]
    assert [(f["hosts"], f["variable"], f["value"]) for f in found] == [
        (["thor1", "thor2"], "ray_node_num_gpus", {"thor1": 1, "thor2": 1})]
    assert "set ray_node_num_gpus: 0 on thor1, thor2" in found[0]["fix"]
    # the same layout on vLLM's own multi-node executor: Ray places nothing
    mp = {"mine": {"extends": "qwen3.5-122b-fp8-vllm-tp2", "backend": "mp"}}
    report = check_inventory(lab(common={"llmfleet_serve_profile": "mine", "llmfleet_serve_profiles_extra": mp}),
                             groups, profiles=profiles, role_specs=SPECS, variants=VARIANTS)
    assert not [f for c in report.to_dict()["checks"] if c["name"] == "ray_placement" for f in c["findings"]]
