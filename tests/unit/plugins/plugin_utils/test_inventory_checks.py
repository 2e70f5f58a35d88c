"""Data table of inventories for the pure controller-side preflight checks (plugin_utils/inventory_checks).

Each case starts from a good 4-node fleet (spark1/spark2 in gb10, thor1/thor2 in thor, head spark1)
and changes a few variables or groups; ``present`` are substrings expected in the report lines
(``FAIL ...``/``WARN ...``/``ok   ...``), ``absent`` must appear in no line.
"""

from __future__ import annotations

import copy
import json

import pytest

from ansible_collections.llmfleet.cluster.plugins.plugin_utils.inventory_checks import (
    ProfileError,
    Unevaluated,
    check_inventory,
    is_pin_var,
)

DROP = object()  # remove the variable from the host

BASE_HOSTS = {
    "spark1": {"llmfleet_fabric_ip": "10.0.0.11", "llmfleet_gpu_arch": "sm_121"},
    "spark2": {"llmfleet_fabric_ip": "10.0.0.12", "llmfleet_gpu_arch": "sm_121"},
    "thor1": {"llmfleet_fabric_ip": "10.0.0.13", "llmfleet_gpu_arch": "sm_110"},
    "thor2": {"llmfleet_fabric_ip": "10.0.0.14", "llmfleet_gpu_arch": "sm_110"},
}
BASE_COMMON = {"llmfleet_engine": "vllm", "llmfleet_release": "vllm-0.11.0", "python_env_vllm_version": "0.11.0"}
BASE_GROUPS = {
    "gb10": ["spark1", "spark2"],
    "thor": ["thor1", "thor2"],
    "ray_head": ["spark1"],
    "ray_workers": ["spark2", "thor1", "thor2"],
}
PROFILES = {
    "tp2": {"engine": "vllm", "tensor_parallel_size": 2, "pipeline_parallel_size": 1},
    "pp4": {"engine": "vllm", "tensor_parallel_size": 1, "pipeline_parallel_size": 4},
    "tp4": {"engine": "vllm", "tensor_parallel_size": 4},
    "sgl-tp2": {"engine": "sglang", "tensor_parallel_size": 2},
    "engines": {"engine": ["vllm", "sglang"], "tensor_parallel_size": 4},
    "broken": ProfileError("broken", "mapping values are not allowed here"),
    "_vllm": {"name": "_vllm", "abstract": True, "engine": "vllm"},
    "base": {"abstract": True, "engine": "vllm", "tensor_parallel_size": 2},
}


def fleet(hosts=None, groups=None, common=None, extra_hosts=None):
    """hostvars, groups: the base fleet with per-host overrides (DROP deletes), groups replaced."""
    hostvars = {h: {**BASE_COMMON, **(common or {}), **v} for h, v in copy.deepcopy(BASE_HOSTS).items()}
    for h, v in {**(extra_hosts or {})}.items():
        hostvars[h] = {**v}
    for h, changes in (hosts or {}).items():
        for k, v in changes.items():
            if v is DROP:
                hostvars[h].pop(k, None)
            else:
                hostvars[h][k] = v
    g = {**BASE_GROUPS, **(groups or {})}
    g = {k: v for k, v in g.items() if v is not None}
    g["all"] = list(hostvars)
    return hostvars, g


