"""The cluster checks' time budget (molecule/cluster/tests/conftest.py): which file starts, given the
lab lane's end, CI's hard limit and the side lanes' steps still to come (tools/ci/run_tests.sh)."""
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SPEC = importlib.util.spec_from_file_location("cluster_conftest", ROOT / "molecule" / "cluster" / "tests" / "conftest.py")
budget = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(budget)
NOW = 1_000_000.0
UPGRADE_AND_TEARDOWN = budget.EXPECTED_S["test_upgrade.py"] + budget.EXPECTED_S["test_teardown.py"]


@pytest.fixture
def run(monkeypatch, tmp_path):
    """A `make test` whose lab lane must end in 60 min, hard limit 80 min, as run_tests.sh exports them;
    `done` lists the side steps with a results line."""
    results = tmp_path / "results"
    monkeypatch.delenv("LLMFLEET_TEST_START", raising=False)
    monkeypatch.setattr(budget, "_SLOWNESS", {})

    def setup(end_in, hard_in, done=()):
        monkeypatch.setenv("LLMFLEET_TEST_END", str(NOW + end_in))
        monkeypatch.setenv("LLMFLEET_TEST_HARD_END", str(NOW + hard_in))
        monkeypatch.setenv("LLMFLEET_TEST_RESULTS", str(results))
        monkeypatch.setenv("LLMFLEET_TEST_SIDE_LANES", "monitoring-rules unit integration-controller|lint build sanity integration-nccl")
        results.write_text("".join(f"{s:<24} ok     10s\n" for s in done))
    return setup


def test_side_lanes_left_is_the_longest_lanes_remaining_sum(run):
    run(3600, 4800, done=["monitoring-rules", "unit", "lint"])
    s = budget.SIDE_EXPECTED_S
    assert budget.side_lanes_left() == max(s["integration-controller"], s["build"] + s["sanity"] + s["integration-nccl"])
    run(3600, 4800, done=list(s))
    assert budget.side_lanes_left() == 0


def test_a_middle_file_starts_only_if_it_and_last_end_before_the_lab_lanes_end(run):
    need = budget.time_needed("test_orphans.py")
    run(need + 1, 10 ** 6, done=list(budget.SIDE_EXPECTED_S))
    assert budget.start_decision("test_orphans.py", NOW) == (True, "")
    run(need - 1, 10 ** 6, done=list(budget.SIDE_EXPECTED_S))
    runs, why = budget.start_decision("test_orphans.py", NOW)
    assert not runs and why.startswith("TIME BUDGET: test_orphans.py") and "LLMFLEET_TEST_END" in why


def test_the_upgrade_is_dropped_when_it_and_the_side_lanes_would_pass_the_hard_limit(run):
    left = budget.SIDE_EXPECTED_S["sanity"] + budget.SIDE_EXPECTED_S["integration-nccl"]
    done = ["monitoring-rules", "unit", "integration-controller", "lint", "build"]
    # past the lab lane's end, but room before the hard limit: LAST runs late rather than untested
    run(-600, UPGRADE_AND_TEARDOWN + left + 1, done=done)
    assert budget.start_decision("test_upgrade.py", NOW) == (True, "")
    run(-600, UPGRADE_AND_TEARDOWN + left - 1, done=done)
    runs, why = budget.start_decision("test_upgrade.py", NOW)
    assert not runs and "LLMFLEET_TEST_HARD_END" in why and f"the side lanes {left} s" in why
    assert "test_upgrade.py and the teardown need" in why
    # the teardown restores the lab whatever the clock says
    assert budget.start_decision("test_teardown.py", NOW) == (True, "")


def test_outside_make_test_everything_runs(monkeypatch):
    for name in ("LLMFLEET_TEST_END", "LLMFLEET_TEST_HARD_END", "LLMFLEET_TEST_RESULTS", "LLMFLEET_TEST_SIDE_LANES"):
        monkeypatch.delenv(name, raising=False)
    assert all(budget.start_decision(f, NOW)[0] for f in budget.MIDDLE + budget.LAST)


def test_the_core_serving_checks_run_past_the_lab_lanes_end_but_not_past_the_hard_limit(run):
    # the upgrade is not counted against them: under the hard limit it is the one to go
    need = budget.EXPECTED_S["test_sglang.py"] + budget.EXPECTED_S["test_teardown.py"]
    run(-60, need + 1, done=list(budget.SIDE_EXPECTED_S))
    assert budget.start_decision("test_sglang.py", NOW) == (True, "")
    assert not budget.start_decision("test_orphans.py", NOW)[0]  # not CORE: dropped at the lab lane's end
    run(-60, need - 1, done=list(budget.SIDE_EXPECTED_S))
    assert "LLMFLEET_TEST_HARD_END" in budget.start_decision("test_sglang.py", NOW)[1]


def test_a_slow_machine_scales_every_expected_time_by_its_pace_to_the_first_check(run, monkeypatch):
    done = ["monitoring-rules", "unit", "integration-controller", "lint", "build"]
    left = budget.SIDE_EXPECTED_S["sanity"] + budget.SIDE_EXPECTED_S["integration-nccl"]
    run(-600, 1.5 * (UPGRADE_AND_TEARDOWN + left) - 1, done=done)
    monkeypatch.setenv("LLMFLEET_TEST_START", str(NOW - 1.5 * budget.EXPECTED_FIRST_CHECK_S))
    runs, why = budget.start_decision("test_upgrade.py", NOW)  # fits at pace 1, not at 1.5
    assert budget.slowness() == 1.5 and not runs and "x1.50" in why
    monkeypatch.setattr(budget, "_SLOWNESS", {})
    monkeypatch.setenv("LLMFLEET_TEST_START", str(NOW - 0.5 * budget.EXPECTED_FIRST_CHECK_S))
    assert budget.start_decision("test_upgrade.py", NOW) == (True, "") and budget.slowness() == 1.0  # never below 1


def test_the_2026_12_07_evening_run_keeps_its_core_checks_and_drops_the_upgrade(run, monkeypatch):
    """That clean-clone run (AMD EPYC) reached its first cluster check 2084 s in, with every side step but
    monitoring-rules and unit still to come, ran the upgrade and ended at 5185 s: 86 min, four from CI's kill."""
    start = NOW - 2084
    run(start + 3600 - 240 - NOW, start + 4800 - NOW, done=["monitoring-rules", "unit"])
    monkeypatch.setenv("LLMFLEET_TEST_START", str(start))
    assert budget.start_decision("test_orphans.py", NOW)[0] is False  # past the lab lane's end
    assert budget.start_decision("test_cluster.py", NOW) == (True, "")
    assert round(budget.slowness(), 2) == 1.23
    assert budget.start_decision("test_upgrade.py", NOW + 300)[0] is False
