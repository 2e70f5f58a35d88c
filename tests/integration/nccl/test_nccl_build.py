"""Integration: the nccl role really compiles NCCL for sm_121 here, and nccl_check sees it.

Run through tests/integration/nccl/run.sh (which the Makefile calls). Needs nvcc (CUDA >= 12.9
for sm_121), make, g++, python3, gcc, apt-get (Debian) and PyPI for nvidia-cuda-cuobjdump.

- NCCL's source is Debian's nvidia-nccl orig tarball (NCCL 2.29.7-1), fetched once with
  tools/nccl/fetch-debian-source.sh into ~/.cache/llmfleet/nccl/.
- CI builds a subset (ONLY_FUNCS=SendRecv) as NCCL's debug build (DEBUG=1, through the role's
  nccl_make_args: host code at -O0 instead of -O3, device code at -O0 -G; the same 147 objects
  and sm_121 ELF for 449 s of build CPU, against 622 s optimised); NCCL_IT_FULL=1 builds every collective, optimised (about
  30 min on 2 cores). NCCL's symmetric kernels are not covered by ONLY_FUNCS and are always
  built. NCCL_IT_MAKE_ARGS overrides the subset's make variables ("" = optimised).
- Every run compiles into a fresh temp prefix root; run.sh puts nvcc and g++ behind ccache when it
  is installed (NCCL_IT_CCACHE=0: plain compilers), so unchanged objects come from its cache.
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
CACHE = Path(os.environ.get("LLMFLEET_CACHE", Path.home() / ".cache" / "llmfleet")) / "nccl"

DEBIAN_VERSION = "2.29.7-1-1"
NCCL_VERSION = "2.29.7-1"
NCCL_CODE = 22907
ARCH = "sm_121"
CUOBJDUMP_REQ = "nvidia-cuda-cuobjdump==13.4.92"
FULL = os.environ.get("NCCL_IT_FULL") == "1"
SUBSET = "" if FULL else os.environ.get("NCCL_IT_ONLY_FUNCS", "SendRecv")
CUDA_HOME = os.environ.get("NCCL_IT_CUDA_HOME", "/usr/local/cuda")
JOBS = int(os.environ.get("NCCL_IT_JOBS", os.cpu_count() or 2))
MAKE_ARGS = [] if FULL else os.environ.get("NCCL_IT_MAKE_ARGS", "DEBUG=1").split()
if os.environ.get("NCCL_IT_NVCC"):  # run.sh: nvcc through ccache
    MAKE_ARGS.append("NVCC=" + os.environ["NCCL_IT_NVCC"])

pytestmark = [
    pytest.mark.skipif(os.environ.get("LLMFLEET_IT_NCCL") != "1",
                       reason="a real NCCL compile: run it through tests/integration/nccl/run.sh"),
    pytest.mark.skipif(not os.access(os.path.join(CUDA_HOME, "bin", "nvcc"), os.X_OK),
                       reason="no nvcc under %s (set NCCL_IT_CUDA_HOME)" % CUDA_HOME),
]


# --------------------------------------------------------------------------- helpers

def _env(**extra):
    env = dict(os.environ)
    for key in ("LD_PRELOAD", "LD_LIBRARY_PATH", "VLLM_NCCL_SO_PATH", "PYTHONPATH"):
        env.pop(key, None)
    env.update(ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=str(ROOT / ".build" / "collections"),
               ANSIBLE_FORCE_COLOR="0", ANSIBLE_DEPRECATION_WARNINGS="0",
               ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0")
    env.update(extra)
    return env


def run_playbook(extra_vars, *args):
    """ansible-playbook site.yml on localhost; streams its output. -> (rc, text, seconds)."""
    vars_file = Path(extra_vars["nccl_prefix_root"]).parent / ("vars-%d.json" % time.monotonic_ns())
    vars_file.write_text(json.dumps(extra_vars))
    cmd = [str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local",
           "-e", "ansible_python_interpreter=%s" % sys.executable,
           "-e", "@%s" % vars_file, str(HERE / "site.yml"), *args]
    print("\n$ " + " ".join(cmd), flush=True)
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    lines = []
    for line in proc.stdout:
        lines.append(line)
        print(line, end="", flush=True)
    rc = proc.wait()
    return rc, "".join(lines), time.monotonic() - start


def recap(text):
    match = re.search(r"^localhost\s+:\s+(.*)$", text, re.M)
    assert match, "no PLAY RECAP in the output"
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", match.group(1))}


def nccl_check(**args):
    """Run llmfleet.cluster.nccl_check ad hoc on localhost; -> the module's result dict."""
    cmd = [str(BIN / "ansible"), "localhost", "-i", "localhost,", "-c", "local",
           "-e", "ansible_python_interpreter=%s" % sys.executable,
           "-m", "llmfleet.cluster.nccl_check", "-a", json.dumps(args)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False,
                          env=_env(ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
                                   ANSIBLE_STDOUT_CALLBACK="json"))
    try:
        out = json.loads(proc.stdout)
    except ValueError:
        pytest.fail("ansible printed no JSON (rc=%d):\n%s\n%s" % (proc.returncode, proc.stdout,
                                                                  proc.stderr))
    return out["plays"][0]["tasks"][0]["hosts"]["localhost"]


