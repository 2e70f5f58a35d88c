"""The cluster checks' pytest hooks; the lab helpers themselves live in tests/lib/lab.py (one
helper for every scenario) and are re-exported here for `from conftest import ...`."""
import os
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.environ.get("MOLECULE_PROJECT_DIRECTORY") or os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))), "tests", "lib"))

# re-exported for the check files (from conftest import ...)
from lab import (  # noqa: E402,F401 pylint: disable=unused-import,wrong-import-position
    FABRIC_IP, MGMT_IP, PROBE, RAY_CLIENT, ROOT, SIM_INVENTORY, VENV, alive_ray_ips, ansible_bin, api_headers, api_key, drained, failures, recap,
    inventory_dir, node, run_ansible, run_module, run_playbook, unit_started_at, wait_for, watchdog_armed)


# Checks that show a known product gap, or whose path CI tests elsewhere in less time, go here as
# "file::test" ids: they then run only with LLMFLEET_CLUSTER_EXTENDED=1, everything else runs in CI.
# PP=2 over Ray on vLLM's CPU build loads, then its first request kills the engine in vLLM itself
# (docs/vllm-ray-on-cpu.md has both tracebacks): RayExecutorV2 (0.32's
# default) fails in Scheduler.update_from_output (KeyError on the request id: the batch queue gets
# the non-last stage's empty output), the older executor (VLLM_USE_RAY_V2_EXECUTOR_BACKEND=0) in
# the CPU worker's sync_and_gather_intermediate_tensors (no intermediate-tensor buffer on CPU).
# TP=2 over Ray (test_serve_ray.py's other checks) runs in CI.
# The engine_patches lifecycle on the sim's installed vLLM (apply, re-run, revert, re-apply, drop from
# the list): ~100-160 s of the lab lane that CI's 60 minutes give to the middle files; the same role's
# lifecycle on real vLLM files runs in integration-controller (tests/integration/engine_patches).
EXTENDED: set = {"test_serve_ray.py::test_ray_pipeline_parallel_two_stages",
                 "test_upgrade.py::test_patch_applies_reverts_and_reapplies_on_the_installed_vllm"}


# Checks of a site.yml re-run: they run before every other check, while the lab is as the converge
# left it (the other checks change what serves and the nodes' state).
FIRST = ("test_rerun.py",)
# Files whose checks change the lab for good: they run after every other check, in this order.
# test_upgrade.py leaves the lab on release B (no engine load spent going back to A), then
# test_teardown.py leaves it torn down (venvs kept): the next converge or `make demo` serves A again.
LAST = ("test_upgrade.py", "test_teardown.py")
# The files between FIRST and LAST, in this order: the serving paths, the plan as the desired state
# (orphans: no engine load, so it comes before the ones that restart engines) and the secure defaults
# first, the fault-injection checks (each an engine or Ray restart or two) after them. When `make test`
# runs short of time, its deadline (below) drops checks from the end of this order, not LAST's.
MIDDLE = ("test_cluster.py", "test_sglang.py", "test_orphans.py", "test_gateway.py", "test_security.py", "test_serve_ray.py",
          "test_serve_lifecycle.py", "test_validate.py", "test_monitoring.py", "test_safeguards.py", "test_guards.py", "test_partition.py")
# The MIDDLE files every `make test` runs, however late the lab lane is (only CI's hard limit drops them):
# each serving path answering a real client across nodes (vLLM TP 2, SGLang, the gateway), about four
# minutes in all. The rest of MIDDLE runs as the lab lane's end allows.
CORE = ("test_cluster.py", "test_sglang.py", "test_gateway.py")

# Checks whose first step replaces whatever serves (their own serve.yml run): a module that changed
# what serves may leave its change to them instead of spending an engine load on restoring the
# inventory's profile (see serving_is_replaced_next). test_serve_ray.py runs just before the first.
REPLACES_SERVING = ("test_serve_lifecycle.py::test_a_process_dying_during_load_fails_fast_with_its_log",)
BEFORE_REPLACER = "test_serve_ray.py"
_NEXT = {}


def _key(item):
    return "%s::%s" % (os.path.basename(str(item.fspath)), item.originalname)


def pytest_collection_modifyitems(config, items):
    position = {id(item): i for i, item in enumerate(items)}  # file order
    replacer = next((os.path.basename(str(item.fspath)) for item in items if _key(item) in REPLACES_SERVING), None)

    def order(item):
        name = os.path.basename(str(item.fspath))
        if name in FIRST:
            return (-1, position[id(item)])
        if name in LAST:
            return (LAST.index(name) + 1, position[id(item)])
        rank = MIDDLE.index(name) if name in MIDDLE else len(MIDDLE)
        if name == BEFORE_REPLACER and replacer is not None:
            # just before the replacer, in file order
            rank = MIDDLE.index(replacer) - 0.5
        return (0, rank, position[id(item)])
    items.sort(key=order)
    if os.environ.get("LLMFLEET_CLUSTER_EXTENDED") == "1":
        return
    skip = pytest.mark.skip(reason="opt-in (LLMFLEET_CLUSTER_EXTENDED=1): see EXTENDED in conftest.py")
    for item in items:
        key = "%s::%s" % (os.path.basename(str(item.fspath)), item.originalname)
        if key in EXTENDED:
            item.add_marker(skip)


