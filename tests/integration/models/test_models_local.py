"""The models role on this machine (connection local), sources served from loopback.

nodea (ray_head) and nodeb (ray_workers) are both this machine; each gets its own models_path and
models_files_dir (host vars) so the two "nodes" hold separate copies. A `python -m http.server`
on 127.0.0.1 (a free port, started and stopped here) serves a tiny model as an archive and as
files, plus a reasoning-parser plugin file. The hub cannot be reached from here: its argv is unit
tested (tests/unit/plugins/module_utils/test_model_fetch.py); this runs it without huggingface_hub.

Run: .venv/bin/pytest tests/integration/models -q
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import localplay  # noqa: E402  (tests/integration, shared with the other local-play tests)

ROOT = localplay.ROOT
MODEL_FILES = {
    "config.json": json.dumps({"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2}).encode(),
    "model.safetensors": os.urandom(300_000),
    "tokenizer/tokenizer.json": b'{"version": "1.0"}',
}
PLUGIN = b"# super_v3 reasoning parser (test stand-in)\n"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    localplay.link_collection()
    work = tmp_path_factory.mktemp("models")
    served = work / "www"
    (served / "files" / "tokenizer").mkdir(parents=True)
    for rel, data in MODEL_FILES.items():
        (served / "files" / rel).write_bytes(data)
    with tarfile.open(served / "tiny.tar.gz", "w:gz") as tar:
        for rel in MODEL_FILES:
            tar.add(served / "files" / rel, arcname=rel)
    (served / "super_v3_reasoning_parser.py").write_bytes(PLUGIN)
    port = free_port()
    log = open(work / "http.log", "w")
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
                               "--directory", str(served)], stdout=log, stderr=subprocess.STDOUT)
    for _attempt in range(50):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    url = f"http://127.0.0.1:{port}"
    profile = {"engine": "vllm", "model": "/opt/llmfleet/models/tiny-test", "tensor_parallel_size": 2,
               "pipeline_parallel_size": 1, "backend": "mp", "device": "cpu",
               "files": [{"name": "super_v3_reasoning_parser", "url": f"{url}/super_v3_reasoning_parser.py",
                          "dest": "super_v3_reasoning_parser.py", "sha256": sha256(PLUGIN),
                          "flag": "--reasoning-parser-plugin"}]}
    nodes = {h: {"models_path": str(work / h / "models" / "tiny-test"), "models_files_dir": str(work / h / "files")}
             for h in ("nodea", "nodeb")}
    (work / "hosts.yml").write_text(yaml.safe_dump({"all": {
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                 "llmfleet_fabric_ip": "127.0.0.1", "llmfleet_gpu_arch": "sm_121",
                 "llmfleet_serve_profile": "tiny-test", "llmfleet_serve_profiles_extra": {"tiny-test": profile}},
        "hosts": nodes,
        "children": {"ray_head": {"hosts": {"nodea": None}}, "ray_workers": {"hosts": {"nodeb": None}}},
    }}))
    yield {"work": work, "url": url, "nodes": nodes, "served": served, "log": work / "http.log"}
    server.terminate()
    server.wait(timeout=10)
    log.close()


def run(lab, extra: dict, *args: str) -> tuple[int, str]:
    work = lab["work"]
    # connection local: both "nodes" are this machine, no ssh between them (the fan-out over the
    # fabric is tested on network namespaces: test_models_fanout.py)
    base = {"common_applied": True, "ansible_become": False, "models_cache": str(work / "cache"),
            "models_distribution": "controller"}
    env = localplay.ansible_env(work, no_proxy=True)    # the sources are served on 127.0.0.1
    return localplay.run_playbook(ROOT / "playbooks" / "models.yml", work / "hosts.yml", {**base, **extra}, *args,
                                  env=env)


def recap(out: str) -> dict[str, dict[str, int]]:
    found = {}
    for host, fields in re.findall(r"^(node[ab])\s+:\s+(.*)$", out, re.M):
        found[host] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", fields)}
    assert set(found) == {"nodea", "nodeb"}, out[-3000:]
    return found


def url_source(lab, sha=None):
    archive = lab["served"] / "tiny.tar.gz"
    return {"models_source": "url",
            "models_urls": [{"url": f"{lab['url']}/tiny.tar.gz", "sha256": sha or sha256(archive.read_bytes())}]}


def assert_copies(lab):
    for host, paths in lab["nodes"].items():
        for rel, data in MODEL_FILES.items():
            assert (Path(paths["models_path"]) / rel).read_bytes() == data, (host, rel)
        plugin = Path(paths["models_files_dir"]) / "super_v3_reasoning_parser.py"
        assert plugin.read_bytes() == PLUGIN, host


def gets(lab, path: str) -> int:
    return lab["log"].read_text().count(f'"GET {path} ')


def test_url_archive_copied_to_both_nodes_and_verified(lab):
    rc, out = run(lab, url_source(lab))
    assert rc == 0, out[-4000:]
    assert_copies(lab)
    assert "nodeb: 3 files, 0.00 GiB at" in " ".join(out.split())
    assert gets(lab, "/tiny.tar.gz") == 1
    assert gets(lab, "/super_v3_reasoning_parser.py") == 1


def test_second_run_changes_nothing_and_downloads_nothing(lab):
    rc, out = run(lab, url_source(lab))
    assert rc == 0, out[-4000:]
    assert all(r["changed"] == 0 for r in recap(out).values()), out[-3000:]
    assert gets(lab, "/tiny.tar.gz") == 1


def test_corrupted_copy_detected_in_check_mode_then_repaired(lab):
    weights = Path(lab["nodes"]["nodeb"]["models_path"]) / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[1000] ^= 0xFF  # same size, different content: only the hash can tell
    weights.write_bytes(bytes(data))
    rc, out = run(lab, url_source(lab), "--check", "--diff")
    assert rc == 0, out[-4000:]
    text = " ".join(out.split())
    assert "nodeb: would copy 1 file(s) to" in text and "model.safetensors: sha256" in text
    assert weights.read_bytes() == bytes(data)  # check mode touched nothing
    rc, out = run(lab, url_source(lab))
    assert rc == 0, out[-4000:]
    counts = recap(out)
    assert counts["nodeb"]["changed"] >= 1 and counts["nodea"]["changed"] == 0, counts
    assert_copies(lab)


def test_wrong_sha256_refused(lab):
    extra = url_source(lab, sha="0" * 64)
    extra["models_cache"] = str(lab["work"] / "cache-bad")
    rc, out = run(lab, extra)
    assert rc == 2, out[-4000:]
    assert "did not match" in out or "checksum" in out.lower()


def test_url_without_sha256_refused(lab):
    rc, out = run(lab, {"models_source": "url", "models_urls": [{"url": f"{lab['url']}/tiny.tar.gz"}]})
    assert rc == 2, out[-4000:]
    assert "models_urls[0].sha256: '' is not 64 hex digits; every download is verified" in " ".join(out.split())


def test_url_plain_files_into_subdirectories(lab):
    items = [{"url": f"{lab['url']}/files/{rel}", "sha256": sha256(data), "dest": rel}
             for rel, data in MODEL_FILES.items()]
    rc, out = run(lab, {"models_source": "url", "models_urls": items, "models_cache": str(lab["work"] / "cache-files")})
    assert rc == 0, out[-4000:]
    assert_copies(lab)


def test_local_source(lab):
    rc, out = run(lab, {"models_source": "local", "models_local_path": str(lab["served"] / "files")})
    assert rc == 0, out[-4000:]
    assert_copies(lab)
    rc, out = run(lab, {"models_source": "local", "models_local_path": str(lab["work"] / "nope")})
    assert rc == 2, out[-4000:]
    assert f"models_local_path '{lab['work'] / 'nope'}' is not a directory on the controller" in " ".join(out.split())


def test_hub_source_without_huggingface_hub_names_the_fix_and_hides_the_token(lab):
    """Stand-in for the hub: this venv has no huggingface_hub, so the real download path stops there."""
    token = "hf_TESTTOKEN_not_a_real_one_123"
    rc, out = run(lab, {"models_source": "hf", "models_hf_repo": "nvidia/some-model", "models_hf_token": token,
                        "models_cache": str(lab["work"] / "cache-hf")}, "-v")
    assert rc == 2, out[-4000:]
    text = " ".join(out.split())
    assert "downloading nvidia/some-model into" in text
    assert "huggingface_hub is not installed for" in text and "pip install 'huggingface_hub>=0.23'" in text
    assert token not in out