# --------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="session")
def tarball():
    out = subprocess.run([str(ROOT / "tools" / "nccl" / "fetch-debian-source.sh"), DEBIAN_VERSION],
                         capture_output=True, text=True, check=True)
    path = out.stdout.strip().splitlines()[-1]
    assert path.endswith("nvidia-nccl_%s.orig.tar.gz" % NCCL_VERSION) and os.path.isfile(path)
    return path


@pytest.fixture(scope="session")
def cuobjdump():
    """cuobjdump from PyPI's nvidia-cuda-cuobjdump, in a cached venv (the toolkit has none)."""
    venv = CACHE / "cuobjdump-venv"
    stamp = venv / "llmfleet-requirement.txt"
    if not (stamp.is_file() and stamp.read_text().strip() == CUOBJDUMP_REQ):
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", CUOBJDUMP_REQ], check=True)
        stamp.write_text(CUOBJDUMP_REQ + "\n")
    hits = glob.glob(str(venv / "lib" / "python3*" / "site-packages" / "nvidia" / "*" / "bin" /
                         "cuobjdump"))
    assert hits, "no cuobjdump inside %s" % CUOBJDUMP_REQ
    return hits[0]


@pytest.fixture(scope="session")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("nccl-it")


@pytest.fixture(scope="session")
def base_vars(tarball, workdir):
    return {
        "llmfleet_gpu_arch": ARCH,
        "nccl_version": NCCL_VERSION,
        "nccl_source": tarball,
        "nccl_prefix_root": str(workdir / "prefix"),
        "nccl_only_functions": SUBSET,
        "nccl_make_args": MAKE_ARGS,
        "nccl_cuda_home": CUDA_HOME,
        "nccl_build_jobs": JOBS,
        "nccl_build_nice": 19,
        "nccl_build_poll_interval": 20,
        "nccl_build_packages": [],
        # the units' env files, here in the temp dir: nccl.env must put the build's library
        # paths in front of what engine.env already had (the units load nccl.env last)
        "nccl_env_file": str(workdir / "etc" / "nccl.env"),
        "nccl_engine_env_files": [str(workdir / "etc" / "comm.env"), str(engine_env_file(workdir))],
    }


def engine_env_file(workdir):
    """A release's engine.env as python_env writes it (CUDA paths of a GB10 node)."""
    path = workdir / "etc" / "engine.env"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("# engine.env\nLD_LIBRARY_PATH=/usr/local/cuda/lib64\nTRITON_PTXAS_PATH=/usr/local/cuda/bin/ptxas\n")
    return path


@pytest.fixture(scope="session")
def built(base_vars):
    """The first converge: a real compile. -> dict(rc, text, seconds, prefix, stamp)."""
    rc, text, seconds = run_playbook(base_vars)
    prefix = Path(base_vars["nccl_prefix_root"]) / ("%s-%s%s" % (NCCL_VERSION, ARCH,
                                                                 "-subset" if SUBSET else ""))
    stamp_file = prefix / "llmfleet-nccl.json"
    stamp = json.loads(stamp_file.read_text()) if stamp_file.is_file() else None
    if stamp:
        print("\nNCCL %s %s build (%s, make %s): %d objects, %d s wall and %d s CPU in the build script, "
              "%.0f s converge"
              % (NCCL_VERSION, ARCH, "full" if FULL else "subset ONLY_FUNCS=%r" % SUBSET, " ".join(MAKE_ARGS) or "-",
                 stamp["objects"], stamp["build_seconds"], stamp["cpu_seconds"], seconds),
              flush=True)
    return dict(rc=rc, text=text, seconds=seconds, prefix=prefix, stamp=stamp, vars=base_vars)


