"""Host-side preflight play against this machine (connection local, read-only probes).

Two inventory hosts, nodea (ray_head) and nodeb, are both this machine, so they share one
/etc/machine-id: the duplicate check must name both and give the fix. A TCP listener on a free port
stands in for a foreign process on the Ray port, a temp dir with a dangling session_latest for a
stale Ray session, and extra vars replace the gpu_info and rdma_info results per host (extra vars win
over register; the modules still run here) to exercise the declared-vs-detected arch check, the
driver/CUDA parity (nodea and nodeb report the H100 and H200 fixtures' versions) and the RDMA state
of the fabric NIC (nodea: its port is Down; nodeb: no RDMA port on it). The host lines also land in
the JSON report. Nothing here touches another machine.

Run: .venv/bin/pytest tests/integration/preflight -q
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
COLLECTIONS = ROOT / ".build" / "collections"
ANSIBLE_PLAYBOOK = Path(sys.executable).with_name("ansible-playbook")


def local_ipv4() -> tuple[str, str] | None:
    """(address, interface) of a non-loopback IPv4 on this machine, from `ip -j addr`."""
    try:
        out = subprocess.run(["ip", "-j", "-4", "addr", "show"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    for link in json.loads(out):
        for addr in link.get("addr_info", []):
            if addr.get("family") == "inet" and not addr.get("local", "").startswith("127."):
                return addr["local"], link["ifname"]
    return None


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    found = local_ipv4()
    if not found:
        pytest.skip("no non-loopback IPv4 on this machine")
    ip, iface = found
    link = COLLECTIONS / "ansible_collections" / "llmfleet" / "cluster"
    if not link.is_symlink():
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(ROOT)
    work = tmp_path_factory.mktemp("preflight-host")
    ray_tmp = work / "ray"
    ray_tmp.mkdir()
    (ray_tmp / "session_latest").symlink_to("session_2026-01-01_00-00-00_000000_1")
    inventory = work / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                 "llmfleet_fabric_ip": ip, "llmfleet_gpu_arch": "sm_121"},
        "hosts": {"nodea": None, "nodeb": None},
        "children": {"ray_head": {"hosts": {"nodea": None}}, "ray_workers": {"hosts": {"nodeb": None}}},
    }}))
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    extra = {
        "ansible_become": False,  # read-only probes; this machine may have no sudo
        "preflight_ray_port": port,
        "preflight_ray_temp_dirs": [str(ray_tmp)],
        "preflight_min_disk_gb": 10 ** 7,
        "preflight_fabric_mtu": 65536,
        "preflight_mtu_fatal": True,
        # per host: a template over a dict of fake gpu_info / rdma_info results
        "preflight_gpu": "{{ preflight_test_gpus[inventory_hostname] }}",
        "preflight_test_gpus": {
            "nodea": {"gpu_count": 1, "gpu_arch": "sm_90", "gpus": [{"arch": "sm_90"}],
                      "driver_version": "550.54.15", "cuda_version": "12.4", "nvidia_smi_error": None},
            "nodeb": {"gpu_count": 1, "gpu_arch": "sm_90", "gpus": [{"arch": "sm_90"}],
                      "driver_version": "580.159.04", "cuda_version": "13.0", "nvidia_smi_error": None},
        },
        "preflight_rdma_expected": True,  # this machine may be a container: check anyway
        "preflight_rdma": "{{ preflight_test_rdma[inventory_hostname] }}",
        "preflight_test_rdma": {
            "nodea": {"source": "ibdev2netdev", "rdma_devices": [
                {"ibdev": "rocep1s0f1", "port": 1, "netdev": iface, "state": "Down", "port_state": "DOWN",
                 "link_layer": "Ethernet", "ipv4": ip, "mtu": 1500}]},
            "nodeb": {"source": "ibdev2netdev", "rdma_devices": [
                {"ibdev": "roceP2p1s0f1", "port": 1, "netdev": "enP2p1s0f1np1", "state": "Up",
                 "port_state": "ACTIVE", "link_layer": "Ethernet", "ipv4": None, "mtu": 9000}]},
        },
        "preflight_report_json": str(work / "report.json"),
    }
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS),
           "ANSIBLE_CACHE_PLUGIN_CONNECTION": str(work / "facts"), "ANSIBLE_LOCAL_TEMP": str(work / "tmp"),
           "ANSIBLE_NOCOLOR": "1"}
    try:
        proc = subprocess.run(
            [str(ANSIBLE_PLAYBOOK), str(ROOT / "playbooks" / "preflight.yml"), "-i", str(inventory),
             "--tags", "preflight_host", "--skip-tags", "preflight_controller", "-e", json.dumps(extra)],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=180, check=False)
    finally:
        listener.close()
    machine_id = Path("/etc/machine-id").read_text().strip() if Path("/etc/machine-id").exists() else ""
    report = work / "report.json"
    return {"rc": proc.returncode, "out": " ".join((proc.stdout + proc.stderr).split()), "port": port,
            "ray_tmp": ray_tmp, "machine_id": machine_id, "raw": proc.stdout + proc.stderr,
            "report": json.loads(report.read_text()) if report.exists() else None}


def test_fails_and_every_host_reports(result):
    assert result["rc"] == 2, result["raw"][-4000:]
    assert "problem(s) on nodea, listed above as FAIL lines" in result["out"]
    assert "problem(s) on nodeb, listed above as FAIL lines" in result["out"]


def test_python_found(result):
    assert "ok python3 at /" in result["out"]


def test_duplicate_machine_id_names_both_hosts_and_the_fix(result):
    if not result["machine_id"]:
        assert "FAIL nodea: /etc/machine-id is empty or missing; run `systemd-machine-id-setup`" in result["out"]
        return
    for host, twin in (("nodea", "nodeb"), ("nodeb", "nodea")):
        assert (f"FAIL {host}: /etc/machine-id {result['machine_id']} duplicates {twin}'s") in result["out"]
    assert "on all but one of nodea, nodeb run `rm /etc/machine-id && systemd-machine-id-setup` and reboot" \
        in result["out"]


def test_foreign_process_on_ray_port(result):
    port = result["port"]
    assert f"FAIL nodea: port {port} (Ray GCS) is held by " in result["out"]
    assert "not by our Ray unit" in result["out"]
    assert f"skip Ray port {port}: not a ray_head" in result["out"]  # nodeb is a worker


def test_stale_ray_session_warns(result):
    assert (f"WARN nodea: stale Ray session {result['ray_tmp']}/session_latest -> "
            "session_2026-01-01_00-00-00_000000_1 with no raylet running; remove it: rm -rf "
            f"{result['ray_tmp']}") in result["out"]


def test_disk_free(result):
    assert "FAIL nodea: only " in result["out"] and "preflight_min_disk_gb is 10000000" in result["out"]


def test_fabric_nic_found_by_ip_and_mtu_fatal(result):
    ip, nic = local_ipv4()
    assert f"ok fabric NIC {nic} holds {ip}" in result["out"]
    assert f"FAIL nodea: fabric NIC {nic} ({ip}) has MTU " in result["out"]
    assert "< 65536 (preflight_fabric_mtu)" in result["out"]


def test_gpu_arch_declared_vs_detected(result):
    assert ("FAIL nodea: llmfleet_gpu_arch 'sm_121' declared but nvidia-smi reports sm_90; set llmfleet_gpu_arch: "
            "sm_90 for nodea") in result["out"]


def test_driver_cuda_parity_names_both_hosts_versions_and_fix(result):
    assert ("FAIL nodea: NVIDIA driver 550.54.15 / CUDA 12.4 differs from nodeb's 580.159.04 / CUDA 13.0 (sm_90 "
            "hosts of cluster 'default' must run one driver and CUDA version") in result["out"]
    assert "FAIL nodeb: NVIDIA driver 580.159.04 / CUDA 13.0 differs from nodea's 550.54.15 / CUDA 12.4" in result["out"]
    assert "install driver 580.159.04 (CUDA 13.0) on nodea, or upgrade every sm_90 host of the cluster together" \
        in result["out"]


def test_rdma_state_of_the_fabric_nic(result):
    ip, nic = local_ipv4()
    assert (f"WARN nodea: RDMA device rocep1s0f1 port 1 on fabric NIC {nic} (llmfleet_fabric_ip {ip}) is Down "
            "(port state DOWN, link layer Ethernet), expected Up / ACTIVE / Ethernet (preflight_rdma_expected is "
            "true); NCCL would fall back to NET/Socket") in result["out"]
    assert (f"WARN nodeb: no RDMA device is bound to fabric NIC {nic} (llmfleet_fabric_ip {ip}) (RDMA ports here: "
            "roceP2p1s0f1 port 1 -> enP2p1s0f1np1 (Up))") in result["out"]
    assert "Fix: RDMA is Up on enP2p1s0f1np1: put llmfleet_fabric_ip on that port" in result["out"]


def test_host_lines_in_the_json_report(result):
    report = result["report"]
    assert report is not None, result["raw"][-3000:]
    assert set(report["host_checks"]) == {"nodea", "nodeb"}
    assert report["host_ok"] is False and report["ok"] is False
    lines = report["host_checks"]["nodeb"]
    assert lines[0].startswith("ok   python3 at /")
    assert any(line.startswith("FAIL nodeb: NVIDIA driver 580.159.04") for line in lines)
    assert any(line.startswith("WARN nodeb: no RDMA device is bound") for line in lines)
    assert all(line[:4] in ("ok  ", "skip", "WARN", "FAIL") for line in lines), lines
