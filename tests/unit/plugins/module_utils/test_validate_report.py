"""validate_report: checks, lines, topology and Markdown from what validate.yml collects.

The base case is a two-node serving group (spark1 head + rank 0, spark2 worker + rank 1) and a Ray-only
worker thor1; each row of the table breaks one thing and names the line that must say so.
"""
import copy

import pytest

from ansible_collections.llmfleet.cluster.plugins.module_utils import nccl_debug
from ansible_collections.llmfleet.cluster.plugins.module_utils import validate_report as vr

IP = {"spark1": "10.231.1.11", "spark2": "10.231.1.12", "thor1": "10.231.1.13"}
UNITS = {
    "spark1": "llmfleet-serve-tiny-llama.service loaded active running vllm tiny-llama rank 0 (API)\n",
    "spark2": "llmfleet-serve-tiny-llama.service loaded active running vllm tiny-llama rank 1 (headless)\n",
    "thor1": "",
}
ROCE = {"source": "sysfs", "rdma_up_netdevs": ["enp1s0f1np1"], "nccl_ib_hca": "rocep1s0f1",
        "rdma_devices": [{"ibdev": "rocep1s0f1", "port": 1, "netdev": "enp1s0f1np1", "state": "Up",
                          "link_layer": "Ethernet", "ipv4": "10.231.1.11", "mtu": 9000}]}
NO_RDMA = {"source": "none", "rdma_up_netdevs": [], "nccl_ib_hca": "", "rdma_devices": []}


def env(host):
    return {"VLLM_HOST_IP": IP[host], "NCCL_SOCKET_IFNAME": "eth1", "GLOO_SOCKET_IFNAME": "eth1",
            "NCCL_IB_DISABLE": "1", "UCX_NET_DEVICES": "eth1"}


def gloo(rank):
    return {"backend": "gloo", "rank": rank, "world_size": 2, "error": "", "correct": True, "size_bytes": 67108864,
            "time_s": 0.4, "algbw_gbps": 1.342, "busbw_gbps": 1.342, "transport": "gloo/TCP",
            "transport_status": "PASS", "transport_detail": "gloo over TCP on eth1 (no RDMA on this group)",
            "nccl": nccl_debug.summarize("")}


def base():
    hosts = ["spark1", "spark2", "thor1"]
    results = {h: {"probe": {"ray_service": "active", "serve_units": UNITS[h], "fabric_nic": "eth1", "mtu": 9000,
                             "rdma": copy.deepcopy(NO_RDMA), "audit_env": env(h), "fabric_transport": "auto"},
                   "collective": None, "ray": None, "smoke": None} for h in hosts}
    results["spark1"]["collective"] = gloo(0)
    results["spark2"]["collective"] = gloo(1)
    results["spark1"]["ray"] = {
        "changed": False, "node_count": 3, "gpus": 0.0, "cpus": 6.0, "missing": [], "unexpected_ips": [], "env_drift": [],
        "nodes": [{"ip": IP[h], "hostname": h, "node_id": "x" + h, "cpus": 2.0, "gpus": 0.0} for h in hosts]}
    results["spark1"]["smoke"] = {"ok": True, "models": ["tiny-llama"], "latencies_s": [0.8, 0.7, 0.9], "p50_s": 0.8,
                                  "max_s": 0.9, "completion_tokens": [16, 16, 16], "tokens_per_s": 20.0,
                                  "text": "hello hello", "error": "", "url": "http://10.231.1.11:8000", "model": "tiny-llama"}
    inventory = {h: {"llmfleet_cluster": "sim", "llmfleet_fabric_ip": IP[h], "gpus_expected": 0,
                     "model": "tiny-llama", "serve_unit": "llmfleet-serve-tiny-llama"} for h in hosts}
    return {"generated_at": "2026-11-22T05:00:00Z",
            "groups": {"all": hosts, "ray_head": ["spark1"], "ray_workers": ["spark2", "thor1"],
                       "serve_nodes": ["spark1", "spark2"]},
            "inventory": inventory, "results": results,
            "params": {"fabric_mtu": 9000, "latency_max_s": 30, "ray_unit": "llmfleet-ray",
                       "audit_files": ["/etc/llmfleet/comm.env"]}}


def find(report, target, name):
    hits = [c for c in report["checks"] if c["target"] == target and c["check"] == name]
    assert len(hits) == 1, (target, name, report["lines"])
    return hits[0]


