# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Failed requests during a fleet upgrade, under a constant load through the gateway.

On a lab that site.yml has converged, a client sends `--rate` chat completions per second per model
through the gateway for the whole of `playbooks/upgrade.yml -e llmfleet_release=<--to>`, and for
`--settle` seconds after it. Each request is judged on its own (HTTP 200 with a choice, within
`--timeout` s). Per model it counts sent and failed requests and the longest run of failures, from
the first failed request's start to the end of the last one. A model served by replicas is upgraded
one replica at a time behind the gateway, so its goal is 0 failed requests. A single-replica group
takes the staged switch: its failures are its downtime, and the upgrade's report
(reports/upgrade-<cluster>.json) gives that downtime. The engine's own cold load, from the same run,
is set beside it: the "ready N s after start" the serve role prints when the group starts again.

  ./.venv/bin/python benchmarks/upgrade_under_load.py --to sim-vllm-0.31.0-cpu [--back sim-vllm-0.32.0-cpu]

`--back` runs a second upgrade the same way (between two engine versions and back). Writes
benchmarks/results/upgrade_under_load-<stamp>.{json,csv} and a row in RESULTS.md; exits 1 when a
replicated model lost a request. Only the lab's own endpoints are contacted.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib as bl  # noqa: E402  (the script runs from anywhere)

QUESTION = "What is the capital of France? Answer in one word."


def ask(gateway: str, key: str, model: str, timeout: float) -> tuple[bool, str]:
    body = json.dumps({"model": model, "max_tokens": 8, "temperature": 0,
                       "messages": [{"role": "user", "content": QUESTION}]}).encode()
    req = urllib.request.Request(gateway.rstrip("/") + "/v1/chat/completions", data=body, method="POST",
                                 headers={"Content-Type": "application/json", "Authorization": "Bearer " + key})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - the lab's own gateway
            data = json.loads(resp.read())
        return bool(data.get("choices")), (data["choices"][0]["message"].get("content") or "")[:40]
    except Exception as exc:  # noqa: BLE001 - every failure counts, whatever it is
        return False, "%s: %s" % (type(exc).__name__, str(exc)[:120])


