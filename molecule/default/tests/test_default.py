"""Verify the foundation converge really happened on every sim node."""
import json

import pytest

# The sim names its nodes by platform (tools/simlab/simlab.py): DGX Spark is GB10 (sm_121),
# Jetson Thor sm_110; any number of each.
ARCH_BY_PLATFORM = {"spark": "sm_121", "thor": "sm_110"}


def test_service_user_is_unprivileged(host):
    user = host.user("llmfleet")
    assert user.exists
    assert user.uid != 0
    assert user.shell == "/usr/sbin/nologin"
    assert user.home == "/var/lib/llmfleet"


def test_directories(host):
    prefix = host.file("/opt/llmfleet")
    assert prefix.is_directory and prefix.user == "root" and prefix.mode == 0o755
    conf = host.file("/etc/llmfleet")
    assert conf.is_directory and conf.group == "llmfleet" and conf.mode == 0o750


def test_node_identity_matches_inventory(host):
    name = host.backend.get_hostname()
    ident = json.loads(host.file("/etc/llmfleet/node.json").content_string)
    assert ident["host"] == name
    assert ident["gpu_arch"] == ARCH_BY_PLATFORM[name.rstrip("0123456789")]
    assert ident["cluster"] == "sim"
    assert ident["ray_role"] == ("head" if name == "spark1" else "worker")
    # the fabric address in the identity is one this node really holds
    addrs = host.check_output("ip -4 -o addr show | awk '{print $4}'")
    assert ident["fabric_ip"] + "/" in addrs


@pytest.mark.parametrize("path", ["/etc/llmfleet/node.json"])
def test_identity_not_world_readable(host, path):
    assert host.file(path).mode & 0o007 == 0
