"""Guards on the converged sim: each plants one known failure of the notes and asserts the
collection catches it with host + fix, and (where it should) repairs it. Every test restores
what it planted, so the serving cluster is left as it found it."""

import os
import time

import pytest

from conftest import FABRIC_IP, MGMT_IP, alive_ray_ips, failures, node, recap, run_playbook, unit_started_at, wait_for

VENV = "/opt/llmfleet/venvs/current"
SERVE_UNIT = "llmfleet-serve-tiny-llama"


def serve_starts():
    return {h: unit_started_at(node(h), SERVE_UNIT) for h in ("spark1", "spark2")}


# ------------------------------------------------------------------ engine install (issue 4)
def test_planted_version_mismatch_is_caught_then_repaired():
    thor2 = node("thor2")
    meta = thor2.check_output(
        f"{VENV}/bin/python -c \"import importlib.metadata as m; print(m.distribution('ray')._path)\"") + "/METADATA"
    real = thor2.check_output(f"sed -n 's/^Version: //p' {meta}")
    thor2.run_expect([0], f"sed -i 's/^Version: .*/Version: 2.59.0/' {meta}")
    try:
        rc, out, _secs = run_playbook("playbooks/python_env.yml", "--tags", "python_env_run")
        assert rc != 0
        assert f"thor2: {VENV}" in out or "thor2:" in out
        assert f"ray locked {real} installed 2.59.0" in " ".join(out.split())
        # the full role re-syncs the drifted package from the wheelhouse (stamp notwithstanding)
        rc, out, _secs = run_playbook("playbooks/python_env.yml")
        assert rc == 0, failures(out)
        assert "drifted from its lock: ray locked %s installed 2.59.0" % real in " ".join(out.split())  # wrapped
        assert recap(out)["thor2"]["changed"] >= 1
        assert all(recap(out)[h]["changed"] == 0 for h in ("spark1", "spark2", "thor1"))
    finally:
        if thor2.check_output(f"sed -n 's/^Version: //p' {meta}") != real:
            thor2.run(f"sed -i 's/^Version: .*/Version: {real}/' {meta}")
    assert thor2.check_output(f"sed -n 's/^Version: //p' {meta}") == real


# ------------------------------------------------------------------ Ray (issue 6)
def test_env_audit_catches_planted_drift():
    """An override that gives thor1's Ray workers another GLOO interface than its env files say."""
    thor1 = node("thor1")
    dropin = "/etc/systemd/system/llmfleet-ray.service.d/zz-planted-drift.conf"
    thor1.run_expect([0], f"mkdir -p {os.path.dirname(dropin)} && printf '[Service]\\n"
                          f"EnvironmentFile=/etc/llmfleet/planted-drift.env\\n' > {dropin} && "
                          "printf 'GLOO_SOCKET_IFNAME=lo\\n' > /etc/llmfleet/planted-drift.env && "
                          "systemctl daemon-reload && systemctl restart llmfleet-ray")
    try:
        wait_for(lambda: FABRIC_IP["thor1"] in alive_ray_ips(node("spark1")), 120)
        rc, out, _secs = run_playbook("playbooks/ray.yml", "--tags", "ray_node_run")
        assert rc != 0
        assert "worker environment drift: thor1 GLOO_SOCKET_IFNAME='lo' (should be " in out
    finally:
        thor1.run(f"rm -f {dropin} /etc/llmfleet/planted-drift.env && systemctl daemon-reload && "
                  "systemctl restart llmfleet-ray")
    wait_for(lambda: FABRIC_IP["thor1"] in alive_ray_ips(node("spark1")), 120)
    rc, out, _secs = run_playbook("playbooks/ray.yml", "--tags", "ray_node_run")
    assert rc == 0, failures(out)
    assert f"Environment audit: {len(FABRIC_IP)} nodes" in out and "no drift" in out


