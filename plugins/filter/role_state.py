# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Which hosts of a play drifted from their role's last full run (documentation in drifted_hosts.yml,
converge_drift.yml)."""

from ansible_collections.llmfleet.cluster.plugins.plugin_utils import lazy_import

role_state = lazy_import.module_utils('role_state')


def drifted_hosts(hosts, hostvars, result_name):
    return role_state.drifted_hosts(list(hosts), hostvars, str(result_name))


def converge_drift(hosts, hostvars):
    return role_state.converge_drift(list(hosts), hostvars)


class FilterModule:
    def filters(self):
        return {'drifted_hosts': drifted_hosts, 'converge_drift': converge_drift}