# id, fleet(...), profiles (None: no profiles dir), ok, present, absent
CASES = [
    # ------------------------------------------------------------------ ray_head
    ("good_no_profile", fleet(), PROFILES, True,
     ["ok   one ray_head per cluster (default: spark1)", "ok   fabric IPs valid and unique (4 hosts)",
      "ok   TP x PP matches the serving group's GPUs (default: no TP/PP declared, 4 GPUs)"], ["FAIL", "WARN"]),
    ("two_heads", fleet(groups={"ray_head": ["spark1", "spark2"], "ray_workers": ["thor1", "thor2"]}), PROFILES, False,
     ["FAIL spark1, spark2: 2 hosts in group ray_head for cluster 'default' (llmfleet_cluster); keep exactly one "
      "ray_head per cluster"], []),
    ("head_is_also_worker", fleet(groups={"ray_workers": ["spark1", "spark2", "thor1", "thor2"]}), PROFILES, False,
     ["FAIL spark1: is in both ray_head and ray_workers; a node is either the head or a worker"], []),
    ("no_ray_groups", fleet(groups={"ray_head": None, "ray_workers": None}), PROFILES, False,
     ["FAIL inventory: no host in groups ray_head, ray_workers or serve_nodes; put the head node"], []),
    ("two_clusters_one_head_each_ok",
     fleet(hosts={"thor1": {"llmfleet_cluster": "b"}, "thor2": {"llmfleet_cluster": "b"}},
           groups={"ray_head": ["spark1", "thor1"], "ray_workers": ["spark2", "thor2"]}), PROFILES, True,
     ["ok   one ray_head per cluster (default: spark1; b: thor1)"], ["FAIL"]),
    ("second_cluster_without_head",
     fleet(hosts={"thor1": {"llmfleet_cluster": "b"}, "thor2": {"llmfleet_cluster": "b"}}), PROFILES, False,
     ["FAIL cluster 'b': no host in group ray_head (cluster hosts: thor1, thor2); put exactly one of them in ray_head"],
     ["FAIL spark"]),
    ("two_clusters_two_heads_in_one",
     fleet(hosts={"thor1": {"llmfleet_cluster": "b"}, "thor2": {"llmfleet_cluster": "b"}},
           groups={"ray_head": ["spark1", "thor1", "thor2"], "ray_workers": ["spark2"]}), PROFILES, False,
     ["FAIL thor1, thor2: 2 hosts in group ray_head for cluster 'b'"], ["cluster 'default'"]),
    ("bad_cluster_name", fleet(hosts={"thor2": {"llmfleet_cluster": "lab two"}}), PROFILES, False,
     ["FAIL thor2: llmfleet_cluster 'lab two' is not a cluster name"], []),
    ("serve_node_outside_ray",
     fleet(groups={"ray_workers": ["spark2", "thor1"], "serve_nodes": ["spark1", "thor2"]}), PROFILES, False,
     ["FAIL thor2: is in serve_nodes but in neither ray_head nor ray_workers; serving runs over Ray: add thor2 to "
      "ray_workers (cluster 'default')"], []),
    # ------------------------------------------------------------------ fabric IP
    ("duplicate_fabric_ip", fleet(hosts={"spark2": {"llmfleet_fabric_ip": "10.0.0.11"}}), PROFILES, False,
     ["FAIL spark2: llmfleet_fabric_ip '10.0.0.11' duplicates spark1's; give each host its own data-plane IPv4 "
      "(the QSFP address)"], ["FAIL spark1"]),
    ("duplicate_fabric_ip_three_hosts",
     fleet(hosts={"spark2": {"llmfleet_fabric_ip": "10.0.0.11"}, "thor2": {"llmfleet_fabric_ip": "10.0.0.11"}}),
     PROFILES, False,
     ["FAIL spark2: llmfleet_fabric_ip '10.0.0.11' duplicates spark1's",
      "FAIL thor2: llmfleet_fabric_ip '10.0.0.11' duplicates spark1's"], []),
    ("duplicate_fabric_ip_across_clusters",
     fleet(hosts={"thor1": {"llmfleet_cluster": "b"}, "thor2": {"llmfleet_cluster": "b", "llmfleet_fabric_ip": "10.0.0.12"}},
           groups={"ray_head": ["spark1", "thor1"], "ray_workers": ["spark2", "thor2"]}), PROFILES, False,
     ["FAIL thor2: llmfleet_fabric_ip '10.0.0.12' duplicates spark2's"], []),
    ("duplicate_fabric_ip_with_non_member",
     fleet(extra_hosts={"bastion": {"llmfleet_fabric_ip": "10.0.0.14"}}), PROFILES, False,
     ["FAIL bastion: llmfleet_fabric_ip '10.0.0.14' duplicates thor2's"], []),
    ("missing_fabric_ip", fleet(hosts={"thor2": {"llmfleet_fabric_ip": DROP}}), PROFILES, False,
     ["FAIL thor2: llmfleet_fabric_ip is not set; set it to thor2's data-plane IPv4 (the QSFP address), "
      "e.g. in host_vars/thor2.yml"], []),
    ("empty_fabric_ip", fleet(hosts={"thor2": {"llmfleet_fabric_ip": ""}}), PROFILES, False,
     ["FAIL thor2: llmfleet_fabric_ip is not set"], []),
    ("non_member_without_fabric_ip_ok", fleet(extra_hosts={"bastion": {}}), PROFILES, True, [], ["bastion"]),
    ("fabric_ip_out_of_range", fleet(hosts={"thor1": {"llmfleet_fabric_ip": "10.0.0.313"}}), PROFILES, False,
     ["FAIL thor1: llmfleet_fabric_ip '10.0.0.313' is not an IPv4 address; set it to the host's data-plane IPv4"], []),
    ("fabric_ip_leading_zero", fleet(hosts={"thor1": {"llmfleet_fabric_ip": "10.0.0.013"}}), PROFILES, False,
     ["FAIL thor1: llmfleet_fabric_ip '10.0.0.013' is not an IPv4 address"], []),
    ("fabric_ip_hostname", fleet(hosts={"thor1": {"llmfleet_fabric_ip": "thor1-qsfp"}}), PROFILES, False,
     ["FAIL thor1: llmfleet_fabric_ip 'thor1-qsfp' is not an IPv4 address"], []),
    ("fabric_ip_cidr", fleet(hosts={"thor1": {"llmfleet_fabric_ip": "10.0.0.13/24"}}), PROFILES, False,
     ["FAIL thor1: llmfleet_fabric_ip '10.0.0.13/24' has a prefix length; drop the '/24': the address alone, "
      "e.g. '10.0.0.13'"], []),
    ("fabric_ip_loopback", fleet(hosts={"thor1": {"llmfleet_fabric_ip": "127.0.1.1"}}), PROFILES, False,
     ["FAIL thor1: llmfleet_fabric_ip '127.0.1.1' is a loopback address in cluster 'default' of 4 hosts "
      "(spark1, spark2, thor1, thor2): the other nodes cannot reach it"], []),
    # link-local is a valid direct-cable fabric (NVIDIA's two-Spark setup); mixed with 10.0.0/24 it is
    # a second subnet, which a cabled fabric without routes cannot be
    ("fabric_ip_link_local", fleet(hosts={h: {"llmfleet_fabric_ip": f"169.254.3.{i}"} for i, h in
                                          enumerate(("spark1", "spark2", "thor1", "thor2"), 1)}), PROFILES, True,
     ["ok   fabric IPs valid and unique (4 hosts)", "ok   one fabric subnet per cluster"], ["FAIL"]),
    ("fabric_ip_link_local_mixed", fleet(hosts={"thor1": {"llmfleet_fabric_ip": "169.254.3.1"}}), PROFILES, False,
     ["FAIL cluster 'default': llmfleet_fabric_ip spans 2 subnets (10.0.0.0/24: spark1, spark2, thor2; "
      "169.254.0.0/16: thor1)"], []),
    ("fabric_ip_loopback_one_host", fleet(groups={"ray_head": ["spark1"], "ray_workers": []},
                                          hosts={"spark1": {"llmfleet_fabric_ip": "127.0.0.2"}}), PROFILES, True,
     ["ok   loopback fabric only on one host"], ["FAIL"]),
    ("fabric_ip_multicast", fleet(hosts={"thor1": {"llmfleet_fabric_ip": "239.1.1.1"}}), PROFILES, False,
     ["FAIL thor1: llmfleet_fabric_ip '239.1.1.1' is a multicast address"], []),
    ("fabric_ip_unspecified", fleet(hosts={"thor1": {"llmfleet_fabric_ip": "0.0.0.0"}}), PROFILES, False,
     ["FAIL thor1: llmfleet_fabric_ip '0.0.0.0' is the unspecified address"], []),
    ("fabric_ip_broadcast", fleet(hosts={"thor1": {"llmfleet_fabric_ip": "255.255.255.255"}}), PROFILES, False,
     ["FAIL thor1: llmfleet_fabric_ip '255.255.255.255' is the broadcast address"], []),
    ("fabric_ip_reserved", fleet(hosts={"thor1": {"llmfleet_fabric_ip": "240.0.0.13"}}), PROFILES, False,
     ["FAIL thor1: llmfleet_fabric_ip '240.0.0.13' is a reserved (240/4) address"], []),
    ("fabric_ip_with_spaces", fleet(hosts={"thor1": {"llmfleet_fabric_ip": " 10.0.0.13 "}}), PROFILES, False,
     ["FAIL thor1: llmfleet_fabric_ip ' 10.0.0.13 ' has spaces around it; write it as '10.0.0.13'"], []),
    ("fabric_ip_ipv6", fleet(hosts={"thor1": {"llmfleet_fabric_ip": "fd00::13"}}), PROFILES, False,
     ["FAIL thor1: llmfleet_fabric_ip 'fd00::13' is IPv6; the fabric (NCCL/Ray) uses IPv4"], []),
    ("fabric_ip_not_a_string", fleet(hosts={"thor1": {"llmfleet_fabric_ip": 167772173}}), PROFILES, False,
     ["FAIL thor1: llmfleet_fabric_ip 167772173 is not a string; quote the IPv4 address"], []),
    ("fabric_ip_unevaluated",
     fleet(hosts={"thor1": {"llmfleet_fabric_ip": Unevaluated("{{ ansible_eth1.ipv4.address }}",
                                                              "'ansible_eth1' is undefined")}}), PROFILES, False,
     ["FAIL thor1: llmfleet_fabric_ip template '{{ ansible_eth1.ipv4.address }}' cannot be evaluated before any host "
      "is contacted ('ansible_eth1' is undefined); set it literally"], ["is not set"]),
    # ------------------------------------------------------------------ GPU arch
    ("arch_unknown", fleet(hosts={"thor1": {"llmfleet_gpu_arch": "sm_11"}}), PROFILES, False,
     ["FAIL thor1: llmfleet_gpu_arch 'sm_11' is not a known GPU arch; use one of sm_121, sm_110, sm_120, sm_100, "
      "sm_90, sm_89, sm_80"], []),
    ("arch_wrong_case", fleet(hosts={"spark1": {"llmfleet_gpu_arch": "SM_121"}}), PROFILES, False,
     ["FAIL spark1: llmfleet_gpu_arch 'SM_121' is not a known GPU arch (did you mean 'sm_121'?)"], []),
    ("arch_missing_in_platform_group", fleet(hosts={"spark2": {"llmfleet_gpu_arch": DROP}}), PROFILES, False,
     ["FAIL spark2: llmfleet_gpu_arch is not set; set llmfleet_gpu_arch: sm_121 (group_vars/gb10.yml)"], []),
    ("arch_missing_without_platform_group",
     fleet(hosts={"thor2": {"llmfleet_gpu_arch": DROP}}, groups={"thor": ["thor1"]}), PROFILES, False,
     ["FAIL thor2: llmfleet_gpu_arch is not set; set llmfleet_gpu_arch (host_vars/thor2.yml) to one of sm_121"], []),
    ("arch_contradicts_group", fleet(hosts={"spark2": {"llmfleet_gpu_arch": "sm_110"}}), PROFILES, False,
     ["FAIL spark2: llmfleet_gpu_arch 'sm_110' contradicts group gb10 (DGX Spark GB10 is sm_121); set "
      "llmfleet_gpu_arch: sm_121 for spark2"], []),
    ("host_in_both_platform_groups", fleet(groups={"thor": ["thor1", "thor2", "spark2"]}), PROFILES, False,
     ["FAIL spark2: is in groups gb10 and thor; a host is one platform"], []),
    ("arch_other_known_ok", fleet(extra_hosts={}, groups={"gb10": ["spark1"]},
                                  hosts={"spark2": {"llmfleet_gpu_arch": "sm_90"}}), PROFILES, True,
     ["ok   GPU arch declared and known (sm_121: spark1; sm_90: spark2; sm_110: thor1, thor2)"], ["FAIL"]),
    # ------------------------------------------------------------------ engine / profile
    ("engine_unknown", fleet(common={"llmfleet_engine": "trtllm"}), PROFILES, False,
     ["FAIL spark1, spark2, thor1, thor2: llmfleet_engine 'trtllm' is not a supported engine; use one of vllm, sglang"],
     []),
    ("engine_differs_in_group", fleet(hosts={"thor2": {"llmfleet_engine": "sglang"}}), PROFILES, False,
     ["FAIL spark1, spark2, thor1, thor2: llmfleet_engine differs across the serving group of cluster 'default' "
      "(ray_head + ray_workers): spark1='vllm', spark2='vllm', thor1='vllm', thor2='sglang'; a serving group runs "
      "one engine"], []),
    ("profile_missing", fleet(common={"llmfleet_serve_profile": "nope"}), PROFILES, False,
     ["FAIL spark1, spark2, thor1, thor2: llmfleet_serve_profile 'nope' does not exist in profiles; use one of: "
      "broken, engines, pp4, sgl-tp2, tp2, tp4"], []),
    ("profile_dir_absent_warns", fleet(common={"llmfleet_serve_profile": "pp4"}), None, True,
     ["WARN spark1, spark2, thor1, thor2: llmfleet_serve_profile 'pp4' cannot be verified: there is no profiles "
      "directory (profiles)", "ok   engine and serve profile"], ["FAIL"]),
    ("profile_abstract_base", fleet(common={"llmfleet_serve_profile": "_vllm"}), PROFILES, False,
     ["FAIL spark1, spark2, thor1, thor2: llmfleet_serve_profile '_vllm' is an abstract engine base, it cannot be "
      "served; use one of: broken, engines, pp4, sgl-tp2, tp2, tp4"], []),
    ("profile_abstract_flag", fleet(common={"llmfleet_serve_profile": "base"}), PROFILES, False,
     ["llmfleet_serve_profile 'base' is an abstract engine base"], ["TP 2"]),
    ("profile_unreadable", fleet(common={"llmfleet_serve_profile": "broken"}), PROFILES, False,
     ["FAIL spark1, spark2, thor1, thor2: llmfleet_serve_profile 'broken' cannot be read (mapping values are not "
      "allowed here); fix profiles/broken.yml"], []),
    ("profile_name_is_a_path", fleet(common={"llmfleet_serve_profile": "../etc/passwd"}), PROFILES, False,
     ["llmfleet_serve_profile '../etc/passwd' is not a profile name"], []),
    ("profile_engine_mismatch",
     fleet(common={"llmfleet_serve_profile": "sgl-tp2"}, groups={"serve_nodes": ["spark1", "spark2"]}), PROFILES,
     False, ["FAIL spark1, spark2, thor1, thor2: llmfleet_engine 'vllm' but serve profile 'sgl-tp2' is for sglang; "
             "set llmfleet_engine: sglang or pick a profile for vllm"], []),
    ("profile_with_engine_list_ok", fleet(common={"llmfleet_serve_profile": "engines"}), PROFILES, True,
     ["ok   engine and serve profile (default: engine vllm, profile 'engines')"], ["FAIL"]),
    ("profile_differs_in_group",
     fleet(common={"llmfleet_serve_profile": "pp4"}, hosts={"thor2": {"llmfleet_serve_profile": "tp4"}}), PROFILES,
     False, ["llmfleet_serve_profile differs across the serving group of cluster 'default'"], []),
    # ------------------------------------------------------------------ TP x PP
    ("tp_pp_profile_matches", fleet(common={"llmfleet_serve_profile": "pp4"}), PROFILES, True,
     ["ok   TP x PP matches the serving group's GPUs (default: TP 1 x PP 4 = 4 GPUs on spark1, spark2, thor1, thor2)"],
     ["FAIL"]),
    ("tp_pp_profile_mismatch", fleet(common={"llmfleet_serve_profile": "tp2"}), PROFILES, False,
     ["FAIL cluster 'default': TP 2 (profile 'tp2' tensor_parallel_size) x PP 1 (profile 'tp2' pipeline_parallel_size) "
      "= 2 GPUs, but the serving group (ray_head + ray_workers: spark1, spark2, thor1, thor2) has 4 (1 per node); make "
      "TP x PP = 4"], []),
    ("tp_pp_variables_win_over_profile",
     fleet(common={"llmfleet_serve_profile": "tp2", "llmfleet_tensor_parallel_size": 4}), PROFILES, True,
     ["ok   TP x PP matches the serving group's GPUs (default: TP 4 x PP 1 = 4 GPUs"], ["FAIL"]),
    ("tp_pp_variable_mismatch",
     fleet(common={"llmfleet_tensor_parallel_size": 2, "llmfleet_pipeline_parallel_size": 3}), PROFILES, False,
     ["FAIL cluster 'default': TP 2 (llmfleet_tensor_parallel_size) x PP 3 (llmfleet_pipeline_parallel_size) = 6 GPUs, "
      "but the serving group (ray_head + ray_workers: spark1, spark2, thor1, thor2) has 4"], []),
    ("tp_pp_extra_vars_strings", fleet(common={"llmfleet_tensor_parallel_size": "2",
                                               "llmfleet_pipeline_parallel_size": "2"}), PROFILES, True,
     ["TP 2 x PP 2 = 4 GPUs"], ["FAIL"]),
    ("tp_pp_only_pp_declared", fleet(common={"llmfleet_pipeline_parallel_size": 4}), PROFILES, True,
     ["TP 1 x PP 4 = 4 GPUs"], ["FAIL"]),
    ("tp_invalid", fleet(common={"llmfleet_tensor_parallel_size": 0}), PROFILES, False,
     ["FAIL spark1, spark2, thor1, thor2: llmfleet_tensor_parallel_size 0 is not a positive integer"], []),
    ("tp_differs_in_group",
     fleet(common={"llmfleet_tensor_parallel_size": 4}, hosts={"thor2": {"llmfleet_tensor_parallel_size": 2}}),
     PROFILES, False,
     ["llmfleet_tensor_parallel_size differs across the serving group of cluster 'default' (ray_head + ray_workers): "
      "spark1=4, spark2=4, thor1=4, thor2=2"], []),
    # two GPUs per node: Hopper nodes (up to 8 each); a GB10 has one (module_utils/platforms.py)
    ("gpus_per_node_counts",
     fleet(common={"llmfleet_serve_profile": "tp4"},
           hosts={"spark1": {"llmfleet_gpu_arch": "sm_90", "llmfleet_gpus_per_node": 2},
                  "spark2": {"llmfleet_gpu_arch": "sm_90", "llmfleet_gpus_per_node": 2}},
           groups={"serve_nodes": ["spark1", "spark2"], "gb10": [], "thor": [], "hopper": ["spark1", "spark2"]}),
     PROFILES, True, ["TP 4 x PP 1 = 4 GPUs on spark1, spark2"], ["FAIL"]),
    ("gpus_per_node_over_the_platform",
     fleet(common={"llmfleet_serve_profile": "tp4"},
           hosts={"spark1": {"llmfleet_gpus_per_node": 2}, "spark2": {"llmfleet_gpus_per_node": 2}},
           groups={"serve_nodes": ["spark1", "spark2"]}), PROFILES, False,
     ["FAIL spark1, spark2: llmfleet_gpus_per_node 2, but a DGX Spark GB10 (gb10) has 1 GPU per node"], []),
    ("gpus_per_node_mismatch_message",
     fleet(common={"llmfleet_serve_profile": "tp4"}, hosts={"spark1": {"llmfleet_gpus_per_node": 2}},
           groups={"serve_nodes": ["spark1", "spark2"]}), PROFILES, False,
     ["has 3 (llmfleet_gpus_per_node spark1=2, spark2=<unset>)"], []),
    ("gpus_per_node_invalid", fleet(hosts={"spark1": {"llmfleet_gpus_per_node": "two"}}), PROFILES, False,
     ["FAIL spark1: llmfleet_gpus_per_node 'two' is not a positive integer"], []),
    ("serve_nodes_narrowing_ok",
     fleet(common={"llmfleet_serve_profile": "tp2"}, groups={"serve_nodes": ["spark1", "spark2"]},
           hosts={"thor2": {"python_env_vllm_version": "0.10.2"}}), PROFILES, True,
     ["ok   TP x PP matches the serving group's GPUs (default: TP 2 x PP 1 = 2 GPUs on spark1, spark2)",
      "ok   versions pinned identically across each serving group (default: 2 pinned vars on spark1, spark2)"],
     ["FAIL"]),
    ("serve_nodes_narrowing_mismatch",
     fleet(common={"llmfleet_serve_profile": "tp2"}, groups={"serve_nodes": ["spark1", "spark2", "thor1"]}), PROFILES,
     False, ["the serving group (serve_nodes: spark1, spark2, thor1) has 3"], []),
    ("serve_nodes_of_other_cluster_only",
     fleet(common={"llmfleet_serve_profile": "tp2"},
           hosts={"thor1": {"llmfleet_cluster": "b"}, "thor2": {"llmfleet_cluster": "b"}},
           groups={"ray_head": ["spark1", "thor1"], "ray_workers": ["spark2", "thor2"], "serve_nodes": ["thor1"]}),
     PROFILES, False,
     ["FAIL cluster 'b': TP 2 (profile 'tp2' tensor_parallel_size) x PP 1 (profile 'tp2' pipeline_parallel_size) = 2 "
      "GPUs, but the serving group (serve_nodes: thor1) has 1"],
     ["cluster 'default'"]),
    # ------------------------------------------------------------------ versions
    ("version_odd_host", fleet(hosts={"thor2": {"python_env_vllm_version": "0.10.2"}}), PROFILES, False,
     ["FAIL thor2: python_env_vllm_version '0.10.2' differs from '0.11.0' on the rest of the serving group of cluster "
      "'default' (ray_head + ray_workers: spark1, spark2, thor1); pin one value for the whole serving group "
      "(group_vars), not per host"], []),
    ("version_split_evenly",
     fleet(hosts={"thor1": {"llmfleet_release": "vllm-0.10.2"}, "thor2": {"llmfleet_release": "vllm-0.10.2"}}),
     PROFILES, False,
     ["FAIL spark1, spark2, thor1, thor2: llmfleet_release differs across the serving group of cluster 'default' "
      "(ray_head + ray_workers): spark1='vllm-0.11.0', spark2='vllm-0.11.0', thor1='vllm-0.10.2', "
      "thor2='vllm-0.10.2'"], []),
    ("version_set_on_one_host_only", fleet(hosts={"spark2": {"ray_node_version": "2.49.0"}}), PROFILES, False,
     ["FAIL spark2: ray_node_version '2.49.0' differs from <unset> on the rest of the serving group"], []),
    ("version_number_equals_string", fleet(hosts={"thor2": {"llmfleet_torch_version": 2.9},
                                                  "spark1": {"llmfleet_torch_version": "2.9"},
                                                  "spark2": {"llmfleet_torch_version": "2.9"},
                                                  "thor1": {"llmfleet_torch_version": "2.9"}}), PROFILES, True,
     ["3 pinned vars"], ["FAIL"]),
    ("python_env_pins_compared",
     fleet(common={"python_env_pins": {"torch": "2.9.0"}}, hosts={"thor1": {"python_env_pins": {"torch": "2.8.0"}}}),
     PROFILES, False, ["FAIL thor1: python_env_pins {\"torch\": \"2.8.0\"} differs from {\"torch\": \"2.9.0\"}"], []),
    ("facts_are_not_pins", fleet(hosts={"thor1": {"ansible_distribution_version": "24.04"},
                                        "thor2": {"ansible_distribution_version": "22.04"}}), PROFILES, True,
     [], ["FAIL"]),
    ("unevaluated_pin_same_template_ok",
     fleet(common={"llmfleet_cuda_version": Unevaluated("{{ cuda[ansible_architecture] }}", "undefined")}), PROFILES,
     True, [], ["FAIL"]),
    ("unevaluated_pin_other_template",
     fleet(common={"llmfleet_cuda_version": Unevaluated("{{ cuda[ansible_architecture] }}", "undefined")},
           hosts={"thor2": {"llmfleet_cuda_version": Unevaluated("{{ cuda_thor }}", "undefined")}}), PROFILES, False,
     ["FAIL thor2: llmfleet_cuda_version template '{{ cuda_thor }}' differs from template "
      "'{{ cuda[ansible_architecture] }}'"], []),
    # ------------------------------------------------------------------ several at once
    ("all_problems_reported_together",
     fleet(common={"llmfleet_serve_profile": "tp2"},
           hosts={"spark2": {"llmfleet_fabric_ip": "10.0.0.11"}, "thor1": {"llmfleet_gpu_arch": "sm_11"},
                  "thor2": {"python_env_vllm_version": "0.10.2"}},
           groups={"ray_head": ["spark1", "spark2"], "ray_workers": ["thor1", "thor2"]}), PROFILES, False,
     ["FAIL spark1, spark2: 2 hosts in group ray_head", "FAIL spark2: llmfleet_fabric_ip '10.0.0.11' duplicates",
      "FAIL thor1: llmfleet_gpu_arch 'sm_11'", "FAIL cluster 'default': TP 2", "FAIL thor2: python_env_vllm_version"],
     []),
]