def test_healthy_cluster_passes():
    rep = vr.evaluate(base())
    assert rep["ok"], rep["lines"]
    assert rep["summary"]["FAIL"] == 0
    for line in rep["lines"]:
        assert line.split(" ", 1)[0] in ("PASS", "WARN", "FAIL")
    assert "PASS cluster/sim: all-reduce: busbw 1.342 Gbit/s" in "\n".join(rep["lines"])
    assert find(rep, "thor1", "ray node")["status"] == "PASS"
    # thor1 serves nothing: no serve unit line for it
    assert not [c for c in rep["checks"] if c["target"] == "thor1" and c["check"] == "serve unit"]


def test_a_serve_node_that_no_serving_group_names_is_judged_as_a_ray_node_only():
    # inventories/gpu-4node with the TP 2 layout: all four hosts in serve_nodes, the plan's group is two
    # of them (the inventory carries each host's own group); seen on 1x H200, 2026-12-01
    raw = base()
    raw["groups"]["serve_nodes"] = ["spark1", "spark2", "thor1"]
    for h in ("spark1", "spark2"):
        raw["inventory"][h]["serving_group"] = ["spark1", "spark2"]
    raw["inventory"]["thor1"].update(model="", serve_unit="", serving_group=[])
    rep = vr.evaluate(raw)
    assert rep["summary"]["FAIL"] == 0, rep["lines"]
    assert not [c for c in rep["checks"] if c["target"] == "thor1" and c["check"] == "serve unit"]
    assert find(rep, "cluster/sim", "all-reduce")["status"] == "PASS"
    assert find(rep, "cluster/sim", "env consistency")["detail"].endswith("spark1, spark2")
    # without the plan's group (raw data of older runs) serve_nodes is the group: thor1 must be a rank
    del raw["inventory"]["spark1"]["serving_group"], raw["inventory"]["spark2"]["serving_group"]
    del raw["inventory"]["thor1"]["serving_group"]
    raw["inventory"]["thor1"].update(model="tiny-llama", serve_unit="llmfleet-serve-tiny-llama")
    assert find(vr.evaluate(raw), "cluster/sim", "all-reduce")["status"] == "FAIL"


def _stop_ray(raw, host):
    raw["results"][host]["probe"]["ray_service"] = "inactive"
    ray = raw["results"]["spark1"]["ray"]
    ray["nodes"] = [n for n in ray["nodes"] if n["hostname"] != host]
    ray["missing"] = [host]
    ray["failed"] = True


def _set(path, value):
    def mutate(raw):
        node = raw
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return mutate


def _drift(raw):
    raw["results"]["spark1"]["ray"]["env_drift"] = [
        {"host": "spark2", "ip": IP["spark2"], "var": "NCCL_IB_DISABLE", "expected": "1", "actual": None}]


def _diverging_env(raw):
    raw["results"]["spark2"]["probe"]["audit_env"]["NCCL_IB_DISABLE"] = "0"


def _rank_failed(raw):
    raw["results"]["spark2"]["collective"].update(error="DistStoreError: Timed out after 61 seconds", correct=False)


def _roce_but_socket(raw):
    for h in ("spark1", "spark2"):
        raw["results"][h]["probe"]["rdma"] = copy.deepcopy(ROCE)
        summary = nccl_debug.summarize(
            "x:1:1 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.\n"
            "x:1:1 [0] NCCL INFO NET/Socket : Using [0]enp1s0f1np1:10.231.1.11<0>\nx:1:1 [0] NCCL INFO Using network Socket\n")
        status, detail = nccl_debug.verdict(summary, True)
        raw["results"][h]["collective"].update(
            backend="nccl", transport="Socket", transport_status=status, transport_detail=detail, nccl=summary,
            busbw_gbps=12.0)


def _head_unreachable(raw):
    raw["results"]["spark1"] = {"probe": None, "collective": None, "ray": None, "smoke": None}


