"""Node-side fetch: the spec (model_node_fetch), the failure messages, the progress line, and the
fetch script itself (roles/models/files/fetch_model.py) run here: URLs from a loopback http.server,
a hub cache snapshot in a temp dir, and the hub path against a stand-in huggingface_hub module
(no hub is reachable from this machine) for the gated / missing-revision answers."""
import functools
import hashlib
import http.server
import json
import os
import subprocess
import sys
import threading

import pytest

from ansible_collections.llmfleet.cluster.plugins.filter import models as filt
from ansible_collections.llmfleet.cluster.plugins.module_utils import model_fetch
from ansible_collections.llmfleet.cluster.plugins.module_utils import model_node_fetch as N

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
SCRIPT = os.path.join(ROOT, "roles", "models", "files", "fetch_model.py")
SHA = "b" * 64


@pytest.mark.parametrize("kwargs, want", [
    (dict(mode="hf", local_dir="/m/o/n", repo_id="o/n", revision="abc123", allow_patterns=["*.json"],
          ignore_patterns=["original/*"], token_file="/k/hf-token"),
     {"mode": "hf", "repo_id": "o/n", "revision": "abc123", "allow_patterns": ["*.json"],
      "ignore_patterns": ["original/*"], "token_file": "/k/hf-token", "progress": "/m/o/n/" + N.PROGRESS}),
    (dict(mode="hf_cache", local_dir="/m/o/n", repo_id="o/n", cache_dir="/raid/hf-cache/hub/"),
     {"mode": "hf_cache", "cache_dir": "/raid/hf-cache/hub", "revision": None}),
    (dict(mode="url", local_dir="/m/x", urls=[{"url": "http://h/a.tar", "sha256": SHA}]),
     {"mode": "url", "urls": [{"url": "http://h/a.tar", "sha256": SHA, "dest": "a.tar", "archive": True,
                               "download": "00-a.tar"}]}),
])
def test_spec(kwargs, want):
    spec = N.node_fetch_spec(**kwargs)
    assert spec["marker"] == model_fetch.MARKER
    for key, value in want.items():
        assert spec[key] == value
    assert "token" not in json.dumps({k: v for k, v in spec.items() if k != "token_file"})


@pytest.mark.parametrize("kwargs, message", [
    (dict(mode="local", local_dir="/m"), "models_source: 'local' cannot be fetched on a node"),
    (dict(mode="hf", local_dir="rel", repo_id="o/n"), "models_path: 'rel' must be an absolute path"),
    (dict(mode="hf", local_dir="/m", repo_id="o/n", revision="main; rm"), "models_hf_revision"),
    (dict(mode="hf", local_dir="/m", repo_id="o/n", ignore_patterns=[""]), "models_hf_ignore_patterns"),
    (dict(mode="hf_cache", local_dir="/m", repo_id="o/n", cache_dir=""), "models_hf_cache_dir: '' must be"),
    (dict(mode="url", local_dir="/m", urls=[{"url": "http://h/a"}]), r"models_urls\[0\].sha256"),
])
def test_spec_errors(kwargs, message):
    with pytest.raises(model_fetch.FetchError, match=message):
        N.node_fetch_spec(**kwargs)


@pytest.mark.parametrize("result, spec, cause, fix", [
    ({"kind": "gated", "token": False}, {"repo_id": "meta-llama/Llama-3.3-70B-Instruct", "mode": "hf"},
     "meta-llama/Llama-3.3-70B-Instruct is gated and no token was given", "models_hf_token"),
    ({"kind": "gated", "token": True}, {"repo_id": "o/n", "mode": "hf"}, "the token may not read it", "accept the model's terms"),
    ({"kind": "revision"}, {"repo_id": "o/n", "revision": "v9", "mode": "hf"},
     "revision 'v9' of o/n does not exist", "models_hf_revision"),
    ({"kind": "revision", "msg": "no snapshot /c/models--o--n/snapshots/abc (has: def)"},
     {"repo_id": "o/n", "revision": "abc", "mode": "hf_cache"}, "(has: def)", "download that revision into the cache"),
    ({"kind": "space", "msg": "10 bytes to fetch"}, {"mode": "url"}, "not enough disk", "nothing was fetched"),
    ({"kind": "network", "msg": "Connection refused"}, {"repo_id": "o/n", "mode": "hf"}, "Connection refused", "re-run resumes"),
    ({"kind": None, "msg": "", "rc": 1}, {"mode": "url"}, "the fetch failed", "see the error"),
])
def test_failure_message(result, spec, cause, fix):
    line = N.failure_message("spark1", result, spec)
    assert line.startswith("spark1: ") and cause in line and fix in line
    assert filt.model_node_fetch_failure("spark1", result, spec) == line


