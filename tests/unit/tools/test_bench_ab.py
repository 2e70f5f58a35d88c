# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""bench_serve_sweep.py ab: ABBA blocks over two endpoints, ratios per level.

Stand-in, named as such: `vllm` is a script that writes the level's result JSON as `vllm bench serve`
does, with an output throughput that depends on the endpoint (B is 10 % slower) and on the run's
position (a drift of the host), so the test sees whether ABBA cancels the drift.
"""
import csv
import math
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SWEEP = ROOT / 'playbooks/files/bench_serve_sweep.py'
sys.path.insert(0, str(SWEEP.parent))
import bench_serve_sweep as bss  # noqa: E402  pylint: disable=wrong-import-position

FAKE_VLLM = '''#!{python}
import json, os, sys
a = sys.argv[1:]
arg = lambda name: a[a.index(name) + 1]
counter = os.path.join(arg("--result-dir"), "runs")
n = int(open(counter).read()) + 1 if os.path.exists(counter) else 1
open(counter, "w").write(str(n))
speed = 1000.0 if arg("--base-url").endswith(":8000") else 900.0
out = speed * int(arg("--max-concurrency")) * (1 + 0.01 * n)   # drifts upward run by run
res = {{"num_prompts": 1, "completed": 1, "failed": 0, "duration": 1.0, "output_throughput": out, "median_ttft_ms": 4.0}}
json.dump(res, open(os.path.join(arg("--result-dir"), arg("--result-filename")), "w"))
'''


def test_ab_runs_abba_blocks_and_reports_the_ratio_per_level(tmp_path):
    fake = tmp_path / 'vllm'
    fake.write_text(FAKE_VLLM.format(python=sys.executable))
    fake.chmod(0o755)
    out = tmp_path / 'out'
    res = subprocess.run([sys.executable, str(SWEEP), 'ab', '--base-url', 'http://127.0.0.1:8000',
                          '--base-url-b', 'http://127.0.0.1:8001', '--labels', 'collection,by-hand', '--blocks', '2',
                          '--concurrency', '4,16', '--model', 'm', '--served-model-name', 'm', '--vllm', str(fake),
                          '--out-dir', str(out)], capture_output=True, text=True, check=True)
    rows = list(csv.DictReader(open(out / 'ab.csv')))
    assert [r['label'] for r in rows[:4]] == ['collection', 'by-hand', 'by-hand', 'collection']
    assert len(rows) == 2 * 2 * 4
    per_level, geo = bss.ab_summary(rows, ['collection', 'by-hand'])
    assert sorted(per_level) == [4, 16]
    # the drift is linear in the run number: ABBA leaves the 1000/900 ratio within 0.1 %
    for v in per_level.values():
        assert v['blocks'] == 2 and abs(v['median'] - 1000 / 900) < 0.002
    assert abs(geo - 1000 / 900) < 0.002
    assert 'geometric mean over levels: 1.11' in res.stdout
    assert (out / 'ab-summary.txt').read_text() in res.stdout


def test_ab_summary_skips_blocks_without_both_sides():
    rows = [{'block': 1, 'concurrency': 8, 'label': 'A', 'output_throughput': 100.0},
            {'block': 1, 'concurrency': 8, 'label': 'B', 'output_throughput': 50.0},
            {'block': 2, 'concurrency': 8, 'label': 'A', 'output_throughput': 100.0}]
    per_level, geo = bss.ab_summary(rows, ['A', 'B'])
    assert per_level[8]['blocks'] == 1 and math.isclose(geo, 2.0)
    assert bss.ab_summary([], ['A', 'B']) == ({}, None)
