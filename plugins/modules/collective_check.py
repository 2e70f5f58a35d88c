#!/usr/bin/python
# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

DOCUMENTATION = r'''
---
module: collective_check
short_description: One rank of a real all-reduce across the serving nodes; bandwidth and the transport used
version_added: 0.1.0
description:
  - Runs one rank of a C(torch.distributed) all-reduce with the engine venv's Python, as the service user,
    with the engine's env files loaded (so C(NCCL_SOCKET_IFNAME), C(GLOO_SOCKET_IFNAME), C(NCCL_IB_DISABLE)
    and C(NCCL_IB_HCA) are the ones the engine gets). Run it on every node of the group in the same task;
    the ranks meet at I(master_addr):I(master_port) (the serving head's fabric IP).
  - Backend C(auto) is NCCL when the node has a CUDA device, else gloo (TCP over the fabric NIC, the CPU sim).
  - With NCCL, C(NCCL_DEBUG=INFO) is set and its output parsed (C(NET/IB) vs C(NET/Socket)) to report the
    transport NCCL really used; with I(rdma_expected) a fallback to sockets is flagged.
  - Returns the median time of I(iters) all-reduces of I(size_mb) MiB and the bandwidth in Gbit/s
    (C(busbw) as nccl-tests computes it). Fails only when the probe cannot run; a failed rendezvous or a wrong
    sum is reported in RV(error) and RV(correct).
author:
  - llmfleet maintainers (@llmfleet)
options:
  venv:
    description: Venv whose Python has torch (the engine release).
    type: path
    default: /opt/llmfleet/venvs/current
  run_as:
    description: User to run the rank as; empty runs as the connection user.
    type: str
    default: llmfleet
  backend:
    description: C(auto), C(nccl) or C(gloo).
    type: str
    default: auto
    choices: [auto, nccl, gloo]
  master_addr:
    description: Fabric IP of rank 0 (it hosts the rendezvous store).
    type: str
    required: true
  master_port:
    description: TCP port of the rendezvous store on I(master_addr) (must be free there).
    type: int
    default: 29533
  rank:
    description: This node's rank.
    type: int
    required: true
  world_size:
    description: Number of ranks (nodes of the group).
    type: int
    required: true
  size_mb:
    description: MiB reduced per all-reduce.
    type: float
    default: 64
  iters:
    description: Timed all-reduces (the median is reported).
    type: int
    default: 5
  warmup:
    description: Untimed all-reduces first.
    type: int
    default: 2
  timeout:
    description: Seconds for the rendezvous and each collective; the module itself gives up after twice that.
    type: int
    default: 90
  env_files:
    description: C(KEY=VALUE) env files loaded in order (a leading C(-) marks an optional file, as in systemd).
    type: list
    elements: str
    default: [/etc/llmfleet/comm.env, -/etc/llmfleet/engine.env, -/etc/llmfleet/nccl.env]
  env:
    description: Extra variables, laid over the env files.
    type: dict
    default: {}
  rdma_expected:
    description: Every node of the group has Up RDMA; NCCL on C(NET/Socket) is then reported as a fallback.
    type: bool
    default: false
extends_documentation_fragment:
  - llmfleet.cluster.attributes.read_only
notes:
  - Linux nodes with torch in the engine venv.
'''

EXAMPLES = r'''
- name: All-reduce across the serving group (every rank in the same task)
  llmfleet.cluster.collective_check:
    master_addr: "{{ hostvars[groups['ray_head'][0]].llmfleet_fabric_ip }}"
    rank: "{{ groups['serve_nodes'].index(inventory_hostname) }}"
    world_size: "{{ groups['serve_nodes'] | length }}"
    size_mb: 64
  register: allreduce
'''