@pytest.mark.parametrize(
    "inventory, profiles, ok, present, absent",
    [pytest.param(*c[1:], id=c[0]) for c in CASES],
)
def test_check_inventory(inventory, profiles, ok, present, absent):
    hostvars, groups = inventory
    report = check_inventory(hostvars, groups, profiles=profiles, profiles_location="profiles")
    lines = report.lines()
    text = "\n".join(lines)
    assert report.ok is ok, text
    for want in present:
        assert any(want in line for line in lines), f"{want!r} not in:\n{text}"
    for unwanted in absent:
        assert not any(unwanted in line for line in lines if not line.startswith("ok ")), \
            f"{unwanted!r} in:\n{text}"
    # every failure is one line that names the problem and the fix
    for f in report.failures:
        assert "\n" not in f.line and f.fix and f.problem
    assert len(lines) == len(report.failures) + len(report.warnings) + sum(c.ok for c in report.checks)


def test_lines_order_failures_first_then_warnings_then_ok():
    hostvars, groups = fleet(common={"llmfleet_serve_profile": "pp4"},
                             hosts={"spark2": {"llmfleet_fabric_ip": "10.0.0.11"}})
    lines = check_inventory(hostvars, groups, profiles=None).lines()
    kinds = [line[:4] for line in lines]
    assert kinds == sorted(kinds, key=["FAIL", "WARN", "ok  "].index)
    assert kinds.count("FAIL") == 1 and kinds.count("WARN") == 1 and kinds.count("ok  ") == len(lines) - 2


