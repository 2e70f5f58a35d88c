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
    assert committed == simlab.inventory_yaml("sim", 6, simlab.SIM_KEY_EXPR)


def test_nodes_past_four_keep_the_first_fours_names_and_addresses():
    four = {n["name"]: n["fabric_ip"] for n in simlab.layout("sim", 4)}
    six = {n["name"]: n["fabric_ip"] for n in simlab.layout("sim", 6)}
    assert four == {"spark1": "10.231.1.11", "spark2": "10.231.1.12", "thor1": "10.231.1.13", "thor2": "10.231.1.14"}
    assert six == dict(four, spark3="10.231.1.15", thor3="10.231.1.16")


def test_layout_scales_and_keeps_one_head():
    for count in (4, 6, 8, 16):
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


def fake_proc(tmp_path, pid, nspid):
    (tmp_path / str(pid)).mkdir()
    (tmp_path / str(pid) / "status").write_text(f"Name:\tsystemd\nPid:\t{pid}\nNSpid:\t{nspid}\n")
    return tmp_path


@pytest.mark.parametrize("state,nspid,alive", [
    # a container's init: pid 1 of its own pid namespace
    ({"Running": True, "Pid": 21227}, "21227\t1", True),
    # the pid podman recorded, reused by a host process on a restored machine (seen in CI)
    ({"Running": True, "Pid": 21227}, "21227", False),
    # ... or by a process inside some other container
    ({"Running": True, "Pid": 21227}, "21227\t57", False),
    # podman's record after the machine's processes were killed: running, pid gone
    ({"Running": True, "Pid": 2**22 + 12345}, None, False),
    ({"Running": False, "Pid": 0}, None, False),
    ({"Running": True, "Pid": 0}, None, False),
])
def test_is_alive_needs_the_containers_own_init(tmp_path, state, nspid, alive):
    proc = fake_proc(tmp_path, state["Pid"], nspid) if nspid else tmp_path
    assert simlab.is_alive({"State": state}, proc) is alive


def test_is_alive_rejects_a_host_process_with_the_recorded_pid():
    assert simlab.is_alive({"State": {"Running": True, "Pid": os.getpid()}}) is False


# /proc/self/mountinfo lines as this CI machine (hybrid) and a cgroup-v2-only host show them
HYBRID = """31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
V2_ONLY = "31 23 0:28 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate\n"


def test_nodes_get_the_hosts_cgroup2_only_on_a_hybrid_host():
    assert simlab.cgroup_args(HYBRID) == ["-v", "/sys/fs/cgroup/unified:/sys/fs/cgroup/unified:rw"]
    assert simlab.cgroup_args(V2_ONLY) == []


def test_release_leases_drops_only_the_named_addresses(tmp_path):
    # CNI host-local's layout: one file per leased address, named by it, holding "<container id>\r\n<ifname>".
    net = tmp_path / "llmfleet-sim-mgmt"
    net.mkdir()
    for name in ("10.231.0.14", "10.231.0.13", "last_reserved_ip.0", "lock"):
        (net / name).write_text("deadbeef\r\neth0")
    dropped = simlab.release_leases([("llmfleet-sim-mgmt", "10.231.0.14"), ("llmfleet-sim-fabric", "10.231.1.14")], tmp_path)
    assert dropped == ["llmfleet-sim-mgmt/10.231.0.14"]
    assert sorted(p.name for p in net.iterdir()) == ["10.231.0.13", "last_reserved_ip.0", "lock"]
