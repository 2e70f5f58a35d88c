#!/usr/bin/python
# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

DOCUMENTATION = r"""
module: gpu_info
short_description: Report NVIDIA GPUs, their CUDA arch (sm_121, sm_110, sm_90, ...), driver and CUDA version
version_added: 0.1.0
author: llmfleet maintainers (!UNKNOWN)
description:
  - Runs C(nvidia-smi --query-gpu=index,name,compute_cap,driver_version,memory.total,uuid
    --format=csv,noheader,nounits) and reads the CUDA version from the plain C(nvidia-smi) header.
  - Turns the compute capability into the CUDA arch name (C(12.1) is C(sm_121)).
  - Unified-memory GPUs (DGX Spark GB10, Jetson Thor) report C(memory.total) as C([N/A]); they are
    returned with C(memory_mib=null) and C(unified_memory=true).
  - A host without C(nvidia-smi) or without a GPU is a normal, successful result with RV(gpu_count=0).
  - Read-only; it changes nothing.
options:
  nvidia_smi_path:
    description:
      - Path of C(nvidia-smi). When not set, it is looked up on the E(PATH).
      - When the tool is not there, the module returns no GPU (with a warning when this path was
        given but does not exist).
    type: path
extends_documentation_fragment:
  - llmfleet.cluster.attributes.read_only
seealso:
  - module: llmfleet.cluster.rdma_info
"""

EXAMPLES = r"""
- name: Discover GPUs
  llmfleet.cluster.gpu_info:
  register: gpu

- name: Check the inventory's arch against the hardware
  ansible.builtin.assert:
    that: gpu.gpu_arch == llmfleet_gpu_arch
    fail_msg: "inventory says {{ llmfleet_gpu_arch }}, the GPU is {{ gpu.gpu_arch }}"
  when: gpu.gpu_count > 0
"""

RETURN = r"""
gpus:
  description: One entry per GPU, in C(nvidia-smi) index order.
  returned: always
  type: list
  elements: dict
  contains:
    index:
      description: GPU index.
      type: int
      sample: 0
    name:
      description: GPU name.
      type: str
      sample: NVIDIA GB10
    compute_cap:
      description: Compute capability.
      type: str
      sample: "12.1"
    arch:
      description: CUDA arch name of the compute capability; null when unknown.
      type: str
      sample: sm_121
    driver_version:
      description: Driver version.
      type: str
      sample: 580.95.05
    memory_mib:
      description: Dedicated GPU memory in MiB; null on unified-memory GPUs.
      type: int
      sample: 81559
    unified_memory:
      description: True when C(nvidia-smi) reports no dedicated memory (C([N/A])).
      type: bool
      sample: true
    uuid:
      description: GPU UUID.
      type: str
      sample: GPU-a1b2c3d4-0000-1111-2222-333344445555
  sample:
    - {index: 0, name: NVIDIA GB10, compute_cap: "12.1", arch: sm_121, driver_version: 580.95.05,
       memory_mib: null, unified_memory: true, uuid: GPU-a1b2c3d4-0000-1111-2222-333344445555}
gpu_count:
  description: Number of GPUs.
  returned: always
  type: int
  sample: 1
gpu_arch:
  description: The CUDA arch when all GPUs agree, else null (also null without GPUs).
  returned: always
  type: str
  sample: sm_121
driver_version:
  description: NVIDIA driver version; null without GPUs.
  returned: always
  type: str
  sample: 580.95.05
cuda_version:
  description: Highest CUDA version the driver supports (C(nvidia-smi) header); null when unknown.
  returned: always
  type: str
  sample: "13.0"
nvidia_smi_error:
  description: Why C(nvidia-smi) gave no GPU list (driver not loaded, ...); null when it worked or found no GPU.
  returned: always
  type: str
  sample: "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmfleet.cluster.plugins.module_utils import gpu as gpu_utils
from ansible_collections.llmfleet.cluster.plugins.module_utils._tool_path import find_tool


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nvidia_smi_path=dict(type='path'),
        ),
        supports_check_mode=True,
    )
    smi = find_tool(module, 'nvidia_smi_path', 'nvidia-smi', 'reporting no GPU')
    gpus, header, error = [], None, None
    if smi:
        rc, out, err = module.run_command([smi] + list(gpu_utils.QUERY_ARGS))
        text = '%s\n%s' % (out, err)
        if rc == 0:
            gpus, malformed = gpu_utils.parse_query_gpu(out)
            for item in malformed:
                module.warn('nvidia-smi line %d not understood: %s'
                            % (item['line_number'], item['line']))
        elif not gpu_utils.is_no_devices(text):
            error = (err or out).strip()[:500] or 'nvidia-smi exited with %d' % rc
            module.warn('nvidia-smi failed (rc=%d): %s' % (rc, error))
        if gpus:
            rc, out, dummy = module.run_command([smi])
            if rc == 0:
                header = out

    result = gpu_utils.summarize(gpus, header)
    module.exit_json(changed=False, nvidia_smi_error=error, **result)


if __name__ == '__main__':
    main()
