# -*- coding: utf-8 -*-
# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Shared module attributes (the fact-gathering modules all read and change nothing)."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type


class ModuleDocFragment(object):

    # List it before ansible.builtin.action_common_attributes (which describes each attribute):
    # the first fragment's values win, and that one sets platform support to N/A.
    READ_ONLY = r"""
options: {}
attributes:
  check_mode:
    support: full
    details: Reads and changes nothing, so it runs the same in check mode.
  diff_mode:
    support: none
    details: Changes nothing, so there is no diff.
  platform:
    support: full
    platforms: posix
"""

    # Action plugins that wait on a job on the host (wait_progress, model_fetch_wait): each adds
    # its own check_mode entry, which says what it does in check mode.
    HOST_WAIT_ACTION = r"""
options: {}
attributes:
  action:
    support: full
  async:
    support: none
  become:
    support: full
  bypass_host_loop:
    support: none
  connection:
    support: full
  delegation:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: posix
"""

    # Modules that read the host and keep what they read in a cache file for the next run
    # (engine_flags): check mode reads as a real run does, so its result is the same.
    READ_CACHED = r"""
options: {}
attributes:
  check_mode:
    support: full
    details: >-
      Reads as a real run does (read-only commands included), so the result is the same; a cache
      file that is missing is reported as a change and not written.
  diff_mode:
    support: partial
    details: Shows that a cache file would be created, not its content.
  platform:
    support: full
    platforms: posix
"""