def test_report_json_names_hosts_variable_value_fix():
    hostvars, groups = fleet(hosts={"spark2": {"llmfleet_fabric_ip": "10.0.0.11"}})
    data = json.loads(json.dumps(check_inventory(hostvars, groups, profiles=PROFILES).to_dict()))
    assert data["ok"] is False and data["failed"] == 1
    fabric = next(c for c in data["checks"] if c["name"] == "fabric_ip")
    assert fabric["ok"] is False
    assert fabric["findings"] == [{
        "severity": "fail", "hosts": ["spark2", "spark1"], "variable": "llmfleet_fabric_ip", "value": "10.0.0.11",
        "problem": "llmfleet_fabric_ip '10.0.0.11' duplicates spark1's",
        "fix": "give each host its own data-plane IPv4 (the QSFP address)",
        "message": "spark2: llmfleet_fabric_ip '10.0.0.11' duplicates spark1's; give each host its own data-plane "
                   "IPv4 (the QSFP address)",
    }]
    assert [c["name"] for c in data["checks"]][:6] == [
        "ray_head", "fabric_ip", "gpu_arch", "engine_profile", "parallelism", "versions"]
    assert all(c["ok"] for c in data["checks"] if c["name"] != "fabric_ip")


def test_report_order_follows_inventory_order():
    hostvars, groups = fleet(hosts={"thor2": {"llmfleet_gpu_arch": "x"}, "spark1": {"llmfleet_gpu_arch": "y"}})
    failures = [f.subject for f in check_inventory(hostvars, groups, profiles=PROFILES).failures]
    assert failures == ["spark1", "thor2"]


