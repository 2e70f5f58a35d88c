"""Data tables for plugins/module_utils/nccl.py (pure NCCL logic)."""
import pytest

from ansible_collections.llmfleet.cluster.plugins.module_utils import nccl

# --------------------------------------------------------------------------- versions

VERSION_CODES = [
    # (ncclGetVersion value, version string) -- 22907 was read from a real 2.29.7 build;
    # codes below 2.9 use X*1000 + Y*100 + Z (NCCL_VERSION_CODE in nccl.h).
    (22907, "2.29.7"),
    (22809, "2.28.9"),
    (22105, "2.21.5"),
    (21003, "2.10.3"),
    (20901, "2.9.1"),
    (2708, "2.7.8"),
    (2408, "2.4.8"),
]


@pytest.mark.parametrize("code, text", VERSION_CODES)
def test_version_code_to_string(code, text):
    assert nccl.version_code_to_string(code) == text


@pytest.mark.parametrize("code, text", VERSION_CODES)
def test_version_string_to_code_round_trips(code, text):
    assert nccl.version_string_to_code(text) == code


@pytest.mark.parametrize("release, code, version", [
    ("2.29.7-1", 22907, "2.29.7"),
    ("v2.28.9-1", 22809, "2.28.9"),
    ("2.28.9", 22809, "2.28.9"),
    (" 2.29.7-1 ", 22907, "2.29.7"),
])
def test_release_forms(release, code, version):
    assert nccl.version_string_to_code(release) == code
    assert nccl.release_to_version(release) == version


@pytest.mark.parametrize("bad", ["2.29", "latest", "2.29.7-1-1", "", "v2.x.7"])
def test_bad_release(bad):
    with pytest.raises(ValueError):
        nccl.parse_release(bad)


@pytest.mark.parametrize("bad", [0, -5])
def test_bad_code(bad):
    with pytest.raises(ValueError):
        nccl.version_code_to_string(bad)


# --------------------------------------------------------------------------- gencode

GENCODES = [
    ("sm_121", "-gencode=arch=compute_121,code=sm_121"),        # GB10 (DGX Spark)
    ("sm_110", "-gencode=arch=compute_110,code=sm_110"),        # Jetson Thor
    ("sm_90", "-gencode=arch=compute_90,code=sm_90"),
    ("sm_90a", "-gencode=arch=compute_90a,code=sm_90a"),
    ("sm_100f", "-gencode=arch=compute_100f,code=sm_100f"),
    ("sm_121, sm_110",
     "-gencode=arch=compute_121,code=sm_121 -gencode=arch=compute_110,code=sm_110"),
    (["sm_121", "sm_121"], "-gencode=arch=compute_121,code=sm_121"),
]


@pytest.mark.parametrize("arch, flags", GENCODES)
def test_gencode_for_arch(arch, flags):
    assert nccl.gencode_for_arch(arch) == flags


@pytest.mark.parametrize("bad", ["121", "compute_121", "sm121", "gfx942", "", "sm_12x"])
def test_gencode_rejects(bad):
    with pytest.raises(ValueError):
        nccl.gencode_for_arch(bad)


@pytest.mark.parametrize("arch", ["sm_121", "sm_110", "sm_90", "sm_90a", "sm_100f"])
def test_role_default_gencode_matches(arch):
    """roles/nccl/defaults nccl_gencode (Jinja) must agree with gencode_for_arch."""
    import os

    import yaml
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.dirname(os.path.abspath(__file__))))))
    with open(os.path.join(root, "roles", "nccl", "defaults", "main.yml")) as f:
        defaults = yaml.safe_load(f)
    templar = Templar(loader=DataLoader(), variables={"llmfleet_gpu_arch": arch})
    assert templar.template(trust_as_template(defaults["nccl_gencode"])).strip() == nccl.gencode_for_arch(arch)


# --------------------------------------------------------------------------- parsers

@pytest.mark.parametrize("name, expected", [
    ("libnccl.so.2", True),
    ("/opt/llmfleet/nccl/2.29.7-1-sm_121/lib/libnccl.so.2.29.7", True),
    ("libnccl.so", True),
    ("libnccl_static.a", False),
    ("libnccl-net.so", False),
    ("libnccl-net-ofi.so.1", False),
    ("libnccl.so.2.bak", False),
])
def test_is_libnccl(name, expected):
    assert nccl.is_libnccl(name) is expected


@pytest.mark.parametrize("value, expected", [
    ("", []),
    (None, []),
    ("/a/lib:/b/lib", ["/a/lib", "/b/lib"]),
    ("/a/lib::/b/lib:", ["/a/lib", "/b/lib"]),
    ("/a/lib;/b/lib", ["/a/lib", "/b/lib"]),
])
def test_split_ld_library_path(value, expected):
    assert nccl.split_ld_library_path(value) == expected


