"""Action plugin llmfleet.cluster.wait_progress, through ansible-playbook on the controller itself
(connection local, real async jobs): the progress lines reach the default callback's output at
normal verbosity, a failed job's result is the task's, a timeout fails with its message, and check
mode does not wait. The pure parts have their tables in module_utils/test_progress.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[4]
PLAY = ROOT / "tests" / "unit" / "fixtures" / "wait_progress" / "play.yml"
PLAYBOOK = Path(sys.executable).with_name("ansible-playbook")


def _run(tmp_path, *extra):
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_CALLBACK_RESULT_FORMAT="json",
               ANSIBLE_COLLECTIONS_PATH=str(ROOT / ".build" / "collections"),
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_ASYNC_DIR=str(tmp_path / "async"))
    proc = subprocess.run(
        [str(PLAYBOOK), "-i", "localhost,", "-c", "local", "-e", f"ansible_python_interpreter={sys.executable}",
         "-e", f"workdir={tmp_path}", str(PLAY), *extra],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=180, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = _run(tmp_path_factory.mktemp("wait_progress"))
    found = re.search(r'^\s*"msg": ("RESULTS .*")$', out, re.M)
    assert found, out
    return out, json.loads(json.loads(found.group(1)).removeprefix("RESULTS "))


def test_progress_lines_show_at_normal_verbosity_with_the_log_detail(run):
    out, _results = run
    lines = re.findall(r"^localhost: tiny-llama loading (\d+) s \(engine log: Loading weights step (\d)\)$", out, re.M)
    # a 6 s job, a line due every second: at least one even when the 2 cores are busy elsewhere
    assert lines, out
    seconds = [int(secs) for secs, _step in lines]
    assert seconds == sorted(seconds)
    assert re.search(r"^localhost: tiny-llama loading done after \d+ s$", out, re.M), out


def test_the_job_result_is_returned(run):
    _out, results = run
    assert results["ok"]["finished"] is True and results["ok"]["rc"] == 0
    assert results["ok"]["stdout"] == "loaded" and results["ok"]["elapsed"] >= 3


def test_a_failed_job_fails_the_wait_with_its_own_result(run):
    out, results = run
    assert results["bad"]["rc"] == 3 and results["bad"]["stderr"] == "the last words"
    assert results["bad"]["msg"] == "non-zero return code"
    assert re.search(r"^controller: source build failed \(rc 3\) after \d+ s$", out, re.M), out


def test_a_wait_past_its_timeout_fails_with_the_message(run):
    out, results = run
    assert results["slow"]["finished"] is False
    assert results["slow"]["msg"] == "venv sync did not end within python_env_sync_timeout=2 s"
    assert re.search(r"^localhost: venv sync timed out after \d+ s$", out, re.M), out


def test_check_mode_does_not_wait(tmp_path):
    out = _run(tmp_path, "--check")
    assert "skipping: [localhost]" in out
    # no progress line and no final line: nothing was started, nothing is waited for
    assert not re.search(r"^(localhost|controller): ", out, re.M), out
