"""Fan-out planning and the checks that stop it before the first byte (model_fanout)."""
import math

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.llmfleet.cluster.plugins.filter import model_fanout as filt
from ansible_collections.llmfleet.cluster.plugins.module_utils import model_fanout as F

GIB = 1 << 30
PUB = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB0bVpC6Hs6y0Zl2p4zY1mYp0sQbVq6vGq7d8k9x0abc llmfleet-models-fabric"


@pytest.mark.parametrize("holders, targets, rounds", [
    (["s1"], ["s2"], [{"s2": "s1"}]),
    (["s1"], ["s2", "t1", "t2"], [{"s2": "s1"}, {"t1": "s1", "t2": "s2"}]),
    (["s1"], [f"n{i}" for i in range(2, 9)],
     [{"n2": "s1"}, {"n3": "s1", "n4": "n2"}, {"n5": "s1", "n6": "n2", "n7": "n3", "n8": "n4"}]),
    # two complete copies already: both send in the first round
    (["s1", "s2"], ["t1", "t2", "t3"], [{"t1": "s1", "t2": "s2"}, {"t3": "s1"}]),
    (["s1"], [], []),
    (["s1"], ["s1"], []),          # a holder is never a target
])
def test_plan_rounds(holders, targets, rounds):
    assert F.plan_rounds(holders, targets) == rounds


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8, 9, 16, 33])
def test_rounds_grow_as_log2(n):
    rounds = F.plan_rounds(["n0"], [f"n{i}" for i in range(1, n)])
    assert len(rounds) == math.ceil(math.log2(n))
    received = [r for step in rounds for r in step]
    assert sorted(received) == sorted(f"n{i}" for i in range(1, n))   # everyone exactly once
    seen = {"n0"}
    for step in rounds:            # a sender holds a complete copy before its round
        assert set(step.values()) <= seen
        assert len(set(step.values())) == len(step)   # one receiver per sender per round
        seen |= set(step)


def test_plan_needs_a_holder():
    with pytest.raises(F.FanoutError, match="no node holds a complete copy"):
        F.plan_rounds([], ["a"])


@pytest.mark.parametrize("ips, message", [
    ({"a": "10.0.1.1", "b": "10.0.1.2"}, None),
    ({"a": "10.0.1.1", "b": ""}, "b: llmfleet_fabric_ip '' is not an IPv4 address"),
    ({"a": "10.0.1.1", "b": "10.0.1.300"}, "b: llmfleet_fabric_ip '10.0.1.300'"),
    ({"a": "10.0.1.1", "b": "10.0.1.1"}, "b: llmfleet_fabric_ip 10.0.1.1 is also a's"),
])
def test_check_fabric_ips(ips, message):
    if message is None:
        assert F.check_fabric_ips(list(ips), ips) is True
    else:
        with pytest.raises(F.FanoutError, match=message.replace("(", r"\(")):
            F.check_fabric_ips(list(ips), ips)


@pytest.mark.parametrize("need, free, reserve, expect", [
    ({"a": 10 * GIB, "b": 10 * GIB}, {"a": 100 * GIB, "b": 100 * GIB}, GIB, []),
    ({"a": 10 * GIB, "b": 0}, {"a": 100 * GIB, "b": 0}, GIB, []),          # b copies nothing
    ({"a": 70 * GIB, "b": 70 * GIB}, {"a": 200 * GIB, "b": 40 * GIB}, GIB,
     ["b: 70.00 GiB to copy (+ 1.00 GiB reserve, models_min_free_gb) but 40.00 GiB free. Fix: free space "
      "there or point models_dir at a larger disk; no byte was copied"]),
    ({"a": 10 * GIB}, {"a": 10 * GIB}, GIB, ["a: 10.00 GiB to copy (+ 1.00 GiB reserve"]),   # reserve counts
    ({"a": 1}, {}, 0, ["a: free space of the models directory unknown"]),
])
def test_check_free_space(need, free, reserve, expect):
    got = F.check_free_space(need, free, reserve)
    assert len(got) == len(expect)
    for line, want in zip(got, expect):
        assert line.startswith(want)


def test_missing_bytes():
    manifest = {"a": {"size": 5}, "b/c": {"size": 7}, "d": {"size": 11}}
    assert F.missing_bytes(manifest, ["a", "b/c"]) == 12
    assert F.missing_bytes(manifest, []) == 0


@pytest.mark.parametrize("path, base, rel", [
    ("/opt/llmfleet/models/tiny-llama", "/opt/llmfleet/models", "tiny-llama"),
    ("/opt/llmfleet/models/nvidia/Nemotron/", "/opt/llmfleet/models/", "nvidia/Nemotron"),
    ("/raid/models/x", "/opt/llmfleet/models", None),
    ("/opt/llmfleet/models", "/opt/llmfleet/models", None),
    ("/opt/llmfleet/models-old/x", "/opt/llmfleet/models", None),
])
def test_relative_model_path(path, base, rel):
    if rel is None:
        with pytest.raises(F.FanoutError, match="is not inside models_dir"):
            F.relative_model_path(path, base)
    else:
        assert F.relative_model_path(path, base) == rel