# CI gives the whole `make test` 90 minutes and kills it after that, reporting nothing, and the side
# lanes still need the machine after the lab lane. tools/ci/run_tests.sh exports LLMFLEET_TEST_END
# (epoch seconds): when the lab lane must be done. A file starts only when its expected time, plus
# the expected time of LAST's files still to come, ends before it; otherwise its checks are skipped
# with a TIME BUDGET reason, which the step's summary shows and counts. So a slow machine drops
# checks from the end of MIDDLE, never upgrade and teardown (LAST always runs: a lane that is
# already late, e.g. after a slow converge, ends late rather than untested), and no MIDDLE file starts
# that would run the lane past its end (a start deadline alone let the ~18-min upgrade begin minutes before the end).
# The decision is per file, at its first check: a file's checks hand the lab on to each other (one
# restores what the one before changed), so a file runs whole or not at all.
# Unset (a plain `molecule verify`): no deadline.
# Seconds per file: a clean-clone `make test` on 2 cores (2026-12-07, or CI's of 2026-12-06 for the
# files that run did not reach), rounded up, less the EXTENDED checks; a file not named here counts
# DEFAULT_EXPECTED_S.
EXPECTED_S = {"test_rerun.py": 270, "test_cluster.py": 140, "test_sglang.py": 60, "test_gateway.py": 30, "test_security.py": 240,
              "test_serve_ray.py": 180, "test_serve_lifecycle.py": 500, "test_orphans.py": 170, "test_validate.py": 260,
              "test_monitoring.py": 120, "test_safeguards.py": 130, "test_guards.py": 510, "test_partition.py": 120,
              "test_upgrade.py": 1230, "test_teardown.py": 240}
DEFAULT_EXPECTED_S = 300
# The side lanes' steps (tools/ci/run_tests.sh) and the seconds each is expected to take once it has the
# machine to itself, i.e. after the lab lane (a clean-clone `make test` on 2 cores, 2026-12-07, rounded up).
# A step counts until its line is in the results file; a lane's steps run one after another, the lanes
# side by side, so what is left after the lab lane is the longest lane's sum.
SIDE_EXPECTED_S = {"monitoring-rules": 5, "unit": 150, "integration-controller": 800,
                   "lint": 300, "build": 30, "sanity": 250, "integration-nccl": 400}
# Seconds from the start of `make test` (LLMFLEET_TEST_START) to the first cluster check on the machine the
# tables above were measured on: the steps before molecule-cluster, its converge and idempotence. A machine
# that gets there later is that much slower for everything after it too (2026-12-07 on an AMD EPYC:
# 2084 s to the first check, and the upgrade file took 1.74x its expected time), so the tables are scaled
# by that ratio, never below 1.
EXPECTED_FIRST_CHECK_S = 1700
_SLOWNESS = {}


def slowness(now=None):
    """How much slower than the tables' machine this run is, from its first cluster check (>= 1)."""
    if "factor" not in _SLOWNESS:
        start = float(os.environ.get("LLMFLEET_TEST_START") or 0)
        now = time.time() if now is None else now
        _SLOWNESS["factor"] = max(1.0, (now - start) / EXPECTED_FIRST_CHECK_S) if start else 1.0
    return _SLOWNESS["factor"]


_FILE_STARTED = {}
# (clock, file, units_now()) as each file starts: printed when a check failed, to tell in which file's
# checks a node's units left the state the one before it handed on
_UNITS_AT_START = []
UNITS_CMD = ("systemctl list-units --all --plain --no-legend --no-pager 'llmfleet-serve-*.service' llmfleet-ray.service "
             "| awk '{sub(/^llmfleet-/, \"\", $1); sub(/[.]service$/, \"\", $1); printf \"%s %s/%s/%s, \", $1, $2, $3, $4}'")


def units_now():
    """Each node's engine and Ray units as systemd has them (load/active/sub), one line."""
    parts = []
    for name in sorted(FABRIC_IP):
        try:
            parts.append(f"{name}: " + node(name).run(UNITS_CMD).stdout.strip().rstrip(","))
        except Exception as exc:  # noqa: BLE001 - a record, never a failure of its own
            parts.append(f"{name}: not read ({type(exc).__name__})")
    return "; ".join(parts)


def time_needed(fname):
    """Seconds a file before LAST is expected to take, plus LAST's files, which run after it."""
    return sum(EXPECTED_S.get(f, DEFAULT_EXPECTED_S) for f in (fname,) + LAST)


