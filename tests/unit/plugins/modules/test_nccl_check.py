"""Tests for the llmfleet.cluster.nccl_check module: decisions on canned probe results, and
the probe script itself run for real (without any libnccl)."""
import json
import os
import subprocess
import sys

import pytest


from ansible_collections.llmfleet.cluster.plugins.modules import nccl_check
from uthelper import run_module


@pytest.fixture
def libs(tmp_path):
    """Real files standing in for the libraries: the build (behind its soname link), an
    impostor and a wheel's copy."""
    lib = tmp_path / "opt" / "2.29.7-1-sm_121" / "lib"
    lib.mkdir(parents=True)
    (lib / "libnccl.so.2.29.7").write_bytes(b"")
    os.symlink("libnccl.so.2.29.7", lib / "libnccl.so.2")
    imp = tmp_path / "impostor"
    imp.mkdir()
    (imp / "libnccl.so.2").write_bytes(b"")
    wheel = tmp_path / "site" / "nvidia" / "nccl" / "lib"
    wheel.mkdir(parents=True)
    (wheel / "libnccl.so.2").write_bytes(b"")
    return {
        "link": str(lib / "libnccl.so.2"),
        "built": str(lib / "libnccl.so.2.29.7"),
        "libdir": str(lib),
        "impostor": str(imp / "libnccl.so.2"),
        "site": str(tmp_path / "site"),
        "wheel": str(wheel / "libnccl.so.2"),
    }


def run(monkeypatch, args, probe, cuobjdump_out=None):
    calls = []

    def fake_probe(module, python, load_name, env):
        calls.append((python, load_name, env))
        return probe, ""

    def run_command(argv):
        if argv[0].endswith("ldconfig"):
            return 0, "0 libs found in cache `/etc/ld.so.cache'\n", ""
        return cuobjdump_out

    monkeypatch.setattr(nccl_check, "run_probe", fake_probe)
    monkeypatch.setattr(nccl_check, "read_text", lambda path: "")
    out = run_module(monkeypatch, nccl_check, args, commands=run_command)
    return out, calls, out.warnings


def maps(*paths):
    return "".join("7f00%04x0000-7f00%04x1000 r-xp 00000000 fd:00 %d %s\n" % (i, i, 100 + i, p)
                   for i, p in enumerate(paths))


def probe(answered, version, mapped, sys_path=(), glob=None, glob_version=None, how="global",
          **extra):
    out = {"rc": 0, "version": version, "answered_by": answered, "maps": maps(*mapped),
           "sys_path": list(sys_path)}
    if glob:
        out.update(bound_rc=0, bound_version=glob_version or version, bound_answered_by=glob,
                   bound_how=how)
    out.update(extra)
    return out


GLOBAL_MSG = "torch's own NCCL calls in the engine process would bind to %s"

