"""Does a release venv hold its lock (plugins/module_utils/venv_state.py): the python_env install decision."""
import json
import subprocess
import sys

import pytest

from ansible_collections.llmfleet.cluster.plugins.module_utils import venv_state as vs

SHA = "3f786850e387550fdab836ed7e6dc881de23001b"
STAMP = SHA + ":bytecode"
LOCK = ("ray==2.49.0 --hash=sha256:aa\nvllm==0.32.0 --hash=sha256:bb\n"
        "torch==2.13.0+cpu \\\n    --hash=sha256:cc\n")
HELD = {"ray": "2.49.0", "vllm": "0.32.0", "torch": "2.13.0+cpu", "pip": "25.0"}


def listing(**changes):
    packages = dict(HELD, **changes)
    return {"python": "3.11.2", "packages": {k: v for k, v in packages.items() if v is not None}}


def test_stamp_names_lock_and_mode():
    assert vs.stamp(SHA) == STAMP
    assert vs.stamp(SHA, "copy") == SHA + ":copy"
    assert vs.stamp(None) == vs.stamp("") == "none:bytecode"


@pytest.mark.parametrize("stamp_found, venv_exists, read_installed, want", [
    (STAMP + "\n", True, "stamped", True),       # the stamp names the lock: look what it really holds
    ("other:bytecode", True, "stamped", False),  # re-synced anyway: not read
    (None, True, "stamped", False),
    (None, True, "always", True),                # a verify lists whatever the stamp
    (STAMP, False, "always", False),             # nothing to list
])
def test_should_list(stamp_found, venv_exists, read_installed, want):
    assert vs.should_list(stamp_found, STAMP, venv_exists, read_installed) is want


# stamp found, venv exists, lock text, listing, listing error -> needs_sync, reason, drift packages
CASES = [
    ("converged", STAMP + "\n", True, LOCK, listing(), None, False, "matches its lock", []),
    ("new node", None, False, LOCK, None, None, True, "no venv", []),
    ("venv never stamped", None, True, LOCK, None, None, True, "no stamp (never synced to a lock)", []),
    ("a new lock (upgrade of the wheelhouse)", "0000:bytecode", True, LOCK, None, None, True,
     "stamped 0000:bytecode, the lock is " + STAMP, []),
    ("an older install mode", SHA + ":copy", True, LOCK, None, None, True,
     "stamped %s:copy, the lock is %s" % (SHA, STAMP), []),
    ("empty stamp", "", True, LOCK, None, None, True, "stamped '', the lock is " + STAMP, []),
    ("no lock on the host (check mode before its copy)", STAMP, True, None, None, None, True, "no lock on the host", []),
    ("a version changed by hand", STAMP, True, LOCK, listing(ray="2.59.0"), None, True,
     "drifted from its lock: ray locked 2.49.0 installed 2.59.0", ["ray"]),
    ("a package removed and one added", STAMP, True, LOCK, listing(vllm=None, numpy="2.0"), None, True,
     "drifted from its lock: numpy locked None installed 2.0; vllm locked 0.32.0 installed None", ["numpy", "vllm"]),
    ("pip / setuptools / wheel are the venv's own", STAMP, True, LOCK, listing(pip="9", setuptools="1", wheel="1"),
     None, False, "matches its lock", []),
    ("names are normalized", STAMP, True, LOCK.replace("vllm==", "VLLM==").replace("ray==", "Ray=="), listing(), None,
     False, "matches its lock", []),
    ("its python is broken", STAMP, True, LOCK, None, "No such file or directory", True,
     "its python cannot list its packages (No such file or directory)", []),
]


@pytest.mark.parametrize("what, found, exists, lock, listed, error, needs, reason, drifted", CASES,
                         ids=[c[0] for c in CASES])
def test_decide(what, found, exists, lock, listed, error, needs, reason, drifted):
    got = vs.decide(STAMP, found, exists, lock, listed, error)
    assert (got["needs_sync"], got["reason"]) == (needs, reason), what
    assert [d["package"] for d in got["drift"]] == drifted == got["reinstall"]


def test_drift_entries_name_both_versions():
    got = vs.decide(STAMP, STAMP, True, LOCK, listing(ray="2.59.0"))
    assert got["drift"] == [{"package": "ray", "locked": "2.49.0", "installed": "2.59.0"}]
    assert vs.drift_text(got["drift"]) == "ray locked 2.49.0 installed 2.59.0"


def test_a_verify_reports_drift_whatever_the_stamp():
    got = vs.decide(STAMP, "other:bytecode", True, LOCK, listing(ray="2.59.0"))
    assert got["needs_sync"] and got["reinstall"] == ["ray"]


def test_the_list_script_prints_sorted_json_of_this_interpreter():
    out = subprocess.run([sys.executable, "-c", vs.LIST_SCRIPT], capture_output=True, text=True, check=True).stdout
    data = json.loads(out)
    assert data["python"] == "%d.%d.%d" % sys.version_info[:3]
    assert data["packages"]["pytest"] == pytest.__version__
    assert out == json.dumps(data, sort_keys=True) + "\n"   # byte-stable: the CLI stamp hashes it