@pytest.mark.parametrize("value, expected", [
    ("", []),
    ("/x/libnccl.so.2", ["/x/libnccl.so.2"]),
    ("/x/libnccl.so.2 /y/libfoo.so", ["/x/libnccl.so.2", "/y/libfoo.so"]),
    ("/x/libnccl.so.2:/y/libfoo.so", ["/x/libnccl.so.2", "/y/libfoo.so"]),
    # /etc/ld.so.preload text
    ("# baked in\n/usr/lib/libjemalloc.so.2\n/opt/nccl/lib/libnccl.so.2\n",
     ["/usr/lib/libjemalloc.so.2", "/opt/nccl/lib/libnccl.so.2"]),
])
def test_split_preload(value, expected):
    assert nccl.split_preload(value) == expected


ENV_FILE = """\
# Managed by llmfleet.cluster.nccl: NCCL 2.29.7-1 built for sm_121.
LD_LIBRARY_PATH=/opt/llmfleet/nccl/2.29.7-1-sm_121/lib
SGLANG_NCCL_SO_PATH=/opt/llmfleet/nccl/2.29.7-1-sm_121/lib/libnccl.so.2
VLLM_NCCL_SO_PATH=/opt/llmfleet/nccl/2.29.7-1-sm_121/lib/libnccl.so.2

export NCCL_SOCKET_IFNAME="enp1s0f0np0"
NCCL_IB_HCA='rocep1s0f1,roceP2p1s0f1'
not a line
1BAD=x
"""


def test_parse_env_file():
    assert nccl.parse_env_file(ENV_FILE) == {
        "LD_LIBRARY_PATH": "/opt/llmfleet/nccl/2.29.7-1-sm_121/lib",
        "SGLANG_NCCL_SO_PATH": "/opt/llmfleet/nccl/2.29.7-1-sm_121/lib/libnccl.so.2",
        "VLLM_NCCL_SO_PATH": "/opt/llmfleet/nccl/2.29.7-1-sm_121/lib/libnccl.so.2",
        "NCCL_SOCKET_IFNAME": "enp1s0f0np0",
        "NCCL_IB_HCA": "rocep1s0f1,roceP2p1s0f1",
    }


# `ldconfig -C /tmp/ldc/ld.so.cache -p` on Debian 12 x86_64 with the sm_121 build's lib dir in
# the conf: real lines (excerpt). The AArch64 line is written in the same format for GB10/Thor.
BUILT_DIR = "/tmp/ldc/opt/llmfleet/nccl/2.29.7-1-sm_121/lib"
LDCONFIG_P = """\
543 libs found in cache `/tmp/ldc/ld.so.cache'
\tlibz.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libz.so.1
\tlibnccl.so.2 (libc6,x86-64) => /tmp/ldc/opt/llmfleet/nccl/2.29.7-1-sm_121/lib/libnccl.so.2
\tlibnccl.so (libc6,x86-64) => /tmp/ldc/opt/llmfleet/nccl/2.29.7-1-sm_121/lib/libnccl.so
\tlibnccl.so.2 (libc6,AArch64) => /lib/aarch64-linux-gnu/libnccl.so.2
"""


@pytest.mark.parametrize("machine, expected", [
    ("x86_64", [("libnccl.so.2", BUILT_DIR + "/libnccl.so.2"),
                ("libnccl.so", BUILT_DIR + "/libnccl.so")]),
    ("aarch64", [("libnccl.so.2", "/lib/aarch64-linux-gnu/libnccl.so.2")]),
    (None, [("libnccl.so.2", BUILT_DIR + "/libnccl.so.2"),
            ("libnccl.so", BUILT_DIR + "/libnccl.so"),
            ("libnccl.so.2", "/lib/aarch64-linux-gnu/libnccl.so.2")]),
])
def test_parse_ldconfig_cache(machine, expected):
    assert nccl.parse_ldconfig_cache(LDCONFIG_P, machine) == expected