# mutation -> lines that must appear (status, target, check, words in the detail)
def _failed_with_journal(raw):
    probe = raw["results"]["spark2"]["probe"]
    probe["serve_units"] = "llmfleet-serve-tiny-llama.service not-found failed failed vllm tiny-llama rank 1 (headless)\n"
    probe["serve_journal"] = "\n".join([
        "Wed 2026-12-02 01:50:01 UTC spark2 llmfleet-serve-other.service[17]: not this unit's line",
        "Wed 2026-12-02 01:50:02 UTC spark2 llmfleet-serve-tiny-llama.service[4711]: RuntimeError: engine core died",
        "Wed 2026-12-02 01:50:03 UTC spark2 init.scope[1]: llmfleet-serve-tiny-llama.service: State 'stop-sigterm' "
        "timed out. Killing.",
        "Wed 2026-12-02 01:50:03 UTC spark2 init.scope[1]: llmfleet-serve-tiny-llama.service: Failed with result "
        "'timeout'.",
    ])


BROKEN = [
    ("ray stopped on a worker", lambda r: _stop_ray(r, "thor1"),
     [("FAIL", "thor1", "ray service", "systemctl start llmfleet-ray"), ("FAIL", "thor1", "ray node", "10.231.1.13"),
      ("FAIL", "cluster/sim", "ray cluster", "missing: thor1 (10.231.1.13)")]),
    ("ray probe failed on the head", _set(["results", "spark1", "ray"], {"failed": True, "msg": "Ray probe failed (rc=1): ConnectionError"}),
     [("FAIL", "cluster/sim", "ray cluster", "ConnectionError")]),
    ("fewer GPUs than expected", _set(["inventory", "spark2", "gpus_expected"], 1),
     [("FAIL", "spark2", "ray node", "offers 0 GPU(s), 1 expected"), ("FAIL", "cluster/sim", "ray cluster", "1 expected")]),
    ("fabric MTU 1500", _set(["results", "spark2", "probe", "mtu"], 1500),
     [("FAIL", "spark2", "fabric MTU", "MTU 1500 < 9000")]),
    ("no NIC holds the fabric IP", _set(["results", "thor1", "probe", "fabric_nic"], ""),
     [("FAIL", "thor1", "fabric MTU", "no interface holds llmfleet_fabric_ip 10.231.1.13")]),
    ("worker env drift", _drift, [("FAIL", "spark2", "env audit", "NCCL_IB_DISABLE=None (should be '1')")]),
    ("env differs across the group", _diverging_env,
     [("FAIL", "cluster/sim", "env consistency", "NCCL_IB_DISABLE (spark1=1, spark2=0)")]),
    ("one rank of the all-reduce failed", _rank_failed, [("FAIL", "cluster/sim", "all-reduce", "spark2: DistStoreError")]),
    ("bandwidth under the floor", _set(["params", "bw_floor_gbps"], 5),
     [("FAIL", "cluster/sim", "all-reduce", "below the floor")]),
    ("wrong sum", lambda r: r["results"]["spark1"]["collective"].update(correct=False),
     [("FAIL", "cluster/sim", "all-reduce", "wrong sum on spark1")]),
    ("silent TCP fallback with RoCE up", _roce_but_socket,
     [("FAIL", "cluster/sim", "collective transport", "silent fallback")]),
    ("serve unit failed", _set(["results", "spark2", "probe", "serve_units"],
                               "llmfleet-serve-tiny-llama.service loaded failed failed vllm tiny-llama rank 1 (headless)\n"),
     [("FAIL", "spark2", "serve unit", "failed/failed")]),
    # systemd's journal lines (journalctl --output=with-unit, Debian 12's systemd 252) name how it ended
    ("serve unit failed, its journal quoted", _failed_with_journal,
     [("FAIL", "spark2", "serve unit", "failed/failed (unit file not-found); its journal ends: llmfleet-serve-tiny-llama.service[4711]: "
       "RuntimeError: engine core died | systemd: llmfleet-serve-tiny-llama.service: State 'stop-sigterm' timed out. "
       "Killing. | systemd: llmfleet-serve-tiny-llama.service: Failed with result 'timeout'.; fix: `journalctl")]),
    ("smoke failed", lambda r: r["results"]["spark1"]["smoke"].update(ok=False, error="POST: HTTP Error 401: Unauthorized"),
     [("FAIL", "cluster/sim", "serve smoke", "401")]),
    ("latency over the limit", _set(["params", "latency_max_s"], 0.5),
     [("FAIL", "cluster/sim", "serve latency", "limit 0.5 s")]),
    # issue 38: back on the sim after the rehearsal, thor1's rehearsal vLLM rank crash-looped while validate passed
    ("an orphan engine unit crash-loops on a node", _set(["results", "thor1", "probe", "orphans"], {
        "units": [{"unit": "llmfleet-serve-tiny-llama.service", "kind": "engine", "active": "activating",
                   "sub": "auto-restart", "running": True, "enabled": True, "file": True}],
        "nft_tables": [], "files": [], "unknown": []}),
     [("FAIL", "thor1", "collection units",
       "llmfleet-serve-tiny-llama.service runs (engine, activating/auto-restart) on thor1, which the plan "
       "does not assign it; fix: `ansible-playbook site.yml --limit thor1`")]),
    ("head unreachable", _head_unreachable,
     [("FAIL", "spark1", "reachable", "ansible spark1 -m ping"), ("FAIL", "cluster/sim", "ray cluster", "no result"),
      ("FAIL", "cluster/sim", "all-reduce", "spark1: did not run"), ("FAIL", "cluster/sim", "serve smoke", "no completion")]),
]


