#!/usr/bin/python
# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

DOCUMENTATION = r"""
module: memory_fit
short_description: Check on the node that a serving group's layout fits its memory
version_added: 0.1.0
author: llmfleet maintainers (!UNKNOWN)
description:
  - Estimates, per node, the weights, activations and KV cache of O(profile) split as O(layout)
    (C(plugins/module_utils/memfit.py)) against the node's memory times the engine's share, with a floor
    the host must keep (unified memory on GB10 and Thor, where the OS, Ray and the engine share one pool).
  - The controller's gate checks the same on the platform's memory; this module confirms it with what
    the node has, in one call, before anything is stopped or started.
  - "The node's memory: O(node_memory_gib), else on a unified-memory node (a CPU profile, or an arch whose
    platform has unified memory: C(sm_121), C(sm_110)) C(MemTotal) or a lower cgroup limit (a container),
    read here. A discrete GPU without O(node_memory_gib) is not checked: RV(verdict=skip)."
  - The model's dimensions come from O(model_config), else the node copy's C(config.json) (O(config_path);
    a missing file or a directory of that name is no error), else the profile's C(model_facts).
  - Fails when the verdict is C(refuse), naming host, profile, layout, the reasons and the fix. It reads only.
options:
  profile:
    description: The resolved profile (C(llmfleet_plan.serve.profile_spec), model path on the node).
    type: dict
    required: true
  layout:
    description: The serving group's layout (C(llmfleet_plan.serve.layout)).
    type: dict
    required: true
  label:
    description: The host named in RV(line) and in the refusal.
    type: str
    default: ''
  gpu_arch:
    description: The node's CUDA arch (C(llmfleet_gpu_arch)); decides whether its memory is unified.
    type: str
    default: ''
  node_memory_gib:
    description: The node's memory for the engine (memory per GPU x GPUs per node on a discrete GPU); unset reads it.
    type: float
  model_config:
    description: The model's C(config.json) as a mapping (wins over O(config_path)).
    type: dict
  config_path:
    description: Where the model's C(config.json) is on the node.
    type: path
  overrides:
    description: The inventory's layout overrides (as the planner took them).
    type: dict
    default: {}
  env:
    description: The engine's environment (C(VLLM_CPU_KVCACHE_SPACE) sizes the CPU build's KV pool).
    type: dict
    default: {}
  concurrency:
    description: Full-length sequences that must be resident at once.
    type: int
    default: 1
  host_reserved_gib:
    description: Memory the host uses beside the engine (default 2 for a CPU profile, else 12).
    type: float
  host_floor_gib:
    description: Refuse when the host would keep less (default 1 for a CPU profile, else 6).
    type: float
  host_warn_gib:
    description: Warn when the host would keep less (default 2 for a CPU profile, else 10).
    type: float
  activation_gib:
    description: Activations and runtime per rank outside the KV pool (default 1.5 for a CPU profile, else 2).
    type: float
extends_documentation_fragment:
  - llmfleet.cluster.attributes.read_only
seealso:
  - module: llmfleet.cluster.engine_flags
"""

EXAMPLES = r"""
- name: Memory fit of this node's share of the group
  llmfleet.cluster.memory_fit:
    profile: "{{ serve_profile }}"
    layout: "{{ llmfleet_plan.serve.layout }}"
    label: "{{ inventory_hostname }}"
    gpu_arch: "{{ llmfleet_gpu_arch }}"
    config_path: "{{ serve_profile.model }}/config.json"
  register: fit

- name: One line per node
  ansible.builtin.debug:
    msg: "{{ fit.line }}"
"""

RETURN = r"""
verdict:
  description: C(fit), C(warn), C(refuse), or C(skip) (a discrete GPU whose memory was not given).
  returned: always
  type: str
  sample: fit
line:
  description: The numbers in one line, C(MEMFIT <verdict> <host>) and the estimate.
  returned: always
  type: str
  sample: "MEMFIT fit spark1: sim-tiny-llama TP=2 PP=1 max-model-len=512 x1: node 7.5 GiB, ..."
fit:
  description: The estimate (C(module_utils/memfit.py) profile_fit); empty when skipped.
  returned: always
  type: dict
source:
  description: Where the model's dimensions came from.
  returned: always
  type: str
  sample: profile model_facts
node_memory_gib:
  description: The memory the check used (GiB).
  returned: always
  type: float
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmfleet.cluster.plugins.module_utils import memfit
from ansible_collections.llmfleet.cluster.plugins.module_utils import platforms

MEMINFO = '/proc/meminfo'
# cgroup v2, then v1: a container's limit below MemTotal is what the node really has
CGROUP_LIMITS = ('/sys/fs/cgroup/memory.max', '/sys/fs/cgroup/memory/memory.limit_in_bytes')
GIB = 1073741824
UNIFIED_ARCHS = frozenset(p['gpu_arch'] for p in platforms.PLATFORMS.values() if p['unified_memory'] and p['gpu_arch'])
# (GPU, CPU profile) defaults of the knobs, docs in roles/serve/tasks/memory_fit.yml
KNOBS = {'host_reserved_gib': (12.0, 2.0), 'host_floor_gib': (6.0, 1.0), 'host_warn_gib': (10.0, 2.0),
         'activation_gib': (2.0, 1.5)}
FIX = ("Nothing was stopped or started. Fix: lower --max-model-len, add nodes (llmfleet_pipeline_parallel_size / "
       "serve_nodes), raise or lower the engine's share (--gpu-memory-utilization / --mem-fraction-static) as the "
       "reason says, use a smaller quantisation, or set serve_memory_fit_* to measured values (serve_memory_fit: "
       "false skips the check).")


def _read(path):
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError):
        return None


def node_memory_gib(meminfo, limit):
    """GiB the node has: MemTotal (text of /proc/meminfo), or the cgroup limit's text when it is lower."""
    total = 0
    for line in (meminfo or '').splitlines():
        if line.startswith('MemTotal:'):
            total = int(line.split()[1]) * 1024
            break
    limit = (limit or '').strip()
    cap = int(limit) if limit.isdigit() else total
    return round(min(total, cap) / float(GIB), 2)