def test_custom_known_archs_and_engines():
    hostvars, groups = fleet(common={"llmfleet_engine": "trtllm"}, hosts={"thor1": {"llmfleet_gpu_arch": "cpu"}},
                             groups={"thor": ["thor2"]})
    report = check_inventory(hostvars, groups, profiles=PROFILES,
                             known_gpu_archs=("sm_121", "sm_110", "cpu"), engines=("vllm", "sglang", "trtllm"))
    assert report.ok, report.lines()


@pytest.mark.parametrize("name, pin", [
    ("llmfleet_release", True),
    ("llmfleet_nccl_version", True),
    ("llmfleet_version", True),
    ("ray_node_version", True),
    ("python_env_vllm_version", True),
    ("python_env_torch_versions", True),
    ("python_env_pins", True),
    ("python_env_pinned_packages", True),
    ("sglang_release", True),
    ("python_env_index_url", False),
    ("llmfleet_fabric_ip", False),
    ("ansible_distribution_version", False),
    ("ansible_version", False),
    ("ansible_python_version", False),
    ("discovered_interpreter_python", False),
    ("preflight_min_disk_gb", False),
])
def test_is_pin_var(name, pin):
    assert is_pin_var(name) is pin


def test_a_rule_that_raises_is_a_finding_and_the_others_still_report(monkeypatch):
    """Every finding is listed before the run stops: a rule that meets a value it did not foresee fails
    as one finding of its own instead of hiding the rest."""
    from ansible_collections.llmfleet.cluster.plugins.plugin_utils import gate_rules

    def broken(_ctx):
        raise KeyError("surprise")
    rules = tuple(gate_rules.Rule(r.key, r.title, r.checks, broken if r.key == "mtu" else r.func)
                  for r in gate_rules.RULES)
    monkeypatch.setattr(gate_rules, "RULES", rules)
    hostvars, groups = fleet(hosts={"spark2": {"llmfleet_fabric_ip": "10.0.0.11"}})
    report = check_inventory(hostvars, groups, profiles=PROFILES)
    lines = report.lines()
    assert not report.ok
    assert any(line.startswith("FAIL inventory: the gate's rule mtu could not run: KeyError") for line in lines), lines
    assert any("duplicates spark1's" in line for line in lines), lines


