"""The llmfleet.cluster.orphans module: thor1 after the rehearsal (tests/unit/fixtures/orphans), its unit and
configuration directories in tmp_path, run_command answered from the fixtures; the exact commands asserted."""
import os

import pytest

from ansible_collections.llmfleet.cluster.plugins.module_utils import orphans as o
from ansible_collections.llmfleet.cluster.plugins.modules import orphans
from uthelper import run_module

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "orphans")
TWIN, SGL = "llmfleet-serve-tiny-llama", "llmfleet-serve-tiny-llama-sglang"
SYSTEMCTL, NFT = "/usr/bin/systemctl", "/usr/sbin/nft"
BINS = {"systemctl": SYSTEMCTL, "nft": NFT}
LIST_FILES = [SYSTEMCTL, "list-unit-files", "--no-legend", "--no-pager", "--full", "llmfleet-*"]
LIST_UNITS = [SYSTEMCTL, "list-units", "--all", "--plain", "--no-legend", "--no-pager", "--full", "llmfleet-*"]
TABLES = "table inet llmfleet_monitoring\ntable inet llmfleet_ray\ntable inet llmfleet_serve_tiny_llama_sglang\n" \
         "table inet llmfleet_serve_tiny_llama\n"


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


@pytest.fixture
def node(tmp_path, monkeypatch):
    """thor1's directories as the rehearsal left them, and its owned set in the rehearsal's plan."""
    unit_dir, config_dir = tmp_path / "systemd", tmp_path / "llmfleet"
    monkeypatch.setattr(o, "UNIT_DIR", str(unit_dir))
    (unit_dir / "timers.target.wants").mkdir(parents=True)
    (config_dir / "safeguards").mkdir(parents=True)
    for unit in (SGL, TWIN):
        (unit_dir / (unit + ".service")).write_text("# llmfleet-serve-hash: 0123456789abcdef\n[Unit]\n")
        (unit_dir / ("llmfleet-firewall-%s.service" % unit[len("llmfleet-"):])).write_text("[Unit]\n")
        (unit_dir / (unit + ".service.d")).mkdir()
        (unit_dir / (unit + ".service.d") / o.SAFEGUARDS_DROPIN).write_text("[Service]\n")
        os.symlink("../llmfleet-watchdog@.timer", str(unit_dir / "timers.target.wants" / ("llmfleet-watchdog@%s.timer" % unit)))
        (config_dir / (unit + ".env")).write_text("LLMFLEET_API_KEY=x\n")
        (config_dir / ("firewall-%s.nft" % unit)).write_text("table inet x\n")
        (config_dir / "safeguards" / (unit + ".json")).write_text("{}\n")
    for name in ("comm.env", "engine.env", "nccl.env", "ray.env", "ray.nft", "node.json", "monitoring.nft"):
        (config_dir / name).write_text("\n")
    owned = o.owned_set([o.node_assignment("thor1", {"unit": TWIN, "hosts": ["spark1", "spark2", "thor1", "thor2"],
                                                     "head": "spark1", "backend": "mp"}, True)], str(config_dir))
    return unit_dir, config_dir, owned


def answers(files_out, units_out, tables_after="", tables_before=TABLES):
    """run_command's stand-in: the listings as thor1 printed them; nft's second listing after the stops."""
    tables = [tables_before, tables_after]

    def run(argv):
        if argv[:2] == [SYSTEMCTL, "list-unit-files"]:
            return (0, files_out, "") if files_out else (1, "", "")
        if argv[:2] == [SYSTEMCTL, "list-units"]:
            return 0, units_out, ""
        if argv == [NFT, "list", "tables"]:
            return 0, tables.pop(0) if len(tables) > 1 else tables[0], ""
        return 0, "", ""
    return run


def rehearsal():
    """thor1's listings after the rehearsal; the orphan's firewall table gone once its unit stopped."""
    return answers(fixture("thor1_after_rehearsal.list-unit-files.txt"), fixture("thor1_after_rehearsal.list-units.txt"),
                   "table inet llmfleet_ray\ntable inet llmfleet_serve_tiny_llama\n")


def test_check_mode_reports_what_it_would_remove_and_runs_only_the_listings(monkeypatch, node):
    unit_dir, config_dir, owned = node
    out = run_module(monkeypatch, orphans, {"owned": owned, "node": "thor1"}, commands=rehearsal(), bins=BINS,
                     check_mode=True)
    assert not out.failed and out.result["changed"]
    assert out.calls == [LIST_FILES, LIST_UNITS, [NFT, "list", "tables"]]
    assert [u["unit"] for u in out.result["orphans"]["units"]] == [
        "llmfleet-firewall-serve-tiny-llama-sglang.service", SGL + ".service", "llmfleet-watchdog@%s.timer" % SGL]
    assert out.result["orphans"]["nft_tables"] == ["inet llmfleet_serve_tiny_llama_sglang"]
    assert out.result["removed"] == {"units": [], "nft_tables": [], "files": [], "image_keys": []}
    assert out.result["msg"].startswith("thor1: would remove llmfleet-firewall-serve-tiny-llama-sglang.service")
    assert (unit_dir / (SGL + ".service")).exists() and (config_dir / (SGL + ".env")).exists()


