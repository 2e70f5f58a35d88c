"""The converged sim cluster: Ray units, firewall, env files, vLLM serving across two nodes."""
import json
import socket
import urllib.request

import pytest

from conftest import FABRIC_IP, MGMT_IP, alive_ray_ips, api_headers, node, recap, run_playbook, wait_for


# ----------------------------------------------------------------------------- Ray
@pytest.mark.parametrize("name", sorted(FABRIC_IP))
def test_ray_unit_hardened_and_unprivileged(name):
    h = node(name)
    svc = h.service("llmfleet-ray")
    assert svc.is_running and svc.is_enabled
    props = h.check_output("systemctl show llmfleet-ray -p User -p NoNewPrivileges -p ProtectSystem -p Restart -p PrivateTmp")
    for want in ("User=llmfleet", "NoNewPrivileges=yes", "ProtectSystem=strict", "Restart=always", "PrivateTmp=yes"):
        assert want in props
    unit = h.file("/etc/systemd/system/llmfleet-ray.service").content_string
    assert f"--node-ip-address={FABRIC_IP[name]}" in unit
    assert "--dashboard-host=0.0.0.0" not in unit
    # unified-memory archs disable Ray's OOM killer (vllm-gb10 fix 7)
    assert "RAY_memory_usage_threshold=1.0" in h.file("/etc/llmfleet/ray.env").content_string


def test_ray_cluster_has_all_four_fabric_ips():
    assert alive_ray_ips(node("spark1")) == sorted(FABRIC_IP.values())


def test_non_carry_over_list_keeps_per_host_vars():
    h = node("spark1")
    names = json.loads(h.file("/var/lib/llmfleet/.config/vllm/ray_non_carry_over_env_vars.json").content_string)
    for var in ("VLLM_HOST_IP", "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "UCX_NET_DEVICES"):
        assert var in names


@pytest.mark.parametrize("ip", [MGMT_IP["spark1"], FABRIC_IP["spark1"]])
def test_gcs_refuses_non_peers(ip):
    """The controller is no fabric peer: nftables resets its connection to Ray's GCS."""
    with pytest.raises(OSError):
        socket.create_connection((ip, 6379), timeout=3).close()


def test_gcs_admits_fabric_peer():
    out = node("thor2").run("timeout 3 bash -c '</dev/tcp/10.231.1.11/6379' && echo open")
    assert out.stdout.strip() == "open"


def test_engine_rendezvous_port_admits_serving_peers_only():
    """vLLM's TCPStore (serve_master_port 29501) listens on every address on spark1: spark2 (the
    other rank) gets in, thor1 (a Ray node that serves nothing) and the controller are reset."""
    probe = "timeout 3 bash -c '</dev/tcp/{ip}/29501' && echo open || echo refused"
    assert node("spark1").check_output("ss -ltnH 'sport = :29501'").strip(), "nothing listens on 29501"
    assert node("spark2").check_output(probe.format(ip=FABRIC_IP["spark1"])).strip() == "open"
    assert node("thor1").check_output(probe.format(ip=FABRIC_IP["spark1"])).strip() == "refused"
    with pytest.raises(OSError):
        socket.create_connection((FABRIC_IP["spark1"], 29501), timeout=3).close()


def test_killed_raylet_comes_back_within_60s():
    h = node("thor2")
    h.run("pkill -KILL -f 'raylet' ")
    head = node("spark1")
    took = wait_for(lambda: alive_ray_ips(head) == sorted(FABRIC_IP.values()) and h.service("llmfleet-ray").is_running, 60)
    print(f"thor2 back in the cluster after {took:.0f}s")


def test_workers_rejoin_restarted_head_within_120s():
    head = node("spark1")
    head.check_output("systemctl restart llmfleet-ray")
    took = wait_for(lambda: alive_ray_ips(head) == sorted(FABRIC_IP.values()), 120)
    print(f"all workers rejoined the restarted head after {took:.0f}s")


def test_a_worker_the_heads_firewall_refuses_joins_in_one_ray_run():
    """A node (re)added to a cluster: the head's Ray table must admit it before the node's Ray starts.

    Seen when the two-cluster test moved thor1/thor2 back: the table was reloaded by a handler, i.e.
    after "Enable and start Ray", whose start on the thors waited for the head's GCS port forever."""
    head, thor2 = node("spark1"), node("thor2")
    head.check_output(f"sed -i 's/, {FABRIC_IP['thor2']}//; s/{FABRIC_IP['thor2']}, //' /etc/llmfleet/ray.nft"
                      " && systemctl restart llmfleet-ray-firewall")
    assert FABRIC_IP["thor2"] not in head.check_output("nft list set inet llmfleet_ray peers")
    thor2.check_output("systemctl restart --no-block llmfleet-ray")
    # refused by the head: the unit stays in its start, waiting for the GCS port
    wait_for(lambda: thor2.check_output("systemctl show -P SubState llmfleet-ray") == "start-pre", 60)
    rc, out, secs = run_playbook("playbooks/ray.yml", timeout=600)
    assert rc == 0, out[-3000:]
    assert recap(out)["spark1"]["changed"] >= 1  # the table file, rewritten and loaded at once
    assert FABRIC_IP["thor2"] in head.check_output("nft list set inet llmfleet_ray peers")
    assert alive_ray_ips(head) == sorted(FABRIC_IP.values())
    print(f"thor2 admitted and joined within one ray.yml run ({secs:.0f}s)")


# ----------------------------------------------------------------------------- serve
def test_engine_units_on_serving_nodes_only():
    for name in ("spark1", "spark2"):
        assert node(name).service("llmfleet-serve-tiny-llama").is_running
    for name in ("thor1", "thor2"):
        assert not node(name).file("/etc/systemd/system/llmfleet-serve-tiny-llama.service").exists


def test_api_binds_fabric_ip_not_wildcard():
    listening = node("spark1").check_output("ss -ltnH '( sport = :8000 )'")
    assert f"{FABRIC_IP['spark1']}:8000" in listening
    assert "0.0.0.0:8000" not in listening and "*:8000" not in listening


def test_headless_rank_on_spark2():
    unit = node("spark2").file("/etc/systemd/system/llmfleet-serve-tiny-llama.service").content_string
    assert "--headless" in unit and "--node-rank 1" in unit and f"--master-addr {FABRIC_IP['spark1']}" in unit
    env = node("spark2").file("/etc/llmfleet/llmfleet-serve-tiny-llama.env")
    assert env.mode == 0o600


def test_completion_from_controller():
    body = json.dumps({"model": "tiny-llama", "max_tokens": 8,
                       "messages": [{"role": "user", "content": "hello"}]}).encode()
    req = urllib.request.Request(f"http://{FABRIC_IP['spark1']}:8000/v1/chat/completions", data=body,
                                 headers=api_headers())
    doc = json.loads(urllib.request.urlopen(req, timeout=120).read())
    assert doc["model"] == "tiny-llama"
    assert doc["usage"]["completion_tokens"] == 8