@pytest.mark.parametrize("mutate,expect", [b[1:] for b in BROKEN], ids=[b[0] for b in BROKEN])
def test_each_breakage_fails_with_its_line(mutate, expect):
    raw = base()
    mutate(raw)
    rep = vr.evaluate(raw)
    assert not rep["ok"]
    for status, target, name, words in expect:
        c = find(rep, target, name)
        assert c["status"] == status, c
        assert words in c["detail"], c
        assert vr.line(c) in rep["lines"]
    assert {t for st, t, _n, _w in expect if st == "FAIL"} <= set(rep["failed_targets"])


NO_ORPHANS = {"units": [], "nft_tables": [], "files": [], "unknown": []}


@pytest.mark.parametrize("orphans, status, words", [
    (NO_ORPHANS, "PASS", "every llmfleet unit, table and env file on spark2 is in its plan"),
    # stopped leftovers: nothing runs, but an enabled unit starts at the next boot
    (dict(NO_ORPHANS, units=[{"unit": "llmfleet-ray.service", "kind": "ray", "active": "inactive", "sub": "dead",
                              "running": False, "enabled": True, "file": True}],
          nft_tables=["inet llmfleet_ray"], files=["/etc/llmfleet/ray.env"]),
     "WARN", "left over on spark2, not in its plan: llmfleet-ray.service (ray, inactive); nft table inet llmfleet_ray; "
             "/etc/llmfleet/ray.env"),
    ({"error": "systemctl list-units failed (rc 1): Access denied"}, "WARN", "could not list them: systemctl"),
    # an image source still authorizes a node that no longer copies from it (the orphans module's image_keys)
    (dict(NO_ORPHANS, image_keys=["thor3"], image_key_file="/root/.ssh/authorized_keys"),
     "WARN", "left over on spark2, not in its plan: image key of thor3 in /root/.ssh/authorized_keys"),
    # two running: both named, in one FAIL
    (dict(NO_ORPHANS, units=[{"unit": "a.service", "kind": "engine", "active": "active", "sub": "running", "running": True},
                             {"unit": "llmfleet-watchdog@a.service.timer", "kind": "watchdog", "active": "active",
                              "sub": "waiting", "running": True}]),
     "FAIL", "`systemctl disable --now a.service llmfleet-watchdog@a.service.timer` on spark2"),
])
def test_collection_units_on_a_node_against_its_plan(orphans, status, words):
    raw = base()
    raw["results"]["spark2"]["probe"]["orphans"] = orphans
    c = find(vr.evaluate(raw), "spark2", "collection units")
    assert c["status"] == status and words in c["detail"], c


def test_no_collection_units_line_where_the_listing_did_not_run():
    assert not [c for c in vr.evaluate(base())["checks"] if c["check"] == "collection units"]


def test_skipped_results_count_as_missing():
    raw = base()
    raw["results"]["spark2"]["collective"] = {"skipped": True, "changed": False}
    rep = vr.evaluate(raw)
    assert "did not run" in find(rep, "cluster/sim", "all-reduce")["detail"]


def test_unexpected_ray_node_warns():
    raw = base()
    raw["results"]["spark1"]["ray"]["nodes"].append({"ip": "192.168.1.5", "hostname": "x", "cpus": 1, "gpus": 0})
    rep = vr.evaluate(raw)
    assert find(rep, "cluster/sim", "ray unexpected nodes")["status"] == "WARN"
    assert rep["ok"]


