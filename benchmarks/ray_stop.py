# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""How long stopping Ray takes on the nodes an upgrade moves (the head and a worker together, as
upgrade.yml's "Stop Ray" does): the installed unit against the unit as it was before 5534307.

  this  the unit ray_node installs: no ExecStop, SIGTERM to `ray start --block` runs Ray's own
        handler, RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S=0, SuccessExitStatus=1.
  old   the same unit with a runtime drop-in that puts the previous stop back: ExecStop=`ray stop
        --grace-period 20`, the GCS drain at Ray's default (30 s), no SuccessExitStatus.

Each repetition stops Ray on every given node at once (`systemctl stop`, one thread per node,
timed per node), once per variant, alternating which goes first; before each stop Ray is started
on every node and the head lists all of the lab's nodes alive. The drop-in is removed at the end.

  ./.venv/bin/python benchmarks/ray_stop.py --inventory .lab/sim/hosts.yml [--nodes spark1,spark2] [--reps 3]

Writes benchmarks/results/ray_stop-<stamp>.{json,csv} and a row in RESULTS.md. Goal: the slowest
node's stop at most half the old one's (median over repetitions).
"""
from __future__ import annotations

import argparse
import concurrent.futures
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib as bl  # noqa: E402  pylint: disable=wrong-import-position

UNIT = "llmfleet-ray.service"
DROPIN_DIR = "/run/systemd/system/llmfleet-ray.service.d"
OLD_STOP = ("[Service]\nExecStop=/opt/llmfleet/venvs/current/bin/ray stop --grace-period 20\n"
            "Environment=RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S=30\nSuccessExitStatus=\n")
ALIVE = ("import ray; ray.init(address='{address}', logging_level='ERROR', log_to_driver=False); "
         "print(sum(1 for n in ray.nodes() if n['Alive']))")


def sh(container: str, script: str, check: bool = True) -> str:
    out = subprocess.run(["podman", "exec", container, "bash", "-c", script], capture_output=True, text=True,
                         check=False)
    if check and out.returncode != 0:
        raise SystemExit(f"{container}: {script!r} failed: {out.stderr.strip()[-500:]}")
    return out.stdout.strip()


def set_variant(containers: list[str], variant: str) -> None:
    script = (f"mkdir -p {DROPIN_DIR} && printf '%s' '{OLD_STOP}' > {DROPIN_DIR}/zz-old-stop.conf"
              if variant == "old" else f"rm -f {DROPIN_DIR}/zz-old-stop.conf")
    for c in containers:
        sh(c, script + " && systemctl daemon-reload")


def start_all(all_containers: list[str], head: str, address: str, count: int, timeout: float = 240) -> None:
    for c in all_containers:
        sh(c, f"systemctl start {UNIT}")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = sh(head, f"cd /var/lib/llmfleet && runuser -u llmfleet -- /opt/llmfleet/venvs/current/bin/python "
                       f"-c \"{ALIVE.format(address=address)}\" 2>/dev/null | tail -1", check=False)
        if out.isdigit() and int(out) == count:
            return
        time.sleep(2)
    raise SystemExit(f"Ray did not list {count} nodes alive within {timeout} s")


def stop_together(containers: list[str]) -> dict[str, float]:
    def one(c: str) -> float:
        t0 = time.monotonic()
        sh(c, f"systemctl stop {UNIT}")
        return round(time.monotonic() - t0, 2)
    with concurrent.futures.ThreadPoolExecutor(len(containers)) as pool:
        return dict(zip(containers, pool.map(one, containers)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--inventory", required=True, type=Path)
    ap.add_argument("--lab", default="sim")
    ap.add_argument("--nodes", default="spark1,spark2", help="the nodes stopped together (the head first)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--goal", type=float, default=0.5, help="this / old, slowest node, medians")
    args = ap.parse_args()
    bl.stop_cleanly_on_sigterm()
    hosts = bl.inventory_hosts(args.inventory)
    names = args.nodes.split(",")
    containers = [f"llmfleet-{args.lab}-{n}" for n in names]
    everyone = [f"llmfleet-{args.lab}-{n}" for n in hosts]
    address = f"{hosts[names[0]]['llmfleet_fabric_ip']}:6379"  # the head's GCS (ray_node_port)
    load0, stamp = bl.loadavg(), bl.utc_stamp()
    rows, slowest = [], {"this": [], "old": []}
    try:
        for rep in range(args.reps):
            for variant in (("old", "this") if rep % 2 else ("this", "old")):
                set_variant(containers, variant)
                start_all(everyone, containers[0], address, len(hosts))
                took = stop_together(containers)
                slowest[variant].append(max(took.values()))
                rows.append({"rep": rep, "variant": variant, **{c.rsplit("-", 1)[1]: s for c, s in took.items()}})
                bl.log(f"rep {rep} {variant}: {took}")
    finally:
        set_variant(containers, "this")
        start_all(everyone, containers[0], address, len(hosts))
    this, old = bl.median(slowest["this"]), bl.median(slowest["old"])
    ratio = round(this / old, 3) if old else 0.0
    met = 0 < ratio <= args.goal
    data = {"machine": bl.machine(), "nodes": names, "reps": args.reps, "rows": rows, "slowest": slowest,
            "median_this_s": this, "median_old_s": old, "ratio": ratio, "goal": args.goal,
            "load_start": load0, "load_end": bl.loadavg()}
    bl.write_results("ray_stop", stamp, data, rows)
    bl.append_results_md({
        "date": bl.utc_now()[:16].replace("T", " ") + " UTC", "benchmark": "Ray stop, head + worker together (#19)",
        "machine": bl.machine_short(data["machine"]), "load": f"{load0[0]}→{data['load_end'][0]}",
        "command": f"benchmarks/ray_stop.py --inventory {args.inventory} --nodes {args.nodes} --reps {args.reps}",
        "numbers": f"slowest node's stop: this unit {slowest['this']} s (median {this}) vs old stop {slowest['old']} s "
                   f"(median {old}); ratio {ratio}",
        "goal": f"ratio ≤ {args.goal}", "met": "yes" if met else "no"})
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
