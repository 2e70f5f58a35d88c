# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
# Documentation only: the work is done on the controller by the action plugin of the same name
# (plugins/action/wait_progress.py), as ansible-core does for assert/debug.

from __future__ import annotations

DOCUMENTATION = r"""
---
module: wait_progress
short_description: Wait for an async job and print a progress line every few seconds while it runs
version_added: 0.1.0
author: llmfleet maintainers (!UNKNOWN)
description:
  - >-
    Polls an async job (a task started with C(async) and C(poll=0)) with C(ansible.builtin.async_status)
    until it ends or O(timeout) seconds pass, and every O(report_every) seconds prints, at normal
    verbosity, a line with the host, what runs, the time elapsed and a detail, for example
    C(spark1: tiny-llama loading 45 s (engine log: Loading weights took 2.1 GiB)).
  - The detail is the last meaningful line of O(detail_argv)'s output on the host (a journal, a log
    tail), without ANSI codes or time/level prefixes and with anything that looks like a key, token or
    C(Bearer) header masked. It is read only when a line is due; a detail that cannot be read is left out.
  - When the job ends it prints the time it took and returns the job's result as
    C(ansible.builtin.async_status) does, so a failed job fails the task with the job's own message
    and data (for example the engine's journal). It then removes the job's status file (O(cleanup)).
  - In check mode it does not wait (nothing was started) and returns skipped.
options:
  what:
    description: What runs, as the progress line names it (C(tiny-llama loading), C(vllm source build)).
    type: str
    required: true
  host:
    description: The name the lines start with; the inventory host by default (C(controller) for a
      job delegated to the controller).
    type: str
  timeout:
    description: Seconds to wait in all. After it the task fails with O(timeout_msg); the job itself
      ends at its own C(async) limit.
    type: int
    required: true
  fast_poll:
    description: Seconds between polls during the first O(fast_window) seconds (a short job is not
      held back by a long O(poll)); 0 turns the fast phase off.
    type: int
    default: 0
  fast_window:
    description: Seconds the fast polls last.
    type: int
    default: 0
  report_every:
    description: Seconds between progress lines (the job's end always prints a line); 0 prints only
      the final line.
    type: int
    default: 15
  detail_argv:
    description: A command run on the host when a line is due; the last meaningful line of its
      output is the line's detail. Empty for no detail. It must not print secrets (they are masked
      by pattern, not by value).
    type: list
    elements: str
    default: []
  detail_label:
    description: What the detail is, as the line names it (C(engine log), C(build log)).
    type: str
    default: log
  timeout_msg:
    description: The failure message when O(timeout) passes (say which variable raises it).
    type: str
  cleanup:
    description: Remove the job's status file once the job ended.
    type: bool
    default: true
extends_documentation_fragment:
  - llmfleet.cluster.attributes.host_wait_action
attributes:
  check_mode:
    support: full
    details: Returns skipped without waiting (a job is never started in check mode).
notes:
  - The lines go through the controller's display, so they show in the default callback's output
    without C(-v); with several hosts they interleave, each starting with its host.
"""

EXAMPLES = r"""
- name: Start the API rank and wait until it serves
  llmfleet.cluster.llm_server:
    name: llmfleet-serve-0
    state: started
  async: 2040
  poll: 0
  register: serve_api_job

- name: Wait for the engine to load, a line every 15 s with the journal's last line
  llmfleet.cluster.wait_progress:
    jid: "{{ serve_api_job.ansible_job_id }}"
    what: tiny-llama loading
    timeout: 2040
    poll: 10
    fast_poll: 2
    fast_window: 180
    detail_argv: [journalctl, -u, llmfleet-serve-0.service, -n, "30", --no-pager, -o, cat]
    detail_label: engine log
  register: serve_api_result

- name: Wait for a build job delegated to the controller
  llmfleet.cluster.wait_progress:
    jid: "{{ build_job.ansible_job_id }}"
    what: wheelhouse build
    host: controller
    timeout: 3600
  delegate_to: localhost
"""

RETURN = r"""
finished:
  description: Whether the job ended (false after O(timeout)).
  returned: unless skipped in check mode
  type: bool
  sample: true
elapsed:
  description: Seconds waited.
  returned: unless skipped in check mode
  type: float
  sample: 47.3
ansible_job_id:
  description: The job waited for.
  returned: unless skipped in check mode
  type: str
  sample: "j123456789.4242"
detail:
  description: The last detail read, after O(timeout).
  returned: when the wait timed out
  type: str
  sample: "Loading safetensors checkpoint shards: 50% Completed | 1/2"
rc:
  description: The job's exit code, with the rest of the job's own result (C(stdout), C(msg), ...).
  returned: when the job ended and returned one
  type: int
  sample: 0
"""