def test_absent_stops_disables_removes_reloads_and_deletes_the_table_left(monkeypatch, node):
    unit_dir, config_dir, owned = node
    fw = "llmfleet-firewall-serve-tiny-llama-sglang.service"
    timer = "llmfleet-watchdog@%s.timer" % SGL
    # the firewall unit's ExecStop did not delete its table this time (the second listing still has it)
    run = answers(fixture("thor1_after_rehearsal.list-unit-files.txt"), fixture("thor1_after_rehearsal.list-units.txt"),
                  TABLES)
    out = run_module(monkeypatch, orphans, {"owned": owned, "node": "thor1"}, commands=run, bins=BINS)
    assert not out.failed and out.result["changed"]
    assert out.calls == [
        LIST_FILES, LIST_UNITS, [NFT, "list", "tables"],
        [SYSTEMCTL, "stop", timer],
        [SYSTEMCTL, "stop", fw, SGL + ".service"],
        [SYSTEMCTL, "disable", fw, SGL + ".service", timer],
        [SYSTEMCTL, "daemon-reload"],
        [SYSTEMCTL, "reset-failed", fw, SGL + ".service"],
        [NFT, "list", "tables"],
        [NFT, "delete", "table", "inet", "llmfleet_serve_tiny_llama_sglang"],
    ]
    assert out.result["removed"] == {
        "units": [fw, SGL + ".service", timer], "nft_tables": ["inet llmfleet_serve_tiny_llama_sglang"],
        "files": sorted([str(config_dir / ("firewall-%s.nft" % SGL)), str(config_dir / (SGL + ".env")),
                         str(config_dir / "safeguards" / (SGL + ".json")),
                         str(unit_dir / (SGL + ".service.d") / o.SAFEGUARDS_DROPIN)]), "image_keys": []}
    assert out.result["msg"].startswith("thor1: removed ")
    # the orphan's files are gone (the drop-in's directory with its last file); the twin's and node.json stay
    assert not (unit_dir / (SGL + ".service")).exists() and not (unit_dir / fw).exists()
    assert not (unit_dir / (SGL + ".service.d")).exists() and not (config_dir / (SGL + ".env")).exists()
    assert (unit_dir / (TWIN + ".service")).exists() and (config_dir / (TWIN + ".env")).exists()
    assert (config_dir / "node.json").exists() and (config_dir / "ray.env").exists()


def test_a_stopped_firewall_deleted_its_own_table_so_no_delete_runs(monkeypatch, node):
    out = run_module(monkeypatch, orphans, {"owned": node[2]}, commands=rehearsal(), bins=BINS)
    assert out.calls[-1] == [NFT, "list", "tables"] and out.result["changed"]


def test_a_converged_node_changes_nothing(monkeypatch, node):
    unit_dir, config_dir, owned = node
    for path in (unit_dir / (SGL + ".service"), config_dir / (SGL + ".env"), config_dir / ("firewall-%s.nft" % SGL),
                 config_dir / "safeguards" / (SGL + ".json"), unit_dir / (SGL + ".service.d") / o.SAFEGUARDS_DROPIN,
                 unit_dir / "timers.target.wants" / ("llmfleet-watchdog@%s.timer" % SGL)):
        path.unlink()
    files_out = "".join(line + "\n" for line in fixture("thor1_after_rehearsal.list-unit-files.txt").splitlines()
                        if "sglang" not in line)
    units_out = "".join(line + "\n" for line in fixture("thor1_after_rehearsal.list-units.txt").splitlines()
                        if "sglang" not in line)
    run = answers(files_out, units_out, tables_before=TABLES.replace("table inet llmfleet_serve_tiny_llama_sglang\n", ""))
    out = run_module(monkeypatch, orphans, {"owned": owned, "node": "thor1"}, commands=run, bins=BINS)
    assert not out.failed and not out.result["changed"]
    assert out.calls == [LIST_FILES, LIST_UNITS, [NFT, "list", "tables"]]
    assert out.result["msg"] == "thor1: nothing the plan does not assign"
    assert out.result["orphans"] == {"units": [], "nft_tables": [], "files": [], "unknown": [], "image_keys": [],
                                     "image_key_file": ""}


def test_reported_lists_without_changing(monkeypatch, node):
    out = run_module(monkeypatch, orphans, {"owned": node[2], "state": "reported", "node": "thor1"},
                     commands=rehearsal(), bins=BINS)
    assert not out.result["changed"] and len(out.calls) == 3
    assert out.result["msg"].startswith("thor1: found llmfleet-firewall-serve-tiny-llama-sglang.service")
    assert [u["running"] for u in out.result["orphans"]["units"]] == [True, True, True]


