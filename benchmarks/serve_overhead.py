# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Serve overhead (issue #7): the serve role's start-to-healthy vs the same engine started by hand.

On a lab that site.yml has converged (vLLM CPU, native multi-node TP=2 on spark1 + spark2), each
repetition measures two starts from a stopped engine, alternating so that load drifts hit both:

  role  `ansible-playbook playbooks/serve.yml` with the units stopped: everything the role does
        (flag check against `vllm serve --help=all`, Ray env audit, unit files, start of the headless
        rank then the API rank, wait for /health and the served name in /v1/models, one smoke
        chat completion), timed from the command's start to its exit.
  hand  what an operator types: on every serving node, as the service user, the unit's own
        ExecStart argv with the unit's EnvironmentFiles sourced (identical flags and env, read
        back from the installed units), headless ranks first; then poll /health and /v1/models from
        the controller and send the same smoke completion. Timed from the first launch to the
        smoke's answer. The processes are then killed (their process group).

Both sides are also timed from their start to the smoke completion's answer: the role from its
first task (a timeline callback, benchmarks/callback_plugins/llmfleet_timeline.py, records task
start times; "the serve role's start" in the issue's words) to the start of the task after its
wait for /health + smoke, so that the ansible-playbook process's own start-up (Python, inventory,
plugins: a fixed ~3 s on the 2-core machine) is reported separately. Whole-command times stay in
the results too.

Goal: median(role from its start) / median(hand) <= 1.3. Writes benchmarks/results/serve_overhead-<stamp>.{json,csv}
and a row in RESULTS.md; exits 1 when the goal is missed.

  ./.venv/bin/python benchmarks/serve_overhead.py --inventory .lab/sim/hosts.yml [--reps 2]

The lab is not brought up or down here (a full converge is ~10 min): pass the inventory of a
converged simlab; the containers are reached with `podman exec` (the cheapest path, so the hand
side carries no Ansible or ssh cost).
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib as bl  # noqa: E402  (the script runs from anywhere)

UNIT_DIR = "/etc/systemd/system"
PIDFILE = "/tmp/llmfleet-bench-serve.pid"


def sh(container: str, script: str, check: bool = True, detach: bool = False) -> str:
    cmd = ["podman", "exec"] + (["-d"] if detach else []) + [container, "bash", "-c", script]
    proc = subprocess.run(cmd, text=True, capture_output=True, check=False)
    if check and proc.returncode != 0:
        raise SystemExit(f"{container}: {script[:120]}... rc={proc.returncode}\n{proc.stdout}{proc.stderr}")
    return proc.stdout


def unquote_systemd(word: str) -> str:
    # serve_unit.systemd_quote doubles $ and % for systemd; shlex already removed the quotes
    return word.replace("$$", "$").replace("%%", "%")


def read_unit(container: str, unit: str) -> dict:
    """ExecStart argv, EnvironmentFiles, User, WorkingDirectory of an installed serve unit."""
    text = sh(container, f"cat {UNIT_DIR}/{unit}.service")
    out = {"env_files": [], "argv": None, "user": None, "workdir": "/"}
    for line in text.splitlines():
        key, _sep, value = line.partition("=")
        if key == "EnvironmentFile":
            out["env_files"].append(value.lstrip("-"))
        elif key == "ExecStart":
            out["argv"] = [unquote_systemd(w) for w in shlex.split(value)]
        elif key == "User":
            out["user"] = value
        elif key == "WorkingDirectory":
            out["workdir"] = value
    if not out["argv"] or not out["user"]:
        raise SystemExit(f"{container}: no ExecStart/User in {unit}.service")
    return out


def hand_launch(container: str, unit: dict) -> None:
    """Start the unit's command as its user, env files sourced, in a new session (killable as a group)."""
    sources = "; ".join(f"if [ -r {shlex.quote(f)} ]; then . {shlex.quote(f)}; fi" for f in unit["env_files"])
    inner = (f"echo $$ > {PIDFILE}; cd {shlex.quote(unit['workdir'])}; "
             f"exec {shlex.join(unit['argv'])} > /tmp/llmfleet-bench-serve.log 2>&1")
    # root reads the 0600 env files (as systemd does) and raises the fd limit (the unit's
    # LimitNOFILE), then drops to the service user keeping that environment
    script = (f"rm -f {PIDFILE}; set -a; {sources}; set +a; ulimit -n 20000; "
              f"setsid runuser -u {shlex.quote(unit['user'])} -- bash -c {shlex.quote(inner)} < /dev/null &")
    sh(container, script)


