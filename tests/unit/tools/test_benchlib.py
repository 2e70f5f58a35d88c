"""benchmarks/benchlib.py: the profile_tasks summary parser, on a real recap (wheelhouse bench, 2026-11-23)."""
import importlib.util
import os

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
spec = importlib.util.spec_from_file_location("benchlib", os.path.join(ROOT, "benchmarks", "benchlib.py"))
bl = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bl)

# profile_tasks pads a name with dashes to a column; a long name keeps one or two of them
RECAP = """\
TASKS RECAP ********************************************************************
Monday 23 November 2026  20:15:01 +0000 (0:00:01.148)       0:02:11.344 *******
===============================================================================
llmfleet.cluster.python_env : Sync the venv to the lock, offline (exactly the locked set, hashes checked) - 107.36s
llmfleet.cluster.python_env : Copy the wheelhouse to the node (rsync, only what changed travels) -- 10.06s
llmfleet.cluster.python_env : Bootstrap uv from the wheelhouse ---------- 7.34s
llmfleet.cluster.common : Read the host's identity - a dash inside ------ 0.50s
llmfleet.cluster.common : Read the host's identity - a dash inside ------ 0.25s
"""


@pytest.mark.parametrize("name, seconds, runs", [
    ("llmfleet.cluster.python_env : Sync the venv to the lock, offline (exactly the locked set, hashes checked)", 107.36, 1),
    ("llmfleet.cluster.python_env : Copy the wheelhouse to the node (rsync, only what changed travels)", 10.06, 1),
    ("llmfleet.cluster.python_env : Bootstrap uv from the wheelhouse", 7.34, 1),
    ("llmfleet.cluster.common : Read the host's identity - a dash inside", 0.75, 2),
])
def test_profile_top_reads_every_padding(name, seconds, runs):
    assert (name, seconds, runs) in bl.profile_top("PLAY RECAP\n" + RECAP, 10)


def test_profile_top_orders_slowest_first_and_cuts():
    top = bl.profile_top(RECAP, 2)
    assert [s for _n, s, _r in top] == [107.36, 10.06]