@pytest.mark.parametrize("floor,transport,want", [
    (None, "gloo/TCP", 0.2), (None, "IB", 50.0), (None, "Socket", 5.0), (3, "IB", 3.0),
    ({"IB": 80}, "IB", 80.0), ({"IB": 80}, "gloo/TCP", 0.2), ("", "Socket", 5.0)])
def test_bw_floor(floor, transport, want):
    assert vr.bw_floor({"bw_floor_gbps": floor}, transport) == want


def test_parse_serve_units():
    text = ("llmfleet-serve-tiny-llama.service loaded active running vllm tiny-llama rank 0 (API)\n"
            "● llmfleet-serve-qwen.service not-found inactive dead llmfleet-serve-qwen.service\n")
    units = vr.parse_serve_units(text)
    assert units[0] == {"unit": "llmfleet-serve-tiny-llama", "load": "loaded", "active": "active", "sub": "running",
                        "description": "vllm tiny-llama rank 0 (API)", "engine": "vllm", "model": "tiny-llama",
                        "rank": 0, "api": True}
    assert units[1]["active"] == "inactive" and units[1]["model"] is None


def test_topology_and_markdown():
    rep = vr.evaluate(base())
    cl = rep["clusters"][0]
    assert cl["name"] == "sim" and cl["head"] == "spark1" and cl["serving"] == ["spark1", "spark2"]
    nodes = {n["host"]: n for n in cl["nodes"]}
    assert nodes["spark1"]["ray_role"] == "head" and nodes["spark1"]["serve_rank"] == 0 and nodes["spark1"]["api"]
    assert nodes["thor1"]["serve_rank"] is None and nodes["thor1"]["serves"] == []
    assert nodes["spark2"]["serves"] == ["tiny-llama"]
    assert {(lk["a"], lk["b"], lk["label"]) for lk in cl["links"]} == {
        ("spark1", "spark2", "TCP (gloo)"), ("spark1", "thor1", "Ray control (TCP)")}
    md = vr.render_markdown(rep)
    assert md.splitlines()[2] == "```mermaid" and md.splitlines()[3] == "flowchart LR"
    for h in IP:
        assert "<b>%s</b>" % h in md and IP[h] in md
    assert "| Node | Ray role | Serve rank | Fabric IP | NIC / MTU | RDMA | Transport |" in md
    assert 'n_spark1 <-->|"TCP (gloo)"| n_spark2' in md
    assert "serve rank 0 (API)" in md


def test_markdown_marks_a_down_node():
    raw = base()
    _stop_ray(raw, "thor1")
    md = vr.render_markdown(vr.evaluate(raw))
    assert "style n_thor1 stroke:#d00" in md
    assert "DOWN (inactive)" in md
    assert "**FAILED**" in md


def test_rdma_links_from_nccl_channels():
    raw = base()
    for rank, h in enumerate(("spark1", "spark2")):
        raw["results"][h]["probe"]["rdma"] = copy.deepcopy(ROCE)
        summary = nccl_debug.summarize(
            "h:1:1 [0] NCCL INFO NET/IB : Using [0]rocep1s0f1:1/RoCE [RO]; OOB enp1s0f1np1:10.231.1.11<0>\n"
            "h:1:1 [0] NCCL INFO Using network IB\n"
            "h:1:1 [0] NCCL INFO Channel 00/0 : %d[0] -> %d[0] [send] via NET/IB/0\n" % (rank, 1 - rank))
        status, detail = nccl_debug.verdict(summary, True)
        raw["results"][h]["collective"].update(
            backend="nccl", transport="IB", transport_status=status, transport_detail=detail, nccl=summary,
            busbw_gbps=95.0)
    rep = vr.evaluate(raw)
    assert rep["ok"], rep["lines"]
    assert find(rep, "cluster/sim", "collective transport")["detail"].startswith("RDMA (NET/IB)")
    link = [lk for lk in rep["clusters"][0]["links"] if lk["kind"] == "collective"][0]
    assert link["transport"] == "IB" and link["label"] == "RDMA (NET/IB)"


# ----------------------------------------------------------------------------- real data (simlab val)
REAL = __import__("pathlib").Path(__file__).resolve().parents[2] / "fixtures" / "validate"