# (case, args(libs), probe(libs), failed, message fragments(libs))
CASES = [
    ("built lib, preloaded, expected",
     lambda L: {"engine_env": {"VLLM_NCCL_SO_PATH": L["link"], "LD_PRELOAD": L["link"]},
                "expected_path": L["link"], "expected_version": "2.29.7-1"},
     lambda L: probe(L["link"], 22907, [L["built"]], glob=L["link"]),
     False, lambda L: ["NCCL 2.29.7 from " + L["built"]]),
    ("other expected path",
     lambda L: {"engine_env": {"VLLM_NCCL_SO_PATH": L["link"]}, "expected_path": L["impostor"]},
     lambda L: probe(L["link"], 22907, [L["built"]]),
     True, lambda L: ["the engine would load %s (via VLLM_NCCL_SO_PATH), not the expected %s"
                      % (L["built"], L["impostor"])]),
    ("LD_PRELOAD interposes beside the so path",
     lambda L: {"engine_env": {"VLLM_NCCL_SO_PATH": L["link"], "LD_PRELOAD": L["impostor"]},
                "expected_path": L["link"]},
     lambda L: probe(L["link"], 22907, [L["impostor"], L["built"]], glob=L["impostor"],
                     glob_version=22809),
     True, lambda L: [GLOBAL_MSG % L["impostor"] + " (via LD_PRELOAD)"]),
    ("LD_PRELOAD wins the soname",
     lambda L: {"engine_env": {"LD_LIBRARY_PATH": L["libdir"], "LD_PRELOAD": L["impostor"]},
                "expected_path": L["link"]},
     lambda L: probe(L["impostor"], 22809, [L["impostor"]], glob=L["impostor"]),
     True, lambda L: ["the engine would load %s (via LD_PRELOAD)" % L["impostor"]]),
    ("torch loaded the wheel",
     lambda L: {"engine_env": {"LD_LIBRARY_PATH": L["libdir"]}, "expected_path": L["link"]},
     lambda L: probe(L["wheel"], 22809, [L["wheel"]], sys_path=[L["site"]], glob=L["wheel"],
                     torch_version="2.11.0+cu130"),
     True, lambda L: ["the engine would load %s (via a pip wheel loaded by torch)" % L["wheel"],
                      GLOBAL_MSG % L["wheel"] + " (via a pip wheel loaded by torch)"]),
    # torch 2.11.0+cu130 on an H200: the wheel is loaded RTLD_LOCAL, found by soname
    ("so path, but torch binds to its wheel",
     lambda L: {"engine_env": {"VLLM_NCCL_SO_PATH": L["link"], "LD_LIBRARY_PATH": L["libdir"]},
                "expected_path": L["link"]},
     lambda L: probe(L["link"], 22907, [L["wheel"], L["built"]], sys_path=[L["site"]],
                     glob=L["wheel"], glob_version=22809, how="soname"),
     True, lambda L: [GLOBAL_MSG % L["wheel"] + " (via a pip wheel loaded by torch)"]),
    ("bound to a library of unknown origin",
     lambda L: {"engine_env": {"VLLM_NCCL_SO_PATH": L["link"]}, "expected_path": L["link"]},
     lambda L: probe(L["link"], 22907, [L["impostor"], L["built"]], glob=L["impostor"],
                     glob_version=22809, how="soname"),
     True, lambda L: [GLOBAL_MSG % L["impostor"]
                      + " (via the libnccl.so.2 torch loaded as its dependency)"]),
    ("preloaded build shadows torch's wheel",
     lambda L: {"engine_env": {"VLLM_NCCL_SO_PATH": L["link"], "LD_PRELOAD": L["link"]},
                "expected_path": L["link"]},
     lambda L: probe(L["link"], 22907, [L["wheel"], L["built"]], sys_path=[L["site"]],
                     glob=L["link"]),
     False, lambda L: ["NCCL 2.29.7 from " + L["built"]]),
    ("wrong version",
     lambda L: {"engine_env": {"VLLM_NCCL_SO_PATH": L["link"]}, "expected_version": "2.28.9-1"},
     lambda L: probe(L["link"], 22907, [L["built"]]),
     True, lambda L: ["reports NCCL 2.29.7, expected 2.28.9"]),
    ("no check asked",
     lambda L: {"engine_env": {"LD_PRELOAD": L["impostor"]}},
     lambda L: probe(L["impostor"], 22809, [L["impostor"]], glob=L["impostor"]),
     False, lambda L: ["NCCL 2.28.9 from " + L["impostor"]]),
]


@pytest.mark.parametrize("case, args, probe_out, failed, fragments", CASES,
                         ids=[c[0] for c in CASES])
def test_decisions(monkeypatch, libs, case, args, probe_out, failed, fragments):
    exit_, calls, _warnings = run(monkeypatch, args(libs), probe_out(libs))
    assert exit_.failed is failed, exit_.result.get("msg")
    for fragment in fragments(libs):
        assert fragment in exit_.result["msg"]


def test_load_name_and_env(monkeypatch, libs, tmp_path):
    env_file = tmp_path / "engine.env"
    env_file.write_text("VLLM_NCCL_SO_PATH=/from/file/libnccl.so.2\nLD_PRELOAD=/x/libjemalloc.so\n")
    args = {"env_files": [str(env_file)],
            "engine_env": {"VLLM_NCCL_SO_PATH": libs["link"], "LD_PRELOAD": None},
            "python": "/opt/venv/bin/python"}
    exit_, calls, _warnings = run(monkeypatch, args, probe(libs["link"], 22907, [libs["built"]]))
    python, load_name, env = calls[0]
    assert (python, load_name) == ("/opt/venv/bin/python", libs["link"])
    assert "LD_PRELOAD" not in env and env["VLLM_NCCL_SO_PATH"] == libs["link"]
    assert exit_.result["engine_env"] == {"VLLM_NCCL_SO_PATH": libs["link"]}
    assert exit_.result["path"] == libs["built"]


