# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""CPU the converged sim spends while nothing asks it anything, per node and per collection unit.

Every `make test` check and engine load on the 2-core controller shares the CPU with what the idle
lab burns. For each node it sums the CPU ticks of the processes in each `llmfleet-*` unit's cgroup
over `--seconds`, all nodes in the same window, and the whole lab's containers (cpuacct).

  ./.venv/bin/python benchmarks/idle_cpu.py [--seconds 120]

Writes benchmarks/results/idle_cpu-<stamp>.{json,csv} and a row in RESULTS.md. Only the lab's own
containers are read (podman exec); nothing is sent to any address.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib as bl  # noqa: E402  (the script runs from anywhere)

# per unit: its processes (the cgroup of systemd's own hierarchy: cgroup v1 or hybrid nodes), then
# the sum of their utime + stime in clock ticks
TICKS = r"""
for u in $(systemctl list-units --plain --no-legend 'llmfleet-*.service' | awk '{print $1}'); do
  cg=$(systemctl show -P ControlGroup "$u")
  f=/sys/fs/cgroup/systemd$cg/cgroup.procs; [ -f "$f" ] || f=/sys/fs/cgroup$cg/cgroup.procs
  t=0; for p in $(cat "$f" 2>/dev/null); do s=$(awk '{print $14 + $15}' /proc/$p/stat 2>/dev/null) && t=$((t + s)); done
  echo "$u $t"
done
"""


def podman(node: str, script: str) -> str:
    return subprocess.run(["podman", "exec", node, "bash", "-c", script], text=True, capture_output=True,
                          check=False).stdout


def ticks(containers: dict[str, str]) -> dict[str, dict[str, int]]:
    out = {}
    for name, container in containers.items():
        out[name] = {u: int(t) for u, t in (line.split() for line in podman(container, TICKS).splitlines() if line.strip())}
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lab", default="sim")
    p.add_argument("--seconds", type=float, default=120.0)
    a = p.parse_args()
    containers = {n.rsplit("-", 1)[-1]: n for n in sorted(bl.lab_containers(a.lab))}
    if not containers:
        raise SystemExit(f"no running containers of lab {a.lab}: make demo first")
    hz = int(subprocess.run(["getconf", "CLK_TCK"], text=True, capture_output=True, check=True).stdout)
    stamp = bl.utc_stamp()
    load0 = bl.loadavg()
    lab0, t0 = bl.lab_cpu_seconds(a.lab), ticks(containers)
    time.sleep(a.seconds)
    lab1, t1 = bl.lab_cpu_seconds(a.lab), ticks(containers)
    rows = []
    for node in containers:
        for unit in sorted(set(t0[node]) & set(t1[node])):
            pct = 100.0 * (t1[node][unit] - t0[node][unit]) / hz / a.seconds
            rows.append({"node": node, "unit": unit, "cpu_pct_of_core": round(pct, 2)})
    lab_pct = round(100.0 * (lab1 - lab0) / a.seconds, 1)
    for r in rows:
        bl.log("%(node)-7s %(unit)-40s %(cpu_pct_of_core)6.2f %% of a core" % r)
    bl.log(f"whole lab (every container): {lab_pct} % of a core")
    numbers = f"idle lab {lab_pct} % of a core over {a.seconds:.0f} s"
    machine = bl.machine()
    data = {"machine": machine, "seconds": a.seconds, "lab_pct_of_core": lab_pct, "units": rows}
    busiest = max(rows, key=lambda r: r["cpu_pct_of_core"], default=None)
    if busiest:
        numbers += "; busiest unit %s on %s %.2f %%" % (busiest["unit"], busiest["node"], busiest["cpu_pct_of_core"])
    bl.write_results("idle_cpu", stamp, data, rows)
    bl.append_results_md({"date": bl.utc_now(), "benchmark": "idle_cpu", "machine": bl.machine_short(machine),
                          "load": "%.2f→%.2f" % (load0[0], bl.loadavg()[0]),
                          "command": "benchmarks/idle_cpu.py " + " ".join(sys.argv[1:]),
                          "numbers": numbers, "goal": "measured (no goal set)", "met": "—"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