@pytest.mark.parametrize("name", sorted(MGMT_IP))
def test_nothing_listens_on_the_management_ip(name):
    """No socket is bound to the mgmt address; wildcard listeners are sshd, or Ray / engine
    rendezvous ports that an llmfleet nftables table admits from fabric peers only."""
    host = node(name)
    listeners = host.check_output("ss -ltnH | awk '{print $4}'").split()
    assert not [a for a in listeners if a.startswith(MGMT_IP[name] + ":")]
    wildcard = sorted({int(a.rsplit(":", 1)[1]) for a in listeners if a.rsplit(":", 1)[0] in ("0.0.0.0", "*", "[::]")})
    ruleset = "\n".join(host.check_output(f"nft list table inet {t}") for t in
                        host.check_output("nft list tables").split() if t.startswith("llmfleet_"))
    for port in wildcard:
        assert port == 22 or str(port) in ruleset or _in_ranges(port, ruleset), \
            f"{name}: port {port} listens on all addresses and no llmfleet_* rule covers it"


def test_stopped_container_comes_back_and_rejoins():
    import subprocess
    subprocess.run(["podman", "stop", "-t", "10", "llmfleet-sim-thor2"], check=True, capture_output=True)
    wait_for(lambda: FABRIC_IP["thor2"] not in alive_ray_ips(node("spark1")), 120)
    t0 = time.monotonic()
    subprocess.run(["podman", "start", "llmfleet-sim-thor2"], check=True, capture_output=True)
    seconds = wait_for(lambda: FABRIC_IP["thor2"] in alive_ray_ips(node("spark1")), 180)
    print(f"\nthor2 stopped, started again: back in the Ray cluster {time.monotonic() - t0:.0f}s after start")
    assert seconds < 180
    assert sorted(alive_ray_ips(node("spark1"))) == sorted(FABRIC_IP.values())


def _in_ranges(port, ruleset):
    import re
    return any(int(a) <= port <= int(b) for a, b in re.findall(r"(\d+)-(\d+)", ruleset))


# ------------------------------------------------------------------ serve safety (issue 8)
def _tiny_variant(name, **fields):
    return {"llmfleet_serve_profile": name,
            "llmfleet_serve_profiles_extra": {name: dict({"extends": "sim-tiny-llama"}, **fields)}}


@pytest.mark.parametrize("gate", [
    None,  # no gate: the engine's own --help must refuse it
    {"max_version": "0.17", "on_fail": "error", "reason": "removed in vLLM 0.18"},
], ids=["by-engine-help", "by-profile-gate"])
def test_removed_flag_fails_before_anything_stops(gate):
    before = serve_starts()
    # the base profile drops --swap-space on new engines; these variants make it an error
    extra = _tiny_variant("sim-tiny-llama-oldflag", args={"--swap-space": 4}, gates={"--swap-space": gate})
    rc, out, seconds = run_playbook("playbooks/serve.yml", extra_vars=extra)
    assert rc != 0
    assert "--swap-space" in out and "0.32.0" in out
    assert "Nothing was stopped or started" in out
    assert serve_starts() == before
    print(f"\nremoved flag refused in {seconds:.0f}s (whole playbook)")


def test_missing_required_env_fails_before_anything_stops():
    before = serve_starts()
    extra = _tiny_variant("sim-tiny-llama-needsenv", env={"VLLM_LLMFLEET_PROBE": "1"},
                          required_env=["VLLM_LLMFLEET_PROBE"])
    rc, out, _secs = run_playbook("playbooks/serve.yml", extra_vars=extra)
    assert rc != 0
    flat = " ".join(out.split())  # the callback wraps long messages
    assert "the Ray workers lack what profile sim-tiny-llama-needsenv requires: VLLM_LLMFLEET_PROBE=unset" in flat
    assert "--tags ray" in flat
    assert serve_starts() == before


def test_corrupted_model_copy_is_detected_and_repaired():
    spark2 = node("spark2")
    weights = "/opt/llmfleet/models/tiny-llama/model.safetensors"
    good = spark2.check_output(f"sha256sum {weights}").split()[0]
    spark2.run_expect([0], f"printf 'XXXX' | dd of={weights} bs=1 seek=4096 conv=notrunc status=none")
    assert spark2.check_output(f"sha256sum {weights}").split()[0] != good
    rc, out, _secs = run_playbook("playbooks/models.yml")
    assert rc == 0, failures(out)
    assert recap(out)["spark2"]["changed"] >= 1
    assert spark2.check_output(f"sha256sum {weights}").split()[0] == good
    rc, out, _secs = run_playbook("playbooks/models.yml")
    assert rc == 0 and all(r["changed"] == 0 for r in recap(out).values())