@pytest.mark.parametrize("engine, load_name", [
    ("vllm", "libnccl.so.2"), ("sglang", "SO"), ("none", "libnccl.so.2")])
def test_engine_variable(monkeypatch, libs, engine, load_name):
    args = {"engine": engine, "engine_env": {"SGLANG_NCCL_SO_PATH": libs["link"]}}
    _exit, calls, _warnings = run(monkeypatch, args, probe(libs["link"], 22907, [libs["built"]]))
    assert calls[0][1] == (libs["link"] if load_name == "SO" else load_name)


def test_unused_copies_are_warnings(monkeypatch, libs):
    args = {"engine_env": {"VLLM_NCCL_SO_PATH": libs["link"], "LD_PRELOAD": libs["link"]},
            "expected_path": libs["link"]}
    exit_, _calls, warnings = run(monkeypatch, args, probe(
        libs["link"], 22907, [libs["wheel"], libs["built"]], sys_path=[libs["site"]],
        glob=libs["link"]))
    assert not exit_.failed
    assert exit_.result["wheel_libraries"] == [libs["wheel"]]
    assert exit_.result["loaded"] == [libs["wheel"], libs["built"]]
    assert exit_.result["bound_path"] == libs["built"]
    assert warnings == ["%s is mapped into the engine process but nothing binds to it"
                        % libs["wheel"]]


def test_wheel_not_loaded_is_a_warning(monkeypatch, libs):
    args = {"engine_env": {"VLLM_NCCL_SO_PATH": libs["link"]}, "expected_path": libs["link"],
            "import_torch": False}
    exit_, _calls, warnings = run(monkeypatch, args, probe(libs["link"], 22907, [libs["built"]],
                                                           sys_path=[libs["site"]]))
    assert not exit_.failed
    assert exit_.result["bound_path"] is None
    assert any(libs["wheel"] in w for w in warnings)


@pytest.mark.parametrize("listing, arch, failed", [
    ("ELF file    1: libnccl.so.1.sm_121.cubin\n", "sm_121", False),
    ("ELF file    1: libnccl.so.1.sm_90.cubin\nELF file    2: libnccl.so.2.sm_120.cubin\n", "sm_121", True),
])
def test_expected_arch(monkeypatch, libs, listing, arch, failed):
    args = {"engine_env": {"VLLM_NCCL_SO_PATH": libs["link"]}, "cuobjdump": "/bin/cuobjdump",
            "expected_arch": arch}
    exit_, _c, _w = run(monkeypatch, args, probe(libs["link"], 22907, [libs["built"]]),
                        cuobjdump_out=(0, listing, ""))
    assert exit_.failed is failed
    if failed:
        assert "holds no sm_121 code (cubins: sm_90, sm_120)" in exit_.result["msg"]


def test_load_error_fails(monkeypatch, libs):
    args = {"engine_env": {"VLLM_NCCL_SO_PATH": "/nowhere/libnccl.so.2"}}
    exit_, _c, _w = run(monkeypatch, args, {"error": "OSError: /nowhere/libnccl.so.2: cannot open",
                                            "sys_path": [], "maps": ""})
    assert exit_.failed
    assert "dlopen /nowhere/libnccl.so.2" in exit_.result["msg"]


# --------------------------------------------------------------------------- the probe itself

def _probe(name, import_torch="0", env=None):
    out = subprocess.run([sys.executable, "-c", nccl_check.PROBE, name, import_torch],
                         capture_output=True, text=True, check=True, env=env)
    return json.loads(out.stdout.rsplit(nccl_check.MARKER, 1)[1])


def test_probe_reports_a_missing_library():
    got = _probe("/nowhere/libnccl.so.2")
    assert got["error"].startswith("OSError")
    assert "maps" in got and got["sys_path"]


def test_probe_reports_a_library_without_nccl():
    got = _probe("libc.so.6")
    assert got["error"].startswith("AttributeError")
    assert "ncclGetVersion" in got["error"]


def test_probe_survives_a_missing_torch(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    (tmp_path / "torch.py").write_text("raise ImportError('no torch here')\n")
    got = _probe("/nowhere/libnccl.so.2", "1", env)
    assert got["torch_error"] == "ImportError: no torch here"