class Load:
    """`rate` requests a second per model, each in its own thread (a slow answer delays no other)."""

    def __init__(self, gateway: str, key: str, models: list[str], rate: float, timeout: float):
        self.gateway, self.key, self.models, self.rate, self.timeout = gateway, key, models, rate, timeout
        self.records: list[dict] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []

    def one(self, model: str) -> None:
        t0 = time.time()
        ok, detail = ask(self.gateway, self.key, model, self.timeout)
        with self.lock:
            self.records.append({"model": model, "start": round(t0, 3), "end": round(time.time(), 3),
                                 "ok": ok, "detail": detail})

    def run(self) -> None:
        tick = 0
        t0 = time.time()
        while not self.stop.is_set():
            for m in self.models:
                t = threading.Thread(target=self.one, args=(m,), daemon=True)
                t.start()
                self.threads.append(t)
            tick += 1
            self.stop.wait(max(0.0, t0 + tick / self.rate - time.time()))

    def finish(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(self.timeout + 5)


def summarize(records: list[dict], model: str, since: float, until: float) -> dict:
    mine = sorted((r for r in records if r["model"] == model and since <= r["start"] <= until), key=lambda r: r["start"])
    failed = [r for r in mine if not r["ok"]]
    longest, run_start, last_end = 0.0, None, None
    for r in mine:
        if not r["ok"]:
            run_start = r["start"] if run_start is None else run_start
            last_end = r["end"]
            longest = max(longest, last_end - run_start)
        else:
            run_start = None
    return {"model": model, "sent": len(mine), "failed": len(failed), "longest_outage_s": round(longest, 1),
            "errors": sorted({f["detail"] for f in failed})[:5],
            "answers": sorted({r["detail"] for r in mine if r["ok"]})[:3]}


def upgrade(inv: Path, target: str, env: dict, logfile: Path, limit: float) -> tuple[int, float, str]:
    """upgrade.yml to `target`: (rc, seconds, its output). A run past `limit` seconds is killed (rc 124), so a
    hung upgrade ends the benchmark with a result instead of loading the lab for hours."""
    cmd = [str(bl.VENV_BIN / "ansible-playbook"), "playbooks/upgrade.yml", "-i", str(inv), "-e", "llmfleet_release=" + target]
    t0 = time.time()
    with logfile.open("w") as fh:
        try:
            rc = subprocess.run(cmd, cwd=bl.ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT, check=False,
                                timeout=limit).returncode
        except subprocess.TimeoutExpired:
            rc = 124
    return rc, round(time.time() - t0, 1), logfile.read_text()


def write_legs(stamp: str, rate: float, models: list[str], legs: list[dict]) -> None:
    """benchmarks/results/upgrade_under_load-<stamp>.{json,csv} with the legs done so far."""
    rows = [dict(to=leg["to"], rc=leg["rc"], upgrade_s=leg["upgrade_s"], downtime_s=leg["report"].get("downtime_s"),
                 cold_load_s=",".join(str(c) for c in leg["cold_load_s"]), **{
                     "%s_%s" % (s["model"], k): s[k] for s in leg["models"] for k in ("sent", "failed", "longest_outage_s")})
            for leg in legs]
    bl.write_results("upgrade_under_load", stamp, {"machine": bl.machine(), "rate_per_model": rate, "models": models,
                                                   "legs": legs}, rows)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--inventory", type=Path, default=bl.ROOT / "inventories" / "sim")
    p.add_argument("--cluster", default="sim")
    p.add_argument("--gateway", default="http://10.231.1.11:8080")
    p.add_argument("--models", default="smollm2,tiny-llama", help="comma-separated: the replicated model first")
    p.add_argument("--replicated", default="smollm2", help="the model whose goal is 0 failed requests")
    p.add_argument("--to", required=True)
    p.add_argument("--back", default="")
    p.add_argument("--rate", type=float, default=2.0, help="requests per second per model")
    p.add_argument("--timeout", type=float, default=30.0)
    p.add_argument("--settle", type=float, default=15.0)
    p.add_argument("--upgrade-timeout", type=float, default=2400.0,
                   help="seconds one upgrade.yml run may take before it is killed (the leg then fails, rc 124)")
    a = p.parse_args()
    bl.stop_cleanly_on_sigterm()
    key = bl.cluster_api_key(a.cluster)
    models = a.models.split(",")
    stamp = bl.utc_stamp()
    env = bl.ansible_env(a.cluster, stamp, {"LLMFLEET_REPORTS": str(bl.ROOT / "reports")})
    load0 = bl.loadavg()
    for m in models:
        ok, detail = ask(a.gateway, key, m, a.timeout)
        if not ok:
            raise SystemExit("%s does not answer through %s before the upgrade: %s" % (m, a.gateway, detail))
    load = Load(a.gateway, key, models, a.rate, a.timeout)
    runner = threading.Thread(target=load.run, daemon=True)
    runner.start()
    legs = []
    for target in [a.to] + ([a.back] if a.back else []):
        bl.log("upgrade to %s under %.1f requests/s per model (%s)" % (target, a.rate, ", ".join(models)))
        t0 = time.time()
        rc, seconds, out = upgrade(a.inventory, target, env, Path("/tmp/llmfleet-upgrade-%s-%s.log" % (stamp, target)),
                                   a.upgrade_timeout)
        time.sleep(a.settle)
        t1 = time.time()
        report_file = bl.ROOT / "reports" / ("upgrade-%s.json" % a.cluster)
        report = json.loads(report_file.read_text()) if report_file.is_file() and report_file.stat().st_mtime >= t0 else {}
        cold = [float(x) for x in re.findall(r"ready ([0-9.]+) s after start", out)]
        leg = {"to": target, "rc": rc, "upgrade_s": seconds, "report": report, "cold_load_s": cold,
               "models": [summarize(load.records, m, t0, t1) for m in models]}
        legs.append(leg)
        bl.log(json.dumps({k: leg[k] for k in ("to", "rc", "upgrade_s", "cold_load_s")}))
        for s in leg["models"]:
            bl.log("  %(model)s: %(failed)d of %(sent)d failed, longest outage %(longest_outage_s)s s %(errors)s" % s)
        # the results so far, after every leg: a run stopped during the next one keeps this leg's
        write_legs(stamp, a.rate, models, legs)
        if rc != 0:
            break
    load.finish()
    repl_failed = sum(s["failed"] for leg in legs for s in leg["models"] if s["model"] == a.replicated)
    numbers = "; ".join(
        "to %s (rc %d, %.0f s): %s; staged switch downtime %s s, cold loads %s s" % (
            leg["to"], leg["rc"], leg["upgrade_s"],
            ", ".join("%s %d/%d failed (longest %s s)" % (s["model"], s["failed"], s["sent"], s["longest_outage_s"])
                      for s in leg["models"]),
            leg["report"].get("downtime_s"), "/".join(str(c) for c in leg["cold_load_s"]))
        for leg in legs)
    met = repl_failed == 0 and all(leg["rc"] == 0 for leg in legs)
    bl.append_results_md({"date": bl.utc_now(), "benchmark": "upgrade_under_load", "machine": bl.machine_short(bl.machine()),
                          "load": "%.2f→%.2f" % (load0[0], bl.loadavg()[0]),
                          "command": "benchmarks/upgrade_under_load.py " + " ".join(sys.argv[1:]),
                          "numbers": numbers, "goal": "0 failed requests for %s (replicas)" % a.replicated,
                          "met": "yes" if met else "no"})
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