def test_authorized_key_line_restricts_command_and_source():
    line = F.authorized_key_line(PUB, ["10.0.1.12", "10.0.1.11", "10.0.1.11"], "/opt/llmfleet/models/")
    assert line.startswith('command="/usr/bin/rrsync -ro /opt/llmfleet/models",from="10.0.1.11,10.0.1.12",restrict ')
    assert line.endswith(" llmfleet-models-fabric")
    assert PUB.split()[1] in line


@pytest.mark.parametrize("pub, peers, message", [
    ("ssh-rsa AAAA x", ["10.0.1.1"], "is not an ssh-ed25519 public key"),
    (PUB, [], "no fabric peer"),
    (PUB, ["10.0.1.1,10.0.0.0/8"], "is not an IPv4 address"),   # no widening of from= by a crafted value
])
def test_authorized_key_line_errors(pub, peers, message):
    with pytest.raises(F.FanoutError, match=message):
        F.authorized_key_line(pub, peers, "/m")


def test_rsync_argv_pull_and_probe():
    argv = F.rsync_argv("10.0.1.11", "tiny-llama", "/opt/llmfleet/models/tiny-llama/", "/k/id", "/k/kh", 22, 30)
    assert argv[0] == "rsync" and "--files-from=-" in argv and "--ignore-times" in argv
    assert "--partial-dir=.llmfleet-partial" in argv
    assert argv[-2:] == ["10.0.1.11:tiny-llama/", "/opt/llmfleet/models/tiny-llama/"]
    ssh = argv[argv.index("-e") + 1]
    assert "-i /k/id" in ssh and "UserKnownHostsFile=/k/kh" in ssh and "StrictHostKeyChecking=yes" in ssh
    assert "BatchMode=yes" in ssh
    probe = F.rsync_argv("10.0.1.11", "tiny-llama", "/d", "/k/id", "/k/kh", probe=True)
    assert "--list-only" in probe and probe[-1] == "10.0.1.11:./" and "--files-from=-" not in probe


# real ssh / rsync messages
@pytest.mark.parametrize("rc, stderr, cause, fix", [
    (255, "ssh: connect to host 10.0.1.11 port 22: No route to host\nrsync: connection unexpectedly closed",
     "cannot reach spark1 at its fabric address 10.0.1.11", "check the fabric link"),
    (255, "ssh: connect to host 10.0.1.11 port 22: Connection timed out", "cannot reach spark1", "models_distribution: controller"),
    # the link down: rsync read the closed pipe before it reaped ssh (make test, 2026-12-02)
    (12, "ssh: connect to host 10.0.1.11 port 22: Network is unreachable\nrsync: connection unexpectedly closed "
         "(0 bytes received so far) [Receiver]\nrsync error: error in rsync protocol data stream (code 12) at io.c(285) "
         "[Receiver=3.5.0]", "cannot reach spark1 at its fabric address 10.0.1.11", "check the fabric link"),
    (12, "Host key verification failed.\nrsync: connection unexpectedly closed (0 bytes received so far) [Receiver]",
         "host key at 10.0.1.11 is not the one recorded", "llmfleet_fabric_ip"),
    (30, "[Receiver] io timeout after 5 seconds -- exiting\nrsync error: timeout in data send/receive (code 30) at io.c(201) "
         "[Receiver=3.2.7]", "cannot reach spark1 at its fabric address 10.0.1.11", "check the fabric link"),
    (255, "root@10.0.1.11: Permission denied (publickey).\r\nrsync: connection unexpectedly closed",
     "refused the cluster key", "authorized_keys"),
    (255, "Host key verification failed.", "host key at 10.0.1.11 is not the one recorded", "llmfleet_fabric_ip"),
    (11, "rsync: [receiver] write failed on \"/m/x\": No space left on device (28)", "the disk filled up", "resumes"),
    (23, "rsync: [sender] change_dir \"/tiny\" failed: No such file or directory (2)",
     "rsync from spark1 (10.0.1.11) exited 23", "re-run"),
])
def test_classify_rsync_failure(rc, stderr, cause, fix):
    line = F.classify_rsync_failure("spark2", "spark1", "10.0.1.11", rc, stderr)
    assert line.startswith("spark2: ") and cause in line and "Fix: " in line and fix in line


def test_probe_problems():
    probes = [{"results": [{"item": "s1", "rc": 0}]},
              {"results": [{"item": "s1", "rc": 255, "stderr": "No route to host"}]},
              {"results": []}, None]
    got = F.probe_problems(["s2", "t1", "s1", "t2"], probes, {"s1": "10.0.1.11"})
    assert got == [F.classify_rsync_failure("t1", "s1", "10.0.1.11", 255, "No route to host")]


def test_filters_adapt_errors():
    with pytest.raises(AnsibleFilterError, match="not inside models_dir"):
        filt.model_fanout_relpath("/x/y", "/opt")
    assert filt.model_fanout_plan(["a"], ["b"]) == [{"b": "a"}]
    assert filt.model_fanout_missing_bytes(["a"], {"a": {"size": 3}}) == 3
    assert set(filt.FilterModule().filters()) == {
        "model_fanout_plan", "model_fanout_check_ips", "model_fanout_relpath", "model_fanout_missing_bytes",
        "model_fanout_space_problems", "model_fanout_authorized_key", "model_fanout_rsync_argv",
        "model_fanout_probe_problems", "model_fanout_rsync_problem"}
