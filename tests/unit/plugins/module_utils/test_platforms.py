"""The platform facts table (module_utils/platforms.py): which platform a host is, and its transport."""
import pytest

from ansible_collections.llmfleet.cluster.plugins.module_utils import platforms


@pytest.mark.parametrize("groups, arch, device, expected", [
    (["gb10", "ray_head"], "sm_121", "gpu", "gb10"),
    (["thor"], None, "gpu", "thor"),          # the group decides without an arch
    (["ray_workers"], "sm_110", "gpu", "thor"),  # no platform group: the arch decides
    (["hopper"], "sm_90", "gpu", "hopper"),
    (["gb10"], "sm_121", "cpu", "cpu"),       # the sim's CPU build on "Sparks"
    (["ray_head"], "sm_80", "gpu", None),     # an arch of no platform in the table
    ([], None, "gpu", None),
])
def test_platform_of(groups, arch, device, expected):
    assert platforms.platform_of(groups, arch, device) == expected


@pytest.mark.parametrize("platform, declared, expected", [
    ("gb10", None, "roce"), ("gb10", "auto", "roce"), ("gb10", "socket", "socket"),
    ("thor", None, "socket"), ("thor", "roce", "roce"), ("hopper", None, "roce"),
    ("cpu", None, "socket"), (None, None, "socket"),
])
def test_transport(platform, declared, expected):
    assert platforms.transport(platform, declared) == expected


def test_the_table_agrees_with_the_inventory_groups():
    # the gate's GROUP_ARCH and the lab's group_vars (gb10: sm_121, thor: sm_110) come from this table
    assert platforms.group_arch() == {"gb10": "sm_121", "thor": "sm_110", "hopper": "sm_90"}
    for name, facts in platforms.PLATFORMS.items():
        assert set(facts) == {"title", "gpu_arch", "gpus_per_node", "memory_gib", "unified_memory", "roce"}, name
    assert [n for n, f in platforms.PLATFORMS.items() if f["roce"]] == ["gb10", "hopper"]
