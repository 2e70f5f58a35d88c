# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Filters over the fleet's topology (clusters, Ray nodes, serving group, NIC by IP)."""

from ansible_collections.llmfleet.cluster.plugins.plugin_utils import lazy_import
from ansible_collections.llmfleet.cluster.plugins.filter.serve_groups import serve_group_members

topology = lazy_import.module_utils('topology')


def _serving_group(host, groups, hostvars):
    """The hosts serving with `host`: its serving group (llmfleet_serve_groups), or, for a host that
    serves nothing, every serving host of its cluster."""
    if not (hostvars.get(host) or {}).get('llmfleet_serve_groups'):
        return topology.serving_group(groups, hostvars, topology.cluster_of(hostvars, host))
    by_group = serve_group_members(host, groups, hostvars)
    for hosts in by_group.values():
        if host in hosts:
            return hosts
    order = list(groups.get('all') or [])
    return sorted({h for hosts in by_group.values() for h in hosts}, key=order.index)


def _ray_nodes(host, groups, hostvars):
    return topology.ray_nodes(groups, hostvars, topology.cluster_of(hostvars, host))


def _ray_head(host, groups, hostvars):
    return topology.ray_head(groups, hostvars, topology.cluster_of(hostvars, host))


class FilterModule:
    def filters(self):
        return {
            'serving_group': _serving_group,
            'cluster_ray_nodes': _ray_nodes,
            'cluster_ray_head': _ray_head,
            'iface_for_ip': lazy_import.function(topology, 'iface_for_ip'),
            'prefix_for_ip': lazy_import.function(topology, 'prefix_for_ip'),
        }
