# -*- coding: utf-8 -*-
# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Shared module attributes: each fragment documents every attribute of the modules that list it.

A fragment cannot extend another one (ansible-core merges only the fragments a module lists), so
each fragment here carries the descriptions that ansible.builtin.action_common_attributes (and its
conn and flow parts) would give, word for word, and a module lists this fragment alone in their
place; a module's own attributes entries still win over the fragment's (check_mode of the waits)."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type


class ModuleDocFragment(object):

    # The fact-gathering modules: they read and change nothing.
    READ_ONLY = r"""
options: {}
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target, if not supported the action will be skipped.
    support: full
    details: Reads and changes nothing, so it runs the same in check mode.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode
    support: none
    details: Changes nothing, so there is no diff.
  platform:
    description: Target OS/families that can be operated against
    support: full
    platforms: posix
"""

    # Action plugins that wait on an async job on the host (wait_progress, model_fetch_wait): the
    # job id and the poll interval are the same option in both; each module adds its own
    # check_mode support and details (what it does in check mode).
    HOST_WAIT_ACTION = r"""
options:
  jid:
    description: The async job id (C(ansible_job_id) of the task started with C(async) and C(poll=0)).
    type: str
    required: true
  poll:
    description: Seconds between polls of the job.
    type: int
    default: 10
attributes:
  action:
    description: Indicates this has a corresponding action plugin so some parts of the options can be executed on the controller
    support: full
  async:
    description: Supports being used with the C(async) keyword
    support: none
  become:
    description: Is usable alongside become keywords
    support: full
  bypass_host_loop:
    description:
      - Forces a 'global' task that does not execute per host, this bypasses per host templating and serial,
        throttle and other loop considerations
      - Conditionals will work as if C(run_once) is being used, variables used will be from the first available host
      - This action will not work normally outside of lockstep strategies
    support: none
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target, if not supported the action will be skipped.
  connection:
    description: Uses the target's configured connection information to execute code on it
    support: full
  delegation:
    description: Can be used in conjunction with delegate_to and related keywords
    support: full
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode
    support: none
  platform:
    description: Target OS/families that can be operated against
    support: N/A
    platforms: posix
"""

    # Modules that read the host and keep what they read in a cache file for the next run
    # (engine_flags): check mode reads as a real run does, so its result is the same. Only what
    # differs from READ_ONLY is here: list it before read_only, as the first fragment's values win.
    READ_CACHED = r"""
options: {}
attributes:
  check_mode:
    details: >-
      Reads as a real run does (read-only commands included), so the result is the same; a cache
      file that is missing is reported as a change and not written.
  diff_mode:
    support: partial
    details: Shows that a cache file would be created, not its content.
"""
