# -*- coding: utf-8 -*-
# Copyright: llmfleet.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
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
