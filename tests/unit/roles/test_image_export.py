"""roles/serve/files/llmfleet_image_export.sh, the forced command of the keys that copy a built engine
image from its source node: it runs for real here, with a stand-in container engine (a script logging
its argv) in place of podman, and SSH_ORIGINAL_COMMAND as sshd sets it."""
import os
import subprocess

import pytest

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "roles", "serve", "files", "llmfleet_image_export.sh")


@pytest.fixture(name="engine")
def fake_engine(tmp_path):
    path = tmp_path / "podman"
    path.write_text(f'#!/bin/sh\necho "$@" > {tmp_path}/argv\necho image-bytes\n')
    path.chmod(0o755)
    return path


def export(engine, command):
    env = {"PATH": "/usr/bin:/bin"}
    if command is not None:
        env["SSH_ORIGINAL_COMMAND"] = command
    return subprocess.run(["sh", SCRIPT, str(engine)], env=env, capture_output=True, text=True, check=False)


def test_exports_an_image_built_for_a_release(engine, tmp_path):
    out = export(engine, "save localhost/llmfleet-engine:sim-vllm-0.32.0-cpu")
    assert out.returncode == 0 and out.stdout == "image-bytes\n", out.stderr
    assert (tmp_path / "argv").read_text() == "save localhost/llmfleet-engine:sim-vllm-0.32.0-cpu\n"


def test_exports_an_image_by_its_id(engine, tmp_path):
    image_id = "sha256:" + "0123456789abcdef" * 4
    out = export(engine, f"save {image_id}")
    assert out.returncode == 0 and out.stdout == "image-bytes\n", out.stderr
    assert (tmp_path / "argv").read_text() == f"save {image_id}\n"


@pytest.mark.parametrize("command, words", [
    (None, "only 'save"),
    ("cat /etc/shadow", "only 'save"),
    ("save", "only 'save"),
    ("save localhost/llmfleet-engine:a localhost/llmfleet-engine:b", "only 'save"),
    ("load localhost/llmfleet-engine:a", "only 'save"),
    ("save docker.io/library/debian:12", "is not an image this node builds"),
    ("save sha256:" + "a" * 63, "is not an image ID"),
    ("save sha256:" + "A" * 64, "is not an image ID"),
    ("save sha256:" + "a" * 63 + ";", "is not an image ID"),
    ("save localhost/llmfleet-engine:", "bad release"),
    ("save localhost/llmfleet-engine:a;id", "bad release"),
    ("save localhost/llmfleet-engine:*", "bad release"),
    ("save localhost/llmfleet-engine:$(id)", "bad release"),
])
def test_refuses_anything_else(engine, tmp_path, command, words):
    out = export(engine, command)
    assert out.returncode == 2 and words in out.stderr and out.stdout == ""
    assert not (tmp_path / "argv").exists()
