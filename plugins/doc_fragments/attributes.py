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
