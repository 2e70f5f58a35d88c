"""The llmfleet.cluster.venv_state module on a venv-like tree in tmp_path: the lock and stamps are real
files; the venv's python is this interpreter (a real listing) or a stand-in for run_command."""
import hashlib
import json
import os
import subprocess
import sys

import pytest

from ansible_collections.llmfleet.cluster.plugins.module_utils import venv_archive
from ansible_collections.llmfleet.cluster.plugins.module_utils import venv_state as vs
from ansible_collections.llmfleet.cluster.plugins.modules import venv_state
from uthelper import run_module

LOCK = "ray==2.49.0 --hash=sha256:aa\nvllm==0.32.0 --hash=sha256:bb\n"
HELD = {"python": "3.11.2", "packages": {"ray": "2.49.0", "vllm": "0.32.0", "pip": "25.0"}}


def tree(tmp_path, stamp=True, venv=True, lock=LOCK, cli=None):
    """(venv, lock path, lock sha1)."""
    path = tmp_path / "venvs" / "sim-a"
    lock_path = tmp_path / "wheelhouse" / "cpu-vllm-0.32.0" / "lock.txt"
    lock_path.parent.mkdir(parents=True)
    sha = None
    if lock is not None:
        lock_path.write_text(lock)
        sha = hashlib.sha1(lock.encode()).hexdigest()
    if venv:
        (path / "bin").mkdir(parents=True)
        if stamp is True:
            stamp = vs.stamp(sha) + "\n"
        if stamp:
            (path / vs.STAMP_FILE).write_text(stamp)
        if cli is not None:
            (path / vs.CLI_STAMP_FILE).write_text(cli + "\n")
    return path, lock_path, sha


def stand_in(listing=None, pyver="3.11", rc=0):
    """run_command: the venv's python prints `listing` (default HELD), the base python its X.Y."""
    listing = HELD if listing is None else listing

    def commands(argv):
        if argv[0].endswith("/bin/python"):
            return (rc, json.dumps(listing, sort_keys=True) + "\n", "" if rc == 0 else "Traceback\nImportError: boom")
        return 0, pyver + "\n", ""
    return commands


def run(monkeypatch, venv, lock, commands=None, check_mode=False, **args):
    out = run_module(monkeypatch, venv_state, dict(venv=str(venv), lock=str(lock), **args), commands=commands,
                     check_mode=check_mode)
    assert not out.failed, out.result
    assert out.result["changed"] is False
    return out.result, out.calls


@pytest.mark.parametrize("check_mode", [False, True])
def test_converged_venv_is_listed_and_needs_nothing(monkeypatch, tmp_path, check_mode):
    venv, lock, sha = tree(tmp_path, cli="abc")
    res, calls = run(monkeypatch, venv, lock, stand_in(), check_mode, wheelhouse_name="cpu-vllm-0.32.0", release="sim-a")
    assert (res["needs_sync"], res["reason"], res["drift"], res["listed"]) == (False, "matches its lock", [], True)
    assert (res["lock_sha1"], res["stamp"], res["stamp_found"]) == (sha, sha + ":bytecode", sha + ":bytecode")
    assert res["packages"] == HELD["packages"] and res["python"] == "3.11.2" and res["cli_checked"] == "abc"
    # the digest of the list as the command module would have returned it (the CLI stamp's value)
    assert res["installed_digest"] == hashlib.sha1(json.dumps(HELD, sort_keys=True).encode()).hexdigest()
    # nothing to install: no archive key, so the base python is not asked
    assert (res["archive_key"], res["base_python_version"]) == ("", "")
    assert calls == [[str(venv / "bin" / "python"), "-c", vs.LIST_SCRIPT]]


def test_drift_behind_a_good_stamp_needs_a_sync_with_the_packages_to_reinstall(monkeypatch, tmp_path):
    venv, lock, sha = tree(tmp_path)
    drifted = {"python": "3.11.2", "packages": dict(HELD["packages"], ray="2.59.0")}
    res, _calls = run(monkeypatch, venv, lock, stand_in(drifted), wheelhouse_name="cpu-vllm-0.32.0", release="sim-a")
    assert res["needs_sync"] and res["reason"] == "drifted from its lock: ray locked 2.49.0 installed 2.59.0"
    assert res["drift"] == [{"package": "ray", "locked": "2.49.0", "installed": "2.59.0"}] and res["reinstall"] == ["ray"]
    assert res["base_python_version"] == "3.11"
    assert res["archive_key"] == venv_archive.archive_key("cpu-vllm-0.32.0", "sim-a", sha, "3.11", str(venv))


