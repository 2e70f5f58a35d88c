"""The shared read-only attributes fragment: what the info modules promise about check and diff mode."""
import importlib.util
import os
import re

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
MODULES = ("gpu_info", "rdma_info", "model_manifest", "collective_check", "nccl_check", "ray_cluster_info")


def load_fragment():
    spec = importlib.util.spec_from_file_location("attributes", os.path.join(ROOT, "plugins", "doc_fragments", "attributes.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return yaml.safe_load(mod.ModuleDocFragment.READ_ONLY)


def test_read_only_fragment_promises_full_check_mode_and_no_diff():
    attrs = load_fragment()["attributes"]
    assert attrs["check_mode"]["support"] == "full"
    assert attrs["diff_mode"]["support"] == "none"
    assert attrs["platform"]["support"] == "full" and attrs["platform"]["platforms"] == "posix"
    # it stands in for ansible.builtin.action_common_attributes, so it describes each attribute too
    assert all(attr["description"] for attr in attrs.values())


def test_info_modules_use_it_and_do_not_redefine_it():
    for name in MODULES:
        spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "plugins", "modules", name + ".py"))
        text = open(spec.origin, encoding="utf-8").read()
        doc = yaml.safe_load(re.search(r"DOCUMENTATION = r('''|\"\"\")(.*?)\1", text, re.S).group(2))
        assert "llmfleet.cluster.attributes.read_only" in doc["extends_documentation_fragment"], name
        assert "attributes" not in doc, name
        # alone: it carries the descriptions ansible.builtin.action_common_attributes would add
        assert doc["extends_documentation_fragment"] == ["llmfleet.cluster.attributes.read_only"], name
