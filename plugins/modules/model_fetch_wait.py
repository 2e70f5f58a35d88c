# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
# Documentation only: the work is done on the controller by the action plugin of the same name
# (plugins/action/model_fetch_wait.py), as ansible-core does for assert/debug.

from __future__ import annotations

DOCUMENTATION = r"""
---
module: model_fetch_wait
short_description: Wait for a node's model download and print its progress while it runs
version_added: 0.1.0
author: llmfleet maintainers (!UNKNOWN)
description:
  - Polls an async job (the models role's C(fetch_model.py) started with C(async)/C(poll=0)) with
    C(ansible.builtin.async_status) and prints, every O(poll) seconds, the bytes done, the total, the
    percentage and the rate read from the script's progress file on the node.
  - Returns the job's result with the script's final JSON line parsed into RV(fetch). It does not fail
    when the job failed; the models role turns RV(fetch) into host, cause and fix.
options:
  progress_file:
    description: The progress JSON the fetch script rewrites (C({done, total, started, now})).
    type: path
    required: true
  timeout:
    description: Seconds to wait in all; the job goes on after it (re-run to wait again).
    type: int
    default: 86400
extends_documentation_fragment:
  - llmfleet.cluster.attributes.host_wait_action
attributes:
  check_mode:
    support: none
    details: It waits for a job started outside check mode; the models role skips it in check mode.
"""

EXAMPLES = r"""
- name: Download on the source node (async)
  ansible.builtin.command:
    argv: [/opt/llmfleet/venvs/current/bin/python, /opt/llmfleet/fetch_model.py, /opt/llmfleet/models/.fetch.json]
  async: 86400
  poll: 0
  register: job
  changed_when: false

- name: Wait, printing bytes done / total and the rate
  llmfleet.cluster.model_fetch_wait:
    jid: "{{ job.ansible_job_id }}"
    progress_file: /opt/llmfleet/models/m/.llmfleet-progress.json
"""

RETURN = r"""
fetch:
  description: The fetch script's final JSON line (C(changed, bytes, seconds) or C(failed, kind, msg)).
  returned: always
  type: dict
  sample: {"changed": true, "bytes": 1073741824, "seconds": 12.5}
progress:
  description: The last progress read from the node.
  returned: always
  type: dict
  sample: {"done": 1073741824, "total": 1073741824, "started": 1764000000.0, "now": 1764000012.5}
rc:
  description: The job's exit code.
  returned: when the job ended
  type: int
  sample: 0
"""
