#!/usr/bin/python
# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

DOCUMENTATION = r"""
module: rdma_info
short_description: Report RDMA (RoCE/InfiniBand) devices, their netdevs and NCCL_IB_HCA
version_added: 0.1.0
author: llmfleet maintainers (!UNKNOWN)
description:
  - Lists the host's RDMA ports with their network interface and state, from C(ibdev2netdev)
    when it is installed, else from C(/sys/class/infiniband).
  - Adds the IPv4 address and MTU of each interface (from C(ip -j addr), else MTU from sysfs)
    and the port's link layer and state from sysfs.
  - Computes RV(rdma_up_netdevs) and RV(nccl_ib_hca) from the ports that are Up.
  - A host without any RDMA device (for example a Jetson Thor) is a normal, successful result
    with RV(source=none).
  - Read-only; it changes nothing.
options:
  ibdev2netdev_path:
    description:
      - Path of the C(ibdev2netdev) tool.
      - When not set, it is looked up on the E(PATH) (and C(/sbin), C(/usr/sbin)).
      - When the tool is not there, or fails, the module reads sysfs instead (with a warning
        when this path was given but does not exist).
    type: path
  sysfs_root:
    description: Where sysfs is mounted (C(class/infiniband) and C(class/net) are read under it).
    type: path
    default: /sys
  use_ibdev2netdev:
    description: Run C(ibdev2netdev). When V(false), only sysfs is read.
    type: bool
    default: true
extends_documentation_fragment:
  - llmfleet.cluster.attributes.read_only
notes:
  - RV(rdma_devices[].state) is C(Up) only when the interface link is up and, where the port state
    is known, the RDMA port is C(ACTIVE).
seealso:
  - module: llmfleet.cluster.gpu_info
"""

EXAMPLES = r"""
- name: Discover RDMA devices
  llmfleet.cluster.rdma_info:
  register: rdma

- name: Use the Up HCAs for NCCL
  ansible.builtin.debug:
    msg: "NCCL_IB_HCA={{ rdma.nccl_ib_hca }} over {{ rdma.rdma_up_netdevs | join(',') }}"
  when: rdma.rdma_up_netdevs | length > 0

- name: Only read sysfs (a container with /sys mounted elsewhere)
  llmfleet.cluster.rdma_info:
    use_ibdev2netdev: false
    sysfs_root: /host/sys
"""

RETURN = r"""
rdma_devices:
  description: One entry per RDMA port, in the order C(ibdev2netdev) (or sysfs, sorted by name) lists them.
  returned: always
  type: list
  elements: dict
  contains:
    ibdev:
      description: RDMA device name.
      type: str
      sample: rocep1s0f1
    port:
      description: RDMA port number.
      type: int
      sample: 1
    netdev:
      description: Network interface of the port; null for an InfiniBand port without IPoIB.
      type: str
      sample: enp1s0f1np1
    state:
      description: C(Up) or C(Down).
      type: str
      sample: Up
    port_state:
      description: RDMA port state (C(ACTIVE), C(DOWN), C(INIT), ...); null when unknown.
      type: str
      sample: ACTIVE
    link_layer:
      description: C(Ethernet) (RoCE) or C(InfiniBand); null when unknown.
      type: str
      sample: Ethernet
    ipv4:
      description: IPv4 address of the interface (global scope first); null when none or unknown.
      type: str
      sample: 192.168.100.10
    mtu:
      description: MTU of the interface; null when unknown.
      type: int
      sample: 9000
  sample:
    - {ibdev: rocep1s0f1, port: 1, netdev: enp1s0f1np1, state: Up, port_state: ACTIVE,
       link_layer: Ethernet, ipv4: 192.168.100.10, mtu: 9000}
    - {ibdev: rocep1s0f0, port: 1, netdev: enp1s0f0np0, state: Down, port_state: DOWN,
       link_layer: Ethernet, ipv4: null, mtu: 1500}
rdma_up_netdevs:
  description: Interfaces of the Up ports, de-duplicated, in device order.
  returned: always
  type: list
  elements: str
  sample: [enp1s0f1np1, enP2p1s0f1np1]
nccl_ib_hca:
  description: Comma-joined RDMA devices with an Up port (a value for C(NCCL_IB_HCA)); empty when none.
  returned: always
  type: str
  sample: rocep1s0f1,roceP2p1s0f1
source:
  description: Where the devices came from; C(none) when the host has no RDMA device.
  returned: always
  type: str
  sample: ibdev2netdev
  choices: [ibdev2netdev, sysfs, none]
unparsed_lines:
  description: Lines of C(ibdev2netdev) output that were not understood (also reported as warnings).
  returned: always
  type: list
  elements: dict
  sample: [{line_number: 3, line: "garbage"}]
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmfleet.cluster.plugins.module_utils import rdma
from ansible_collections.llmfleet.cluster.plugins.module_utils._tool_path import find_tool


def _listdir(path):
    try:
        return os.listdir(path)
    except OSError:
        return []


def _read_text(path):
    try:
        with open(path, 'r', encoding='utf-8') as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError):
        return None


def _from_ibdev2netdev(module):
    """(devices, malformed) from the tool, or (None, []) when it is absent or fails."""
    path = find_tool(module, 'ibdev2netdev_path', 'ibdev2netdev', 'reading sysfs', ['/sbin', '/usr/sbin', '/usr/bin'])
    if not path:
        return None, []
    rc, out, err = module.run_command([path])
    if rc != 0:
        detail = (err or out or '').strip()
        # exiting without a word means "no RDMA driver loaded": not worth a warning
        if detail:
            module.warn('%s exited with %d (%s); reading sysfs' % (path, rc, detail[:200]))
        return None, []
    return rdma.parse_ibdev2netdev(out)


def _addresses(module):
    ip = module.get_bin_path('ip', opt_dirs=['/sbin', '/usr/sbin'])
    if not ip:
        return {}
    rc, out, dummy = module.run_command([ip, '-j', 'addr', 'show'])
    if rc != 0:
        return {}
    return rdma.parse_ip_addr_json(out)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            ibdev2netdev_path=dict(type='path'),
            sysfs_root=dict(type='path', default='/sys'),
            use_ibdev2netdev=dict(type='bool', default=True),
        ),
        supports_check_mode=True,
    )
    root = module.params['sysfs_root']
    sysfs_devices = rdma.collect_sysfs(_listdir, _read_text, root=root)

    devices, malformed = None, []
    if module.params['use_ibdev2netdev']:
        devices, malformed = _from_ibdev2netdev(module)
    for item in malformed:
        module.warn('ibdev2netdev line %d not understood: %s' % (item['line_number'], item['line']))

    if devices:
        source = 'ibdev2netdev'
        devices = rdma.merge_sysfs(devices, sysfs_devices)
    elif sysfs_devices:
        # ibdev2netdev only lists Mellanox netdevs; sysfs also sees rxe, irdma, bnxt_re
        source = 'sysfs'
        devices = sysfs_devices
    else:
        source = 'none'
        devices = []

    if devices:
        devices = rdma.annotate_addresses(devices, _addresses(module))
        for dev in devices:
            if dev.get('mtu') is None and dev.get('netdev'):
                dev['mtu'] = rdma.sysfs_netdev_info(_read_text, root, dev['netdev'])['mtu']

    result = rdma.summarize(devices)
    module.exit_json(changed=False, source=source, unparsed_lines=malformed, **result)


if __name__ == '__main__':
    main()