def real(name):
    return __import__("json").loads((REAL / name).read_text())


def test_real_healthy_lab_passes():
    rep = vr.evaluate(real("sim2_healthy.json"))
    assert rep["ok"], rep["lines"]
    assert len(rep["lines"]) == 16
    cl = rep["clusters"][0]
    assert cl["transport"] == "gloo/TCP" and cl["busbw_gbps"] > 0
    assert [n["host"] for n in cl["nodes"]] == ["spark1", "thor1"]
    assert [n["serves"] for n in cl["nodes"]] == [["tiny-llama"], ["tiny-llama"]]
    assert find(rep, "thor1", "fabric MTU")["detail"] == "eth0 (10.231.79.12) MTU 9000"


def test_real_stopped_worker_fails_naming_it():
    rep = vr.evaluate(real("sim2_ray_stopped_thor1.json"))
    assert not rep["ok"] and rep["failed_targets"] == ["cluster/sim", "thor1"]
    assert [vr.line(c) for c in rep["checks"] if c["status"] == "FAIL"] == [
        "FAIL thor1: ray service: llmfleet-ray is failed; fix: `systemctl start llmfleet-ray` on thor1 "
        "(`journalctl -u llmfleet-ray -n 50` says why it stopped)",
        "FAIL thor1: ray node: not alive in the Ray cluster of spark1 at 10.231.79.12; fix: `systemctl restart "
        "llmfleet-ray` on thor1 (it must register --node-ip-address=10.231.79.12)",
        "FAIL cluster/sim: ray cluster: 1/2 nodes alive, 0 GPU(s) offered (0 expected), 2 CPUs; missing: thor1 (10.231.79.12)",
    ]


def test_real_lab_with_a_planted_mtu_and_env_drift():
    raw = real("sim2_healthy.json")
    raw["results"]["thor1"]["probe"]["mtu"] = 1500
    raw["results"]["thor1"]["probe"]["audit_env"]["NCCL_IB_DISABLE"] = "0"
    rep = vr.evaluate(raw)
    assert find(rep, "thor1", "fabric MTU")["status"] == "FAIL"
    assert "NCCL_IB_DISABLE (spark1=1, thor1=0)" in find(rep, "cluster/sim", "env consistency")["detail"]


def test_unreachable_results_fail_the_all_reduce():
    raw = base()
    raw["results"]["spark2"]["collective"] = {"unreachable": True, "changed": False,
                                              "msg": "Data could not be sent to remote host"}
    rep = vr.evaluate(raw)
    assert "spark2: Data could not be sent" in find(rep, "cluster/sim", "all-reduce")["detail"]
    assert find(rep, "cluster/sim", "all-reduce")["status"] == "FAIL"


# ----------------------------------------------------------------------------- fabric reachability
def _pings(raw, lost=(), link_down=()):
    """Every host pinged every other; pairs in ``lost`` (a, b) got no answer; hosts in link_down have no link."""
    hosts = raw["groups"]["all"]
    for h in hosts:
        probe = raw["results"][h]["probe"]
        probe["fabric_link_up"] = h not in link_down
        probe["fabric_peers"] = {IP[p]: ("lost" if (h, p) in lost else "ok") for p in hosts if p != h}
    return raw


def _cut(host):
    return {(host, p) for p in IP if p != host} | {(p, host) for p in IP if p != host}


def test_fabric_reachability_passes_when_every_node_reaches_every_other():
    rep = vr.evaluate(_pings(base()))
    assert rep["ok"], rep["lines"]
    assert find(rep, "spark2", "fabric reachability")["detail"] == (
        "reaches spark1 (10.231.1.11), thor1 (10.231.1.13) from 10.231.1.12 on eth1, link up")


@pytest.mark.parametrize("link_down", [(), ("spark2",)], ids=["firewall drop", "link down"])
def test_a_cut_off_node_fails_by_name_and_its_peers_point_to_it(link_down):
    rep = vr.evaluate(_pings(base(), lost=_cut("spark2"), link_down=link_down))
    assert not rep["ok"]
    c = find(rep, "spark2", "fabric reachability")
    assert c["status"] == "FAIL"
    state = "DOWN" if link_down else "up"
    assert c["detail"].startswith(f"CUT OFF: spark2 (10.231.1.12 on eth1, link {state}) reaches none of "
                                  "spark1 (10.231.1.11), thor1 (10.231.1.13) over the fabric")
    assert ("`ip link set eth1 up`" in c["detail"]) == bool(link_down)
    for peer in ("spark1", "thor1"):
        w = find(rep, peer, "fabric reachability")
        assert w["status"] == "WARN" and w["detail"].endswith("not spark2 (cut off, see its line)")
    assert "spark2" in rep["failed_targets"] and "spark1" not in rep["failed_targets"]


