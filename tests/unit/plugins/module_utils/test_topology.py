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
    inventory = t.Inventory(GROUPS, HOSTVARS)
    assert inventory.cluster_ray_nodes(cluster) == ray
    assert inventory.ray_head(cluster) == head
    assert inventory.serving_group(cluster) == serving


def test_inventory_order_clusters_and_hosts():
    # members in inventory order (not group order); a host only hostvars names is placed last
    inventory = t.Inventory(GROUPS, dict(HOSTVARS, b1={"llmfleet_cluster": "third"}), ("b1",))
    assert inventory.members == ["spark1", "spark2", "thor1", "thor2", "a1", "a2"]
    assert inventory.clusters == ["default", "other"]
    assert inventory.cluster_hosts("third") == ["b1"]
    assert inventory.sort(["b1", "a2", "spark2"]) == ["spark2", "a2", "b1"]


@pytest.mark.parametrize("value,name", [
    (None, "default"), ("", "default"), ("lab", "lab"), (5, "5"), (True, "true"), (["a"], '["a"]'),
])
def test_cluster_name(value, name):
    # one rule for the plan and the gate; a value that is no string (the gate's finding) still places the host
    assert t.cluster_name(value) == name


def test_group_members_is_the_plans_rule():
    spec = {"sparks": {"hosts": ["spark1", "spark2"]}, "thors": {"hosts": ["thor1", "thor2"]}}
    inventory = t.Inventory(GROUPS, HOSTVARS)
    assert inventory.group_members("default", spec) == {"sparks": ["spark1", "spark2"], "thors": ["thor1", "thor2"]}
    with pytest.raises(t._serve_groups.ServeGroupError):
        inventory.group_members("default", {"x": {"hosts": ["a1"]}})  # a host of another cluster


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
