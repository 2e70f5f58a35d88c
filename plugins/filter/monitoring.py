# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Prometheus scrape jobs from the cluster plan (module_utils/monitoring.py; docs in monitoring_scrape_configs.yml)."""

from ansible.errors import AnsibleFilterError

from ansible_collections.llmfleet.cluster.plugins.plugin_utils import lazy_import

monitoring = lazy_import.module_utils('monitoring')


def monitoring_scrape_configs(server, hostvars, prometheus_port=9090, node_exporter_port=9100, interval='10s', timeout='5s'):
    plan = (hostvars.get(server) or {}).get('llmfleet_plan')
    if not plan:
        raise AnsibleFilterError('monitoring_scrape_configs: %s has no llmfleet_plan (is it a host of the play?)' % server)
    plans = {}
    for host in plan['cluster']['hosts']:
        other = (hostvars.get(host) or {}).get('llmfleet_plan')
        if other:
            plans[host] = other
    try:
        return monitoring.scrape_configs(plans, server, int(prometheus_port), int(node_exporter_port),
                                         interval, timeout)
    except monitoring.MonitoringError as exc:
        raise AnsibleFilterError('monitoring_scrape_configs: %s' % exc)


def monitoring_unit_include(plan):
    return monitoring.unit_include(plan)


def monitoring_retention_bytes(size):
    try:
        return monitoring.retention_bytes(size)
    except monitoring.MonitoringError as exc:
        raise AnsibleFilterError('monitoring_retention_bytes: %s' % exc)


class FilterModule:
    def filters(self):
        return {'monitoring_scrape_configs': monitoring_scrape_configs, 'monitoring_unit_include': monitoring_unit_include,
                'monitoring_retention_bytes': monitoring_retention_bytes}
