"""engine_flags module, run for real on a venv in tmp_path.

The version is read for real: a venv made here (`python -m venv --without-pip`) holds an engine
dist-info of the version under test, and the module's `<venv>/bin/python -c importlib.metadata...`
reads it. The engine itself cannot run here (no vLLM/SGLang install), so its help command is a
stand-in: `sh` printing a real `--help` capture (engine_help/, from its
'usage:' line, as the engine prints it), only when the environment the role gives it is there,
and logging each run. The command lines are rendered by the serve role's own filter for the sim
profiles.
"""
import os
import shlex
import stat
import subprocess
import sys

import pytest

from ansible_collections.llmfleet.cluster.plugins.filter import serving
from ansible_collections.llmfleet.cluster.plugins.module_utils import flagcheck
from ansible_collections.llmfleet.cluster.plugins.modules import engine_flags
from uthelper import run_module

HELP_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))), "engine_help")  # the captures the controller gate ships
ENV = {"VLLM_NO_USAGE_STATS": "1", "HOME": "/root"}  # roles/serve/defaults: serve_help_environment
HOST = "spark1"


@pytest.fixture(scope="module")
def bare_venv(tmp_path_factory):
    root = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    return root


def install(venv, dist, version):
    """A dist-info as pip leaves it: what importlib.metadata reads the version from."""
    site = subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    for old in os.listdir(site):
        if old.endswith(".dist-info"):
            subprocess.run(["rm", "-rf", os.path.join(site, old)], check=True)
    info = os.path.join(site, f"{dist}-{version.replace('/', '_')}.dist-info")
    os.makedirs(info)
    with open(os.path.join(info, "METADATA"), "w", encoding="utf-8") as handle:
        handle.write(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")


def help_command(capture, log):
    """Prints the capture as the engine would (from 'usage:'), if the role's environment is set."""
    script = (f'test "$VLLM_NO_USAGE_STATS" = 1 && test "$HOME" = /root || exit 3; echo ran >> {shlex.quote(str(log))}; '
              f"sed -n '/^usage:/,$p' {shlex.quote(os.path.join(HELP_DIR, capture + '.txt'))}")
    return ["sh", "-c", script]


def rendered(profile, extras=None, nodes=2):
    prof = serving.serve_profile(profile, extras)
    plan = serving.serve_plan(prof, [{"name": f"sim{i}", "gpu_arch": "cpu"} for i in range(1, nodes + 1)])
    sglang = prof["engine"] == "sglang"
    argv = serving.serve_command(
        prof, plan, 0, master_addr="10.231.1.11", host="10.231.1.11", port=8000,
        executable="/opt/llmfleet/venvs/current/bin/" + ("python" if sglang else "vllm"),
        launcher="/opt/llmfleet/lib/llmfleet_sglang_launch.py" if sglang else None,
        api_key_env="LLMFLEET_API_KEY" if sglang else None)
    return prof, argv


def args(venv, tmp_path, prof, argv, capture, **extra):
    return dict({"argv": argv, "engine": prof["engine"], "venv": str(venv),
                 "help_command": help_command(capture, tmp_path / "help.log"), "help_environment": ENV,
                 "cache_dir": str(tmp_path / "cache"), "profile_name": prof["name"],
                 "gates": prof.get("gates") or {}, "label": HOST}, **extra)


def help_runs(tmp_path):
    log = tmp_path / "help.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


# id, profile, extras, installed (dist, version), help capture, errors (fragments, in order), warnings (fragments)
CASES = [
    ("sim vLLM profile on the sim's 0.32.0", "sim-tiny-llama", None, ("vllm", "0.32.0+cpu"), "vllm-0.32.0", [], []),
    ("sim vLLM profile on the second sim release 0.31.0", "sim-tiny-llama", None, ("vllm", "0.31.0+cpu"), "vllm-0.31.0",
     [], []),
    ("sim SGLang profile through the launcher", "sim-tiny-llama-sglang", None, ("sglang", "0.5.21"), "sglang-0.5.21",
     [], []),
    ("a flag vLLM 0.32.0 removed", "old", {"old": {"extends": "sim-tiny-llama", "args": {"--num-scheduler-steps": 8}}},
     ("vllm", "0.32.0+cpu"), "vllm-0.32.0", ["vllm 0.32.0+cpu: unknown flag --num-scheduler-steps"], []),
    ("--swap-space made an error by a gate, on 0.20.0", "swap",
     {"swap": {"extends": "sim-tiny-llama", "args": {"--swap-space": 4},
               "gates": {"--swap-space": {"max_version": "0.17", "on_fail": "error", "reason": "removed in vLLM 0.18"}}}},
     ("vllm", "0.20.0"), "vllm-0.20.0", ["vllm 0.20.0: unknown flag --swap-space: this build's --help does not list it "
                                         "(--swap-space is not available in vllm 0.20.0: needs <= 0.17"], []),
    ("a gate refuses a flag the build's help still lists", "swap16",
     {"swap16": {"extends": "sim-tiny-llama", "args": {"--swap-space": 4},
                 "gates": {"--swap-space": {"max_version": "0.16", "on_fail": "error"}}}},
     ("vllm", "0.17.1"), "vllm-0.17.1", ["vllm 0.17.1: --swap-space is not available in vllm 0.17.1: needs <= 0.16"], []),
    ("a value outside a closed choice list", "dtype", {"dtype": {"extends": "sim-tiny-llama", "args": {"--dtype": "float8"}}},
     ("vllm", "0.32.0+cpu"), "vllm-0.32.0", ["vllm 0.32.0+cpu: --dtype float8 is not one of"], []),
    ("an abbreviation is a warning", "abbrev", {"abbrev": {"extends": "sim-tiny-llama", "args": {"--max-num-se": 4}}},
     ("vllm", "0.32.0+cpu"), "vllm-0.32.0", [], ["--max-num-se is an abbreviation of --max-num-seqs"]),
    ("an SGLang flag of another engine", "sgl", {"sgl": {"extends": "sim-tiny-llama-sglang", "args": {"--enforce-eager": True}}},
     ("sglang", "0.5.21"), "sglang-0.5.21", ["sglang 0.5.21: unknown flag --enforce-eager"], []),
]


@pytest.mark.parametrize("profile, extras, installed, capture, errors, warnings", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_check_fills_the_cache_then_reads_it(monkeypatch, bare_venv, tmp_path, profile, extras, installed, capture,
                                             errors, warnings):
    install(bare_venv, *installed)
    prof, argv = rendered(profile, extras)
    first = run_module(monkeypatch, engine_flags, args(bare_venv, tmp_path, prof, argv, capture))
    version = installed[1]
    cache = tmp_path / "cache" / f"{prof['engine']}-{version}-help.txt"
    assert first.result["version"] == version and first.result["help_cache"] == str(cache)
    assert first.result["changed"] is True and first.result["cached"] is False and help_runs(tmp_path) == 1
    # the cache holds the help's stdout as the role's copy task wrote it (stdout + one newline)
    printed = subprocess.run(help_command(capture, tmp_path / "other.log"), env=dict(os.environ, **ENV),
                             check=True, capture_output=True, text=True).stdout
    assert cache.read_text() == printed.rstrip("\n") + "\n"
    assert stat.S_IMODE(cache.stat().st_mode) == 0o644 and stat.S_IMODE(cache.parent.stat().st_mode) == 0o755

    second = run_module(monkeypatch, engine_flags, args(bare_venv, tmp_path, prof, argv, capture))
    assert second.result["changed"] is False and second.result["cached"] is True and help_runs(tmp_path) == 1
    for out in (first, second):
        assert out.failed is bool(errors), out.result["msg"]
        assert out.result["ok"] is (not errors)
        assert len(out.result["errors"]) == len(errors), out.result["errors"]
        for got, want in zip(out.result["errors"], errors):
            assert want in got
        assert len(out.warnings) == len(warnings) == len(out.result["flag_warnings"]), out.warnings
        for got, want in zip(out.warnings, warnings):
            assert want in got
        if errors:
            assert out.result["msg"] == flagcheck.refusal_message(HOST, prof["engine"], version, prof["name"],
                                                                  out.result["errors"])
        else:
            assert out.result["msg"].startswith(f"{len(out.result['flags'])} flags known to {prof['engine']} {version}")
            assert len(out.result["flags"]) > 10


def test_refusal_message_keeps_the_wording_the_guards_grep(monkeypatch, bare_venv, tmp_path):
    """molecule/cluster/tests/test_guards.py looks for the flag, the version and this sentence."""
    install(bare_venv, "vllm", "0.32.0+cpu")
    prof, argv = rendered("swap", {"swap": {"extends": "sim-tiny-llama", "args": {"--swap-space": 4},
                                            "gates": {"--swap-space": None}}})
    out = run_module(monkeypatch, engine_flags, args(bare_venv, tmp_path, prof, argv, "vllm-0.32.0"))
    assert out.failed
    assert out.result["msg"] == (
        "spark1: vllm 0.32.0+cpu would refuse profile swap: vllm 0.32.0+cpu: unknown flag --swap-space: this "
        "build's --help does not list it. Nothing was stopped or started. Fix the profile's args/gates (or "
        "llmfleet_serve_profiles_extra), or install an engine release that has these flags.")


def test_the_cache_wins_over_the_help_command(monkeypatch, bare_venv, tmp_path):
    """A build's cached help is the one checked (0.11.0's here: it lacks --attention-backend)."""
    install(bare_venv, "vllm", "0.11.0")
    cache = tmp_path / "cache" / "vllm-0.11.0-help.txt"
    cache.parent.mkdir()
    with open(os.path.join(HELP_DIR, "vllm-0.11.0.txt"), encoding="utf-8") as src:
        cache.write_text(src.read())
    prof, argv = rendered("att", {"att": {"extends": "sim-tiny-llama", "args": {"--attention-backend": "TRITON_ATTN"}}})
    out = run_module(monkeypatch, engine_flags, args(bare_venv, tmp_path, prof, argv, "vllm-0.32.0"))
    assert help_runs(tmp_path) == 0 and out.result["cached"] is True and out.result["changed"] is False
    assert out.failed and any("unknown flag --attention-backend" in e for e in out.result["errors"])


@pytest.mark.parametrize("diff", [False, True])
def test_check_mode_runs_the_help_and_writes_nothing(monkeypatch, bare_venv, tmp_path, diff):
    install(bare_venv, "vllm", "0.32.0+cpu")
    prof, argv = rendered("sim-tiny-llama")
    out = run_module(monkeypatch, engine_flags, args(bare_venv, tmp_path, prof, argv, "vllm-0.32.0"),
                     check_mode=True, diff=diff)
    assert not out.failed and out.result["ok"] is True and out.result["changed"] is True
    assert help_runs(tmp_path) == 1 and not (tmp_path / "cache").exists()
    path = str(tmp_path / "cache" / "vllm-0.32.0+cpu-help.txt")
    assert out.result.get("diff") == ({"before": {"path": path, "state": "absent"},
                                       "after": {"path": path, "state": "file"}} if diff else None)


def test_report_only(monkeypatch, bare_venv, tmp_path):
    install(bare_venv, "vllm", "0.32.0+cpu")
    prof, argv = rendered("old", {"old": {"extends": "sim-tiny-llama", "args": {"--num-scheduler-steps": 8}}})
    out = run_module(monkeypatch, engine_flags,
                     args(bare_venv, tmp_path, prof, argv, "vllm-0.32.0", fail_on_error=False))
    assert not out.failed and out.result["ok"] is False and "would refuse profile old" in out.result["msg"]


@pytest.mark.parametrize("case, words", [
    ("engine not installed", "spark1: cannot read the installed vllm version with "),
    ("help command fails", "spark1: `sh -c "),
    ("help without the role's environment", "(rc 3)"),
    ("version that cannot name a file", "spark1: engine version '../0.1' cannot name a help cache file"),
])
def test_failures_name_host_and_cause(monkeypatch, bare_venv, tmp_path, case, words):
    install(bare_venv, "sglang" if case == "engine not installed" else "vllm",
            "../0.1" if case == "version that cannot name a file" else "0.32.0+cpu")
    prof, argv = rendered("sim-tiny-llama")
    extra = {}
    if case == "help command fails":
        extra["help_command"] = ["sh", "-c", "echo 'ModuleNotFoundError: vllm' >&2; exit 1"]
    if case == "help without the role's environment":
        extra["help_environment"] = {}
    out = run_module(monkeypatch, engine_flags, args(bare_venv, tmp_path, prof, argv, "vllm-0.32.0", **extra))
    assert out.failed and words in out.result["msg"], out.result["msg"]
    assert not (tmp_path / "cache").exists()


# ------------------------------------------------------------------------------------------------
# a container group's build: version and help read inside the image (the commands checked exactly;
# the sim's container group runs them for real: molecule/cluster/tests/test_container.py)
# ------------------------------------------------------------------------------------------------
IMAGE_ID = "4f7c0a19be2d" + "a" * 52
IMAGE_REF = "nvcr.io/nvidia/vllm@sha256:" + "b" * 64
ENGINES = {"podman": "/usr/bin/podman", "docker": "/usr/bin/docker"}


def image_commands(version, help_text, present=True):
    """podman answering as a node that has (or lacks) the image, with the engine inside it."""
    def run(argv):
        if argv[1:3] == ["image", "inspect"]:
            return (0, "sha256:%s\n" % IMAGE_ID, "") if present else (125, "", "Error: image not known\n")
        if "--entrypoint" in argv and argv[argv.index("--entrypoint") + 1] == "python3":
            return 0, version + "\n", ""
        return 0, help_text, ""
    return run


def image_args(tmp_path, prof, argv, **extra):
    return dict({"argv": argv, "engine": prof["engine"], "venv": "/opt/llmfleet/venvs/current",
                 "help_command": ["vllm", "serve", "--help=all"], "help_environment": ENV,
                 "cache_dir": str(tmp_path / "cache"), "profile_name": prof["name"], "label": HOST,
                 "image": IMAGE_REF, "python": "python3"}, **extra)


def capture_text(name):
    with open(os.path.join(HELP_DIR, name + ".txt"), encoding="utf-8") as src:
        text = src.read()
    return text[text.index("usage:"):]


LIMITS = {engine_flags.resource.RLIMIT_NOFILE: (1024, 20000),
          engine_flags.resource.RLIMIT_NPROC: (engine_flags.resource.RLIM_INFINITY,) * 2}


def test_an_image_is_checked_against_its_own_build(monkeypatch, tmp_path):
    """The image's 0.11.0 refuses a flag the node's 0.32.0 would take: the check reads the image."""
    monkeypatch.setattr(engine_flags.resource, "getrlimit", LIMITS.__getitem__)
    prof, argv = rendered("new", {"new": {"extends": "sim-tiny-llama", "args": {"--attention-backend": "TRITON_ATTN"}}})
    out = run_module(monkeypatch, engine_flags, image_args(tmp_path, prof, argv),
                     commands=image_commands("0.11.0", capture_text("vllm-0.11.0")), bins=ENGINES)
    # podman keeps it in this cgroup; the limits are the module's own (an unlimited one is left out)
    inside = ["podman", "run", "--rm", "--network", "host", "--cgroups", "disabled", "--ulimit", "nofile=1024:20000"]
    assert out.calls == [
        ["podman", "image", "inspect", "--format", "{{.Id}}", IMAGE_REF],
        inside + ["--entrypoint", "python3", IMAGE_ID, "-c", engine_flags._VERSION_CODE, "vllm"],
        # the role's help environment by name only, the image by the ID the node has
        inside + ["--env", "HOME", "--env", "VLLM_NO_USAGE_STATS", "--entrypoint", "vllm", IMAGE_ID, "serve", "--help=all"],
    ]
    assert out.failed and any("vllm 0.11.0: unknown flag --attention-backend" in e for e in out.result["errors"])
    cache = tmp_path / "cache" / "vllm-0.11.0-4f7c0a19be2d-help.txt"
    assert out.result["help_cache"] == str(cache) and cache.read_text().startswith("usage:")
    # the next run reads the cache: only the inspect and the version run
    again = run_module(monkeypatch, engine_flags, image_args(tmp_path, prof, argv),
                       commands=image_commands("0.11.0", "no help: the cache is read"), bins=ENGINES)
    assert len(again.calls) == 2 and again.result["cached"] is True and again.failed


def test_an_image_the_node_lacks(monkeypatch, tmp_path):
    """Check mode: not checked (a run pulls or builds it first); a run: fails naming host and image."""
    prof, argv = rendered("sim-tiny-llama")
    check = run_module(monkeypatch, engine_flags, image_args(tmp_path, prof, argv),
                       commands=image_commands("0.32.0", "", present=False), check_mode=True, bins=ENGINES)
    assert not check.failed and check.result["checked"] is False and len(check.calls) == 1
    assert f"image {IMAGE_REF} is not on this node yet" in check.result["msg"]
    run = run_module(monkeypatch, engine_flags, image_args(tmp_path, prof, argv, container_engine="docker"),
                     commands=image_commands("0.32.0", "", present=False), bins=ENGINES)
    assert run.failed and run.calls[0][0] == "docker"
    assert run.result["msg"] == (f"spark1: image {IMAGE_REF} is not on this node (docker image inspect): pull or "
                                 "build it before the flag check")


def test_a_container_engine_the_node_lacks(monkeypatch, tmp_path):
    """Check mode on a fresh node (the engine's install only reported): not checked, nothing run;
    a run: fails naming host, engine and image."""
    prof, argv = rendered("sim-tiny-llama")
    check = run_module(monkeypatch, engine_flags, image_args(tmp_path, prof, argv),
                       commands=image_commands("0.32.0", ""), check_mode=True, bins={})
    assert not check.failed and check.result["checked"] is False and check.calls == []
    assert check.result["msg"] == (f"spark1: podman is not installed yet: image {IMAGE_REF} is checked once a run "
                                   "has installed it and pulled or built the image")
    run = run_module(monkeypatch, engine_flags, image_args(tmp_path, prof, argv),
                     commands=image_commands("0.32.0", ""), bins={})
    assert run.failed and run.calls == []
    assert run.result["msg"] == f"spark1: podman is not installed: install it before the flag check of image {IMAGE_REF}"
