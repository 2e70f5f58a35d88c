"""The collection's units, tables and files a node holds and its plan does not assign (module_utils/orphans.py).

Real outputs: thor1 after the README's rehearsal step (`site.yml -i inventories/lab -i inventories/lab-twin`
run after `make demo`, issue 38 item 5): the sim's SGLang rank, its watchdog and firewall still beside the
rehearsal's vLLM rank. ``*.list-unit-files.txt`` is systemd 252's own output (Debian 12, the sim's nodes:
`systemctl --root=<dir> list-unit-files --no-legend --no-pager --full 'llmfleet-*'` over the unit files the
roles write, enabled as they enable them); ``*.list-units.txt`` is laid out as systemd 252 prints
`list-units --all --plain --no-legend --full` (each column as wide as its widest cell; that listing needs a
running service manager), with the units' own descriptions from the roles' templates.
"""
import os

import pytest

from ansible_collections.llmfleet.cluster.plugins.module_utils import orphans as o

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "orphans")


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


TWIN, SGL = "llmfleet-serve-tiny-llama", "llmfleet-serve-tiny-llama-sglang"
# thor1's plan in the rehearsal (lab + lab-twin): rank 2 of the twin's vLLM TP=4 group, a Ray worker
THOR1_TWIN = o.owned_set([o.node_assignment("thor1", {"unit": TWIN, "hosts": ["spark1", "spark2", "thor1", "thor2"],
                                                      "head": "spark1", "backend": "mp"}, True)], "/etc/llmfleet")
# thor1's plan in the sim (make demo): rank 1 of the Thors' SGLang group
THOR1_SIM = o.owned_set([o.node_assignment("thor1", {"unit": SGL, "hosts": ["thor1", "thor2"], "head": "thor1",
                                                     "backend": "native"}, True)], "/etc/llmfleet")


def thor1_units():
    files = o.parse_unit_files(fixture("thor1_after_rehearsal.list-unit-files.txt"))
    # the module reads each listed unit file from the unit directory (the template units aside)
    texts = {unit: "[Unit]\n" for unit in files if "@." not in unit}
    return o.installed(files, o.parse_units(fixture("thor1_after_rehearsal.list-units.txt")), texts,
                       wanted_instances=["llmfleet-watchdog@%s.timer" % SGL, "llmfleet-watchdog@%s.timer" % TWIN])


def test_parse_unit_files_reads_systemds_own_listing_header_and_footer_included():
    files = o.parse_unit_files(fixture("thor1_after_rehearsal.list-unit-files.txt"))
    assert files[SGL + ".service"] == "enabled" and files["llmfleet-watchdog@.timer"] == "indirect"
    assert files["llmfleet-headroom@.service"] == "static" and len(files) == 11
    with_legend = "UNIT FILE                    STATE   PRESET\nllmfleet-ray.service enabled enabled\n\n1 unit files listed.\n"
    assert o.parse_unit_files(with_legend) == {"llmfleet-ray.service": "enabled"}


def test_parse_units_reads_state_and_description():
    units = o.parse_units(fixture("thor1_after_rehearsal.list-units.txt"))
    assert units[SGL + ".service"] == {"load": "loaded", "active": "activating", "sub": "auto-restart",
                                       "description": "sglang tiny-llama-sglang rank 1 (headless)"}
    assert units["llmfleet-watchdog@%s.timer" % SGL]["sub"] == "waiting" and len(units) == 12
    # a unit whose file is gone while it still runs (systemd marks it with a bullet outside --plain)
    gone = o.parse_units("\u25cf llmfleet-serve-x.service not-found active running llmfleet-serve-x.service\n")
    assert gone["llmfleet-serve-x.service"]["load"] == "not-found"


def test_parse_tables():
    text = "table inet llmfleet_ray\ntable inet llmfleet_serve_tiny_llama_sglang\ntable ip nat\n"
    assert o.parse_tables(text) == ["inet llmfleet_ray", "inet llmfleet_serve_tiny_llama_sglang", "ip nat"]


