"""teardown.yml on the converged sim (issue 10). Runs LAST in the scenario (conftest orders it).

It leaves the lab torn down, by design: no llmfleet unit, drop-in, service env file, nftables
table or process on any node; release venvs, wheelhouse and models kept; host protection
(earlyoom, sshd's OOMScoreAdjust drop-in) and the fabric/engine env files (node configuration,
like netplan) kept. That is the documented state after `make test`:
`make demo` (site.yml) or the next `molecule converge -s cluster` starts Ray and serving again
from it without downloads. A re-converge here would cost another engine load (~4 min on the 2-core
box) for nothing the next converge does not prove.
Measured on the 2-core box: the three tests 210 s (teardown.yml 133 s, most of it stopping the
engines and Ray; the --check purge run and the idempotence run the rest); `make demo` afterwards
converged and served again in 4 min 34 s (validate.yml all PASS).
"""

import pytest

from conftest import FABRIC_IP, failures, node, recap, run_playbook

HOSTS = sorted(FABRIC_IP)
SERVING = ("spark1", "spark2")
UNIT = "llmfleet-serve-tiny-llama"
KEPT = ("/opt/llmfleet/venvs/current/bin/python", "/opt/llmfleet/wheelhouse")
MODEL = "/opt/llmfleet/models/tiny-llama/config.json"  # on the serving nodes
# node configuration of the fabric/python_env/nccl roles, kept like the netplan file (purge=true removes it)
NODE_CONFIG = ("/etc/llmfleet/comm.env", "/etc/llmfleet/engine.env", "/etc/llmfleet/nccl.env")
# what the collection leaves on purpose after a teardown: the host protection of the safeguards role
# the Thors' container group (inventories/sim): thor2 copies thor1's image with its own key, which thor1
# authorizes for the export only (docs/containers.md)
IMAGE_SOURCE, IMAGE_COPIER = "thor1", "thor2"
IMAGE_AUTHORIZED = "/root/.ssh/authorized_keys2"  # the sim's serve_image_authorized_keys
IMAGE_KEY_DIR = "/etc/llmfleet/image-key"
HOST_PROTECTION = {"/etc/systemd/system/ssh.service.d/50-llmfleet-oom.conf",
                   "/etc/systemd/system/earlyoom.service.d/50-llmfleet-container.conf"}


def llmfleet_units(h):
    """Every llmfleet unit systemd knows: files (enabled or not) and loaded ones (failed/transient too)."""
    files = h.check_output("systemctl list-unit-files --no-legend --no-pager 'llmfleet*' | awk '{print $1}'")
    loaded = h.check_output("systemctl list-units --all --plain --no-legend --no-pager 'llmfleet*' | awk '{print $1}'")
    return sorted(set(files.split()) | set(loaded.split()))


def service_env_files(h):
    """The EnvironmentFile= paths the llmfleet units load (read from systemd, before the teardown)."""
    paths = set()
    for unit in llmfleet_units(h):
        out = h.check_output(f"systemctl show -P EnvironmentFiles {unit} 2>/dev/null || true")
        paths |= {word for word in out.split() if word.startswith("/")}
    return paths


@pytest.fixture(scope="module")
def before():
    """What the converged lab has before the teardown (so the checks below cannot pass vacuously)."""
    state = {}
    for name in HOSTS:
        h = node(name)
        state[name] = {"units": llmfleet_units(h), "env": service_env_files(h),
                       "tables": h.check_output("nft list tables | grep -c llmfleet || true").strip()}
        assert "llmfleet-ray.service" in state[name]["units"], (name, state[name])
        assert int(state[name]["tables"]) >= 1, name
    for name in SERVING:
        assert f"{UNIT}.service" in state[name]["units"]
        assert f"/etc/llmfleet/{UNIT}.env" in state[name]["env"]
    assert f" llmfleet-image-{IMAGE_COPIER}" in node(IMAGE_SOURCE).file(IMAGE_AUTHORIZED).content_string
    assert node(IMAGE_COPIER).file(f"{IMAGE_KEY_DIR}/id_ed25519").exists
    state["images"] = built_images(node(IMAGE_SOURCE))
    assert state["images"], "thor1 has no built engine image"
    return state


