"""The models role's fan-out over the fabric, for real, on three network namespaces of this machine.

benchmarks/models_fanout.py builds the lab (its own names and addresses: LFB_PREFIX=lft,
10.243.0.0/24 management with the controller on it, 10.243.1.0/24 fabric without it; an sshd per
namespace; unshaped). lft1 holds a small model; the role copies it to lft2 and lft3 node to node
(2 rounds), a second run copies nothing, a corrupted file is sent again, and a node whose fabric
link is down stops the run before any byte moves, naming host, cause and fix. Needs root (ip netns).

Run: .venv/bin/pytest tests/integration/models/test_models_fanout.py -q
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import localplay  # noqa: E402

ROOT = localplay.ROOT
LAB_ENV = {"LFB_PREFIX": "lft", "LFB_NET": "10.243", "LFB_DIR": "/var/tmp/lftbench"}
BASE = Path(LAB_ENV["LFB_DIR"])
HOSTS = ("lft1", "lft2", "lft3")
FILES = {"config.json": b'{"architectures": ["LlamaForCausalLM"]}', "model.safetensors": os.urandom(8 << 20),
         "tokenizer/tokenizer.json": b'{"version": "1.0"}'}

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")


def lab_cmd(*args):
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "models_fanout.py"), *args], check=True,
                          capture_output=True, text=True, timeout=120, env=dict(os.environ, **LAB_ENV))


@pytest.fixture(scope="module")
def lab():
    localplay.link_collection()
    lab_cmd("up", "--nodes", "3", "--no-shape")
    src = BASE / "lft1" / "models" / "bench-model"
    for rel, data in FILES.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_bytes(data)
    yield BASE
    lab_cmd("down")


def play(extra=None):
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_CACHE_PLUGIN="memory",
               ANSIBLE_COLLECTIONS_PATH=str(localplay.COLLECTIONS), ANSIBLE_SSH_CONTROL_PATH_DIR=str(BASE / "cp"))
    res = subprocess.run([str(localplay.ANSIBLE_PLAYBOOK), "-i", str(BASE / "inventory.json"),
                          str(ROOT / "playbooks" / "models.yml"),
                          "-e", json.dumps({"models_distribution": "fabric", "models_verify_hashes": True,
                                            "models_fabric_timeout": 30, **(extra or {})})],
                         # a guard against a hung play, not a time limit: under make test's full load a play of this
                         # file took 140 s, and the unreachable-peer play once ran past 300 s
                         capture_output=True, text=True, timeout=900, env=env, check=False)
    out = res.stdout + res.stderr
    recap = {h: {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", f)}
             for h, f in re.findall(r"^(lft\d)\s+:\s+(.*)$", out, re.M)}
    assert set(recap) == set(HOSTS), out[-3000:]
    return res.returncode, out, recap


def digest(host):
    root = BASE / host / "models" / "bench-model"
    return {rel: hashlib.sha256((root / rel).read_bytes()).hexdigest() for rel in FILES if (root / rel).exists()}


def test_fanout_copies_node_to_node_and_is_idempotent(lab):
    want = {rel: hashlib.sha256(data).hexdigest() for rel, data in FILES.items()}
    rc, out, recap = play()
    assert rc == 0, out[-3000:]
    assert digest("lft2") == want and digest("lft3") == want
    # the cluster key is 0600 and authorized only for read-only rsync of models_dir from the peers
    assert (BASE / "lft2" / "fabric-key" / "id_ed25519").stat().st_mode & 0o777 == 0o600
    line = [ln for ln in (BASE / "lft1" / "authorized_keys").read_text().splitlines() if "llmfleet-models-fabric" in ln]
    assert line and line[0].startswith(f'command="/usr/bin/rrsync -ro {BASE}/lft1/models",from="10.243.1.1,10.243.1.2,10.243.1.3",restrict ')
    rc, out, recap = play()
    assert rc == 0 and all(r["changed"] == 0 for r in recap.values()), out[-3000:]


def test_corrupted_file_is_sent_again(lab):
    target = BASE / "lft3" / "models" / "bench-model" / "model.safetensors"
    stat = target.stat()
    data = bytearray(target.read_bytes())
    data[100] ^= 0xFF                        # same size, same mtime: only the hash tells
    target.write_bytes(bytes(data))
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    rc, out, recap = play()
    assert rc == 0, out[-3000:]
    assert digest("lft3")["model.safetensors"] == hashlib.sha256(FILES["model.safetensors"]).hexdigest()
    assert recap["lft3"]["changed"] >= 1 and recap["lft2"]["changed"] == 0


def test_unreachable_peer_stops_before_any_byte(lab):
    victim = BASE / "lft3" / "models" / "bench-model"
    for rel in FILES:
        (victim / rel).unlink()
    subprocess.run(["ip", "netns", "exec", "lft3", "ip", "link", "set", "fab", "down"], check=True)
    try:
        # a downed link fails at ssh's connect timeout: short, so the check stays quick (the other plays keep
        # the role's default, which a busy machine's rsync needs: at 5 s the probe timed out under CI load)
        rc, out, _recap = play({"models_fabric_timeout": 5})
    finally:
        subprocess.run(["ip", "netns", "exec", "lft3", "ip", "link", "set", "fab", "up"], check=True)
    assert rc != 0
    # on a failure, the play's error lines (its full output is too long for the assertion's message)
    errors = "\n".join(line for line in out.splitlines() if re.search(r"fatal:|FAILED|ERROR|msg:|unreachable=[1-9]", line))
    assert "lft3: cannot reach lft1 at its fabric address 10.243.1.1 over ssh. Fix: check the fabric link" in out, errors[-3000:]
    assert not any(victim.rglob("*.safetensors"))          # nothing copied
    assert digest("lft2")["model.safetensors"] == hashlib.sha256(FILES["model.safetensors"]).hexdigest()
