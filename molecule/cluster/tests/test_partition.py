"""A fabric partition on the converged sim (issue 10): spark2's fabric link cut for 30 s.

The cut is an nftables table on spark2 that drops everything in and out of its fabric NIC (found by
its IP; names differ per node): silent, as a pulled cable looks to the peers, while the management
network (Ansible, ssh) stays up. It restores itself: a transient systemd timer on spark2 deletes the
table CUT_S seconds after the cut, so the link comes back even if this test dies half-way (the
test's `finally` deletes it as well, and the start clears a leftover of a killed run).

While cut, validate.yml must fail with `FAIL spark2: fabric reachability: CUT OFF: ...` naming the
NIC and the peers it lost. After the link is back nothing is run on the cluster: it has to recover
by itself (Ray node of spark2 alive again, /health 200, a completion answered) within
RECOVERY_BOUND_S.

Measured on the 2-core box (4-node sim, vLLM CPU TP=2 on spark1+spark2), two runs: validate.yml
(run beside the cut, shortened timeouts) 46-57 s with `FAIL spark2: fabric reachability: CUT OFF:
spark2 (10.231.1.12 on eth1, link up) reaches none of spark1 ..., thor1 ..., thor2 ...` and a failed
all-reduce; Ray never declared spark2 dead in 30 s (4/4 alive 22 s into the cut); after the link
came back: Ray 4/4 and /health within 2 s, the first completion answered after 3-10 s (the engine's
stalled TCP flows wait for their next retransmission). Bound 300 s: a watchdog-driven restart of
every rank (3 failed probes 30 s apart + an engine reload, 96 s in test_serve_lifecycle) still fits.
The test takes ~55 s.
"""
import json
import threading
import time
import urllib.error
import urllib.request


from conftest import FABRIC_IP, alive_ray_ips, api_headers, node, run_playbook, wait_for

CUT_S = 30
RECOVERY_BOUND_S = 300
TABLE = "inet llmfleet_test_cut"
TIMER = "llmfleet-test-uncut"  # transient (systemd-run --collect): gone once it fired
API = f"http://{FABRIC_IP['spark1']}:8000"


def fabric_nic(h, ip):
    nic = h.check_output(f"ip -o -4 addr show | awk '$4 ~ /^{ip}\\// {{print $2; exit}}'").strip()
    assert nic, f"no interface holds {ip}"
    return nic


def cut_active(h):
    return h.run(f"nft list table {TABLE}").rc == 0


def uncut(h):
    """Idempotent: the link is back and no restore timer is left."""
    h.run(f"nft delete table {TABLE} 2>/dev/null; systemctl stop {TIMER}.timer 2>/dev/null; "
          f"systemctl reset-failed {TIMER}.service {TIMER}.timer 2>/dev/null; true")


def healthy():
    try:
        with urllib.request.urlopen(f"{API}/health", timeout=5) as resp:
            return resp.status == 200
    except OSError:
        return False


def completes():
    body = json.dumps({"model": "tiny-llama", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}).encode()
    req = urllib.request.Request(f"{API}/v1/chat/completions", data=body, headers=api_headers())
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return json.loads(resp.read())["usage"]["completion_tokens"] >= 1
    except (OSError, urllib.error.HTTPError, ValueError, KeyError):
        return False


def test_partition_is_reported_while_cut_and_the_cluster_recovers_by_itself(tmp_path):
    """Cut, validate while cut, recovery by itself (numbers: module docstring and the printed line)."""
    s1, s2 = node("spark1"), node("spark2")
    uncut(s2)
    wait_for(lambda: alive_ray_ips(s1) == sorted(FABRIC_IP.values()) and healthy() and completes(), 600)
    nic = fabric_nic(s2, FABRIC_IP["spark2"])
    rules = (f"table {TABLE} {{ "
             f"chain cut_in {{ type filter hook input priority -10; policy accept; iifname \"{nic}\" drop; }}; "
             f"chain cut_out {{ type filter hook output priority -10; policy accept; oifname \"{nic}\" drop; }}; }}")
    try:
        s2.check_output(f"echo '{rules}' | nft -f - && "
                        f"systemd-run --quiet --collect --unit {TIMER} --on-active={CUT_S}s "
                        f"/bin/sh -c 'nft delete table {TABLE} 2>/dev/null; true'")
        t_cut = time.monotonic()
        # the cut is real: spark1 gets no answer from spark2's fabric IP, the management network still works
        assert s1.run(f"ping -n -q -c 2 -i 0.2 -W 1 -I {FABRIC_IP['spark1']} {FABRIC_IP['spark2']}").rc != 0
        assert s2.check_output("hostname") == "spark2"
        # validate.yml runs beside this thread (its pings come first, seconds into the cut; its slower
        # checks may outlast the cut), while this thread watches the link come back and times the recovery
        run = {}

        def run_validate():
            run["rc"], _out, run["took"] = run_playbook(
                "playbooks/validate.yml", timeout=300,
                extra_vars={"validate_report_dir": str(tmp_path), "validate_collective_timeout": 15,
                            "validate_ray_timeout": 5, "validate_smoke_requests": 1, "validate_smoke_timeout": 15})
        validate = threading.Thread(target=run_validate)
        validate.start()
        time.sleep(max(0.0, CUT_S - 8 - (time.monotonic() - t_cut)))
        ray_during_cut = alive_ray_ips(s1)
        # the timer restores the link (the test does not)
        wait_for(lambda: not cut_active(s2), CUT_S + 60, step=1)
        t_back = time.monotonic()

        # recovery by itself: nothing is restarted by hand
        def ray_back():
            return alive_ray_ips(s1) == sorted(FABRIC_IP.values())
        ray_s = wait_for(ray_back, RECOVERY_BOUND_S, step=1)
        health_s = wait_for(healthy, RECOVERY_BOUND_S - ray_s, step=1) + ray_s
        served_s = wait_for(completes, RECOVERY_BOUND_S - health_s, step=2) + health_s
        validate.join(300)
    finally:
        uncut(s2)
    assert not cut_active(s2)
    assert not validate.is_alive() and run["rc"] != 0
    report = json.loads((tmp_path / "validate.json").read_text())
    reach = {c["target"]: c for c in report["checks"] if c["check"] == "fabric reachability"}
    assert reach["spark2"]["status"] == "FAIL", reach
    detail = reach["spark2"]["detail"]
    assert detail.startswith(f"CUT OFF: spark2 ({FABRIC_IP['spark2']} on {nic}, link up) reaches none of ")
    for peer in ("spark1", "thor1", "thor2"):
        assert f"{peer} ({FABRIC_IP[peer]})" in detail
        assert reach[peer]["status"] == "WARN" and reach[peer]["detail"].endswith("not spark2 (cut off, see its line)")
    assert "spark2" in report["failed_targets"]
    print(f"\npartition: spark2's {nic} cut {t_back - t_cut:.0f}s (validate.yml took {run['took']:.0f}s, FAIL spark2 "
          f"fabric reachability); Ray alive {CUT_S - 8}s into the cut: {ray_during_cut}; after the link came back, "
          f"by itself: Ray 4/4 alive {ray_s:.0f}s, /health {health_s:.0f}s, completion {served_s:.0f}s "
          f"(bound {RECOVERY_BOUND_S}s)")
