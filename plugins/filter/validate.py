# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Validation report filters (playbooks/validate.yml): judge the collected data, render Markdown.

Documentation of each filter lives beside this file in <filter_name>.yml (ansible-doc -t filter).
The logic is in plugins/module_utils/validate_report.py.
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.llmfleet.cluster.plugins.plugin_utils.plain_data import plain
from ansible_collections.llmfleet.cluster.plugins.plugin_utils import lazy_import

_vr = lazy_import.module_utils('validate_report')


def validate_report(raw):
    """Checks, one line each, topology and summary from what validate.yml collected."""
    if not isinstance(raw, dict):
        raise AnsibleFilterError('validate_report expects a mapping, got %s' % type(raw).__name__)
    return _vr.evaluate(plain(raw))


def validate_markdown(report):
    """Markdown of a validate_report result, opening with a Mermaid topology diagram."""
    if not isinstance(report, dict):
        raise AnsibleFilterError('validate_markdown expects the validate_report result, got %s' % type(report).__name__)
    return _vr.render_markdown(plain(report))


class FilterModule:
    def filters(self):
        return {
            'validate_report': validate_report,
            'validate_markdown': validate_markdown,
        }