def test_a_one_way_block_fails_on_the_node_that_sees_it():
    rep = vr.evaluate(_pings(base(), lost={("thor1", "spark1")}))
    c = find(rep, "thor1", "fabric reachability")
    assert c["status"] == "FAIL" and "no answer from spark1 (10.231.1.11)" in c["detail"]
    assert find(rep, "spark1", "fabric reachability")["status"] == "PASS"


def test_two_node_cluster_cut_fails_both():
    raw = base()
    for h in ("thor1",):
        del raw["results"][h]
        del raw["inventory"][h]
    raw["groups"] = {"all": ["spark1", "spark2"], "ray_head": ["spark1"], "ray_workers": ["spark2"],
                     "serve_nodes": ["spark1", "spark2"]}
    rep = vr.evaluate(_pings(raw, lost={("spark1", "spark2"), ("spark2", "spark1")}))
    assert {c["target"] for c in rep["checks"] if c["check"] == "fabric reachability" and c["status"] == "FAIL"} == {
        "spark1", "spark2"}


def test_ping_error_warns_and_missing_ping_data_gives_no_line():
    raw = _pings(base())
    raw["results"]["thor1"]["probe"]["fabric_peers"] = {"error": "ping not installed (iputils-ping)"}
    rep = vr.evaluate(raw)
    assert find(rep, "thor1", "fabric reachability")["status"] == "WARN"
    rep = vr.evaluate(base())
    assert not [c for c in rep["checks"] if c["check"] == "fabric reachability"]


# Ansible lists no interface at all when the host has no `ip` (iproute2): the MTU check cannot run
# there, which is a missing package (WARN naming it, like the ping check), not a wrong inventory.
@pytest.mark.parametrize("network_facts,status,words", [
    (False, "WARN", "`ip` not installed (iproute2)"),
    ("False", "WARN", "fix: install iproute2 on thor1"),
    (True, "FAIL", "no interface holds llmfleet_fabric_ip 10.231.1.13"),
    (None, "FAIL", "no interface holds llmfleet_fabric_ip 10.231.1.13"),  # reports from before the field
])
def test_mtu_without_network_facts(network_facts, status, words):
    raw = base()
    probe = raw["results"]["thor1"]["probe"]
    probe.update(fabric_nic="", mtu=None)
    if network_facts is not None:
        probe["network_facts"] = network_facts
    rep = vr.evaluate(raw)
    c = find(rep, "thor1", "fabric MTU")
    assert c["status"] == status and words in c["detail"], c
    assert rep["ok"] is (status != "FAIL")


def test_mtu_with_network_facts_still_judges_the_nic():
    raw = base()
    raw["results"]["spark2"]["probe"].update(network_facts=True, mtu=1500)
    assert find(vr.evaluate(raw), "spark2", "fabric MTU")["status"] == "FAIL"


def test_a_ray_worker_rank_passes_without_a_unit_and_a_unit_rank_still_needs_one():
    """Backend ray: the plan's runs_unit is false on the group's other nodes (their ranks are Ray
    workers of the engine on its first node); a node whose plan runs a unit still FAILs without it."""
    raw = base()
    raw["results"]["spark2"]["probe"].update(runs_unit=False, serve_units="")
    c = find(vr.evaluate(raw), "spark2", "serve unit")
    assert c["status"] == "PASS" and "Ray worker" in c["detail"]
    node = next(n for n in vr.evaluate(raw)["clusters"][0]["nodes"] if n["host"] == "spark2")
    assert len(node["serves"]) == 1 and node["serves"][0].endswith(" (Ray worker)"), node["serves"]
    raw["results"]["spark2"]["probe"].update(runs_unit=True)
    c = find(vr.evaluate(raw), "spark2", "serve unit")
    assert c["status"] == "FAIL" and "not installed" in c["detail"]