RETURN = r'''
backend:
  description: The backend used (nccl or gloo).
  type: str
  returned: always
  sample: gloo
transport:
  description: C(IB) or C(Socket) (NCCL, parsed from its INFO lines), C(gloo/TCP) for gloo, null when NCCL logged none.
  type: str
  returned: always
  sample: Socket
transport_status:
  description: PASS, WARN or FAIL of the transport against I(rdma_expected).
  type: str
  returned: always
transport_detail:
  description: The reason for RV(transport_status), with the fix.
  type: str
  returned: always
nccl:
  description: Parsed NCCL INFO output (transport, link layers, GDRDMA, channels, evidence lines).
  type: dict
  returned: always
busbw_gbps:
  description: Bus bandwidth in Gbit/s (median time).
  type: float
  returned: always
algbw_gbps:
  description: Algorithm bandwidth in Gbit/s (median time).
  type: float
  returned: always
time_s:
  description: Median seconds of one all-reduce.
  type: float
  returned: always
size_bytes:
  description: Bytes reduced per all-reduce.
  type: int
  returned: always
correct:
  description: The reduced values equal the expected sum.
  type: bool
  returned: always
error:
  description: Why the rank failed (rendezvous timeout, peer gone); empty when it ran.
  type: str
  returned: always
'''

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.llmfleet.cluster.plugins.module_utils import collective
from ansible_collections.llmfleet.cluster.plugins.module_utils import nccl as nccl_utils
from ansible_collections.llmfleet.cluster.plugins.module_utils import nccl_debug


def read_env_files(paths):
    env, missing = {}, []
    for spec in paths:
        optional = spec.startswith('-')
        path = spec[1:] if optional else spec
        if not os.path.exists(path):
            if not optional:
                missing.append(path)
            continue
        with open(path, encoding='utf-8') as handle:
            env.update(nccl_utils.parse_env_file(handle.read()))
    return env, missing


def main():
    module = AnsibleModule(
        argument_spec=dict(
            venv=dict(type='path', default='/opt/llmfleet/venvs/current'),
            run_as=dict(type='str', default='llmfleet'),
            backend=dict(type='str', default='auto', choices=['auto', 'nccl', 'gloo']),
            master_addr=dict(type='str', required=True),
            master_port=dict(type='int', default=29533),
            rank=dict(type='int', required=True),
            world_size=dict(type='int', required=True),
            size_mb=dict(type='float', default=64),
            iters=dict(type='int', default=5),
            warmup=dict(type='int', default=2),
            timeout=dict(type='int', default=90),
            env_files=dict(type='list', elements='str',
                           default=['/etc/llmfleet/comm.env', '-/etc/llmfleet/engine.env', '-/etc/llmfleet/nccl.env']),
            env=dict(type='dict', default={}),
            rdma_expected=dict(type='bool', default=False),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        args = collective.probe_args(p['rank'], p['world_size'], p['master_addr'], p['master_port'],
                                     int(p['size_mb'] * 1024 * 1024), p['iters'], p['warmup'], p['timeout'], p['backend'])
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    env, missing = read_env_files(p['env_files'])
    if missing:
        module.fail_json(msg='env file(s) missing: %s (run the fabric role first)' % ', '.join(missing))
    env.update({k: str(v) for k, v in p['env'].items()})
    python = os.path.join(p['venv'], 'bin', 'python')
    if not os.path.exists(python):
        module.fail_json(msg='%s not found: the engine venv is not installed (python_env role)' % python)
    cmd = [python, '-c', collective.PROBE, json.dumps(args)]
    if p['run_as']:
        cmd = [module.get_bin_path('runuser', required=True), '-u', p['run_as'], '--'] + cmd
    rc, out, err = module.run_command(cmd, cwd='/', environ_update=env)
    try:
        doc = collective.parse_output(out)
    except ValueError:
        module.fail_json(msg='the all-reduce probe failed (rc=%s): %s' % (rc, (err or out)[-2000:]), rc=rc)
    res = collective.result(doc)
    summary = nccl_debug.summarize(out + '\n' + err)
    if res['backend'] == 'gloo':
        transport, status, detail = 'gloo/TCP', ('WARN' if p['rdma_expected'] else 'PASS'), (
            'gloo over TCP on %s (no CUDA device: NCCL and RDMA cannot be exercised here)' % (res['gloo_ifname'] or 'the default NIC')
            if p['rdma_expected'] else 'gloo over TCP on %s (no RDMA on this group)' % (res['gloo_ifname'] or 'the default NIC'))
    else:
        transport = summary['transport']
        status, detail = nccl_debug.verdict(summary, p['rdma_expected'])
    res.update(changed=False, transport=transport, transport_status=status, transport_detail=detail,
               nccl=summary, rc=rc, stderr_tail=(err or '')[-1500:] if res['error'] else '')
    module.exit_json(**res)


if __name__ == '__main__':
    main()
