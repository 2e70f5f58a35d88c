# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Time to healthy of one engine from a container image and from the release's venv, in the same run.

On the sim converged with thor3 able to run containers (`make integration-container`, or
`LLMFLEET_SIM_NESTED=1 make demo`), the SmolLM2 replicas are written out as two groups: smol-1 on
spark3 from its venv, smol-2 on thor3 from the image thor3 builds from the same release venv
(docs/containers.md). A first serve.yml run moves smol-2 into its container (the image build,
untimed). Then each repetition restarts both replicas in one serve.yml run
(`serve_state=restarted`, `--limit spark3,thor3`): both load the same model on the same release at
the same time, on nodes of one machine, so load drifts hit both alike. The time per side is the serve
role's own "ready N s after start" (the unit's start to /health answering and the model listed).

Reports the medians and the same-run ratio container / venv. At the end serve.yml puts smol-2 back on
its venv. Writes benchmarks/results/container_vs_venv-<stamp>.{json,csv} and a row in RESULTS.md.

  ./.venv/bin/python benchmarks/container_vs_venv.py [--reps 3]
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib as bl  # noqa: E402  (the script runs from anywhere)

INVENTORY = bl.ROOT / "inventories" / "sim"
VENV_HOST, CONTAINER_HOST = "spark3", "thor3"
# the serve role's endpoint report: "<model> at http://<ip>:<port>/v1 (...); ready <s> s after start"
READY = re.compile(r"at\s+http://([0-9.]+):\d+/v1\s+\([^;]*\);\s+ready\s+([0-9.]+)\s+s\s+after\s+start")


def split_groups() -> dict:
    """The sim's serving groups with the smollm2 replicas written out: smol-1 venv, smol-2 container."""
    spec = yaml.safe_load((INVENTORY / "group_vars" / "all.yml").read_text())["llmfleet_serve_groups"]
    smol = spec.pop("smol")
    spec["smol-1"] = {"hosts": [VENV_HOST], "profile": smol["profile"]}
    spec["smol-2"] = {"hosts": [CONTAINER_HOST], "profile": smol["profile"], "runtime": "container"}
    return spec


def serve(env: dict, log: Path, groups: dict | None, *args: str) -> str:
    cmd = [str(bl.VENV_BIN / "ansible-playbook"), "playbooks/serve.yml", "-i", str(INVENTORY), *args]
    if groups is not None:
        cmd += ["-e", json.dumps({"llmfleet_serve_groups": groups})]
    _secs, _rc, out = bl.timed(cmd, log, env=env)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=3)
    a = p.parse_args()
    bl.stop_cleanly_on_sigterm()
    stamp = bl.utc_stamp()
    env = bl.ansible_env("sim", stamp)
    logs = bl.ROOT / ".cache" / "bench-logs" / f"container_vs_venv-{stamp}"
    ips = {h: v["llmfleet_fabric_ip"] for h, v in bl.inventory_hosts(INVENTORY / "hosts.yml").items()}
    load0 = bl.loadavg()
    groups = split_groups()
    bl.log("smol-2 onto the container runtime (its image built on %s, untimed)" % CONTAINER_HOST)
    serve(env, logs / "setup.log", groups)
    reps = []
    try:
        for i in range(a.reps):
            out = serve(env, logs / f"rep{i}.log", groups, "--limit", f"{VENV_HOST},{CONTAINER_HOST}",
                        "-e", "serve_state=restarted")
            ready = {ip: float(s) for ip, s in READY.findall(out)}
            rep = {"venv_s": ready.get(ips[VENV_HOST]), "container_s": ready.get(ips[CONTAINER_HOST])}
            if None in rep.values():
                raise SystemExit(f"repetition {i}: no 'ready N s after start' for both replicas (log {logs})")
            bl.log("rep %d: venv %.1f s, container %.1f s" % (i, rep["venv_s"], rep["container_s"]))
            reps.append(rep)
    finally:
        bl.log("smol-2 back on its venv")
        serve(env, logs / "restore.log", None)
    venv = bl.median([r["venv_s"] for r in reps])
    container = bl.median([r["container_s"] for r in reps])
    ratio = round(container / venv, 3)
    data = {"machine": bl.machine(), "reps": reps, "median_venv_s": venv, "median_container_s": container,
            "ratio": ratio, "venv_host": VENV_HOST, "container_host": CONTAINER_HOST}
    bl.write_results("container_vs_venv", stamp, data, reps)
    bl.append_results_md({
        "date": bl.utc_now(), "benchmark": "container_vs_venv", "machine": bl.machine_short(bl.machine()),
        "load": "%.2f→%.2f" % (load0[0], bl.loadavg()[0]),
        "command": f"benchmarks/container_vs_venv.py --reps {a.reps}",
        "numbers": "SmolLM2 time to healthy, both restarted in one serve.yml run: venv (%s) %s s, container (%s) "
                   "%s s (medians; per rep %s) → container/venv **%.3f×**" % (
                       VENV_HOST, venv, CONTAINER_HOST, container,
                       ", ".join("%.1f/%.1f" % (r["venv_s"], r["container_s"]) for r in reps), ratio),
        "goal": "measured (no goal set)", "met": "—"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
