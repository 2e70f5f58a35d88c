# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The platforms a node can be, as a table of facts: GPUs per node, memory, RoCE or not, GPU arch.

Pure, no I/O. A host's platform is its platform group (gb10, thor, hopper), else the platform of its
llmfleet_gpu_arch; a node serving a CPU profile (device: cpu, the sim) is on the ``cpu`` platform
whatever its group. The controller gate reads the table to check what the inventory declares before
any host is contacted (GPUs per node, the memory fit of a serving group, whether tensor parallelism
may span the group's nodes); the fabric role's detected transport confirms ``roce`` on the hosts.

memory_gib is what one node offers the engine and the OS: the unified pool of a GB10 or Thor
(MemTotal of a 128 GB node, as memfit's default), or one GPU's memory on a discrete platform.
"""

PLATFORMS = {
    'gb10': {'title': 'DGX Spark GB10', 'gpu_arch': 'sm_121', 'gpus_per_node': 1,
             'memory_gib': 121.7, 'unified_memory': True, 'roce': True},
    'thor': {'title': 'Jetson Thor', 'gpu_arch': 'sm_110', 'gpus_per_node': 1,
             'memory_gib': 121.7, 'unified_memory': True, 'roce': False},
    # an HGX board: up to 8 GPUs; 80 GiB is the H100's memory, the smallest of the family
    'hopper': {'title': 'Hopper (H100/H200)', 'gpu_arch': 'sm_90', 'gpus_per_node': 8,
               'memory_gib': 80.0, 'unified_memory': False, 'roce': True},
    # the sim's CPU build: no GPU, memory is the container's (unknown on the controller)
    'cpu': {'title': 'CPU only (vLLM/SGLang CPU build)', 'gpu_arch': None, 'gpus_per_node': None,
            'memory_gib': None, 'unified_memory': True, 'roce': False},
}
# The platform groups of an inventory, in the order a host is looked up.
GROUPS = ('gb10', 'thor', 'hopper')


def group_arch():
    """{platform group: the GPU arch its hardware has}."""
    return {name: PLATFORMS[name]['gpu_arch'] for name in GROUPS}


def platform_of(group_names, gpu_arch=None, device='gpu'):
    """The platform name of a host in the groups `group_names` with `gpu_arch`, serving on `device`;
    None when neither a platform group nor a known arch tells."""
    if device == 'cpu':
        return 'cpu'
    for name in GROUPS:
        if name in (group_names or ()):
            return name
    for name in GROUPS:
        if gpu_arch and PLATFORMS[name]['gpu_arch'] == gpu_arch:
            return name
    return None


def transport(platform, declared=None, emulated=False):
    """The collective transport a node of `platform` uses: fabric_transport when the inventory pins it
    (roce | socket); else socket on an emulated node (its peers share its machine: no RoCE between
    them, as between a Spark and a Thor), and RoCE where the platform has it."""
    if declared in ('roce', 'socket'):
        return declared
    if emulated:
        return 'socket'
    return 'roce' if platform and PLATFORMS.get(platform, {}).get('roce') else 'socket'
