"""The fabric role chose the NIC by IP, set MTU 9000 via netplan, wrote per-host env files."""
import os
import sys

import pytest

# The addresses come from the sim inventory through the one lab helper (tests/lib/lab.py), so the
# check follows the lab's size (tools/simlab/simlab.py, LAB_NODES).
sys.path.insert(0, os.path.join(os.environ.get("MOLECULE_PROJECT_DIRECTORY") or os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))), "tests", "lib"))
from lab import FABRIC_IP, MGMT_IP  # noqa: E402 pylint: disable=wrong-import-position


def iface_holding(host, ip):
    out = host.check_output("ip -o -4 addr show")
    for line in out.splitlines():
        f = line.split()
        if f[3].split("/")[0] == ip:
            return f[1]
    raise AssertionError(f"no interface holds {ip}")


def env_file(host):
    env = {}
    for line in host.file("/etc/llmfleet/comm.env").content_string.splitlines():
        if line and not line.startswith("#"):
            k, v = line.split("=", 1)
            env[k] = v
    return env


def test_fabric_nic_mtu_9000_mgmt_untouched(host):
    name = host.backend.get_hostname()
    fabric = iface_holding(host, FABRIC_IP[name])
    mgmt = iface_holding(host, MGMT_IP[name])
    assert fabric != mgmt
    assert host.file(f"/sys/class/net/{fabric}/mtu").content_string.strip() == "9000"
    assert host.file(f"/sys/class/net/{mgmt}/mtu").content_string.strip() == "1500"


def test_netplan_file_names_only_the_fabric_nic(host):
    name = host.backend.get_hostname()
    f = host.file("/etc/netplan/60-llmfleet-fabric.yaml")
    assert f.exists and f.mode == 0o600
    text = f.content_string
    assert f"{iface_holding(host, FABRIC_IP[name])}:" in text
    assert f"- {FABRIC_IP[name]}/24" in text
    assert "mtu: 9000" in text and "link-local: []" in text
    assert MGMT_IP[name] not in text


def test_no_ipv6_link_local_on_fabric(host):
    name = host.backend.get_hostname()
    fabric = iface_holding(host, FABRIC_IP[name])
    assert "fe80" not in host.check_output(f"ip -6 addr show dev {fabric}")


def test_env_file_is_this_hosts_own(host):
    name = host.backend.get_hostname()
    env = env_file(host)
    fabric = iface_holding(host, FABRIC_IP[name])
    assert env["VLLM_HOST_IP"] == FABRIC_IP[name]
    for var in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME", "UCX_NET_DEVICES"):
        assert env[var] == fabric, var
    # no RDMA in the sim: sockets for everyone, no HCA list
    assert env["NCCL_IB_DISABLE"] == "1"
    assert "NCCL_IB_HCA" not in env
    f = host.file("/etc/llmfleet/comm.env")
    assert f.group == "llmfleet" and f.mode == 0o640


@pytest.mark.parametrize("peer", sorted(FABRIC_IP))
def test_jumbo_frames_reach_every_peer(host, peer):
    name = host.backend.get_hostname()
    if peer == name:
        pytest.skip("self")
    fabric = iface_holding(host, FABRIC_IP[name])
    cmd = host.run(f"ping -c 1 -W 2 -M do -s 8972 -I {fabric} {FABRIC_IP[peer]}")
    assert cmd.rc == 0, cmd.stdout + cmd.stderr
