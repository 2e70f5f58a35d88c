# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Filters over the fleet's topology: the NIC and the prefix of an IP."""

from ansible_collections.llmfleet.cluster.plugins.plugin_utils import lazy_import

topology = lazy_import.module_utils('topology')


class FilterModule:
    def filters(self):
        return {
            'iface_for_ip': lazy_import.function(topology, 'iface_for_ip'),
            'prefix_for_ip': lazy_import.function(topology, 'prefix_for_ip'),
        }