# /proc/self/maps lines of python3 run with LD_PRELOAD=<impostor libnccl.so.2> that then
# ctypes-loaded the sm_121 build (real output, filtered to [heap] and nccl lines): address
# order, not load order.
MAPS = """\
55bbe1757000-55bbe1910000 rw-p 00000000 00:00 0                          [heap]
7f6179400000-7f6179456000 r--p 00000000 fe:00 3598789                    /tmp/ldc/opt/llmfleet/nccl/2.29.7-1-sm_121/lib/libnccl.so.2.29.7
7f6179456000-7f6179641000 r-xp 00056000 fe:00 3598789                    /tmp/ldc/opt/llmfleet/nccl/2.29.7-1-sm_121/lib/libnccl.so.2.29.7
7f6179641000-7f61797a1000 r--p 00241000 fe:00 3598789                    /tmp/ldc/opt/llmfleet/nccl/2.29.7-1-sm_121/lib/libnccl.so.2.29.7
7f61797a1000-7f61797a8000 r--p 003a1000 fe:00 3598789                    /tmp/ldc/opt/llmfleet/nccl/2.29.7-1-sm_121/lib/libnccl.so.2.29.7
7f61797a8000-7f61797c6000 rw-p 003a8000 fe:00 3598789                    /tmp/ldc/opt/llmfleet/nccl/2.29.7-1-sm_121/lib/libnccl.so.2.29.7
7f617a88a000-7f617a88b000 r--p 00000000 fe:00 2162687                    /tmp/impostor/libnccl.so.2
7f617a88b000-7f617a88c000 r-xp 00001000 fe:00 2162687                    /tmp/impostor/libnccl.so.2
7f617a88c000-7f617a88d000 r--p 00002000 fe:00 2162687                    /tmp/impostor/libnccl.so.2
7f617a88d000-7f617a88e000 r--p 00002000 fe:00 2162687                    /tmp/impostor/libnccl.so.2
7f617a88e000-7f617a88f000 rw-p 00003000 fe:00 2162687                    /tmp/impostor/libnccl.so.2
"""


@pytest.mark.parametrize("text, expected", [
    (MAPS, [BUILT_DIR + "/libnccl.so.2.29.7", "/tmp/impostor/libnccl.so.2"]),
    # a library replaced on disk while mapped, and NCCL's net plugin (not a libnccl)
    ("7f1c2f000000-7f1c2f001000 r--p 00000000 fd:00 2621800    /old/libnccl.so.2.28.9 (deleted)\n"
     "7f1c2d000000-7f1c2d001000 r--p 00000000 fd:00 2621700    /opt/x/lib/libnccl-net.so\n",
     ["/old/libnccl.so.2.28.9"]),
    ("", []),
])
def test_libnccl_from_maps(text, expected):
    assert nccl.libnccl_from_maps(text) == expected


# `cuobjdump --list-elf` (nvidia-cuda-cuobjdump 13.4.92) on libnccl.so.2.29.7 built with
# -gencode=arch=compute_121,code=sm_121 and ONLY_FUNCS=SendRecv (real output; the two sm_100
# cubins are the symmetric FP8 LDMC kernels NCCL builds with its own sm_100f gencode).
CUOBJDUMP_SM121 = """\
ELF file    1: libnccl.so.1.sm_121.cubin
ELF file    2: libnccl.so.2.sm_121.cubin
ELF file    3: libnccl.so.3.sm_121.cubin
ELF file    4: libnccl.so.4.sm_121.cubin
ELF file    5: libnccl.so.5.sm_121.cubin
ELF file    6: libnccl.so.6.sm_121.cubin
ELF file    7: libnccl.so.7.sm_100.cubin
ELF file    8: libnccl.so.8.sm_121.cubin
ELF file    9: libnccl.so.9.sm_100.cubin
ELF file   10: libnccl.so.10.sm_121.cubin
"""


@pytest.mark.parametrize("text, expected", [
    (CUOBJDUMP_SM121, ["sm_100", "sm_121"]),
    ("ELF file    1: libnccl.so.2.21.5.1.sm_90.cubin\nELF file    2: x.2.sm_120.cubin\n"
     "PTX file    3: x.3.sm_120.ptx\n", ["sm_90", "sm_120"]),
    ("", []),
])
def test_parse_cuobjdump_list_elf(text, expected):
    assert nccl.parse_cuobjdump_list_elf(text) == expected


# --------------------------------------------------------------------------- resolution

BUILT = "/opt/llmfleet/nccl/2.29.7-1-sm_121/lib/libnccl.so.2"
WHEEL = "/opt/venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2"
SYSTEM = "/usr/lib/aarch64-linux-gnu/libnccl.so.2"
IMPOSTOR = "/usr/local/lib/preload/libnccl.so.2"
FILES = {BUILT, WHEEL, SYSTEM, IMPOSTOR, "/usr/lib/libnccl.so.2"}
CACHE = [("libnccl.so.2", SYSTEM)]