def side_lanes_left():
    """Seconds the side lanes are expected to need after now, on their own: for each lane
    (LLMFLEET_TEST_SIDE_LANES, lanes split by '|'), the SIDE_EXPECTED_S of its steps that have no line in
    LLMFLEET_TEST_RESULTS yet; the longest lane's sum. 0 outside `make test`."""
    lanes, results = os.environ.get("LLMFLEET_TEST_SIDE_LANES", ""), os.environ.get("LLMFLEET_TEST_RESULTS", "")
    try:
        with open(results, encoding="utf-8") as handle:
            done = {line.split()[0] for line in handle if line.strip()}
    except OSError:
        done = set()
    return slowness() * max([sum(SIDE_EXPECTED_S.get(s, DEFAULT_EXPECTED_S) for s in lane.split() if s not in done)
                             for lane in lanes.split("|")] or [0])


def start_decision(fname, now=None):
    """(runs, why not) for `fname` at `now`. A MIDDLE file runs when it and LAST end before
    LLMFLEET_TEST_END. CORE's and LAST's files run, but for one limit: CI kills a `make test` at 90 min
    and reports nothing, so no file starts that, with the teardown after it and the side lanes' steps
    still to come, would end after LLMFLEET_TEST_HARD_END; the teardown always runs."""
    now = time.time() if now is None else now
    end = float(os.environ.get("LLMFLEET_TEST_END") or 0)
    hard = float(os.environ.get("LLMFLEET_TEST_HARD_END") or 0)
    if fname == LAST[-1]:
        return True, ""
    pace = slowness(now)
    must = int(pace * sum(EXPECTED_S.get(f, DEFAULT_EXPECTED_S) for f in (fname, LAST[-1])))
    side = int(side_lanes_left())
    if hard and now + must + side > hard:
        return False, (f"TIME BUDGET: {fname} and the teardown need {must} s and the side lanes {side} s (x{pace:.2f}: "
                       f"this machine's pace), which would end past LLMFLEET_TEST_HARD_END "
                       f"({time.strftime('%H:%M:%S', time.localtime(hard))}, before CI's kill); this check did not run")
    need = int(pace * time_needed(fname))
    if fname in LAST or fname in CORE or not end or now + need <= end:
        return True, ""
    return False, (f"TIME BUDGET: {fname} and what must run after it need {need} s (x{pace:.2f}: this "
                   f"machine's pace), more than is left "
                   f"before LLMFLEET_TEST_END ({time.strftime('%H:%M:%S', time.localtime(end))}); this check did not run")


def file_runs(fname):
    """Whether `fname`'s checks run: decided once, when first asked (its first check's setup, or a
    fixture of the check before it asking whether what runs next replaces what serves)."""
    if fname not in _FILE_STARTED:
        runs, why = start_decision(fname)
        _FILE_STARTED[fname] = (time.time(), why) if runs else (None, why)
        if runs:
            _UNITS_AT_START.append((time.strftime("%H:%M:%S"), fname, units_now()))
    return _FILE_STARTED[fname][0] is not None


def pytest_runtest_setup(item):
    fname = os.path.basename(str(item.fspath))
    if not file_runs(fname):
        pytest.skip(_FILE_STARTED[fname][1])


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item, nextitem):
    _NEXT["item"] = nextitem  # before the fixtures of `item` are torn down


def serving_is_replaced_next():
    """True when the check that runs next replaces what serves first (REPLACES_SERVING): a
    fixture tearing down may then leave its serving change in place."""
    nxt = _NEXT.get("item")
    # a replacer that the time budget skips replaces nothing: the fixture must restore
    return nxt is not None and _key(nxt) in REPLACES_SERVING and file_runs(os.path.basename(str(nxt.fspath)))


# Each check's wall time as it ends, with the clock: a run that CI kills (or a session that stops)
# still leaves every finished check's time in the log; pytest's --durations table prints only at
# the very end.
@pytest.fixture(autouse=True)
def check_time(request):
    t0 = time.monotonic()
    yield
    print(f"\n[{time.strftime('%H:%M:%S')}] CHECK TIME {request.node.nodeid}: {time.monotonic() - t0:.1f}s")


# When a check failed, what ended processes on the nodes, at the end of the run's output: earlyoom's
# kills and the collection's units' exits (a node's engine or Ray killed by earlyoom or the kernel,
# or stopped by a test, shows here with its clock; the failure's message alone names the symptom).
NODE_EVIDENCE = ("journalctl -u earlyoom --no-pager -o short-iso | grep -E 'sending SIG[A-Z]+ to process|low memory' | tail -n 5; "
                 "journalctl -u 'llmfleet-*' --no-pager -o short-iso | "
                 "grep -E 'Main process exited|Failed with result|Killed|oom-kill|Stopped|timed out' | tail -n 15")


def pytest_sessionfinish(session, exitstatus):
    if not session.testsfailed:
        return
    print("\n=== what ended processes on the nodes: earlyoom's kills, then the llmfleet units' exits (each oldest first)")
    for name in sorted(FABRIC_IP):
        try:
            out = node(name).run(NODE_EVIDENCE).stdout.strip()
        except Exception as exc:  # noqa: BLE001 - the evidence must never hide the result
            out = f"(not read: {type(exc).__name__}: {exc})"
        print(f"--- {name}\n{out or '(nothing)'}")
    print("=== the engine and Ray units as each file's checks started")
    for clock, fname, units in _UNITS_AT_START:
        print(f"[{clock}] {fname}: {units}")