def test_an_incomplete_owned_set_only_reports(monkeypatch, node):
    owned = dict(node[2], complete=False)
    out = run_module(monkeypatch, orphans, {"owned": owned}, commands=rehearsal(), bins=BINS)
    assert not out.result["changed"] and len(out.calls) == 3 and out.result["orphans"]["units"]
    assert "reported, not removed" in out.warnings[0]


def test_without_a_service_manager_units_are_only_reported(monkeypatch, node):
    def run(argv):
        if argv[:2] == [SYSTEMCTL, "list-units"]:
            return 1, "", "System has not been booted with systemd as init system (PID 1). Can't operate.\n" \
                          "Failed to connect to bus: Host is down\n"
        return listed(argv)
    listed = rehearsal()
    out = run_module(monkeypatch, orphans, {"owned": node[2], "node": "thor1"}, commands=run, bins=BINS)
    assert not out.failed and not out.result["changed"] and len(out.calls) == 3
    assert "no service manager" in out.warnings[0]
    # the orphan's files stay too (a unit runner outside systemd may read them); named, not removed
    assert (node[1] / (SGL + ".env")).exists()
    assert out.result["msg"].startswith("thor1: found ") and str(node[1] / (SGL + ".env")) in out.result["msg"]


def test_a_listing_that_fails_fails_naming_the_command(monkeypatch, node):
    def run(argv):
        return (1, "", "Access denied\n") if argv[:2] == [SYSTEMCTL, "list-units"] else listed(argv)
    listed = rehearsal()
    out = run_module(monkeypatch, orphans, {"owned": node[2]}, commands=run, bins=BINS)
    assert out.failed and out.result["msg"] == "systemctl list-units failed (rc 1): Access denied"


def test_no_nft_no_tables_and_a_prefix_of_the_inventory_is_listed(monkeypatch, node):
    owned = dict(node[2], patterns=["acme-*", "llmfleet-*"])
    out = run_module(monkeypatch, orphans, {"owned": owned}, commands=rehearsal(), bins={"systemctl": SYSTEMCTL},
                     check_mode=True)
    assert out.calls == [LIST_FILES[:-1] + ["acme-*", "llmfleet-*"], LIST_UNITS[:-1] + ["acme-*", "llmfleet-*"]]
    assert out.result["orphans"]["nft_tables"] == []


# thor1's authorized_keys as container_copy.yml leaves it on an image's source (the operator's own key first)
OPERATOR_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOperator operator@laptop\n"
IMAGE_LINE = ('restrict,from="10.231.1.%s",command="/opt/llmfleet/libexec/llmfleet-image-export podman" '
              'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI%s llmfleet-image-%s\n')


def image_keys(node, tmp_path, copiers):
    """thor1's owned set where `copiers` copy from it; its authorized_keys authorizes thor2 and thor3."""
    keys = tmp_path / "authorized_keys"
    keys.write_text(OPERATOR_KEY + IMAGE_LINE % ("14", "Thor2", "thor2") + IMAGE_LINE % ("16", "Thor3", "thor3"))
    keys.chmod(0o600)
    return keys, dict(node[2], image_keys={"file": str(keys), "hosts": copiers})


def test_an_image_key_of_a_node_that_no_longer_copies_is_removed_and_the_other_lines_stay(monkeypatch, node, tmp_path):
    keys, owned = image_keys(node, tmp_path, ["thor2"])
    out = run_module(monkeypatch, orphans, {"owned": owned, "node": "thor1"}, commands=rehearsal(), bins=BINS)
    assert not out.failed and out.result["changed"]
    assert out.result["orphans"]["image_keys"] == ["thor3"] and out.result["removed"]["image_keys"] == ["thor3"]
    assert keys.read_text() == OPERATOR_KEY + IMAGE_LINE % ("14", "Thor2", "thor2")
    assert oct(keys.stat().st_mode & 0o777) == "0o600"
    assert "image key of thor3 in %s" % keys in out.result["msg"]


def test_check_mode_reports_a_stale_image_key_and_keeps_it(monkeypatch, node, tmp_path):
    keys, owned = image_keys(node, tmp_path, [])
    before = keys.read_text()
    out = run_module(monkeypatch, orphans, {"owned": owned, "node": "thor1"}, commands=rehearsal(), bins=BINS,
                     check_mode=True)
    assert not out.failed and out.result["changed"]
    assert out.result["orphans"]["image_keys"] == ["thor2", "thor3"] and out.result["removed"]["image_keys"] == []
    assert keys.read_text() == before and "would remove" in out.result["msg"]


def test_no_authorized_keys_file_no_image_key(monkeypatch, node, tmp_path):
    owned = dict(node[2], image_keys={"file": str(tmp_path / "absent"), "hosts": []})
    out = run_module(monkeypatch, orphans, {"owned": owned, "state": "reported"}, commands=rehearsal(), bins=BINS)
    assert out.result["orphans"]["image_keys"] == []
