#!/usr/bin/python
# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

DOCUMENTATION = r'''
---
module: ray_cluster_info
short_description: Ray cluster state, waiting for nodes, and an audit of each worker's environment
version_added: 0.1.0
description:
  - Connects to a running Ray cluster from one of its nodes (as the service user, with the release
    venv's Python) and returns the alive nodes with their IPs and resources.
  - With I(wait_for_nodes), I(wait_for_gpus) or I(expected), waits until the cluster has assembled
    and fails with the list of expected hosts that are missing (by fabric IP) when it does not.
  - With I(audit_env), runs a tiny task pinned to every node and compares the environment that
    node's Ray worker process really has with what that host should have.
author:
  - llmfleet maintainers (@llmfleet)
options:
  venv:
    description: Venv whose Python has Ray.
    type: path
    default: /opt/llmfleet/venvs/current
  address:
    description: GCS address of the head, C(ip:port).
    type: str
    required: true
  run_as:
    description: User to run the probe as (the Ray service user); empty runs as the connection user.
    type: str
    default: llmfleet
  expected:
    description: 'Hosts that must be in the cluster, C({host: fabric_ip}).'
    type: dict
    default: {}
  wait_for_nodes:
    description: Wait until at least this many nodes are alive.
    type: int
    default: 0
  wait_for_gpus:
    description: Wait until the cluster offers at least this many GPUs.
    type: int
    default: 0
  timeout:
    description: Seconds to wait.
    type: int
    default: 120
  audit_env:
    description: "Expected environment per fabric IP, C({ip: {VAR: value}}); compared with each node's worker."
    type: dict
    default: {}
  fail_on_drift:
    description: Fail when the audit finds a difference.
    type: bool
    default: true
  ray_env:
    description:
      - Environment the probe's Ray client runs with, besides the module's own; the node's Ray authentication (the
        cluster plan's C(ray_auth.env), i.e. C(RAY_AUTH_MODE) and C(RAY_AUTH_TOKEN_PATH)). A cluster that checks tokens refuses
        a client without them.
    type: dict
    default: {}
extends_documentation_fragment:
  - llmfleet.cluster.attributes.read_only
notes:
  - Linux nodes with Ray in a venv.
  - The probe is a Ray driver; it needs the node to be part of the cluster (run it on the head).
'''

EXAMPLES = r'''
- name: Wait for all four nodes with their fabric IPs
  llmfleet.cluster.ray_cluster_info:
    address: 10.0.0.25:6379
    expected: {spark1: 10.0.0.25, spark2: 10.0.0.22, thor1: 10.0.0.27, thor2: 10.0.0.26}
    wait_for_nodes: 4
    wait_for_gpus: 4
    timeout: 300
    ray_env: {RAY_AUTH_MODE: token, RAY_AUTH_TOKEN_PATH: /etc/llmfleet/ray-auth-token}

- name: Audit what each Ray worker process really has
  llmfleet.cluster.ray_cluster_info:
    address: 10.0.0.25:6379
    audit_env:
      10.0.0.25: {VLLM_HOST_IP: 10.0.0.25, NCCL_IB_DISABLE: "1"}
      10.0.0.22: {VLLM_HOST_IP: 10.0.0.22, NCCL_IB_DISABLE: "1"}
'''

RETURN = r'''
nodes:
  description: Alive nodes sorted by IP.
  type: list
  elements: dict
  returned: always
  sample: [{ip: 10.0.0.25, hostname: spark1, node_id: abc, cpus: 20.0, gpus: 1.0, memory_bytes: 1, object_store_bytes: 1, custom: {arch_sm_121: 1.0}}]
node_count:
  description: Number of alive nodes.
  type: int
  returned: always
gpus:
  description: GPUs offered by the alive nodes.
  type: float
  returned: always
cpus:
  description: CPUs offered by the alive nodes.
  type: float
  returned: always
missing:
  description: Expected hosts with no alive node at their fabric IP.
  type: list
  elements: str
  returned: always
unexpected_ips:
  description: Alive node IPs that belong to no expected host.
  type: list
  elements: str
  returned: always
audit_vars:
  description: The variables the audit compared (the union over O(audit_env)).
  type: list
  elements: str
  returned: always
env_drift:
  description: Audit differences, C({host, ip, var, expected, actual}).
  type: list
  elements: dict
  returned: always
'''

