# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Filters for the nftables tables: the cluster's peer addresses and the API's allowed networks."""

from ansible.errors import AnsibleFilterError

from ansible_collections.llmfleet.cluster.plugins.plugin_utils import lazy_import

firewall = lazy_import.module_utils('firewall')


def _nodes(hosts, hostvars):
    return [{'fabric_ip': hostvars[h].get('llmfleet_fabric_ip', ''), 'ansible_host': hostvars[h].get('ansible_host', '')}
            for h in hosts]


def firewall_peers(hosts, hostvars):
    return firewall.peer_addresses(_nodes(hosts, hostvars))


def firewall_api_allow(hosts, hostvars, ssh_client='', prefix=24, extra=None):
    try:
        return firewall.api_allow(_nodes(hosts, hostvars), firewall.controller_address(ssh_client), prefix, extra or [])
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule:
    def filters(self):
        return {'firewall_peers': firewall_peers, 'firewall_api_allow': firewall_api_allow}
