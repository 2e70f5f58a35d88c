"""Model distribution helpers: hub argv (a stand-in for the hub, which this machine cannot reach),
URL sources, profile files, manifest comparison; and the model_manifest module on a temp dir."""
import json
import os
import subprocess
import sys

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible.module_utils.testing import patch_module_args

from ansible_collections.llmfleet.cluster.plugins.module_utils import cluster_plan
from ansible_collections.llmfleet.cluster.plugins.module_utils import model_fetch as F
from ansible_collections.llmfleet.cluster.plugins.module_utils import profiles as P
from ansible_collections.llmfleet.cluster.plugins.filter import serving
from ansible_collections.llmfleet.cluster.plugins.modules import model_manifest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
SHA = "a" * 64


# ------------------------------------------------------------------------------------------------
# hub: argv construction (stand-in) and the script run against a fake huggingface_hub
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, spec", [
    (dict(repo_id="nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4", local_dir="/c/m", revision="0123abc",
          allow_patterns=["*.json", "*.safetensors"]),
     {"repo_id": "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4", "revision": "0123abc",
      "allow_patterns": ["*.json", "*.safetensors"], "filename": None, "local_dir": "/c/m", "marker": F.MARKER, "token_stdin": True}),
    (dict(repo_id="Qwen/Qwen3.5-35B-A3B", local_dir="/c/q", revision="", allow_patterns=[]),
     {"repo_id": "Qwen/Qwen3.5-35B-A3B", "revision": None, "allow_patterns": None, "filename": None,
      "local_dir": "/c/q", "marker": F.MARKER, "token_stdin": True}),
    (dict(repo_id="nvidia/x", local_dir="/c/f", filename="super_v3_reasoning_parser.py"),
     {"repo_id": "nvidia/x", "revision": None, "allow_patterns": None, "filename": "super_v3_reasoning_parser.py",
      "local_dir": "/c/f", "marker": F.MARKER, "token_stdin": True}),
])
def test_hf_argv(kwargs, spec):
    argv = F.hf_fetch_argv("/venv/bin/python", **kwargs)
    assert argv[:3] == ["/venv/bin/python", "-c", F.HF_SCRIPT]
    assert json.loads(argv[3]) == spec
    assert not any("token" in a.lower() and "hf_" in a for a in argv[3:])   # the token is never an argument


@pytest.mark.parametrize("kwargs, message", [
    (dict(repo_id="not a repo", local_dir="/c"), "models_hf_repo: 'not a repo' is not a hub repository id"),
    (dict(repo_id="o/n", local_dir="rel"), "local_dir: 'rel' must be an absolute path"),
    (dict(repo_id="o/n", local_dir="/c", revision="main; rm -rf /"), "models_hf_revision: 'main; rm -rf /'"),
    (dict(repo_id="o/n", local_dir="/c", allow_patterns=[""]), "models_hf_allow_patterns: expected a list"),
])
def test_hf_argv_errors(kwargs, message):
    with pytest.raises(F.FetchError, match=message.replace("(", r"\(").replace(";", ";")):
        F.hf_fetch_argv("/py", **kwargs)


def _run_script(tmp_path, argv, token="hf_secret"):
    """Run HF_SCRIPT with a fake huggingface_hub that records its calls (no network)."""
    fake = tmp_path / "fake"
    fake.mkdir(exist_ok=True)
    (fake / "huggingface_hub.py").write_text(
        "import json, os\n"
        "def _rec(kind, **kw):\n"
        "    kw['kind'] = kind\n"
        "    with open(os.environ['FAKE_LOG'], 'a') as f: f.write(json.dumps(kw) + '\\n')\n"
        "    return kw['local_dir']\n"
        "def snapshot_download(**kw): return _rec('snapshot', **kw)\n"
        "def hf_hub_download(**kw): return _rec('file', **kw)\n")
    # the token arrives on stdin (as the models role's no_log `stdin:` sends it), not in the environment
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(fake), "FAKE_LOG": str(tmp_path / "calls.log")}
    return subprocess.run([sys.executable] + argv[1:], env=env, input=token + "\n", capture_output=True, text=True,
                          check=False)


def test_hf_script_calls_snapshot_download_once_then_skips(tmp_path):
    local = tmp_path / "model"
    argv = F.hf_fetch_argv(sys.executable, "nvidia/m", str(local), revision="v1", allow_patterns=["*.json"])
    first = _run_script(tmp_path, argv)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["changed"] is True
    calls = [json.loads(line) for line in (tmp_path / "calls.log").read_text().splitlines()]
    assert calls == [{"kind": "snapshot", "repo_id": "nvidia/m", "revision": "v1", "local_dir": str(local),
                      "token": "hf_secret", "allow_patterns": ["*.json"]}]
    assert "hf_secret" not in (local / F.MARKER).read_text()   # the marker holds no token
    second = _run_script(tmp_path, argv)
    assert json.loads(second.stdout)["changed"] is False
    assert len((tmp_path / "calls.log").read_text().splitlines()) == 1
    moved = F.hf_fetch_argv(sys.executable, "nvidia/m", str(local), revision="v2", allow_patterns=["*.json"])
    assert json.loads(_run_script(tmp_path, moved).stdout)["changed"] is True   # a new revision downloads again


