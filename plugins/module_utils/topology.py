# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Who is in which cluster, who serves, and which NIC holds an address. Pure functions.

A fleet inventory may hold several clusters: hosts are partitioned by ``llmfleet_cluster``
(default ``default``). Within a cluster the Ray nodes are ``ray_head`` + ``ray_workers``; the
serving group is the cluster's part of ``serve_nodes`` when that group has any, else its Ray
nodes.
"""

import ipaddress
import json

from ansible_collections.llmfleet.cluster.plugins.module_utils import serve_groups as _serve_groups

DEFAULT_CLUSTER = 'default'


HEAD, WORKERS, SERVE = 'ray_head', 'ray_workers', 'serve_nodes'


def cluster_name(value):
    """The cluster a value of ``llmfleet_cluster`` names: the value, ``default`` when unset or empty.
    A value that is no string (the controller gate refuses it) still names one, by its JSON text."""
    if value is None or value == '':
        return DEFAULT_CLUSTER
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def cluster_of(hostvars, host):
    return cluster_name((hostvars.get(host) or {}).get('llmfleet_cluster'))


def host_order(groups):
    """{host: position}: the inventory's order (``all``), then any host only a group names, in that
    group's order. Every membership list of :class:`Inventory` is in this order."""
    order = dict.fromkeys(groups.get('all') or [])
    for hosts in groups.values():
        order.update(dict.fromkeys(h for h in hosts or [] if h not in order))
    return {h: i for i, h in enumerate(order)}


def ordered(groups, names, order=None):
    """Hosts of the named groups, de-duplicated, in inventory order (host_order)."""
    order = host_order(groups) if order is None else order
    members = {h for name in names for h in groups.get(name) or []}
    return sorted(members, key=lambda h: (order.get(h, len(order)), h))


class Inventory:
    """The one model of the inventory's membership: hosts in inventory order, each host's cluster,
    each cluster's hosts, Ray head, Ray nodes and serving group(s). The cluster plan
    (module_utils/cluster_plan.py, plugin_utils/serve_group_inputs.py), the controller gate
    (plugin_utils/inventory_checks.py, which adds the findings of values it cannot use), preflight and
    validate all read membership here, so none of them can place a host differently.

    ``groups``: Ansible's ``groups``; ``hostvars``: host -> variables (only ``llmfleet_cluster`` is read);
    ``hosts``: hosts to place after the inventory's order that no group names (unit tests' hostvars).
    """

    def __init__(self, groups, hostvars, hosts=()):
        self.groups = groups
        order = host_order(groups)
        order.update({h: len(order) + i for i, h in enumerate(h for h in hosts if h not in order)})
        self.order = order
        self.head = self.members_of(HEAD)
        self.workers = self.members_of(WORKERS)
        self.serve = self.members_of(SERVE)
        self.ray_nodes = ordered(groups, (HEAD, WORKERS), order)
        # every host of a cluster's Ray or serving groups
        self.members = ordered(groups, (HEAD, WORKERS, SERVE), order)
        self.cluster = {h: cluster_of(hostvars, h) for h in order}
        self.clusters = list(dict.fromkeys(self.cluster[h] for h in self.members))

    def members_of(self, group):
        return ordered(self.groups, (group,), self.order)

    def sort(self, hosts):
        return sorted(set(hosts), key=lambda h: (self.order.get(h, len(self.order)), h))

    def in_cluster(self, hosts, cluster):
        return [h for h in hosts if self.cluster.get(h) == cluster]

    def cluster_hosts(self, cluster):
        """Every host of the inventory in `cluster` (members or not: a gateway or monitoring host too)."""
        return self.in_cluster(self.order, cluster)

    def cluster_ray_nodes(self, cluster):
        return self.in_cluster(self.ray_nodes, cluster)

    def ray_head(self, cluster):
        heads = self.in_cluster(self.head, cluster)
        return heads[0] if heads else None

    def serving_group(self, cluster):
        """The cluster's default serving group: its part of serve_nodes when that has any, else its Ray
        nodes (llmfleet_serve_groups, when set, divides the cluster instead: :meth:`group_members`)."""
        return self.in_cluster(self.serve, cluster) or self.cluster_ray_nodes(cluster)

    def group_members(self, cluster, spec):
        """{group name: hosts} of llmfleet_serve_groups `spec` in `cluster` (serve_groups.members;
        raises serve_groups.ServeGroupError for a spec the plan refuses)."""
        return _serve_groups.members(spec, self.cluster_hosts(cluster), self.groups, self.serving_group(cluster))


def iface_for_ip(facts, ip):
    """Name of the interface holding IPv4 ``ip`` in Ansible's network facts, or ''.

    ``facts`` is ``ansible_facts`` (keys ``interfaces`` and one dict per interface with
    ``ipv4`` and ``ipv4_secondaries``). Names are never assumed: podman and real hosts alike
    name the fabric NIC differently from node to node.
    A loopback ``ip`` (127.0.0.0/8, a one-host cluster's "fabric") is held by the interface with a
    loopback address whose network contains it: Linux answers the whole 127.0.0.0/8 on ``lo``
    although only 127.0.0.1/8 is listed.
    """
    held = []
    for name in facts.get('interfaces') or []:
        data = facts.get(name.replace('-', '_')) or facts.get(name) or {}
        addrs = []
        if isinstance(data.get('ipv4'), dict):
            addrs.append(data['ipv4'])
        addrs.extend(a for a in data.get('ipv4_secondaries') or [] if isinstance(a, dict))
        for a in addrs:
            if a.get('address') == ip:
                return data.get('device', name)
            held.append((data.get('device', name), '%s/%s' % (a.get('address'), a.get('prefix') or 32)))
    loop = _loopback_net(ip)
    if loop is not None:
        for device, cidr in held:
            if _loopback_net(cidr) is not None and loop in ipaddress.ip_interface(cidr).network:
                return device
        if not facts.get('interfaces'):
            # no interface facts at all (a host without iproute2, whose network facts Ansible leaves
            # empty: the lent GPU machines): Linux's loopback device is lo and answers all of 127/8
            return 'lo'
    return ''


def _loopback_net(text):
    """The IPv4 address of ``text`` (``a.b.c.d`` or ``a.b.c.d/n``) when it is a loopback one, else None."""
    try:
        addr = ipaddress.ip_interface(str(text)).ip
    except ValueError:
        return None
    return addr if addr.version == 4 and addr.is_loopback else None


def prefix_for_ip(facts, ip, default=24):
    """Prefix length of ``ip`` as configured now (so netplan keeps it), else ``default``."""
    iface = iface_for_ip(facts, ip)
    if not iface:
        return default
    data = facts.get(iface.replace('-', '_')) or facts.get(iface) or {}
    for a in [data.get('ipv4') or {}] + list(data.get('ipv4_secondaries') or []):
        if a.get('address') == ip and a.get('prefix'):
            return int(a['prefix'])
    return default
