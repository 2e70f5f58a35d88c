"""The committed sim inventory is exactly what the lab tool builds for 4 nodes."""
import importlib.util
import os

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
spec = importlib.util.spec_from_file_location("simlab", os.path.join(ROOT, "tools", "simlab", "simlab.py"))
simlab = importlib.util.module_from_spec(spec)
spec.loader.exec_module(simlab)


def test_committed_sim_inventory_matches_generator():
    with open(os.path.join(ROOT, "inventories", "sim", "hosts.yml")) as f:
        committed = f.read()
    assert committed == simlab.inventory_yaml("sim", 4, simlab.SIM_KEY_EXPR)


def test_layout_scales_and_keeps_one_head():
    for count in (4, 8, 16):
        inv = yaml.safe_load(simlab.inventory_yaml("scale", count, "/k"))["all"]["children"]
        hosts = list(inv["gb10"]["hosts"]) + list(inv["thor"]["hosts"])
        assert len(hosts) == count
        assert list(inv["ray_head"]["hosts"]) == ["spark1"]
        assert len(inv["ray_workers"]["hosts"]) == count - 1
        fabric = [h["llmfleet_fabric_ip"] for g in ("gb10", "thor") for h in inv[g]["hosts"].values()]
        mgmt = [h["ansible_host"] for g in ("gb10", "thor") for h in inv[g]["hosts"].values()]
        assert len(set(fabric)) == count and not set(fabric) & set(mgmt)


def test_lab_names_get_disjoint_subnets():
    assert simlab.subnets("sim") != simlab.subnets("scale")
    assert simlab.subnets("sim")[0] != simlab.subnets("sim")[1]


@pytest.mark.parametrize("state,alive", [
    ({"Running": True, "Pid": os.getpid()}, True),
    # podman's record after the machine's processes were killed (seen in CI): running, pid gone
    ({"Running": True, "Pid": 2**22 + 12345}, False),
    ({"Running": False, "Pid": 0}, False),
    ({"Running": True, "Pid": 0}, False),
])
def test_is_alive_needs_a_live_process(state, alive):
    assert simlab.is_alive({"State": state}) is alive


# /proc/self/mountinfo lines as this CI machine (hybrid) and a cgroup-v2-only host show them
HYBRID = """31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
V2_ONLY = "31 23 0:28 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate\n"


def test_nodes_get_the_hosts_cgroup2_only_on_a_hybrid_host():
    assert simlab.cgroup_args(HYBRID) == ["-v", "/sys/fs/cgroup/unified:/sys/fs/cgroup/unified:rw"]
    assert simlab.cgroup_args(V2_ONLY) == []
