"""fatbin: kernel builds read from fatbins nvcc 13.0 wrote (tests/unit/fixtures/fatbin/kernel.cu,
`nvcc -fatbin -arch=<arch>`), and which of them load on which device."""
from pathlib import Path

import pytest

from ansible_collections.llmfleet.cluster.plugins.module_utils import fatbin

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "fatbin"


@pytest.mark.parametrize("arch, elf", [
    ("sm_90", "sm_90"), ("sm_90a", "sm_90a"), ("sm_120", "sm_120"), ("sm_120a", "sm_120a"),
    ("sm_120f", "sm_120f"), ("sm_121", "sm_121"), ("sm_110f", "sm_110f"),
])
def test_each_build_kind_is_read_from_the_fatbin(arch, elf):
    counts = fatbin.summary(fatbin.entries((FIXTURES / ("kernel_%s.fatbin" % arch)).read_bytes()))
    assert [k for k in counts if k.startswith("sm_")] == [elf]
    assert any(k.startswith("ptx_") for k in counts)


@pytest.mark.parametrize("build, device, loads", [
    ("sm_120", "sm_121", True),     # plain SASS: same major, newer minor
    ("sm_120f", "sm_121", True),    # family build
    ("sm_120a", "sm_121", False),   # arch-specific: sm_120 only
    ("sm_120a", "sm_120", True),
    ("sm_121", "sm_120", False),    # never an older minor
    ("sm_110f", "sm_121", False),   # another major
    ("sm_90a", "sm_90", True),
])
def test_sass_loads_on(build, device, loads):
    assert fatbin.sass_loads_on(build, device) is loads


# Counts read with tools/fatbin_arches.py from the published aarch64 vLLM wheels' _C libraries.
VLLM_0_18_1 = {"sm_100": 31, "sm_100a": 20, "sm_120": 36, "sm_120a": 16, "sm_80": 19, "sm_90": 39, "sm_90a": 22}
VLLM_0_32_0 = {"sm_100": 46, "sm_100f": 23, "sm_110": 46, "sm_110f": 21, "sm_120": 47, "sm_120f": 35,
               "sm_90": 55, "sm_90a": 26}


@pytest.mark.parametrize("counts, device, gap", [
    (VLLM_0_18_1, "sm_121", ["sm_120a"]),
    (VLLM_0_18_1, "sm_120", []),
    (VLLM_0_32_0, "sm_121", []),
    (VLLM_0_32_0, "sm_110", []),
    (VLLM_0_18_1, "sm_90", []),
])
def test_arch_specific_gap(counts, device, gap):
    assert fatbin.arch_specific_gap(counts, device) == gap


def test_bytes_without_a_fatbin_have_no_entries():
    assert fatbin.entries(b"\x7fELF" + b"\0" * 256) == []
