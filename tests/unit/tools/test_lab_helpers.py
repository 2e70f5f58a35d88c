"""tests/lib/lab.py, the lab helper every scenario uses: the parsers the cluster checks assert
through, and run_ansible's timeout (a check must fail on a hung run, not read rc -9 as a result)."""
import importlib.util
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
spec = importlib.util.spec_from_file_location("lab", os.path.join(ROOT, "tests", "lib", "lab.py"))
lab = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lab)

# The shape of `serve.yml -v` output (the yaml callback) when a new key restarts both groups: the
# Thors' SGLang API rank stops in the same task and may print first, with nothing to drain.
RESTART_BOTH = """\
TASK [llmfleet.cluster.serve : Stop the API rank first (drains running requests)] ***
skipping: [spark2]
skipping: [thor2]
changed: [thor1] =>
    changed: true
    drained:
        running: 0
        waited: 0.0
    unit: /etc/systemd/system/llmfleet-serve-tiny-qwen.service
changed: [spark1] =>
    changed: true
    drained:
        running: 2.0
        waited: 11.5
    hash: 75f1eddda094d983
    unit: /etc/systemd/system/llmfleet-serve-tiny-llama.service

TASK [llmfleet.cluster.serve : Stop the other ranks] ***************************
changed: [spark2] =>
    changed: true
    drained:
        running: 7
        waited: 3.0
"""


@pytest.mark.parametrize("host, expected", [("spark1", (2.0, 11.5)), ("thor1", (0.0, 0.0))])
def test_drained_reads_the_hosts_own_result_in_its_task(host, expected):
    assert lab.drained(RESTART_BOTH, host) == expected


@pytest.mark.parametrize("host", ["spark2", "thor2"])  # skipped in that task; spark2 drains in the next one
def test_drained_fails_for_a_host_without_a_result_in_the_task(host):
    with pytest.raises(AssertionError):
        lab.drained(RESTART_BOTH, host)


def test_recap_counts_per_host():
    out = ("PLAY RECAP ****\nspark1                     : ok=35   changed=3    unreachable=0    failed=0    "
           "skipped=15   rescued=0    ignored=0   \nthor1                      : ok=36   changed=0    "
           "unreachable=0    failed=1    skipped=13   rescued=0    ignored=0   \n")
    assert lab.recap(out)["spark1"]["changed"] == 3 and lab.recap(out)["thor1"]["failed"] == 1


@pytest.mark.parametrize("on_line", [None, lambda line: None], ids=["plain", "on_line"])
def test_run_ansible_raises_on_timeout_on_both_paths(on_line):
    with pytest.raises(subprocess.TimeoutExpired):
        lab.run_ansible([sys.executable, "-c", "import time; print('x', flush=True); time.sleep(30)"],
                        1, tail=100, on_line=on_line)


@pytest.mark.parametrize("on_line", [None, lambda line: None], ids=["plain", "on_line"])
def test_run_ansible_returns_rc_and_output(on_line):
    rc, out, _seconds = lab.run_ansible([sys.executable, "-c", "print('hello'); raise SystemExit(3)"],
                                        30, tail=100, on_line=on_line)
    assert (rc, out) == (3, "hello\n")