def read_config(path):
    """(config dict or None, error): a missing file or a directory of that name is no error."""
    if not path or not os.path.exists(path) or os.path.isdir(path):
        return None, None
    try:
        with open(path) as handle:
            return json.load(handle), None
    except (IOError, OSError, ValueError) as exc:
        return None, '%s: %s' % (path, exc)


def describe(verdict, host, name, fit, source, floor):
    """The MEMFIT line of one node."""
    why = fit.get('reasons', []) + fit.get('notes', [])
    return ('MEMFIT %s %s: %s TP=%s PP=%s max-model-len=%s x%s: node %s GiB, engine %s GiB = weights %s + '
            'activations %s + KV pool %s (needs %s, room for %s full-length seqs); host keeps %s GiB (floor %s); '
            'dims from %s%s' % (
                verdict, host, name, fit.get('tensor_parallel_size'), fit.get('pipeline_parallel_size'),
                fit.get('max_model_len'), fit.get('concurrency'), fit.get('node_memory_gib'),
                fit.get('engine_budget_gib'), fit.get('weights_per_node_gib'), fit.get('activation_per_node_gib'),
                fit.get('kv_pool_per_node_gib'), fit.get('kv_needed_per_node_gib'), fit.get('max_full_length_seqs'),
                fit.get('host_headroom_gib'), floor, source, ('; ' + '; '.join(why)) if why else ''))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            profile=dict(type='dict', required=True),
            layout=dict(type='dict', required=True),
            label=dict(type='str', default=''),
            gpu_arch=dict(type='str', default=''),
            node_memory_gib=dict(type='float'),
            model_config=dict(type='dict'),
            config_path=dict(type='path'),
            overrides=dict(type='dict', default={}),
            env=dict(type='dict', default={}),
            concurrency=dict(type='int', default=1),
            host_reserved_gib=dict(type='float'),
            host_floor_gib=dict(type='float'),
            host_warn_gib=dict(type='float'),
            activation_gib=dict(type='float'),
        ),
        supports_check_mode=True,
    )
    p = module.params
    profile, host = p['profile'], p['label'] or 'this node'
    name = profile.get('name', '?')
    cpu = profile.get('device', 'gpu') == 'cpu'
    memory = p['node_memory_gib']
    if memory is None and not (cpu or p['gpu_arch'] in UNIFIED_ARCHS):
        module.exit_json(changed=False, verdict='skip', fit={}, source='', node_memory_gib=None, line=(
            'MEMFIT skip %s: %s has its own GPU memory; set serve_memory_fit_node_memory_gib (memory per GPU x GPUs '
            'per node) to check profile %s' % (host, p['gpu_arch'] or '?', name)))
    if memory is None:
        limit = next((text for text in (_read(path) for path in CGROUP_LIMITS) if text is not None), 'max')
        memory = node_memory_gib(_read(MEMINFO), limit)
    config, source = p['model_config'], 'serve_memory_fit_model_config'
    if config is None:
        config, error = read_config(p['config_path'])
        if error:
            module.fail_json(msg='%s: cannot read the model config %s' % (host, error))
        source = p['config_path'] if config is not None else 'profile model_facts'
    knobs = {key: p[key] if p[key] is not None else default[1 if cpu else 0] for key, default in KNOBS.items()}
    try:
        fit = memfit.profile_fit(profile, p['layout'], memory, config, p['overrides'], p['concurrency'],
                                 p['env'], **knobs)
    except (ValueError, TypeError, KeyError) as exc:
        module.fail_json(msg='%s: memory fit of profile %s: %s' % (host, name, exc))
    verdict = fit.get('verdict', 'fit')
    line = describe(verdict, host, name, fit, source, knobs['host_floor_gib'])
    result = dict(changed=False, verdict=verdict, fit=fit, source=source, node_memory_gib=memory, line=line)
    if verdict == 'refuse':
        module.fail_json(msg='%s: profile %s (TP=%s, PP=%s, --max-model-len %s) does not fit %s GiB: %s. %s' % (
            host, name, fit.get('tensor_parallel_size'), fit.get('pipeline_parallel_size'), fit.get('max_model_len'),
            fit.get('node_memory_gib'), '; '.join(fit.get('reasons', [])), FIX), **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