RESOLVE = [
    # (case, env, system preload, engine, cache, expected path, expected source)
    ("vllm var wins", {"VLLM_NCCL_SO_PATH": BUILT, "LD_LIBRARY_PATH": "/opt/venv/x"},
     [], "vllm", CACHE, BUILT, "VLLM_NCCL_SO_PATH"),
    ("sglang var", {"SGLANG_NCCL_SO_PATH": BUILT}, [], "sglang", CACHE, BUILT,
     "SGLANG_NCCL_SO_PATH"),
    ("vllm ignores sglang's var", {"SGLANG_NCCL_SO_PATH": BUILT}, [], "vllm", CACHE, SYSTEM,
     "ld.so.cache"),
    ("empty var is unset", {"VLLM_NCCL_SO_PATH": ""}, [], "vllm", CACHE, SYSTEM, "ld.so.cache"),
    ("LD_PRELOAD beats LD_LIBRARY_PATH",
     {"LD_PRELOAD": "/usr/lib/libjemalloc.so.2 " + IMPOSTOR,
      "LD_LIBRARY_PATH": "/opt/llmfleet/nccl/2.29.7-1-sm_121/lib"},
     [], "vllm", CACHE, IMPOSTOR, "LD_PRELOAD"),
    ("/etc/ld.so.preload counts", {"LD_LIBRARY_PATH": "/opt/llmfleet/nccl/2.29.7-1-sm_121/lib"},
     [IMPOSTOR], "vllm", CACHE, IMPOSTOR, "/etc/ld.so.preload"),
    ("bare soname in LD_PRELOAD is not a path", {"LD_PRELOAD": "libnccl.so.2"}, [], "vllm",
     CACHE, SYSTEM, "ld.so.cache"),
    ("LD_LIBRARY_PATH order", {"LD_LIBRARY_PATH": "/nowhere:/opt/llmfleet/nccl/2.29.7-1-sm_121/lib:"
                               "/usr/lib/aarch64-linux-gnu"},
     [], "vllm", CACHE, BUILT, "LD_LIBRARY_PATH"),
    ("built lib behind the system one", {"LD_LIBRARY_PATH": "/usr/lib/aarch64-linux-gnu:"
                                         "/opt/llmfleet/nccl/2.29.7-1-sm_121/lib"},
     [], "vllm", CACHE, SYSTEM, "LD_LIBRARY_PATH"),
    ("cache", {}, [], "none", CACHE, SYSTEM, "ld.so.cache"),
    ("default dirs", {}, [], "vllm", [], "/usr/lib/libnccl.so.2", "default library path"),
]


@pytest.mark.parametrize("case, env, system_preload, engine, cache, path, source", RESOLVE,
                         ids=[r[0] for r in RESOLVE])
def test_resolve_nccl(case, env, system_preload, engine, cache, path, source):
    got = nccl.resolve_nccl(env, FILES.__contains__, ld_cache=cache,
                            system_preload=system_preload, engine=engine)
    assert (got["path"], got["source"]) == (path, source)


def test_resolve_keeps_preloads_beside_the_so_path():
    got = nccl.resolve_nccl({"VLLM_NCCL_SO_PATH": BUILT, "LD_PRELOAD": IMPOSTOR},
                            FILES.__contains__)
    assert got["path"] == BUILT
    assert got["preloaded"] == [{"path": IMPOSTOR, "source": "LD_PRELOAD"}]


def test_resolve_nothing():
    got = nccl.resolve_nccl({"LD_LIBRARY_PATH": "/a"}, lambda p: False, default_dirs=("/b",))
    assert got["path"] is None
    assert got["searched"] == ["/a/libnccl.so.2", "/b/libnccl.so.2"]


REAL = "/opt/llmfleet/nccl/2.29.7-1-sm_121/lib/libnccl.so.2.29.7"
PROBLEMS = [
    # (case, path, bound_path, sources, expected messages)
    ("all well, nothing global", REAL, None, (None, None), []),
    ("all well, preloaded", REAL, REAL, ("VLLM_NCCL_SO_PATH", "LD_PRELOAD"), []),
    ("other lib answered", WHEEL, WHEEL, ("LD_LIBRARY_PATH", "a pip wheel loaded by torch"),
     ["the engine would load %s (via LD_LIBRARY_PATH), not the expected %s" % (WHEEL, REAL),
      "torch's own NCCL calls in the engine process would bind to %s (via a pip wheel "
      "loaded by torch), not the expected %s" % (WHEEL, REAL)]),
    ("preload interposes", REAL, IMPOSTOR, ("VLLM_NCCL_SO_PATH", "LD_PRELOAD"),
     ["torch's own NCCL calls in the engine process would bind to %s (via LD_PRELOAD), "
      "not the expected %s" % (IMPOSTOR, REAL)]),
    ("no source known", IMPOSTOR, None, (None, None),
     ["the engine would load %s, not the expected %s" % (IMPOSTOR, REAL)]),
]


@pytest.mark.parametrize("case, path, bound_path, sources, expected", PROBLEMS,
                         ids=[p[0] for p in PROBLEMS])
def test_load_problems(case, path, bound_path, sources, expected):
    assert nccl.load_problems(REAL, path, bound_path, *sources) == expected