import json

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.llmfleet.cluster.plugins.module_utils import ray_state


def main():
    module = AnsibleModule(
        argument_spec=dict(
            venv=dict(type='path', default='/opt/llmfleet/venvs/current'),
            address=dict(type='str', required=True),
            run_as=dict(type='str', default='llmfleet'),
            expected=dict(type='dict', default={}),
            wait_for_nodes=dict(type='int', default=0),
            wait_for_gpus=dict(type='int', default=0),
            timeout=dict(type='int', default=120),
            audit_env=dict(type='dict', default={}),
            fail_on_drift=dict(type='bool', default=True),
            ray_env=dict(type='dict', default={}),
        ),
        supports_check_mode=True,
    )
    p = module.params
    audit_vars = sorted({v for env in p['audit_env'].values() for v in (env or {})})
    args = {'address': p['address'], 'timeout': p['timeout'], 'wait_for_nodes': p['wait_for_nodes'],
            'wait_for_gpus': p['wait_for_gpus'], 'expected_ips': sorted(set(p['expected'].values())),
            'audit_vars': audit_vars}
    cmd = [p['venv'] + '/bin/python', '-c', ray_state.PROBE, json.dumps(args)]
    if p['run_as']:
        cmd = [module.get_bin_path('runuser', required=True), '-u', p['run_as'], '--'] + cmd
    rc, out, err = module.run_command(cmd, cwd='/', environ_update={str(k): str(v) for k, v in p['ray_env'].items()})
    if rc != 0:
        module.fail_json(msg='Ray probe failed against %s (rc=%s): %s' % (p['address'], rc, err[-2000:]),
                         stdout=out[-2000:])
    try:
        state = ray_state.parse_probe_output(out)
    except ValueError as exc:
        module.fail_json(msg=str(exc), stdout=out[-2000:], stderr=err[-2000:])
    nodes = ray_state.summarize(state['nodes'])
    ip_to_host = dict((ip, h) for h, ip in p['expected'].items())
    result = dict(
        changed=False, nodes=nodes, node_count=len(nodes),
        gpus=sum(n['gpus'] for n in nodes), cpus=sum(n['cpus'] for n in nodes),
        missing=ray_state.missing_hosts(p['expected'], nodes),
        unexpected_ips=ray_state.unexpected_ips(p['expected'], nodes),
        env_drift=ray_state.env_drift(p['audit_env'], state.get('env'), ip_to_host) if p['audit_env'] else [],
        audit_vars=audit_vars,
    )
    problems = []
    if result['missing']:
        problems.append('missing from the Ray cluster: %s (expected at %s); check their %s units and that '
                        'they registered --node-ip-address = llmfleet_fabric_ip'
                        % (', '.join(result['missing']),
                           ', '.join(p['expected'][h] for h in result['missing']), 'llmfleet-ray'))
    if result['node_count'] < p['wait_for_nodes']:
        problems.append('%d nodes alive, %d wanted' % (result['node_count'], p['wait_for_nodes']))
    if result['gpus'] < p['wait_for_gpus']:
        problems.append('%g GPUs offered, %d wanted' % (result['gpus'], p['wait_for_gpus']))
    if result['env_drift'] and p['fail_on_drift']:
        problems.append('worker environment drift: ' + '; '.join(
            '%s %s=%r (should be %r)' % (d['host'], d['var'], d['actual'], d['expected']) for d in result['env_drift']))
    if problems:
        module.fail_json(msg='; '.join(problems) + ' (after %ss)' % p['timeout'], **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
