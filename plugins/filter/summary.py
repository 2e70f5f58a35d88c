# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The deploy summary's lines (see module_utils/summary.py; documentation in deploy_summary.yml)."""

from ansible.errors import AnsibleFilterError

from ansible_collections.llmfleet.cluster.plugins.plugin_utils import lazy_import

summary = lazy_import.module_utils('summary')


def deploy_summary(nodes, endpoints, api_key_file=None, ray=None, prometheus_url=None):
    try:
        return summary.summary_lines(dict(nodes), endpoints, api_key_file or None,
                                     dict(ray) if ray else None, prometheus_url or None)
    except (summary.SummaryError, TypeError) as exc:
        raise AnsibleFilterError('deploy_summary: %s' % exc)


class FilterModule:
    def filters(self):
        return {'deploy_summary': deploy_summary}