@pytest.mark.parametrize("unit, text, want", [
    (SGL + ".service", None, ("engine", "")),
    ("llmfleet-firewall-serve-tiny-llama-sglang.service", None, ("serve_firewall", "")),
    ("llmfleet-watchdog@%s.timer" % SGL, None, ("watchdog", SGL)),
    ("llmfleet-headroom@%s.service" % SGL, None, ("watchdog", SGL)),
    ("llmfleet-watchdog-restart@%s.service" % SGL, None, ("watchdog", SGL)),
    ("llmfleet-watchdog@.timer", None, ("kept", "")),
    ("llmfleet-monitoring-firewall.service", None, ("kept", "")),
    ("llmfleet-ray.service", None, ("ray", "")),
    ("llmfleet-ray-firewall.service", None, ("ray_firewall", "")),
    # serve_unit_name gave the engine another name: llm_server's stamp says what it is
    ("llmfleet-tiny.service", "# Managed by Ansible\n# llmfleet-serve-hash: 0123\n", ("engine", "")),
    ("llmfleet-tiny.service", "[Unit]\n", ("unknown", "")),
    # llm_server runs the gateway too: its stamp must not make it an engine unit
    ("llmfleet-gateway.service", "# llmfleet-serve-hash: 0123\n", ("gateway", "")),
    ("llmfleet-gateway-firewall.service", None, ("gateway_firewall", "")),
])
def test_unit_kind(unit, text, want):
    assert o.unit_kind(unit, THOR1_TWIN, text) == want


def test_thor1_after_the_rehearsal_the_sims_sglang_rank_its_watchdog_and_firewall_are_orphans():
    tables = ["inet llmfleet_monitoring", "inet llmfleet_ray", "inet llmfleet_serve_tiny_llama_sglang",
              "inet llmfleet_serve_tiny_llama"]
    files = o.collection_files("/etc/llmfleet", ["comm.env", "engine.env", "nccl.env", "ray.env", "ray.nft", "node.json",
                                                 "monitoring.nft", SGL + ".env", TWIN + ".env", "firewall-%s.nft" % SGL,
                                                 "firewall-%s.nft" % TWIN],
                               [SGL + ".json", TWIN + ".json"], [SGL, TWIN])
    found = o.orphans(THOR1_TWIN, thor1_units(), tables, files)
    assert [(u["unit"], u["kind"], u["active"], u["enabled"], u["running"]) for u in found["units"]] == [
        ("llmfleet-firewall-serve-tiny-llama-sglang.service", "serve_firewall", "active", True, True),
        (SGL + ".service", "engine", "activating", True, True),
        ("llmfleet-watchdog@%s.timer" % SGL, "watchdog", "active", True, True),
    ]
    assert found["nft_tables"] == ["inet llmfleet_serve_tiny_llama_sglang"]
    assert found["files"] == ["/etc/llmfleet/firewall-%s.nft" % SGL, "/etc/llmfleet/%s.env" % SGL,
                              "/etc/llmfleet/safeguards/%s.json" % SGL,
                              "/etc/systemd/system/%s.service.d/50-llmfleet-safeguards.conf" % SGL]
    assert found["unknown"] == []
    assert o.summary("thor1", found, "would remove").startswith(
        "thor1: would remove llmfleet-firewall-serve-tiny-llama-sglang.service (serve_firewall, running); "
        "%s.service (engine, running)" % SGL)
    assert o.summary("thor1", {"units": []}) == "thor1: nothing the plan does not assign"


def test_going_back_to_the_sim_the_rehearsals_vllm_rank_is_the_orphan():
    found = o.orphans(THOR1_SIM, thor1_units(), ["inet llmfleet_serve_tiny_llama"])
    assert [u["unit"] for u in found["units"]] == ["llmfleet-firewall-serve-tiny-llama.service",
                                                   TWIN + ".service", "llmfleet-watchdog@%s.timer" % TWIN]
    assert found["nft_tables"] == ["inet llmfleet_serve_tiny_llama"]


def test_a_converged_node_has_none_and_a_stopped_disabled_unit_without_file_is_gone():
    units = o.installed(o.parse_unit_files(""), o.parse_units(
        "llmfleet-serve-old.service not-found inactive dead llmfleet-serve-old.service\n"
        "llmfleet-watchdog@llmfleet-serve-old.service loaded inactive dead llmfleet health watchdog probe\n"))
    assert o.orphans(THOR1_SIM, units) == {"units": [], "nft_tables": [], "files": [], "unknown": []}
    # failed (the crash-looping rank stopped by its start limit): listed, to reset
    failed = o.installed({}, o.parse_units("llmfleet-serve-old.service not-found failed failed x\n"))
    assert [u["active"] for u in o.orphans(THOR1_SIM, failed)["units"]] == ["failed"]