@pytest.fixture(scope="session")
def impostor(workdir):
    """A fake prebuilt libnccl.so.2 (reports 2.28.9), compiled with gcc."""
    out = workdir / "impostor" / "libnccl.so.2"
    out.parent.mkdir()
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libnccl.so.2", "-o", str(out),
                    str(HERE / "impostor.c")], check=True)
    return str(out)


@pytest.fixture(scope="session")
def engine_site(workdir, impostor):
    """sys.path entry of a fake engine venv laid out like torch 2.11.0+cu130's: an
    nvidia-nccl-cu12 wheel's libnccl.so.2 (the impostor), and a 'torch' that, on import, loads
    that file by path and then its libtorch_cuda.so, which needs libnccl.so.2 through an RPATH
    into the wheel. -> (site dir, real path of the wheel's libnccl)."""
    site = workdir / "engine-site"
    lib = site / "nvidia" / "nccl" / "lib"
    lib.mkdir(parents=True)
    shutil.copy(impostor, lib / "libnccl.so.2")
    dist = site / "nvidia_nccl_cu12-2.28.9.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: nvidia-nccl-cu12\nVersion: 2.28.9\n")
    (site / "torch" / "lib").mkdir(parents=True)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(site / "torch" / "lib" / "libtorch_cuda.so"),
                    str(HERE / "fake_libtorch_cuda.c"), str(lib / "libnccl.so.2"),
                    "-Wl,-rpath,$ORIGIN/../../nvidia/nccl/lib", "-Wl,--disable-new-dtags"],
                   check=True)
    (site / "torch" / "__init__.py").write_text(
        "import ctypes, os\n"
        "__version__ = '0.0+llmfleet.fake'\n"
        "_here = os.path.dirname(__file__)\n"
        "ctypes.CDLL(os.path.join(_here, '..', 'nvidia', 'nccl', 'lib', 'libnccl.so.2'))\n"
        "_C = ctypes.CDLL(os.path.join(_here, 'lib', 'libtorch_cuda.so'))\n")
    return str(site), str((lib / "libnccl.so.2").resolve())


def engine_env(built):
    """What nccl_env gives an engine (see roles/nccl/tasks/configure.yml)."""
    lib = built["prefix"] / "lib"
    so = str(lib / "libnccl.so.2")
    return {"VLLM_NCCL_SO_PATH": so, "LD_PRELOAD": so, "LD_LIBRARY_PATH": str(lib)}


# --------------------------------------------------------------------------- tests

def test_disabled_role_does_nothing(base_vars, workdir):
    vars_ = dict(base_vars, nccl_enabled=False, nccl_prefix_root=str(workdir / "disabled"))
    rc, text, _seconds = run_playbook(vars_)
    assert rc == 0
    assert recap(text)["changed"] == 0
    assert not (workdir / "disabled").exists()


def test_wrong_source_version_fails_fast(base_vars, workdir):
    vars_ = dict(base_vars, nccl_version="2.28.9-1", nccl_prefix_root=str(workdir / "mismatch"),
                 nccl_keep_build_dir=True)
    rc, text, _seconds = run_playbook(vars_)
    assert rc != 0
    assert "source tree is NCCL 2.29.7-1, expected 2.28.9-1" in text
    # fast = before the compile: no progress line, nothing installed (a wall-clock bound would
    # only measure how busy the machine is; make test runs this step at idle CPU priority)
    assert "objects compiled" not in text
    assert not list((workdir / "mismatch").rglob("libnccl.so*"))