def hand_stop(container: str) -> None:
    # setsid made runuser the session leader; the engine (the pid in PIDFILE) and its workers are in
    # that session: signal the whole session, then check that nothing of it is left
    out = sh(container, f"if [ -s {PIDFILE} ]; then sid=$(ps -o sid= -p $(cat {PIDFILE}) | tr -d ' '); "
                        f"if [ -n \"$sid\" ]; then pkill -TERM -s $sid; "
                        f"for _i in $(seq 60); do pgrep -s $sid >/dev/null || break; sleep 1; done; "
                        f"pkill -KILL -s $sid; sleep 1; echo left=$(pgrep -s $sid | tr '\\n' ,); fi; "
                        f"rm -f {PIDFILE}; fi; true", check=False)
    if "left=" in out and out.split("left=", 1)[1].strip():
        raise SystemExit(f"{container}: hand-started engine processes left after the stop: {out.strip()}")


def get(url: str, key: str, body: dict | None = None, timeout: float = 5) -> tuple[int, bytes]:
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = "Bearer " + key
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers=headers, method="POST" if data else "GET")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, b""
    except OSError:
        return 0, b""


def wait_serving(base: str, model: str, key: str, timeout: float = 900) -> float:
    """Seconds until /health is 200 and /v1/models lists the model, then one smoke completion."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if get(base + "/health", key)[0] == 200:
            code, body = get(base + "/v1/models", key)
            if code == 200 and model in [m.get("id") for m in json.loads(body).get("data", [])]:
                break
        time.sleep(2)  # the same poll interval as llm_server's wait
    else:
        raise SystemExit(f"{base} did not serve {model} within {timeout}s")
    code, body = get(base + "/v1/chat/completions", key, timeout=300, body={
        "model": model, "max_tokens": 8, "temperature": 0, "messages": [{"role": "user", "content": "Say hello."}]})
    if code != 200:
        raise SystemExit(f"smoke completion failed: HTTP {code}")
    return time.monotonic() - t0


WAIT_DONE_TASK = "Report the endpoint"  # the serve role's task right after its wait


def role_span(timeline: dict) -> float:
    """Seconds from the play's first task to the start of the task after the API rank's wait."""
    tasks = timeline["tasks"]
    if not tasks:
        raise SystemExit("timeline: no task recorded (was the llmfleet_timeline callback enabled?)")
    ends = [t["start"] for t in tasks if t["task"].endswith(WAIT_DONE_TASK)]
    if not ends:
        raise SystemExit(f"timeline: no task named {WAIT_DONE_TASK!r}: did the role start the engine?")
    return ends[-1] - tasks[0]["start"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--inventory", required=True, type=Path, help="a converged simlab's hosts.yml")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--unit", default="llmfleet-serve-tiny-llama")
    ap.add_argument("--model", default="tiny-llama")
    ap.add_argument("--api-key-env", default="LLMFLEET_API_KEY", help="env var holding the API key, if any")
    ap.add_argument("--goal", type=float, default=1.3)
    args = ap.parse_args()
    bl.stop_cleanly_on_sigterm()
    inv = args.inventory.resolve()
    lab = inv.parent.name
    # the key the engines require: the env's, else the cluster's key file (the sim's cluster is the
    # lab's name); without it /v1/models answers 401 and the hand side never serves
    key = os.environ.get(args.api_key_env) or bl.cluster_api_key(lab)
    hosts = bl.inventory_hosts(inv)
    import yaml
    groups = yaml.safe_load(inv.read_text())["all"]["children"]
    serving = list((groups.get("serve_nodes") or groups["ray_head"]).get("hosts") or {})
    head = next(iter(groups["ray_head"]["hosts"]))
    order = [h for h in serving if h != head] + [head]  # headless ranks first, the API rank last
    container = {h: f"llmfleet-{lab}-{h}" for h in serving}
    base = f"http://{hosts[head]['llmfleet_fabric_ip']}:8000"
    stamp, run_id = bl.utc_stamp(), bl.utc_stamp().lower()
    timeline = Path(f"/tmp/llmfleet-bench-timeline-{run_id}.json")
    env = bl.ansible_env(lab, run_id, {
        "ANSIBLE_CALLBACK_PLUGINS": str(bl.ROOT / "benchmarks" / "callback_plugins"),
        "ANSIBLE_CALLBACKS_ENABLED": "llmfleet_timeline",
        "LLMFLEET_TIMELINE_FILE": str(timeline)})
    logs = bl.ROOT / ".cache" / "bench-logs" / f"serve_overhead-{stamp}"
    # only the measured group's nodes: without --limit the role also stops and starts every other
    # serving group (the sim's SGLang pair), whose load then shares the cores with the measured start
    play = [str(bl.VENV_BIN / "ansible-playbook"), "playbooks/serve.yml", "-i", str(inv), "--limit", ",".join(serving)]
    load0 = bl.loadavg()

    bl.log("stopping the serve units (untimed), reading them back")
    bl.timed(play + ["-e", "serve_state=stopped"], logs / "stop-0.log", env)
    units = {h: read_unit(container[h], args.unit) for h in serving}
    rows, role, role_cmd, hand = [], [], [], []
    for rep in range(1, args.reps + 1):
        bl.log(f"rep {rep}: role start")
        timeline.unlink(missing_ok=True)
        secs, _rc, out = bl.timed(play, logs / f"role-{rep}.log", env)
        role_secs = role_span(json.loads(timeline.read_text()))
        role_cmd.append(round(secs, 1))
        role.append(round(role_secs, 1))
        rows.append({"rep": rep, "side": "role", "seconds": round(role_secs, 1), "command_seconds": round(secs, 1),
                     "changed": bl.recap_totals(out)["changed"]})
        bl.timed(play + ["-e", "serve_state=stopped"], logs / f"stop-role-{rep}.log", env)
        bl.log(f"rep {rep}: role {secs:.1f}s; hand start")
        t0 = time.monotonic()
        try:
            for h in order:
                hand_launch(container[h], units[h])
            wait_serving(base, args.model, key)
            secs = time.monotonic() - t0
        finally:
            for h in reversed(order):
                hand_stop(container[h])
        hand.append(round(secs, 1))
        rows.append({"rep": rep, "side": "hand", "seconds": round(secs, 1), "command_seconds": round(secs, 1),
                     "changed": ""})
        bl.log(f"rep {rep}: hand {secs:.1f}s")
    bl.log("starting the serve units again (untimed)")
    bl.timed(play, logs / "restore.log", env)
    ratio = round(bl.median(role) / bl.median(hand), 3)
    met = ratio <= args.goal
    data = {"benchmark": "serve_overhead", "stamp": stamp, "machine": bl.machine(), "load_start": load0,
            "load_end": bl.loadavg(), "inventory": str(inv.relative_to(bl.ROOT)) if inv.is_relative_to(bl.ROOT) else str(inv),
            "serving": order, "units": units, "role_s": role, "role_command_s": role_cmd, "hand_s": hand,
            "median_role_s": bl.median(role), "median_role_command_s": bl.median(role_cmd),
            "ratio_command": round(bl.median(role_cmd) / bl.median(hand), 3),
            "median_hand_s": bl.median(hand), "ratio": ratio, "goal": args.goal, "met": met,
            "other_containers": bl.other_labs()}
    bl.write_results("serve_overhead", stamp, data, rows)
    bl.append_results_md({
        "date": bl.utc_now()[:10], "benchmark": "serve overhead (#7)", "machine": bl.machine_short(data["machine"]),
        "load": f"{load0[0]}→{data['load_end'][0]}",
        "command": f"benchmarks/serve_overhead.py --inventory {data['inventory']} --reps {args.reps}",
        "numbers": (f"role from its first task {role} s (whole ansible-playbook command {role_cmd} s) vs hand "
                    f"{hand} s; median ratio {ratio} (whole command {data['ratio_command']})"),
        "goal": f"ratio ≤ {args.goal}", "met": "yes" if met else "no"})
    bl.log(f"role median {bl.median(role)}s, hand median {bl.median(hand)}s, ratio {ratio} (goal <= {args.goal})")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