def built_images(h):
    return h.check_output("podman images --format '{{.Repository}}:{{.Tag}}' --filter reference=localhost/llmfleet-engine").split()


def test_purge_check_mode_would_remove_venvs_wheelhouse_models_and_removes_nothing(before):
    # no --diff: the diff of a directory removal lists every file of it
    rc, out, _secs = run_playbook("playbooks/teardown.yml", "--check", extra_vars={"purge": True})
    assert rc == 0, failures(out)
    for name in HOSTS:
        present = tuple(p for p in NODE_CONFIG if node(name).file(p).exists)
        assert "/etc/llmfleet/comm.env" in present, name
        models = ("/opt/llmfleet/models",) if name in SERVING else ()  # only serving nodes hold weights
        for path in ("/opt/llmfleet/venvs", "/opt/llmfleet/wheelhouse") + models + present:
            assert f"changed: [{name}] => (item={path})" in out, (name, path)
        assert llmfleet_units(node(name)) == before[name]["units"]
    assert node("spark1").service(UNIT).is_running
    for image in before["images"]:
        assert f"(item=podman {image})" in out, image
    assert built_images(node(IMAGE_SOURCE)) == before["images"]


def test_teardown_leaves_no_unit_dropin_env_file_table_or_process(before):
    rc, out, secs = run_playbook("playbooks/teardown.yml")
    assert rc == 0, failures(out)
    print(f"\nteardown.yml: {secs:.0f}s")
    for name in HOSTS:
        h = node(name)
        assert llmfleet_units(h) == [], name
        left = h.check_output("ls -d /etc/systemd/system/llmfleet-* /etc/systemd/system/*/llmfleet-* "
                              "/etc/systemd/system/*.d/*llmfleet* /run/systemd/transient/llmfleet-* 2>/dev/null || true").split()
        assert set(left) <= HOST_PROTECTION, (name, left)
        left_env = [p for p in before[name]["env"] if h.file(p).exists and p not in NODE_CONFIG]
        assert left_env == [], (name, left_env)
        assert h.check_output("ls /etc/llmfleet/llmfleet-serve-* /etc/llmfleet/ray.env /etc/llmfleet/ray.nft /etc/llmfleet/ray-auth-token "
                              "/etc/llmfleet/firewall-* /etc/llmfleet/safeguards /etc/llmfleet/llmfleet-gateway.env "
                              "/etc/llmfleet/gateway.nft /etc/llmfleet/gateway-workers.json 2>/dev/null || true") == ""
        assert h.check_output("nft list tables | grep llmfleet || true") == "", name
        assert h.check_output("pgrep -u llmfleet -l || true") == "", name
        # kept: what a re-converge needs to serve again without downloads, and the host protection
        for path in KEPT + ((MODEL,) if name in SERVING else ()):
            assert h.file(path).exists, (name, path)
        assert h.service("earlyoom").is_running
        assert h.check_output("systemctl show -P OOMScoreAdjust ssh") == "-1000"
        # the image copies' keys and their authorizations go; the images stay (like the venvs)
        assert not h.file(IMAGE_KEY_DIR).exists, name
        assert "llmfleet-image-" not in h.check_output(f"cat {IMAGE_AUTHORIZED} 2>/dev/null || true"), name
    assert built_images(node(IMAGE_SOURCE)) == before["images"]


def test_teardown_again_changes_nothing():
    rc, out, _secs = run_playbook("playbooks/teardown.yml")
    assert rc == 0, failures(out)
    assert all(r["changed"] == 0 for r in recap(out).values()), recap(out)