def test_first_converge_builds(built):
    assert built["rc"] == 0, "the first converge failed"
    assert recap(built["text"])["changed"] > 0
    assert built["stamp"]["key"]["version"] == NCCL_VERSION
    assert built["stamp"]["key"]["arch"] == ARCH
    assert built["stamp"]["key"]["gencode"] == "-gencode=arch=compute_121,code=sm_121"
    assert built["stamp"]["key"]["only_functions"] == SUBSET
    assert built["stamp"]["key"]["source"].startswith("sha256:")
    assert (built["prefix"] / "lib" / ("libnccl.so.%s" % NCCL_VERSION.split("-", maxsplit=1)[0])).is_file()
    assert (built["prefix"] / "include" / "nccl.h").is_file()
    # progress was reported while the async build ran (it takes minutes)
    assert re.search(r"objects compiled, \d+ s elapsed", built["text"])
    env_file = (Path(built["vars"]["nccl_env_file"])).read_text()
    expected = dict(engine_env(built), LD_LIBRARY_PATH="%s/lib:/usr/local/cuda/lib64" % built["prefix"])
    for key, value in expected.items():
        assert "%s=%s\n" % (key, value) in env_file


def test_nccl_check_reports_the_built_library(built, cuobjdump):
    res = nccl_check(engine_env=engine_env(built), import_torch=False,
                     expected_path=str(built["prefix"] / "lib" / "libnccl.so.2"),
                     expected_version=NCCL_VERSION, cuobjdump=cuobjdump, expected_arch=ARCH)
    assert not res.get("failed"), res.get("msg")
    assert res["version"] == NCCL_CODE
    assert res["version_string"] == "2.29.7"
    assert res["path"] == str((built["prefix"] / "lib" / "libnccl.so.2").resolve())
    assert res["loaded"] == [res["path"]]
    assert res["bound_path"] == res["path"]
    assert res["predicted"]["source"] == "VLLM_NCCL_SO_PATH"
    assert ARCH in res["elf_archs"]


def test_cuobjdump_lists_sm121_elf(built, cuobjdump):
    lib = built["prefix"] / "lib" / "libnccl.so.2"
    out = subprocess.run([cuobjdump, "--list-elf", str(lib)], capture_output=True, text=True,
                         check=True).stdout
    cubins = re.findall(r"^ELF file\s+\d+: .*\.(sm_\w+)\.cubin$", out, re.M)
    assert "sm_121" in cubins, out[:2000]
    # nothing for other GPUs but NCCL's own sm_100f FP8 LDMC kernels (its NVCC_GENCODE_LDMC_FP8)
    assert set(cubins) - {"sm_100", "sm_100f"} == {"sm_121"}


def test_second_converge_is_a_noop(built, base_vars):
    assert built["rc"] == 0
    rc, text, seconds = run_playbook(base_vars)
    assert rc == 0
    assert recap(text)["changed"] == 0
    print("\nsecond converge: %.0f s" % seconds)


def test_check_mode_changes_nothing(built, base_vars):
    rc, text, _seconds = run_playbook(base_vars, "--check")
    assert rc == 0
    assert recap(text)["changed"] == 0


@pytest.mark.parametrize("override, prefix_name", [
    ({"llmfleet_gpu_arch": "sm_110"}, "%s-sm_110" % NCCL_VERSION),
    ({"nccl_version": "2.28.9-1"}, "2.28.9-1-%s" % ARCH),
])
def test_changed_version_or_arch_would_rebuild(built, base_vars, override, prefix_name):
    """Check mode reports the new build, and builds nothing."""
    rc, text, _seconds = run_playbook(dict(base_vars, **override), "--check")
    assert rc == 0
    assert recap(text)["changed"] >= 1
    prefix = Path(base_vars["nccl_prefix_root"]) / (prefix_name + ("-subset" if SUBSET else ""))
    assert "would build NCCL" in text and str(prefix) in text
    assert not prefix.exists()


def test_changed_subset_is_a_new_key(built, base_vars):
    rc, text, _seconds = run_playbook(dict(base_vars, nccl_only_functions="SendRecv|Broadcast * *"),
                                      "--check")
    assert rc == 0
    assert "would build NCCL" in text


def test_nccl_check_fails_on_another_expected_path(built, impostor):
    res = nccl_check(engine_env=engine_env(built), import_torch=False, expected_path=impostor)
    assert res.get("failed")
    assert impostor in res["msg"]
    assert str((built["prefix"] / "lib" / "libnccl.so.2").resolve()) in res["msg"]


