#!/usr/bin/python
# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

DOCUMENTATION = r"""
module: env_files_info
short_description: Read the environment a unit's env files declare, in one call
version_added: 0.1.0
author: llmfleet maintainers (!UNKNOWN)
description:
  - Reads systemd C(EnvironmentFile=) files (C(KEY=VALUE) lines, comments, C(export), one level of quotes)
    in the order given and merges them as systemd does (a later file's value wins) - one module call where a
    M(ansible.builtin.slurp) per file and a merge in Jinja took a task each.
  - A missing file is not part of the declared environment (an optional C(EnvironmentFile=-...)); any other
    read error fails.
  - The logic is C(plugins/module_utils/env_files.py) (unit tables); this module only reads.
  - The values may be secret (an API key in an engine env file) - put C(no_log) on a task that reads such files.
options:
  paths:
    description: The env files, in the order the unit loads them.
    type: list
    elements: path
    required: true
  include:
    description: Keep only the names this regular expression matches at their start (empty - keep all).
    type: str
    default: ''
extends_documentation_fragment:
  - llmfleet.cluster.attributes.read_only
seealso:
  - module: llmfleet.cluster.ray_cluster_info
"""

EXAMPLES = r"""
- name: Read the env files the Ray unit loads
  llmfleet.cluster.env_files_info:
    paths:
      - /etc/llmfleet/comm.env
      - /etc/llmfleet/engine.env
      - /etc/llmfleet/ray.env
    include: '^(NCCL_|GLOO_|VLLM_)'
  register: declared

- name: Show the interface NCCL is told to use
  ansible.builtin.debug:
    msg: "{{ declared.env.NCCL_SOCKET_IFNAME | default('unset') }}"
"""

RETURN = r"""
env:
  description: The merged variables whose names O(include) matches.
  returned: always
  type: dict
  sample: {NCCL_SOCKET_IFNAME: eth1, VLLM_HOST_IP: 10.231.1.11}
found:
  description: The files that exist and were read, in the order given.
  returned: always
  type: list
  elements: str
  sample: [/etc/llmfleet/comm.env, /etc/llmfleet/ray.env]
"""

import re

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native, to_text

from ansible_collections.llmfleet.cluster.plugins.module_utils import env_files


def _read(path):
    try:
        with open(path, 'rb') as handle:
            return to_text(handle.read(), errors='surrogate_or_strict')
    except FileNotFoundError:
        return None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            paths=dict(type='list', elements='path', required=True),
            include=dict(type='str', default=''),
        ),
        supports_check_mode=True,
    )
    try:
        re.compile(module.params['include'])
    except re.error as exc:
        module.fail_json(msg='include %r is not a regular expression: %s' % (module.params['include'], exc))
    texts, found = [], []
    for path in module.params['paths']:
        try:
            text = _read(path)
        except (OSError, UnicodeError) as exc:
            module.fail_json(msg='%s: %s' % (path, to_native(exc)))
        texts.append(text)
        if text is not None:
            found.append(path)
    module.exit_json(changed=False, env=env_files.declared_env(texts, module.params['include']), found=found)


if __name__ == '__main__':
    main()