@pytest.mark.parametrize("progress, want", [
    (None, "spark1: starting"),
    ({"done": 3 << 30, "total": 6 << 30, "started": 100.0, "now": 110.0},
     "spark1: 3.0 GiB / 6.0 GiB (50.0%) at 307.2 MiB/s, ~10 s left"),
    ({"done": 512, "total": None, "started": 0, "now": 1}, "spark1: 512 B at 512 B/s"),
])
def test_progress_line(progress, want):
    assert N.progress_line("spark1", progress) == want


# ---- the script itself ----------------------------------------------------------------------
def run_script(spec, tmp_path, env=None):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    res = subprocess.run([sys.executable, SCRIPT, str(path)], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, **(env or {})), check=False)
    return res.returncode, json.loads(res.stdout.strip().splitlines()[-1]), res


@pytest.fixture()
def http_dir(tmp_path):
    served = tmp_path / "served"
    served.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield served, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_script_url_download_verify_and_idempotence(tmp_path, http_dir):
    served, base = http_dir
    data = os.urandom(300_000)
    (served / "model.safetensors").write_bytes(data)
    local = tmp_path / "node" / "m"
    spec = N.node_fetch_spec("url", str(local), urls=[{"url": f"{base}/model.safetensors",
                                                       "sha256": hashlib.sha256(data).hexdigest()}])
    # a stale partial file from an interrupted run: the server ignores Range, so it is replaced
    local.mkdir(parents=True)
    (local / "model.safetensors.part").write_bytes(b"garbage")
    rc, out, _res = run_script(spec, tmp_path)
    assert rc == 0 and out["changed"] is True
    assert (local / "model.safetensors").read_bytes() == data
    progress = json.loads((local / N.PROGRESS).read_text())
    assert progress["total"] == len(data) and progress["done"] >= len(data) - len(b"garbage")
    rc, out, _res = run_script(spec, tmp_path)
    assert rc == 0 and out["changed"] is False


def test_script_url_bad_sha256(tmp_path, http_dir):
    served, base = http_dir
    (served / "w.bin").write_bytes(b"x" * 1000)
    spec = N.node_fetch_spec("url", str(tmp_path / "m"), urls=[{"url": f"{base}/w.bin", "sha256": SHA}])
    rc, out, _res = run_script(spec, tmp_path)
    assert rc == 2 and out["kind"] == "sha256" and not (tmp_path / "m" / "w.bin").exists()


def test_script_url_no_space(tmp_path, http_dir):
    served, base = http_dir
    (served / "w.bin").write_bytes(b"x" * 1000)
    spec = N.node_fetch_spec("url", str(tmp_path / "m"), urls=[{"url": f"{base}/w.bin", "sha256": SHA}],
                             reserve_bytes=1 << 60)     # no disk has an exbibyte free
    rc, out, _res = run_script(spec, tmp_path)
    assert rc == 2 and out["kind"] == "space" and not (tmp_path / "m" / "w.bin").exists()


def make_cache(tmp_path):
    """A hub cache laid out as huggingface_hub writes it: blobs, snapshots/<commit> symlinks, refs."""
    repo = tmp_path / "hub" / "models--org--tiny"
    commit = "a" * 40
    (repo / "blobs").mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    snap = repo / "snapshots" / commit
    (snap / "tok").mkdir(parents=True)
    files = {"config.json": b'{"a": 1}', "model.safetensors": os.urandom(50_000), "tok/t.json": b"{}"}
    for rel, data in files.items():
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        os.symlink(os.path.relpath(blob, (snap / rel).parent), snap / rel)
    return tmp_path / "hub", commit, files