def test_nccl_check_fails_on_ld_preload(built, impostor):
    env = dict(engine_env(built), LD_PRELOAD=impostor)
    res = nccl_check(engine_env=env, import_torch=False,
                     expected_path=str(built["prefix"] / "lib" / "libnccl.so.2"))
    assert res.get("failed")
    assert res["path"] == str((built["prefix"] / "lib" / "libnccl.so.2").resolve())
    assert res["bound_path"] == impostor and res["bound_version_string"] == "2.28.9"
    assert ("torch's own NCCL calls in the engine process would bind to %s (via LD_PRELOAD)"
            % impostor) in res["msg"]
    assert impostor in res["loaded"]


def test_nccl_check_ld_preload_wins_without_so_path(built, impostor):
    env = {"LD_LIBRARY_PATH": str(built["prefix"] / "lib"), "LD_PRELOAD": impostor}
    res = nccl_check(engine_env=env, import_torch=False,
                     expected_path=str(built["prefix"] / "lib" / "libnccl.so.2"))
    assert res.get("failed")
    assert res["path"] == impostor and res["version"] == 22809
    assert "the engine would load %s (via LD_PRELOAD)" % impostor in res["msg"]


def test_nccl_check_sees_a_wheel_that_torch_loads(built, engine_site):
    site, wheel_lib = engine_site
    expected = str(built["prefix"] / "lib" / "libnccl.so.2")
    # LD_LIBRARY_PATH alone loses to the wheel torch already loaded (same soname)
    env = {"LD_LIBRARY_PATH": str(built["prefix"] / "lib"), "PYTHONPATH": site}
    res = nccl_check(engine_env=env, python=sys.executable, expected_path=expected)
    assert res.get("failed")
    assert res["path"] == wheel_lib and res["version_string"] == "2.28.9"
    assert res["torch_version"] == "0.0+llmfleet.fake"
    assert wheel_lib in res["wheel_libraries"]
    assert "the engine would load %s (via a pip wheel loaded by torch)" % wheel_lib in res["msg"]
    # VLLM_NCCL_SO_PATH gets pynccl the build, but torch's own calls still bind to its wheel
    env = {k: v for k, v in engine_env(built).items() if k != "LD_PRELOAD"}
    res = nccl_check(engine_env=dict(env, PYTHONPATH=site), python=sys.executable,
                     expected_path=expected)
    assert res.get("failed")
    assert res["version"] == NCCL_CODE and res["bound_path"] == wheel_lib
    assert ("torch's own NCCL calls in the engine process would bind to %s" % wheel_lib
            in res["msg"])
    # nccl_env (the build in LD_PRELOAD too): both bind to the build; the wheel is inert
    res = nccl_check(engine_env=dict(engine_env(built), PYTHONPATH=site), python=sys.executable,
                     expected_path=expected)
    assert not res.get("failed"), res.get("msg")
    assert res["path"] == res["bound_path"] == str(Path(expected).resolve())
    assert wheel_lib in res["loaded"]
    assert any(wheel_lib in w for w in res.get("warnings", []))


def test_role_check_uses_the_engine_environment(built, base_vars, engine_site, impostor):
    """The role's own check, given the engine's interpreter and environment (which the role
    merges as consumers must: nccl_env's LD_PRELOAD and LD_LIBRARY_PATH first)."""
    site, wheel_lib = engine_site
    vars_ = dict(base_vars, nccl_check_python=sys.executable,
                 nccl_check_environment={"PYTHONPATH": site})
    rc, text, _seconds = run_playbook(vars_, "--tags", "nccl_configure")
    assert rc == 0 and recap(text)["changed"] == 0
    assert "%s is mapped into the engine process but nothing binds to it" % wheel_lib in text
    # the engine's own LD_PRELOAD goes after the build: mapped, but nothing binds to it
    vars_["nccl_check_environment"] = {"PYTHONPATH": site, "LD_PRELOAD": impostor}
    rc, text, _seconds = run_playbook(vars_, "--tags", "nccl_configure")
    assert rc == 0
    assert "%s is mapped into the engine process but nothing binds to it" % impostor in text
    # an engine environment that pins another NCCL for pynccl fails the play
    vars_["nccl_check_environment"] = {"PYTHONPATH": site, "VLLM_NCCL_SO_PATH": impostor}
    rc, text, _seconds = run_playbook(vars_, "--tags", "nccl_configure")
    assert rc != 0
    assert "the engine would load %s (via VLLM_NCCL_SO_PATH)" % impostor in text