def test_a_node_that_left_ray_loses_its_ray_unit_table_and_files_and_unknown_units_are_only_reported():
    owned = o.owned_set([o.node_assignment("thor1", None, False)], "/etc/llmfleet")
    units = o.installed(o.parse_unit_files("llmfleet-ray.service enabled enabled\n"
                                           "llmfleet-ray-firewall.service enabled enabled\n"
                                           "llmfleet-custom.service enabled enabled\n"),
                        o.parse_units("llmfleet-ray.service loaded active running Ray worker node (llmfleet, sm_110)\n"),
                        {"llmfleet-ray.service": "[Unit]\n", "llmfleet-ray-firewall.service": "[Unit]\n"})
    found = o.orphans(owned, units, ["inet llmfleet_ray", "inet llmfleet_monitoring", "inet filter"],
                      o.collection_files("/etc/llmfleet", ["ray.env", "ray.nft", "comm.env"], [], []))
    assert [(u["unit"], u["kind"], u["running"]) for u in found["units"]] == [
        ("llmfleet-ray-firewall.service", "ray_firewall", False), ("llmfleet-ray.service", "ray", True)]
    assert found["nft_tables"] == ["inet llmfleet_ray"]
    assert found["files"] == ["/etc/llmfleet/ray.env", "/etc/llmfleet/ray.nft"]
    assert found["unknown"] == ["llmfleet-custom.service"]


def test_a_unit_file_outside_the_unit_directory_is_not_removed_but_disabled_and_stopped():
    # a generated (or vendor) unit of the collection's name: systemd lists its file, the module found none to read
    units = o.installed({"llmfleet-serve-old.service": "generated"},
                        o.parse_units("llmfleet-serve-old.service loaded active running vllm old rank 0 (API)\n"))
    found = o.orphans(THOR1_SIM, units)
    assert found["units"][0]["file"] is False
    assert o.actions(found) == [("run", ["systemctl", "stop", "llmfleet-serve-old.service"]),
                                ("run", ["systemctl", "reset-failed", "llmfleet-serve-old.service"])]


def test_actions_stop_timers_first_then_the_rest_disable_remove_reload_reset():
    found = o.orphans(THOR1_TWIN, thor1_units(), [], ["/etc/llmfleet/%s.env" % SGL])
    assert o.actions(found) == [
        ("run", ["systemctl", "stop", "llmfleet-watchdog@%s.timer" % SGL]),
        ("run", ["systemctl", "stop", "llmfleet-firewall-serve-tiny-llama-sglang.service", SGL + ".service"]),
        ("run", ["systemctl", "disable", "llmfleet-firewall-serve-tiny-llama-sglang.service", SGL + ".service",
                 "llmfleet-watchdog@%s.timer" % SGL]),
        ("remove", "/etc/systemd/system/llmfleet-firewall-serve-tiny-llama-sglang.service"),
        ("remove", "/etc/systemd/system/%s.service" % SGL),
        ("remove", "/etc/llmfleet/%s.env" % SGL),
        ("run", ["systemctl", "daemon-reload"]),
        ("run", ["systemctl", "reset-failed", "llmfleet-firewall-serve-tiny-llama-sglang.service", SGL + ".service"]),
    ]
    assert o.actions({"units": [], "files": []}) == []


def test_serve_firewall_names_as_the_serve_role():
    assert o.serve_firewall(SGL, "/etc/llmfleet") == {
        "unit": "llmfleet-firewall-serve-tiny-llama-sglang.service",
        "table": "inet llmfleet_serve_tiny_llama_sglang", "file": "/etc/llmfleet/firewall-%s.nft" % SGL}
    assert o.serve_firewall("acme-tiny.v2", "/c", "acme")["table"] == "inet llmfleet_serve_tiny_v2"


@pytest.mark.parametrize("text, hosts, stale, kept", [
    # the source's copiers stay; a node that no longer copies goes; the operator's lines are never touched
    ("ssh-ed25519 AAAA op@laptop\nrestrict ssh-ed25519 BBBB llmfleet-image-thor2\nrestrict ssh-ed25519 CCCC llmfleet-image-thor3\n",
     ["thor2"], ["thor3"], "ssh-ed25519 AAAA op@laptop\nrestrict ssh-ed25519 BBBB llmfleet-image-thor2\n"),
    # nobody copies any more: every image key goes
    ("restrict ssh-ed25519 BBBB llmfleet-image-thor2", [], ["thor2"], ""),
    # a comment that only mentions the name, a key of another tool: kept
    ("# llmfleet-image-thor2 was here\nssh-ed25519 DDDD llmfleet-image-thor2-backup@x y\n", [], [],
     "# llmfleet-image-thor2 was here\nssh-ed25519 DDDD llmfleet-image-thor2-backup@x y\n"),
    # no file
    (None, [], [], ""),
])
def test_stale_image_keys(text, hosts, stale, kept):
    assert o.stale_image_keys(text, hosts) == (stale, kept)


def test_the_summary_names_a_stale_image_key_and_its_file():
    found = {"units": [], "nft_tables": [], "files": [], "image_keys": ["thor3"], "image_key_file": "/root/.ssh/authorized_keys"}
    assert o.summary("thor1", found, "removed") == "thor1: removed image key of thor3 in /root/.ssh/authorized_keys"
