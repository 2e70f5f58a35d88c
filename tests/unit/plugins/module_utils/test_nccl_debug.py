"""nccl_debug: the transport NCCL really used, from real NCCL_DEBUG=INFO output (fixtures/nccl_debug)."""
from pathlib import Path

import pytest

from ansible_collections.llmfleet.cluster.plugins.module_utils import nccl_debug

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "nccl_debug"


def load(name):
    return (FIX / name).read_text()


# One real line each -> (kind, a field, its value)
LINES = [
    ("spark-153d:7:19 [0] NCCL INFO Using network IB", "network", "network", "IB"),
    ("TUF-Node02:556:574 [0] NCCL INFO Using network Socket", "network", "network", "Socket"),
    ("NCCL INFO Using network AWS Libfabric", "network", "network", "AWS Libfabric"),
    ("3767c65d25c4:880:887 [0] NCCL INFO NET/IB : No device found.", "ib_none", None, None),
    ("spark-153d:7:19 [0] NCCL INFO NET/IB : Using [0]rocep1s0f0:1/RoCE [RO]; OOB enp1s0f0np0:192.168.100.10<0>",
     "ib_devices", "oob", "enp1s0f0np0:192.168.100.10<0>"),
    ("NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB eth0:10.4.2.17<0>", "ib_devices", "devices",
     [{"device": "mlx5_0", "port": 1, "link_layer": "IB"}, {"device": "mlx5_1", "port": 1, "link_layer": "IB"}]),
    ("gpuserver1:15326 [0] NCCL INFO NET/IB : Using [0]={[0] rocep130s0:1/RoCE, [1] rocep130s0:2/RoCE}", "ib_devices",
     "devices", [{"device": "rocep130s0", "port": 1, "link_layer": "RoCE"}, {"device": "rocep130s0", "port": 2, "link_layer": "RoCE"}]),
    ("TUF-Node02:556:574 [0] NCCL INFO NET/Socket : Using [0]eth0:192.168.29.197<0>", "socket_devices", "devices",
     [{"device": "eth0", "ip": "192.168.29.197"}]),
    ("TUF-Node02:556:574 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.", "ib_disabled", "value", "1"),
    ("spark2:2211:2290 [0] NCCL INFO Failed to open libibverbs.so[.1]", "ibverbs_missing", None, None),
    ("spark-153d:7:19 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0", "channel", "transport", "IB"),
    ("NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA", "channel", "gdr", True),
    ("node-a:1101:1120 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0", "channel", "transport", "Socket"),
    ("gpuserver1:15326 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct", "channel", "transport", "SHM"),
    ("spark-153d:7:7 [0] NCCL INFO NCCL version 2.30.7+cuda13.0", "version", "version", "2.30.7"),
    ("NCCL version 2.21.5+cuda12.4", "version", "version", "2.21.5"),
]


@pytest.mark.parametrize("text,kind,field,value", LINES)
def test_parse_line(text, kind, field, value):
    ev = nccl_debug.parse_line(text)
    assert ev["kind"] == kind
    if field:
        assert ev[field] == value


@pytest.mark.parametrize("text", [
    "spark-153d:7:19 [0] NCCL INFO 8 coll channels, 0 collnet channels, 8 p2p channels",
    "3767c65d25c4:880:887 [0] NCCL INFO Using non-device net plugin version 0",
    "INFO 09-18 10:02:11 [__init__.py:235] Automatically detected platform cuda.",
    "",
])
def test_lines_without_transport_information(text):
    assert nccl_debug.parse_line(text) is None


# fixture -> (transport, RDMA expected on the hosts, verdict status, words the detail must hold)
LOGS = [
    ("roce_spark.log", "IB", True, "PASS", ["NET/IB", "RoCE"]),
    ("ib_gdrdma.log", "IB", True, "PASS", ["GDRDMA"]),
    ("roce_two_ports_shm.log", "IB", True, "PASS", ["RoCE"]),
    ("socket_no_ib_device.log", "Socket", False, "PASS", ["NET/Socket"]),
    ("socket_no_ib_device.log", "Socket", True, "FAIL", ["silent fallback", "no IB device"]),
    ("socket_ib_disabled_env.log", "Socket", True, "FAIL", ["silent fallback", "NCCL_IB_DISABLE=1"]),
    ("socket_no_libibverbs.log", "Socket", True, "FAIL", ["libibverbs", "/dev/infiniband"]),
    ("socket_ib_initialized.log", "Socket", True, "FAIL", ["IB devices were found"]),
    ("mixed_channels.log", "mixed", True, "FAIL", ["NET/IB x1", "NET/Socket x1"]),
    ("mixed_channels.log", "mixed", False, "FAIL", ["disagree"]),
    ("libfabric.log", "Libfabric", True, "PASS", ["Libfabric"]),
    ("no_transport.log", None, True, "WARN", ["NCCL_DEBUG=INFO"]),
]


@pytest.mark.parametrize("fixture,transport,rdma,status,words", LOGS)
def test_summary_and_verdict(fixture, transport, rdma, status, words):
    summary = nccl_debug.summarize(load(fixture))
    assert summary["transport"] == transport
    got_status, detail = nccl_debug.verdict(summary, rdma)
    assert got_status == status
    for w in words:
        assert w in detail or w in nccl_debug.describe(summary)


def test_summary_details_of_a_roce_log():
    s = nccl_debug.summarize(load("roce_spark.log"))
    assert s["link_layers"] == ["RoCE"] and not s["gdr"]
    assert s["version"] == "2.30.7"
    assert s["net_channels"] == {"IB": 2}
    assert s["ib_devices"] == [{"device": "rocep1s0f0", "port": 1, "link_layer": "RoCE"}]
    assert any("Using network IB" in e for e in s["evidence"])


def test_intra_node_channels_do_not_decide_the_transport():
    s = nccl_debug.summarize(load("roce_two_ports_shm.log"))
    assert s["net_channels"] == {"IB": 1}
    assert s["transport"] == "IB"


def test_link_transports_maps_ranks_to_hosts():
    s = nccl_debug.summarize(load("socket_no_libibverbs.log") + load("roce_spark.log"))
    links = nccl_debug.link_transports(s, {0: "spark1", 1: "spark2"})
    assert links == {("spark1", "spark2"): "mixed"}
    s = nccl_debug.summarize(load("roce_spark.log"))
    assert nccl_debug.link_transports(s, {0: "spark1", 1: "spark2"}) == {("spark1", "spark2"): "IB"}
    # unknown ranks are ignored
    assert nccl_debug.link_transports(s, {0: "spark1"}) == {}