def test_hf_script_single_file(tmp_path):
    argv = F.hf_fetch_argv(sys.executable, "nvidia/m", str(tmp_path / "f"), filename="super_v3_reasoning_parser.py")
    assert _run_script(tmp_path, argv, token="").returncode == 0
    call = json.loads((tmp_path / "calls.log").read_text())
    assert call["kind"] == "file" and call["filename"] == "super_v3_reasoning_parser.py" and call["token"] is None


def test_hf_script_without_huggingface_hub(tmp_path):
    argv = F.hf_fetch_argv(sys.executable, "nvidia/m", str(tmp_path / "m"))
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": ""}
    proc = subprocess.run([sys.executable, "-S"] + argv[1:], env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == F.HF_MISSING_RC
    assert "huggingface_hub is not installed for" in proc.stderr and "models_hf_python" in proc.stderr


# ------------------------------------------------------------------------------------------------
# URL sources, paths, profile files
# ------------------------------------------------------------------------------------------------
def test_url_items():
    items = F.url_items([
        {"url": "http://127.0.0.1:8/tiny.tar.gz", "sha256": "sha256:" + SHA.upper()},
        {"url": "https://h/x/model.safetensors?download=1", "sha256": SHA, "dest": "sub/model.safetensors"},
        {"url": "https://h/blob", "sha256": SHA, "archive": True},
    ])
    assert [(i["dest"], i["archive"], i["sha256"]) for i in items] == [
        ("tiny.tar.gz", True, SHA), ("sub/model.safetensors", False, SHA), ("blob", True, SHA)]
    assert [i["download"] for i in items] == ["00-tiny.tar.gz", "01-model.safetensors", "02-blob"]


@pytest.mark.parametrize("items, message", [
    ([], "models_urls: expected a non-empty list"),
    ([{"url": "ftp://h/x", "sha256": SHA}], "models_urls[0].url: 'ftp://h/x' is not an http(s) URL"),
    ([{"url": "http://h/x"}], "models_urls[0].sha256: '' is not 64 hex digits"),
    ([{"url": "http://h/x", "sha256": SHA, "dest": "../x"}], "models_urls[0].dest: '../x' must be a relative path"),
])
def test_url_items_errors(items, message):
    with pytest.raises(F.FetchError) as err:
        F.url_items(items)
    assert message in str(err.value)


@pytest.mark.parametrize("model, expected", [
    ("/opt/llmfleet/models/tiny-llama", "/opt/llmfleet/models/tiny-llama"),
    ("nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4", "/opt/llmfleet/models/nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4"),
])
def test_model_path(model, expected):
    assert F.model_path(model, "/opt/llmfleet/models/") == expected


def test_compare():
    expected = {"a": {"size": 3, "sha256": "x"}, "b": {"size": 4, "sha256": "y"}, "c": {"size": 1, "sha256": "z"}}
    actual = {"a": {"size": 3, "sha256": "x"}, "b": {"size": 4, "sha256": "q" * 20}, "d": {"size": 1, "sha256": "w"}}
    out = F.compare(expected, actual)
    assert out["bad"] == ["b", "c"] and out["extra"] == ["d"]
    assert out["problems"][0].startswith("b: sha256 qqqqqqqqqqqq..., expected y") and out["problems"][1] == "c: missing"
    assert F.compare(expected, actual, hashes=False)["bad"] == ["c"]
    assert F.compare({"a": {"size": 3, "sha256": "x"}}, {"a": {"size": 2, "sha256": None}})["problems"] == [
        "a: 2 bytes, expected 3"]


NEMOTRON_PLUGIN_PROFILES = ["nemotron-super-nvfp4-vllm-pp4", "nemotron-super-nvfp4-vllm-pp2",
                            "nemotron-super-nvfp4-vllm-tp2-1m"]


@pytest.mark.parametrize("name", NEMOTRON_PLUGIN_PROFILES)
def test_plugin_file_lands_where_the_command_points(name):
    """The models role's node path of the plugin file is the path after --reasoning-parser-plugin."""
    with open(os.path.join(ROOT, "roles", "models", "defaults", "main.yml"), encoding="utf-8") as handle:
        default = yaml.safe_load(handle)["models_files_dir"]
    # the role's default is the cluster plan's files directory, which with the default prefix is the
    # directory the serve command renders into each file's flag
    assert default == "{{ llmfleet_plan.paths.files }}"
    files_dir = cluster_plan.paths()["files"]
    assert files_dir == P.DEFAULT_FILES_DIR
    prof = serving.serve_profile(name)
    plan = {"tensor_parallel_size": prof["tensor_parallel_size"], "pipeline_parallel_size": prof["pipeline_parallel_size"]}
    argv = serving.serve_command(prof, plan, 0, engine_version="0.20.0")
    items = F.file_items(prof["files"], "/cache", files_dir)
    assert [i["source"] for i in items] == ["url"]
    assert items[0]["url"] == ("https://huggingface.co/nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4/raw/main/"
                               "super_v3_reasoning_parser.py")   # notes 000/004
    assert items[0]["controller_path"] == "/cache/files/super_v3_reasoning_parser/super_v3_reasoning_parser.py"
    assert argv[argv.index("--reasoning-parser-plugin") + 1] == items[0]["node_path"] == \
        "/opt/llmfleet/files/super_v3_reasoning_parser.py"
    assert argv[argv.index("--reasoning-parser") + 1] == "super_v3"


def test_plugin_file_sources_render():
    extras = {"my-nemo": {"extends": "nemotron-super-nvfp4-vllm-tp2-1m", "files": [
        {"name": "parser", "hf_repo": "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4",
         "hf_file": "super_v3_reasoning_parser.py", "hf_revision": "abc123", "dest": "/srv/p/parser.py",
         "flag": "--reasoning-parser-plugin"},
        {"name": "extra", "path": "/home/me/extra.py", "dest": "extra.py", "sha256": SHA}]}}
    prof = serving.serve_profile("my-nemo", extras)
    argv = serving.serve_command(prof, {"tensor_parallel_size": 2, "pipeline_parallel_size": 1}, 0, engine_version="0.20.0")
    assert argv[argv.index("--reasoning-parser-plugin") + 1] == "/srv/p/parser.py"
    items = F.file_items(prof["files"], "/cache", "/opt/llmfleet/files", python="/py")
    assert [(i["source"], i["node_path"]) for i in items] == [("hf", "/srv/p/parser.py"),
                                                              ("path", "/opt/llmfleet/files/extra.py")]
    assert json.loads(items[0]["hf_argv"][3])["revision"] == "abc123"
    assert items[1]["controller_path"] == "/home/me/extra.py" and items[1]["sha256"] == SHA
    # version gate: a build without --reasoning-parser-plugin drops the flag and its file
    old = serving.serve_command(prof, {"tensor_parallel_size": 2, "pipeline_parallel_size": 1}, 0, engine_version="0.11.0")
    assert "--reasoning-parser-plugin" not in old


@pytest.mark.parametrize("item, message", [
    ({"name": "p", "dest": "p.py"}, "give exactly one source of url, path, hf_repo (+ hf_file), got none"),
    ({"name": "p", "dest": "p.py", "url": "https://x/p.py", "path": "/p.py"}, "got url, path"),
    ({"name": "p", "dest": "p.py", "path": "rel/p.py"}, "path: expected an absolute path on the controller"),
    ({"name": "p", "dest": "p.py", "hf_repo": "o/n"}, "hf_file: required with hf_repo"),
    ({"name": "p", "dest": "p.py", "url": "https://x/p.py", "sha256": "xyz"}, "sha256: expected 64 lowercase hex digits"),
    ({"name": "p", "dest": "../p.py", "url": "https://x/p.py"}, "dest: '..' is not allowed"),
])
def test_profile_file_schema(item, message):
    with pytest.raises(AnsibleFilterError) as err:
        serving.serve_profile("x", {"x": {"extends": "qwen3.5-35b-a3b-vllm", "files": [item]}})
    assert message in str(err.value)


# ------------------------------------------------------------------------------------------------
# the model_manifest module
# ------------------------------------------------------------------------------------------------
class ModuleExit(Exception):
    def __init__(self, result):
        super().__init__(result)
        self.result = result


def run_manifest(monkeypatch, args):
    def exit_json(_self, **kw):
        raise ModuleExit(kw)
    monkeypatch.setattr(model_manifest.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(model_manifest.AnsibleModule, "fail_json", exit_json)
    with patch_module_args(args), pytest.raises(ModuleExit) as done:
        model_manifest.main()
    return done.value.result


def test_manifest_module(tmp_path, monkeypatch):
    src = tmp_path / "src"
    (src / "tok").mkdir(parents=True)
    (src / ".cache" / "huggingface").mkdir(parents=True)
    (src / "config.json").write_text("{}")
    (src / "tok" / "t.json").write_text("[1]")
    (src / ".cache" / "huggingface" / "x.metadata").write_text("hidden")
    (src / F.MARKER).write_text("{}")
    source = run_manifest(monkeypatch, {"path": str(src)})
    assert sorted(source["files"]) == ["config.json", "tok/t.json"] and source["total_bytes"] == 5
    assert source["files"]["config.json"]["sha256"] == "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
    dst = tmp_path / "dst"
    (dst / "tok").mkdir(parents=True)
    (dst / "config.json").write_text("[]")      # same size, other content
    node = run_manifest(monkeypatch, {"path": str(dst), "expected": source["files"]})
    assert node["bad"] == ["config.json", "tok/t.json"] and node["changed"] is False
    sizes = run_manifest(monkeypatch, {"path": str(dst), "expected": source["files"], "hashes": False})
    assert sizes["bad"] == ["tok/t.json"]
    missing = run_manifest(monkeypatch, {"path": str(tmp_path / "none"), "expected": source["files"]})
    assert missing["exists"] is False and missing["bad"] == ["config.json", "tok/t.json"]