def test_a_new_node_is_not_listed_and_gets_its_archive_key(monkeypatch, tmp_path):
    venv, lock, sha = tree(tmp_path, venv=False)
    res, calls = run(monkeypatch, venv, lock, stand_in(pyver="3.12"), wheelhouse_name="w", release="sim-a")
    assert (res["needs_sync"], res["reason"], res["venv_exists"], res["listed"]) == (True, "no venv", False, False)
    assert res["stamp_found"] is None and res["installed_digest"] == "" and res["packages"] == {}
    assert res["archive_key"].startswith("w/sim-a-") and res["archive_key"].endswith("-%s-py3.12.tar.zst" % sha[:16])
    assert [c[0] for c in calls] == ["/usr/bin/python3"]


def test_another_stamp_is_not_listed_and_archives_off_ask_no_python(monkeypatch, tmp_path):
    venv, lock, sha = tree(tmp_path, stamp="0000:bytecode\n")
    res, calls = run(monkeypatch, venv, lock, stand_in())
    assert res["needs_sync"] and res["reason"] == "stamped 0000:bytecode, the lock is %s:bytecode" % sha
    assert calls == [] and res["archive_key"] == ""


def test_no_lock_on_the_host_stamps_none(monkeypatch, tmp_path):
    venv, lock, _sha = tree(tmp_path, lock=None, stamp="none:bytecode")
    res, _calls = run(monkeypatch, venv, lock, stand_in())
    assert (res["needs_sync"], res["reason"], res["lock_sha1"], res["stamp"]) == \
        (True, "no lock on the host", "", "none:bytecode")


def test_a_broken_venv_python_is_a_reason_to_resync_not_a_crash(monkeypatch, tmp_path):
    venv, lock, _sha = tree(tmp_path)
    res, _calls = run(monkeypatch, venv, lock, stand_in(rc=1))
    assert res["needs_sync"] and res["reason"] == "its python cannot list its packages (ImportError: boom)"
    assert not res["listed"]


def test_verify_lists_whatever_the_stamp(monkeypatch, tmp_path):
    venv, lock, _sha = tree(tmp_path, stamp=None)
    res, calls = run(monkeypatch, venv, lock, stand_in(), read_installed="always")
    assert res["listed"] and res["drift"] == [] and res["reason"] == "no stamp (never synced to a lock)"
    assert len(calls) == 1


def test_a_real_venv_python(monkeypatch, tmp_path):
    """bin/python is this interpreter: the lock pins what it really holds, so nothing drifts; one pin off drifts."""
    venv, lock, _sha = tree(tmp_path, lock=None)
    os.symlink(sys.executable, venv / "bin" / "python")
    held = json.loads(subprocess.run([str(venv / "bin" / "python"), "-c", vs.LIST_SCRIPT], capture_output=True,
                                     text=True, check=True).stdout)["packages"]
    name, version = next((n, v) for n, v in sorted(held.items()) if n not in vs.IGNORED)
    text = "".join("%s==%s --hash=sha256:00\n" % (n, v) for n, v in sorted(held.items()))
    lock.write_text(text)
    (venv / vs.STAMP_FILE).write_text(vs.stamp(hashlib.sha1(text.encode()).hexdigest()))
    res, _calls = run(monkeypatch, venv, lock)
    assert (res["needs_sync"], res["drift"], res["python"]) == (False, [], "%d.%d.%d" % sys.version_info[:3])
    lock.write_text(text.replace("%s==%s " % (name, version), "%s==0.0.0.dev0 " % name))
    (venv / vs.STAMP_FILE).write_text(vs.stamp(hashlib.sha1(lock.read_bytes()).hexdigest()))
    res, _calls = run(monkeypatch, venv, lock)
    assert res["reinstall"] == [name] and res["needs_sync"]
