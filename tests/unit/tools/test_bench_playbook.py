"""playbooks/bench.yml, run for real with a local connection against a stub endpoint.

The GPU run (issue 22) drove bench.yml on the GPU host itself; the sweep ran wherever the module
started (with a local connection: the checkout's playbooks/ directory), and a run broke when that
checkout was replaced under it. The sweep must run in its own run directory. Stand-ins, named as such: the endpoint answers only /v1/models (bench.yml's
check before the sweep), `vllm` is a script that writes the level's result JSON as `vllm bench
serve` does and records its working directory, and the plotter writes a placeholder PNG (no
matplotlib here). Everything else is the playbook as it runs on a fleet.
"""
import csv
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from loopback_http import JsonHandler, serving

ROOT = Path(__file__).resolve().parents[3]

FAKE_VLLM = '''#!{python}
# stand-in for `vllm bench serve`: one level's result JSON, and the directory it ran in
import json, os, sys
a = sys.argv[1:]
arg = lambda name: a[a.index(name) + 1]
assert a[:2] == ["bench", "serve"], a
conc, prompts = int(arg("--max-concurrency")), int(arg("--num-prompts"))
with open(os.path.join({record!r}, "cwd-c%03d" % conc), "w") as f:
    f.write(os.getcwd())
res = {{"num_prompts": prompts, "completed": prompts, "failed": 0, "duration": 1.0, "request_throughput": prompts,
       "output_throughput": 100.0 * conc, "total_token_throughput": 300.0 * conc, "mean_ttft_ms": 5.0,
       "median_ttft_ms": 4.0, "p99_ttft_ms": 9.0}}
with open(os.path.join(arg("--result-dir"), arg("--result-filename")), "w") as f:
    json.dump(res, f)
'''

FAKE_PLOTTER = '''#!/bin/sh
# stand-in for the plotting interpreter: every CSV it is given must exist (from its working
# directory, as for the real plotter); the PNG named after --out
while [ $# -gt 0 ]; do
  case "$1" in *.csv) [ -f "$1" ] || { echo "no such CSV: $1 (in $(pwd))" >&2; exit 1; } ;; esac
  [ "$1" = --out ] && printf 'PNG' > "$2"
  shift
done
'''


class _Models(JsonHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        self.send_json(200 if self.path == "/v1/models" else 404,
                       {"object": "list", "data": [{"id": "tiny-llama", "object": "model"}]})


def _script(path, text):
    path.write_text(text)
    path.chmod(0o755)
    return path


@pytest.fixture
def endpoint():
    with serving(_Models) as port:
        yield port


def _playbook_bin():
    playbook_bin = Path(sys.executable).with_name("ansible-playbook")
    if not playbook_bin.exists():
        pytest.skip("ansible-playbook is not installed next to this Python")
    return playbook_bin


def _env(tmp_path):
    search_path = ROOT.parents[2] if ROOT.parents[1].name == "ansible_collections" else ROOT / ".build" / "collections"
    return dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(search_path), ANSIBLE_HOME=str(tmp_path / "home"),
                ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_NOCOLOR="1", ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"))


def _head_inventory(tmp_path):
    """One Ray head on a local connection, in no serving group: the plan names no API URL for it."""
    (tmp_path / "hosts.yml").write_text(textwrap.dedent("""\
        all:
          children:
            ray_head:
              hosts:
                benchhost:
                  ansible_connection: local
                  llmfleet_fabric_ip: 127.0.0.1
        """))


def test_bench_sweeps_in_its_run_directory(tmp_path, endpoint):
    playbook_bin = _playbook_bin()
    record = tmp_path / "record"
    record.mkdir()
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    os.symlink(sys.executable, venv / "python")
    _script(venv / "vllm", FAKE_VLLM.format(python=sys.executable, record=str(record)))
    plotter = _script(tmp_path / "plotter", FAKE_PLOTTER)
    _head_inventory(tmp_path)
    remote, results = tmp_path / "remote", tmp_path / "results"
    (tmp_path / "vars.json").write_text(json.dumps({
        "ansible_python_interpreter": sys.executable, "ansible_become": False,
        "bench_url": f"http://127.0.0.1:{endpoint}", "llmfleet_api_key": "",
        "bench_model": "/models/tiny", "bench_served_model_name": "tiny-llama",
        "bench_venv": str(venv.parent), "bench_remote_root": str(remote), "bench_results_dir": str(results),
        "bench_plot_python": str(plotter), "bench_concurrency": "1,4", "bench_label": "t"}))
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    env = _env(tmp_path)
    proc = subprocess.run(
        [str(playbook_bin), "-i", str(tmp_path / "hosts.yml"), "-e", "@" + str(tmp_path / "vars.json"),
         str(ROOT / "playbooks" / "bench.yml")],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=240, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run_dirs = [p for p in remote.iterdir() if p.is_dir()]
    assert len(run_dirs) == 1 and run_dirs[0].name.startswith("t-"), run_dirs
    for conc in (1, 4):
        assert (record / ("cwd-c%03d" % conc)).read_text() == str(run_dirs[0])
    rows = list(csv.DictReader((results / "sweep.csv").open()))
    assert [(r["concurrency"], r["output_throughput"]) for r in rows] == [("1", "100.0"), ("4", "400.0")]
    assert (results / "sweep.png").read_text() == "PNG"


def test_compare_mode_reads_relative_paths_from_the_callers_directory(tmp_path):
    """Comparison mode (controller only): CSVs named relative to where the user runs ansible-playbook."""
    playbook_bin = _playbook_bin()
    cwd = tmp_path / "work"
    (cwd / "a").mkdir(parents=True)
    (cwd / "b").mkdir()
    for d in ("a", "b"):
        (cwd / d / "sweep.csv").write_text("concurrency,output_throughput\n1,1.0\n")
    plotter = _script(tmp_path / "plotter", FAKE_PLOTTER)
    proc = subprocess.run(
        [str(playbook_bin), str(ROOT / "playbooks" / "bench.yml"), "-e", '{"bench_compare": ["a/sweep.csv", "b/sweep.csv"]}',
         "-e", "bench_compare_out=ab.png", "-e", "bench_plot_python=" + str(plotter)],
        cwd=cwd, env=dict(_env(tmp_path), PWD=str(cwd)), capture_output=True, text=True, timeout=240, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (cwd / "ab.png").read_text() == "PNG"


def test_a_head_serving_no_group_needs_bench_url(tmp_path):
    """The URL is the plan's (the head's serving group's): a head outside every group stops before any request,
    naming bench_url, and no run directory is made."""
    playbook_bin = _playbook_bin()
    _head_inventory(tmp_path)
    remote = tmp_path / "remote"
    (tmp_path / "vars.json").write_text(json.dumps({
        "ansible_python_interpreter": sys.executable, "ansible_become": False, "llmfleet_api_key": "",
        "bench_model": "/models/tiny", "bench_served_model_name": "tiny-llama", "bench_remote_root": str(remote)}))
    proc = subprocess.run(
        [str(playbook_bin), "-i", str(tmp_path / "hosts.yml"), "-e", "@" + str(tmp_path / "vars.json"),
         str(ROOT / "playbooks" / "bench.yml")],
        cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True, timeout=240, check=False)
    assert proc.returncode != 0
    assert "benchhost: bench_url is empty: this Ray head serves no group" in proc.stdout, proc.stdout + proc.stderr
    assert not remote.exists()
