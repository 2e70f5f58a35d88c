# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The controller's directories of the collection (its cache, its reports), resolved in one place for every role and playbook."""

DOCUMENTATION = r"""
name: controller_dir
author:
  - llmfleet maintainers (@llmfleet)
version_added: "0.2.0"
short_description: The controller's cache or reports directory of llmfleet
description:
  - C(cache) is where the controller keeps what it downloads or builds once for the whole fleet
    (wheelhouses, venv archives, model staging, the gateway's wheels, the bench plot venv); it is
    C($LLMFLEET_CACHE) when set, else C(~/.cache/llmfleet) (C($HOME/.cache/llmfleet)).
  - C(reports) is where the playbooks write their reports (validate, upgrade, summary, bench); it is
    I(override) when not empty (pass the inventory's C(llmfleet_reports_dir)), else C($LLMFLEET_REPORTS)
    when set, else C(reports) under the directory C(ansible-playbook) runs in (C($PWD/reports)).
  - Reads the controller's environment only; creates nothing.
options:
  _terms:
    description: Which directory, C(cache) or C(reports).
    type: list
    elements: str
    required: true
  override:
    description: A directory that wins over the environment when not empty (C(reports) only).
    type: str
    default: ""
"""

EXAMPLES = r"""
- name: The models role's staging directory on the controller
  ansible.builtin.set_fact:
    models_cache: "{{ lookup('llmfleet.cluster.controller_dir', 'cache') }}/models"

- name: Where validate writes its report
  ansible.builtin.debug:
    msg: "{{ lookup('llmfleet.cluster.controller_dir', 'reports', override=llmfleet_reports_dir | default('')) }}"
"""

RETURN = r"""
_raw:
  description: One element, the directory's path (not created).
  type: list
  elements: str
"""

import os

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase


def controller_dir(which, environ, override=''):
    """The path of `which` ('cache' or 'reports') from the controller's environment `environ`."""
    if which == 'cache':
        return environ.get('LLMFLEET_CACHE') or environ.get('HOME', '') + '/.cache/llmfleet'
    if which == 'reports':
        return override or environ.get('LLMFLEET_REPORTS') or environ.get('PWD', '') + '/reports'
    raise AnsibleLookupError("controller_dir takes 'cache' or 'reports', got %r" % (which,))


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        unknown = sorted(set(kwargs) - {'override'})
        if unknown:
            raise AnsibleLookupError('controller_dir: unknown option(s) %s (override)' % ', '.join(unknown))
        if len(terms) != 1:
            raise AnsibleLookupError("controller_dir takes one term, 'cache' or 'reports', got %r" % (terms,))
        override = str(kwargs.get('override') or '')
        if override and terms[0] != 'reports':
            raise AnsibleLookupError('controller_dir: override applies to reports only')
        return [controller_dir(str(terms[0]), os.environ, override)]
