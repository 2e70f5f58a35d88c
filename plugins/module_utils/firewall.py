# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Who may reach the cluster's ports: the address sets of the nftables tables. Pure.

Two sets, both IPv4 (the collection pins Ray and the engines to IPv4 fabric addresses):

* peers: the exact fabric and management addresses of the cluster's own nodes. Ray's ports, the
  engine's rendezvous port and the metrics ports admit these (and loopback) only: an open Ray
  port runs anyone's code (CVE-2023-48022, "ShadowRay").
* API clients (serve_allow's default): the networks (prefix ``/24`` by default) of every cluster
  node's management address (``ansible_host``) and fabric address, plus the controller's own
  address as the node sees it (the first field of ``SSH_CLIENT``). The API port admits these.
"""
import ipaddress


def _ipv4(value):
    """The IPv4 address in ``value`` (a bare address), or None (hostnames, IPv6, empty)."""
    try:
        return ipaddress.IPv4Address(str(value or '').strip())
    except ValueError:
        return None


def peer_addresses(nodes):
    """Sorted unique IPv4 addresses of the nodes (dicts with ``fabric_ip`` and ``ansible_host``)."""
    found = set()
    for node in nodes:
        for key in ('fabric_ip', 'ansible_host'):
            addr = _ipv4(node.get(key))
            if addr is not None:
                found.add(addr)
    return [str(a) for a in sorted(found)]


def controller_address(ssh_client):
    """The controller's address from a node's ``SSH_CLIENT`` ("addr port port"), or ''."""
    addr = _ipv4((ssh_client or '').split(' ')[0])
    return str(addr) if addr is not None else ''


def api_allow(nodes, controller='', prefix=24, extra=()):
    """CIDRs admitted to the API port: the node networks, the controller, ``extra``; collapsed.

    A bad ``extra`` entry raises ValueError naming it.
    """
    if not 0 <= int(prefix) <= 32:
        raise ValueError('prefix %r is not 0..32' % (prefix,))
    nets = set()
    for addr in peer_addresses(nodes):
        nets.add(ipaddress.IPv4Network('%s/%d' % (addr, int(prefix)), strict=False))
    ctl = _ipv4(controller)
    if ctl is not None:
        nets.add(ipaddress.IPv4Network(ctl))
    for item in extra or ():
        try:
            nets.add(ipaddress.IPv4Network(str(item).strip(), strict=False))
        except ValueError:
            raise ValueError('serve_allow entry %r is not an IPv4 address or CIDR (e.g. 192.168.1.0/24)' % (item,))
    return [str(n) for n in ipaddress.collapse_addresses(nets)]
