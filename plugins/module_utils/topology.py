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

DEFAULT_CLUSTER = 'default'


def cluster_of(hostvars, host):
    value = (hostvars.get(host) or {}).get('llmfleet_cluster')
    return value if value else DEFAULT_CLUSTER


HEAD, WORKERS, SERVE = 'ray_head', 'ray_workers', 'serve_nodes'


def host_order(groups):
    """{host: position}: the inventory's order (``all``), then any host only a group names, in that
    group's order. Every membership list below, the plan's and the controller gate's, is in this order."""
    order = dict.fromkeys(groups.get('all') or [])
    for hosts in groups.values():
        order.update(dict.fromkeys(h for h in hosts or [] if h not in order))
    return {h: i for i, h in enumerate(order)}


def ordered(groups, names, order=None):
    """Hosts of the named groups, de-duplicated, in inventory order (host_order)."""
    order = host_order(groups) if order is None else order
    members = {h for name in names for h in groups.get(name) or []}
    return sorted(members, key=lambda h: (order.get(h, len(order)), h))


def ray_nodes(groups, hostvars, cluster):
    return [h for h in ordered(groups, (HEAD, WORKERS)) if cluster_of(hostvars, h) == cluster]


def ray_head(groups, hostvars, cluster):
    heads = [h for h in ordered(groups, (HEAD,)) if cluster_of(hostvars, h) == cluster]
    return heads[0] if heads else None


def serving_group(groups, hostvars, cluster):
    serve = [h for h in ordered(groups, (SERVE,)) if cluster_of(hostvars, h) == cluster]
    return serve or ray_nodes(groups, hostvars, cluster)


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
