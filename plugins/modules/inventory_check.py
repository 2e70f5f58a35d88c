# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
# Documentation only: the work is done on the controller by the action plugin of the same name
# (plugins/action/inventory_check.py), as ansible-core does for assert/debug.

from __future__ import annotations

DOCUMENTATION = r"""
---
module: inventory_check
short_description: Check a fleet inventory for consistency on the controller, before any host is contacted
description:
  - Evaluates C(hostvars) and C(groups) of the whole inventory on the controller and checks the
    following, per cluster (hosts are partitioned by C(llmfleet_cluster), default C(default)).
  - Exactly one host in group C(ray_head) per cluster; no host in both C(ray_head) and C(ray_workers);
    every C(serve_nodes) host is a Ray node.
  - Every Ray node and serving host has a C(llmfleet_fabric_ip) that is a usable IPv4 address (not
    multicast, unspecified or reserved; no prefix length), unique across the
    whole inventory, and not another host's management address (C(ansible_host)). Link-local
    (169.254/16) is accepted for the fabric (a direct cable, as NVIDIA's two-Spark setup uses); a
    loopback address only in a cluster on one machine (one host, or emulated nodes naming one
    C(llmfleet_machine)), never 127.0.0.1, which Ray rewrites.
  - Every fleet host (Ray groups, C(serve_nodes), C(gb10), C(thor)) declares a known
    C(llmfleet_gpu_arch), consistent with its platform group (C(gb10) is sm_121, C(thor) is sm_110,
    C(hopper) is sm_90, the platform facts of C(plugins/module_utils/platforms.py)).
  - C(llmfleet_engine) is C(vllm) or C(sglang); C(llmfleet_serve_profile), when set, names an existing
    profile (C(<collection>/profiles/<name>.yml)) whose C(engine) matches; engine and profile are the
    same across a serving group.
  - Tensor parallel x pipeline parallel size (C(llmfleet_tensor_parallel_size) /
    C(llmfleet_pipeline_parallel_size), else the profile's C(tensor_parallel_size) /
    C(pipeline_parallel_size)) equals the GPUs of the serving group (C(llmfleet_gpus_per_node), default
    1, summed), for every serving group (each group of C(llmfleet_serve_groups) with its own profile,
    else the cluster's C(serve_nodes) hosts if any, else its C(ray_head) and C(ray_workers) hosts).
    Clusters that declare neither are not checked.
  - Version pins are identical across a serving group - C(llmfleet_release), every variable whose name
    contains C(version) or ends in C(_release), and C(python_env_*pin*) variables (C(ansible_*) excluded).
    A variable whose template needs facts is compared as its raw template.
  - Then the rule table of C(plugins/plugin_utils/gate_rules.py) (listed in C(docs/gate-rules.md)) - every
    variable the inventory sets for a role against that role's C(meta/argument_specs.yml), absolute node
    paths, safe names, numeric ranges, management vs fabric addresses, one fabric subnet and one MTU per
    cluster, port collisions per node, engine / python_env variant / profile / release agreement; per
    serving group, with the plan's own functions, GPUs per node within the platform's, TP across nodes
    only over RoCE, the memory fit of the model, its rendered command against the captured C(--help) of
    the engine version its variant pins (C(engine_help/)), paths and ports its ranks share; addresses
    and networks parse. Profiles in C(llmfleet_serve_profiles_extra) are resolved and validated like
    shipped ones.
  - All problems are collected and reported together, one line each naming the host(s), the variable,
    its value and the fix; then the task fails. On success, RV(lines) has one line per check.
version_added: "0.1.0"
author:
  - llmfleet maintainers (@llmfleet)
options:
  report_json:
    description:
      - Also write the results as JSON to this controller path (relative paths are relative to the
        current directory). Written whether the checks pass or not, also in check mode.
    type: path
  known_gpu_archs:
    description:
      - GPU architectures accepted in C(llmfleet_gpu_arch).
    type: list
    elements: str
    default: [sm_121, sm_110, sm_120, sm_100, sm_90, sm_89, sm_80]
  engines:
    description:
      - Serving engines accepted in C(llmfleet_engine).
    type: list
    elements: str
    default: [vllm, sglang]
  fail_on_problems:
    description:
      - Fail the task when a check fails (its C(msg) then lists every line).
      - V(false) returns the results with RV(ok=false) instead, to print RV(lines) and fail in a
        later task (as C(llmfleet.cluster.preflight) does, for a compact report).
    type: bool
    default: true
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.conn
  - ansible.builtin.action_common_attributes.flow
attributes:
  action:
    support: full
  async:
    support: none
  become:
    support: none
  bypass_host_loop:
    support: none
  connection:
    support: none
  check_mode:
    support: full
    details: Read-only; the JSON report, if requested, is written in check mode too.
  delegation:
    support: none
  diff_mode:
    support: none
  platform:
    platforms: all
    details: Runs on the controller only and contacts no host.
notes:
  - Run it once, on C(localhost) with C(gather_facts=false); it reads the whole inventory regardless of
    C(--limit).
  - The playbook C(llmfleet.cluster.preflight) runs it first, then the host-side checks.
"""

EXAMPLES = r"""
- name: Preflight | inventory checks on the controller
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Check the inventory
      llmfleet.cluster.inventory_check:
        report_json: "{{ preflight_report_json | default(omit) }}"
      register: preflight_inventory

    - name: Show one line per check
      ansible.builtin.debug:
        msg: "{{ preflight_inventory.lines }}"
"""

RETURN = r"""
ok:
  description: Whether every check passed.
  returned: always
  type: bool
problems:
  description: Number of failed findings (lines starting with C(FAIL)).
  returned: always
  type: int
lines:
  description:
    - "The report, one line each: C(FAIL <hosts>: <problem>; <fix>) per problem, C(WARN ...) per
      warning, then C(ok   <check> (<details>)) per passing check."
  returned: always
  type: list
  elements: str
  sample:
    - "FAIL spark2: llmfleet_fabric_ip '10.0.0.25' duplicates spark1's; give each host its own data-plane IPv4 (the QSFP address)"
    - "ok   one ray_head per cluster (default: spark1)"
checks:
  description: One entry per check, with its findings.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Check id (C(ray_head), C(fabric_ip), C(gpu_arch), C(engine_profile), C(parallelism), C(versions)).
      type: str
    title:
      description: What the check verifies.
      type: str
    ok:
      description: Whether the check passed.
      type: bool
    details:
      description: "What was found when the check passed (e.g. C(default: spark1))."
      type: str
    findings:
      description: Problems, each with C(hosts), C(variable), C(value), C(problem), C(fix), C(message), C(severity).
      type: list
      elements: dict
report_json:
  description: Absolute path of the JSON report written.
  returned: when O(report_json) is set
  type: str
"""