def test_script_hf_cache_links_the_snapshot(tmp_path):
    cache, commit, files = make_cache(tmp_path)
    local = tmp_path / "models" / "org" / "tiny"
    rc, out, _res = run_script(N.node_fetch_spec("hf_cache", str(local), repo_id="org/tiny", cache_dir=str(cache)), tmp_path)
    assert rc == 0 and out["changed"] and out["revision"] == commit
    for rel, data in files.items():
        assert (local / rel).read_bytes() == data and not (local / rel).is_symlink()
    blob = cache / "models--org--tiny" / "blobs" / hashlib.sha256(files["model.safetensors"]).hexdigest()
    assert os.stat(local / "model.safetensors").st_ino == os.stat(blob).st_ino     # a hard link, no copy
    rc, out, _res = run_script(N.node_fetch_spec("hf_cache", str(local), repo_id="org/tiny", cache_dir=str(cache)), tmp_path)
    assert out["changed"] is False


def test_script_hf_cache_missing_revision(tmp_path):
    cache, commit, _files = make_cache(tmp_path)
    spec = N.node_fetch_spec("hf_cache", str(tmp_path / "m"), repo_id="org/tiny", revision="v2", cache_dir=str(cache))
    rc, out, _res = run_script(spec, tmp_path)
    assert rc == 2 and out["kind"] == "revision" and commit in out["msg"]
    assert "has:" in N.failure_message("thor1", out, spec)


STAND_IN_HUB = '''
"""Stand-in for huggingface_hub (no hub reachable here): answers like the hub for two repos."""
import types
class HfHubHTTPError(Exception): pass
class RepositoryNotFoundError(HfHubHTTPError): pass
class GatedRepoError(RepositoryNotFoundError): pass
class RevisionNotFoundError(HfHubHTTPError): pass
def filter_repo_objects(items, allow_patterns=None, ignore_patterns=None):
    return list(items)
utils = types.SimpleNamespace(HfHubHTTPError=HfHubHTTPError, RepositoryNotFoundError=RepositoryNotFoundError,
                              GatedRepoError=GatedRepoError, RevisionNotFoundError=RevisionNotFoundError,
                              filter_repo_objects=filter_repo_objects)
class HfApi:
    def __init__(self, token=None):
        self.token = token
    def model_info(self, repo, revision=None, files_metadata=False):
        if revision == "nope":
            raise RevisionNotFoundError("404 Client Error. Revision Not Found for url: .../nope")
        if repo == "meta-llama/gated" and not self.token:
            return types.SimpleNamespace(gated="manual", sha="c" * 40, siblings=[])
        raise GatedRepoError("403 Client Error. Cannot access gated repo")
def snapshot_download(**kw):
    raise AssertionError("must not download")
'''


@pytest.mark.parametrize("repo, revision, token, kind, has_token", [
    ("meta-llama/gated", None, None, "gated", False),
    ("meta-llama/gated", None, "hf_abc", "gated", True),
    ("org/tiny", "nope", None, "revision", None),
])
def test_script_hf_stops_before_downloading(tmp_path, repo, revision, token, kind, has_token):
    (tmp_path / "fakehub").mkdir()
    (tmp_path / "fakehub" / "huggingface_hub.py").write_text(STAND_IN_HUB)
    token_file = None
    if token:
        token_file = tmp_path / "hf-token"
        token_file.write_text(token)
        token_file.chmod(0o600)
    spec = N.node_fetch_spec("hf", str(tmp_path / "m"), repo_id=repo, revision=revision,
                             token_file=str(token_file) if token_file else None)
    rc, out, res = run_script(spec, tmp_path, env={"PYTHONPATH": str(tmp_path / "fakehub")})
    assert rc == 2 and out["kind"] == kind, res.stderr
    if has_token is not None:
        assert out["token"] is has_token
    assert token is None or token not in res.stdout + res.stderr
    assert not any((tmp_path / "m").glob("*.safetensors"))
