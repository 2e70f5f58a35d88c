# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Which hosts of a play drifted from their role's last full run (documentation in drifted_hosts.yml,
converge_drift.yml)."""

from ansible.errors import AnsibleFilterError

from ansible_collections.llmfleet.cluster.plugins.plugin_utils import lazy_import
from ansible_collections.llmfleet.cluster.plugins.plugin_utils.registered import registered_vars

role_state = lazy_import.module_utils('role_state')


def _results(hosts, hostvars):
    # each role's vars call these over every play host, on every host: registered results only, not
    # every host's hostvars (plugin_utils/registered.py)
    return {h: registered_vars(hostvars, h) for h in hosts}


def drifted_hosts(hosts, hostvars, result_name, absent='drifted'):
    if absent not in ('drifted', 'skip'):
        raise AnsibleFilterError("drifted_hosts: absent must be 'drifted' or 'skip', got %r" % (absent,))
    hosts = list(hosts)
    return role_state.drifted_hosts(hosts, _results(hosts, hostvars), str(result_name), absent)


def converge_drift(hosts, hostvars):
    hosts = list(hosts)
    return role_state.converge_drift(hosts, _results(hosts, hostvars))


class FilterModule:
    def filters(self):
        return {'drifted_hosts': drifted_hosts, 'converge_drift': converge_drift}
