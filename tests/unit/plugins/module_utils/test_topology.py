"""Clusters, serving groups and NIC-by-IP over inventory data."""
import pytest

from ansible_collections.llmfleet.cluster.plugins.module_utils import topology as t

GROUPS = {
    "all": ["spark1", "spark2", "thor1", "thor2", "a1", "a2"],
    "ray_head": ["spark1", "a1"],
    "ray_workers": ["thor2", "spark2", "thor1", "a2"],
    "serve_nodes": ["spark2", "spark1"],
}
HOSTVARS = {"a1": {"llmfleet_cluster": "other"}, "a2": {"llmfleet_cluster": "other"}}


@pytest.mark.parametrize("cluster,ray,head,serving", [
    ("default", ["spark1", "spark2", "thor1", "thor2"], "spark1", ["spark1", "spark2"]),
    # no serve_nodes in this cluster: its Ray nodes serve
    ("other", ["a1", "a2"], "a1", ["a1", "a2"]),
    ("none", [], None, []),
])
def test_partition_by_cluster(cluster, ray, head, serving):
    assert t.ray_nodes(GROUPS, HOSTVARS, cluster) == ray
    assert t.ray_head(GROUPS, HOSTVARS, cluster) == head
    assert t.serving_group(GROUPS, HOSTVARS, cluster) == serving


# network facts as Ansible gathers them in the sim (podman named the fabric NIC eth1 here)
FACTS = {
    "interfaces": ["lo", "eth0", "eth1", "enP2p1s0f1np1"],
    "eth0": {"device": "eth0", "ipv4": {"address": "10.231.0.11", "prefix": "24"}},
    "eth1": {"device": "eth1", "ipv4": {"address": "10.231.1.11", "prefix": "24"}},
    "enP2p1s0f1np1": {"device": "enP2p1s0f1np1", "ipv4": {"address": "169.254.3.4", "prefix": "16"},
                      "ipv4_secondaries": [{"address": "192.168.100.10", "prefix": "24"}]},
    "lo": {"device": "lo", "ipv4": {"address": "127.0.0.1", "prefix": "8"}},
}


@pytest.mark.parametrize("ip,iface,prefix", [
    ("10.231.1.11", "eth1", 24),
    ("10.231.0.11", "eth0", 24),
    ("192.168.100.10", "enP2p1s0f1np1", 24),  # a secondary address counts
    ("10.9.9.9", "", 24),
    ("127.0.0.1", "lo", 8),
    # a one-host cluster's fabric IP (inventories/gpu-host): Linux answers all of 127.0.0.0/8 on lo
    ("127.0.0.2", "lo", 24),
    ("10.231.1.12", "", 24),  # in eth1's subnet but not held: no match outside loopback
])
def test_iface_and_prefix_for_ip(ip, iface, prefix):
    assert t.iface_for_ip(FACTS, ip) == iface
    assert t.prefix_for_ip(FACTS, ip, 24) == prefix


def test_a_loopback_ip_without_interface_facts_is_on_lo():
    """A host without iproute2 has empty network facts (the lent GPU machines): 127/8 is lo's all the same."""
    assert t.iface_for_ip({}, "127.0.0.3") == "lo"
    assert t.iface_for_ip({}, "10.0.0.3") == ""