# --------------------------------------------------------------------------- the plan, the gate's last check
def _plan_check(report):
    return next(c for c in report.checks if c.key == "plan")


def test_the_plans_refusal_no_check_foresaw_is_a_finding_naming_host_variable_value_and_fix():
    hostvars, groups = fleet(hosts={"spark2": {"ray_node_agent_ports": [6383, 6384]}})
    errors = {"spark2": "spark2: ray_node_agent_ports [6383, 6384] is not a list of three ports (dashboard agent "
                        "HTTP, dashboard agent gRPC, runtime-env agent); set three integers"}
    report = check_inventory(hostvars, groups, profiles=PROFILES, plan_errors=errors)
    check = _plan_check(report)
    assert not report.ok and not check.ok and len(check.findings) == 1
    finding = check.findings[0]
    assert (finding.hosts, finding.variable, finding.value) == (("spark2",), "ray_node_agent_ports", [6383, 6384])
    assert finding.line == ("spark2: ray_node_agent_ports [6383, 6384] is not a list of three ports (dashboard agent "
                            "HTTP, dashboard agent gRPC, runtime-env agent); set three integers")


def test_a_cluster_value_the_plan_refuses_on_every_host_is_one_line_and_fix_prefix_goes():
    hostvars, groups = fleet()
    errors = {h: f"{h}: gateway_metrics_port 8080 is also gateway_port; fix: two ports (defaults 8080 and 29000)"
              for h in ("spark1", "spark2")}
    check = _plan_check(check_inventory(hostvars, groups, profiles=PROFILES, plan_errors=errors))
    assert [f.line for f in check.findings] == [
        "spark1, spark2: gateway_metrics_port 8080 is also gateway_port; two ports (defaults 8080 and 29000)"]


def test_a_refusal_of_what_a_check_above_named_is_left_out():
    # TP 4 on a 4-node fleet of pp4: parallelism names spark1 and llmfleet_tensor_parallel_size; the plan
    # refuses the same layout on every host (its message names the profile, no variable)
    hostvars, groups = fleet(common={"llmfleet_serve_profile": "tp2"})
    report = check_inventory(hostvars, groups, profiles=PROFILES)
    assert not report.ok
    named = sorted({h for f in report.failures for h in f.hosts})
    errors = {h: f"{h}: profile 'tp2': TP x PP = 2 x 1 = 2 but the serving group has 4 GPUs" for h in named}
    assert _plan_check(check_inventory(hostvars, groups, profiles=PROFILES, plan_errors=errors)).findings == []


def test_without_plan_errors_the_plan_check_says_it_was_not_built():
    hostvars, groups = fleet(common={"llmfleet_serve_profile": "pp4"})
    check = _plan_check(check_inventory(hostvars, groups, profiles=PROFILES))
    assert check.ok and check.details == "not built: the gate read another profiles directory"
    check = _plan_check(check_inventory(hostvars, groups, profiles=PROFILES, plan_errors={}))
    assert check.ok and check.details == "4 hosts"
