# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""What Ansible alone costs on this controller as the host count grows (issue 19, item 5's
"16 nodes <= 2x 4 nodes"): no collection code, no lab, no network.

Each size gets an inventory of N hosts on the local connection and a play of K tasks per host,
run with this checkout's ansible.cfg (forks 32). Shapes:
  debug   K `ansible.builtin.debug` tasks (an action plugin: a forked worker per host and task,
          nothing executed on a host) - the controller's own cost of a host-task;
  command K `ansible.builtin.command: true` tasks (a module run on the host through the local
          connection: the worker plus a Python on the "host", as a real task adds over ssh).
K=1 is the least any run that touches every host once can do; K=52 is about what a no-op
site.yml runs per host (210 worker results on 4 nodes, benchmarks/RESULTS.md 2026-11-27 17:04).

  ./.venv/bin/python benchmarks/controller_floor.py [--sizes 4,16] [--tasks 1,52] [--rounds 3]

Writes benchmarks/results/controller_floor-<stamp>.{json,csv} and a row in RESULTS.md. The goal
column asks whether the largest size stays within 2x the smallest for every shape (the median of
--rounds runs each).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib as bl  # noqa: E402  pylint: disable=wrong-import-position

ACTIONS = {
    "debug": {"ansible.builtin.debug": {"msg": "{{ inventory_hostname }}"}},
    "command": {"ansible.builtin.command": "true", "changed_when": False},
}


def write_inputs(tmp: Path, nodes: int, tasks: int, action: str) -> tuple[Path, Path]:
    hosts = {f"node{i:02d}": None for i in range(1, nodes + 1)}
    inv = tmp / f"hosts-{nodes}.yml"
    inv.write_text(yaml.safe_dump({"all": {"hosts": hosts, "vars": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}))
    play = tmp / f"play-{action}-{tasks}.yml"
    body = [dict({"name": f"task {k}"}, **ACTIONS[action]) for k in range(1, tasks + 1)]
    play.write_text(yaml.safe_dump([{"name": "floor", "hosts": "all", "gather_facts": False, "tasks": body}],
                                   sort_keys=False))
    return inv, play


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="4,16")
    ap.add_argument("--tasks", default="1,52")
    ap.add_argument("--actions", default="debug,command")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-record", action="store_true", help="do not append to RESULTS.md")
    args = ap.parse_args()
    bl.stop_cleanly_on_sigterm()
    sizes = [int(s) for s in args.sizes.split(",")]
    task_counts = [int(k) for k in args.tasks.split(",")]
    actions = args.actions.split(",")
    load0, stamp = bl.loadavg(), bl.utc_stamp()
    env = bl.ansible_env("floor", stamp)
    logs = bl.ROOT / ".cache" / "bench-logs" / f"controller_floor-{stamp}"
    rows, medians = [], {}
    with tempfile.TemporaryDirectory(prefix="llmfleet-floor-") as tmpdir:
        tmp = Path(tmpdir)
        for action in actions:
            for tasks in task_counts:
                for nodes in sizes:
                    inv, play = write_inputs(tmp, nodes, tasks, action)
                    runs = []
                    for rnd in range(1, args.rounds + 1):
                        log = logs / f"{action}-{tasks}-{nodes}-{rnd}.log"
                        secs, _rc, out = bl.timed([str(bl.VENV_BIN / "ansible-playbook"), "-i", str(inv), str(play)], log, env=env)
                        tot = bl.recap_totals(out)
                        if tot["hosts"] != nodes or tot["failed"] or tot["unreachable"]:
                            raise SystemExit(f"{action} K={tasks} N={nodes}: recap {tot} (log {log})")
                        runs.append(round(secs, 2))
                        rows.append({"action": action, "tasks": tasks, "nodes": nodes, "round": rnd, "seconds": round(secs, 2),
                                     "ms_per_host_task": round(1000 * secs / (nodes * tasks), 1)})
                        bl.log(f"{action} K={tasks} N={nodes} round {rnd}: {secs:.2f} s")
                    medians[(action, tasks, nodes)] = bl.median(runs)
    ratios = {f"{a} K={k}": round(medians[(a, k, sizes[-1])] / medians[(a, k, sizes[0])], 2)
              for a in actions for k in task_counts}
    met = all(r <= 2 for r in ratios.values())
    data = {"machine": bl.machine(), "sizes": sizes, "tasks": task_counts, "actions": actions, "rounds": args.rounds,
            "medians": {f"{a} K={k} N={n}": s for (a, k, n), s in medians.items()}, "ratios": ratios,
            "load_start": load0, "load_end": bl.loadavg()}
    bl.write_results("controller_floor", stamp, data, rows)
    if not args.no_record:
        numbers = "; ".join(
            f"{a} K={k}: " + ", ".join(f"{n} hosts {medians[(a, k, n)]} s" for n in sizes)
            + f" → **{ratios[f'{a} K={k}']}×**" for a in actions for k in task_counts)
        bl.append_results_md({
            "date": bl.utc_now()[:16].replace("T", " ") + " UTC",
            "benchmark": "Ansible alone, N local hosts × K tasks (#19 item 5's floor)",
            "machine": bl.machine_short(data["machine"]), "load": f"{load0[0]}→{data['load_end'][0]}",
            "command": f"benchmarks/controller_floor.py --sizes {args.sizes} --tasks {args.tasks} "
                       f"--actions {args.actions} --rounds {args.rounds}",
            "numbers": numbers + f" (medians of {args.rounds})",
            "goal": f"{sizes[-1]} hosts ≤ 2× {sizes[0]} hosts", "met": "yes" if met else "no"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
