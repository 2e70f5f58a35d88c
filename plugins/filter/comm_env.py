# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

DOCUMENTATION = r"""
name: comm_env
short_description: Per-host NCCL/Gloo/UCX/vLLM communication environment of a serving group
version_added: 0.1.0
author: llmfleet maintainers (!UNKNOWN)
description:
  - The single place that computes each host's communication environment.
  - The cluster transport is C(roce) only when every host of the serving group has Up RDMA
    devices, else C(socket) for all hosts (C(NCCL_IB_DISABLE=1) everywhere; a Spark on RoCE
    and a Thor on sockets otherwise fail in NCCL with C(wrong type 3 != 4)).
  - Per host it sets C(NCCL_SOCKET_IFNAME), C(GLOO_SOCKET_IFNAME), C(TP_SOCKET_IFNAME) to that
    host's fabric interface (never an exclusion list), C(VLLM_HOST_IP) to its fabric IP,
    C(UCX_NET_DEVICES) (fabric interface, or the Up RDMA netdevs with RoCE), C(NCCL_IB_DISABLE),
    and C(NCCL_IB_HCA) with RoCE only.
  - Global overrides, then per-host overrides, are applied last and win. A null value removes
    the variable.
  - Fails naming the host and the fix when a host of the group has no fabric interface or IP.
  - The same file provides C(llmfleet.cluster.cluster_transport) (input, O(group) and
    O(transport) as here; returns C(roce) or C(socket)) and C(llmfleet.cluster.env_file)
    (renders one host's env dict as a sorted, quoted systemd EnvironmentFile with a header
    comment; optional argument C(header)).
positional: group
options:
  _input:
    description:
      - 'Per-host facts: C({host: {fabric_ip, fabric_iface, rdma_up_netdevs, nccl_ib_hca}}).'
      - C(rdma_up_netdevs) and C(nccl_ib_hca) are the values returned by
        M(llmfleet.cluster.rdma_info) (a list or a comma-separated string each).
    type: dict
    required: true
  group:
    description: Inventory hostnames of the serving group.
    type: list
    elements: str
    required: true
  overrides:
    description: 'Environment overrides for every host: C({VAR: value}).'
    type: dict
    default: {}
  host_overrides:
    description: 'Per-host environment overrides: C({host: {VAR: value}}), applied after O(overrides).'
    type: dict
    default: {}
  transport:
    description:
      - C(auto) picks C(roce) only when every host has Up RDMA devices.
      - C(socket) forces sockets; C(roce) fails when a host has no Up RDMA device.
    type: str
    choices: [auto, roce, socket]
    default: auto
"""

EXAMPLES = r"""
- name: Compute the communication environment of the serving group
  ansible.builtin.set_fact:
    llmfleet_comm_env_all: >-
      {{ comm_facts | llmfleet.cluster.comm_env(serve_group,
                                                overrides={'NCCL_DEBUG': 'INFO'},
                                                host_overrides={'thor1': {'NCCL_PROTO': 'Simple'}}) }}
  vars:
    serve_group: "{{ groups['ray_head'] + groups['ray_workers'] }}"
    comm_facts:
      spark1: {fabric_ip: 192.168.100.10, fabric_iface: enp1s0f1np1,
               rdma_up_netdevs: [enp1s0f1np1, enP2p1s0f1np1], nccl_ib_hca: "rocep1s0f1,roceP2p1s0f1"}
      thor1: {fabric_ip: 192.168.100.20, fabric_iface: mgbe0_0, rdma_up_netdevs: [], nccl_ib_hca: ""}

- name: Write this host's EnvironmentFile
  ansible.builtin.copy:
    dest: /etc/llmfleet/comm.env
    content: "{{ llmfleet_comm_env_all[inventory_hostname] | llmfleet.cluster.env_file }}"
    mode: "0644"

- name: Show the cluster transport
  ansible.builtin.debug:
    msg: "{{ comm_facts | llmfleet.cluster.cluster_transport(serve_group) }}"
"""

RETURN = r"""
_value:
  description: 'C({host: {VAR: value}}) for every host of the group; values are strings.'
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.llmfleet.cluster.plugins.plugin_utils import lazy_import

_comm = lazy_import.module_utils('comm_env')
_nccl = lazy_import.module_utils('nccl')


def comm_env(facts, group, overrides=None, host_overrides=None, transport='auto'):
    try:
        return _comm.compute_comm_env(facts, group, overrides=overrides,
                                      host_overrides=host_overrides, transport=transport)
    except _comm.CommEnvError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def cluster_transport_filter(facts, group, transport='auto', planned=''):
    try:
        return _comm.cluster_transport(facts, group, transport=transport, planned=planned or '')
    except _comm.CommEnvError as exc:
        raise AnsibleFilterError('cluster_transport: %s' % exc) from exc


def env_file(env, header=None):
    try:
        if header is None:
            return _comm.render_env_file(env)
        return _comm.render_env_file(env, header=header)
    except ValueError as exc:
        raise AnsibleFilterError('env_file: %s' % exc) from exc


def parse_env_file_filter(text):
    """KEY=VALUE text (an EnvironmentFile) -> dict, as systemd reads it (no expansion)."""
    return _nccl.parse_env_file(str(text))


class FilterModule:
    def filters(self):
        return {
            'comm_env': comm_env,
            'cluster_transport': cluster_transport_filter,
            'env_file': env_file,
            'parse_env_file': parse_env_file_filter,
        }
