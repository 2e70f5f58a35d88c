# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Shared helpers for the benchmark scripts (standard library + PyYAML from the repo's .venv).

Every benchmark brings up its own simulated lab (tools/simlab), runs the real commands an operator
runs (ansible-playbook, ansible, uv, pip), times them with a monotonic clock, records the machine
and its load average (the machine may be shared), and writes:

  benchmarks/results/<bench>-<UTC stamp>.json   everything measured, with the commands
  benchmarks/results/<bench>-<UTC stamp>.csv    one row per measurement
  benchmarks/RESULTS.md                         one row appended to the table at its end
"""
from __future__ import annotations

import csv
import datetime as dt
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
RESULTS_DIR = BENCH / "results"
RESULTS_MD = BENCH / "RESULTS.md"
SIMLAB = ROOT / "tools" / "simlab" / "simlab.py"
VENV_BIN = ROOT / ".venv" / "bin"
LAB_STATE = Path(os.environ.get("LLMFLEET_LAB_STATE", ROOT / ".lab"))
# Lab names the benchmarks may use (never `sim`: that one is the developers'/molecule's).
LAB_NAMES = ("bench", "scale")


def stop_cleanly_on_sigterm() -> None:
    """SIGTERM (a stopped session, `kill PID`) unwinds like Ctrl-C, so `finally` takes the lab down."""
    import signal

    def handler(_signum, _frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, handler)


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def utc_stamp() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def loadavg() -> list[float]:
    """1/5/15-minute load average (what `uptime` prints)."""
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def machine() -> dict:
    cpu = "?"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem_kb = 0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            mem_kb = int(line.split()[1])
    return {"cpus": os.cpu_count(), "cpu_model": cpu, "mem_gib": round(mem_kb / 1048576, 1),
            "kernel": platform.release(), "python": platform.python_version()}


def lab_containers(lab: str) -> list[str]:
    """The names of a lab's running containers (simlab labels each with llmfleet.lab=<lab>)."""
    return subprocess.run(["podman", "ps", "--filter", f"label=llmfleet.lab={lab}", "--format", "{{.Names}}"],
                          text=True, capture_output=True, check=False).stdout.split()


def lab_cpu_seconds(lab: str) -> float:
    """CPU time used so far by all containers of a lab (cgroup v1 cpuacct or v2 cpu.stat).

    Wall time on a shared 2-core machine moves with the other labs' load; the CPU time a side
    needs does not, so the benchmarks record both."""
    total = 0.0
    for c in lab_containers(lab):
        cg = subprocess.run(["podman", "inspect", "--format", "{{.State.CgroupPath}}", c], text=True,
                            capture_output=True, check=False).stdout.strip()
        v1 = Path(f"/sys/fs/cgroup/cpuacct{cg}/cpuacct.usage")
        v2 = Path(f"/sys/fs/cgroup{cg}/cpu.stat")
        if v1.exists():
            total += int(v1.read_text()) / 1e9
        elif v2.exists():
            for line in v2.read_text().splitlines():
                if line.startswith("usage_usec"):
                    total += int(line.split()[1]) / 1e6
    return total


def children_cpu_seconds() -> float:
    """CPU time of this process's finished children (ansible, ssh, rsync) on the controller."""
    import resource
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def mem_available_gib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1048576
    return 0.0


def disk_free_gib(path: Path = ROOT) -> float:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize / 2**30


def require_room(mem_gib: float, disk_gib: float, what: str) -> None:
    """Refuse to start a lab that would push a shared machine into the OOM killer or a full disk
    (earlyoom picks the biggest process: another lab's engine, not ours)."""
    mem, disk = mem_available_gib(), disk_free_gib()
    if mem < mem_gib or disk < disk_gib:
        raise SystemExit(f"{what}: needs {mem_gib} GiB available memory and {disk_gib} GiB free disk, "
                         f"the machine has {mem:.1f} GiB and {disk:.1f} GiB now (shared with other labs); "
                         "re-run when they are free, or pass --force")


def machine_short(m: dict) -> str:
    return f"{m['cpus']} cores {m['cpu_model']}, {m['mem_gib']:.0f} GiB"


def other_labs() -> list[str]:
    """Names of the other simlab containers running while we measure (they share the CPU)."""
    out = subprocess.run(["podman", "ps", "--format", "{{.Names}}"], text=True,
                         capture_output=True, check=False).stdout.split()
    return sorted(out)


def ansible_env(lab: str, run_id: str, extra: dict | None = None) -> dict:
    """Environment for ansible-playbook / ansible against a benchmark lab.

    The fact cache and the ssh ControlMaster sockets are private to this run: ansible.cfg keys
    both by host name / address, and the lab `sim` (and a previous lab of the same name) uses the
    same host names and may reuse the addresses, so sharing them would hand stale facts of another
    container to a fresh node.
    """
    env = dict(os.environ)
    env.update({
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_COLLECTIONS_PATH": str(ROOT / ".build" / "collections"),
        "ANSIBLE_CACHE_PLUGIN_CONNECTION": str(ROOT / ".cache" / f"facts-{lab}-{run_id}"),
        "ANSIBLE_SSH_CONTROL_PATH_DIR": f"/tmp/llmfleet-cp-{lab}-{run_id}",
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_NOCOLOR": "1",
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    })
    env.pop("ANSIBLE_CALLBACKS_ENABLED", None)
    if extra:
        env.update(extra)
    return env


def cluster_api_key(cluster: str) -> str:
    """The key a converge gave the cluster's engines: its key file where the api_key lookup keeps it
    (plugins/lookup/api_key.py, default_path); '' when there is none."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("llmfleet_api_key_lookup", ROOT / "plugins" / "lookup" / "api_key.py")
    lookup = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lookup)
    path = Path(lookup.default_path(cluster))
    return path.read_text().strip() if path.is_file() else ""


def ensure_collection_link() -> None:
    link = ROOT / ".build" / "collections" / "ansible_collections" / "llmfleet" / "cluster"
    if not link.exists():
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(ROOT)


def lab_up(name: str, nodes: int) -> Path:
    if name not in LAB_NAMES:
        raise SystemExit(f"lab {name!r}: benchmarks use only {LAB_NAMES}")
    log(f"lab {name}: up with {nodes} nodes")
    subprocess.run([sys.executable, str(SIMLAB), "up", "--nodes", str(nodes), "--name", name],
                   check=True, cwd=ROOT)
    return LAB_STATE / name / "hosts.yml"


def lab_down(name: str) -> None:
    if name not in LAB_NAMES:
        raise SystemExit(f"lab {name!r}: benchmarks use only {LAB_NAMES}")
    log(f"lab {name}: down")
    subprocess.run([sys.executable, str(SIMLAB), "down", "--name", name], check=False, cwd=ROOT)


def inventory_hosts(inv: Path) -> dict[str, dict]:
    """host -> vars (ansible_host, ...) from a simlab inventory."""
    import yaml  # the repo's .venv has PyYAML
    data = yaml.safe_load(inv.read_text())["all"]
    top = data.get("vars", {})
    hosts: dict[str, dict] = {}

    def walk(group: dict) -> None:
        for h, hv in (group.get("hosts") or {}).items():
            hosts.setdefault(h, dict(top)).update(hv or {})
        for child in (group.get("children") or {}).values():
            walk(child or {})
    walk(data)
    return hosts


def timed(cmd: list[str], logfile: Path, env: dict | None = None, cwd: Path = ROOT,
          check: bool = True) -> tuple[float, int, str]:
    """Run cmd, output to logfile; (seconds, rc, output)."""
    logfile.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=cwd, env=env, text=True, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, check=False)
    secs = time.monotonic() - t0
    logfile.write_text(f"$ {shlex.join(cmd)}\n# {secs:.1f}s rc={proc.returncode}\n{proc.stdout}")
    if check and proc.returncode != 0:
        tail = "\n".join(proc.stdout.splitlines()[-40:])
        raise SystemExit(f"command failed (rc={proc.returncode}, log {logfile}): {shlex.join(cmd)}\n{tail}")
    return secs, proc.returncode, proc.stdout


RECAP = re.compile(r"^(\S+)\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)"
                   r"\s+skipped=(\d+)\s+rescued=(\d+)\s+ignored=(\d+)", re.M)


def recap(output: str) -> dict[str, dict]:
    """PLAY RECAP per host: {host: {ok, changed, unreachable, failed, skipped, ...}}."""
    res = {}
    for m in RECAP.finditer(output):
        keys = ("ok", "changed", "unreachable", "failed", "skipped", "rescued", "ignored")
        res[m.group(1)] = dict(zip(keys, (int(x) for x in m.groups()[1:])))
    return res


def recap_totals(output: str) -> dict:
    r = recap(output)
    tot = {k: sum(h[k] for h in r.values()) for k in ("ok", "changed", "failed", "unreachable", "skipped")}
    tot["hosts"] = len(r)
    return tot


PROFILE = re.compile(r"^(.+?)\s-+\s+(\d+\.\d+)s\s*$", re.M)  # long names get a single dash


def profile_top(output: str, n: int = 10) -> list[tuple[str, float, int]]:
    """Slowest tasks from ansible.posix.profile_tasks' closing summary: (name, total s, runs).

    A task that runs in several plays (e.g. a role pulled in as a meta dependency of several
    roles) appears once per run: the runs are added up and counted."""
    summary = output.split("TASKS RECAP", 1)[-1]
    tot: dict[str, list] = {}
    for m in PROFILE.finditer(summary):
        e = tot.setdefault(m.group(1).strip(), [0.0, 0])
        e[0] += float(m.group(2))
        e[1] += 1
    rows = [(k, round(v[0], 2), v[1]) for k, v in tot.items()]
    return sorted(rows, key=lambda r: -r[1])[:n]


def median(xs: list[float]) -> float:
    s = sorted(xs)
    k = len(s) // 2
    return round(s[k] if len(s) % 2 else (s[k - 1] + s[k]) / 2, 2)


def write_results(bench: str, stamp: str, data: dict, rows: list[dict]) -> tuple[Path, Path]:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    jpath = RESULTS_DIR / f"{bench}-{stamp}.json"
    cpath = RESULTS_DIR / f"{bench}-{stamp}.csv"
    jpath.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    fields: list[str] = []
    for r in rows:
        for k in r:
            if k not in fields:
                fields.append(k)
    with cpath.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    log(f"wrote {jpath.relative_to(ROOT)} and {cpath.relative_to(ROOT)}")
    return jpath, cpath


TABLE_HEADER = ("| date | benchmark | machine | load 1m start→end | command | numbers | goal | met? |\n"
                "| --- | --- | --- | --- | --- | --- | --- | --- |\n")


def append_results_md(row: dict) -> None:
    """Append one row to the table that ends benchmarks/RESULTS.md (created if missing)."""
    if not RESULTS_MD.exists():
        RESULTS_MD.write_text("# Benchmark results\n\n## Results\n\n" + TABLE_HEADER)
    text = RESULTS_MD.read_text()
    if TABLE_HEADER not in text:
        text = text.rstrip("\n") + "\n\n## Results\n\n" + TABLE_HEADER
    cells = [row["date"], row["benchmark"], row["machine"], row["load"], f"`{row['command']}`",
             row["numbers"], row["goal"], row["met"]]
    line = "| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in cells) + " |\n"
    if not text.endswith("\n"):
        text += "\n"
    RESULTS_MD.write_text(text + line)
    log(f"appended a row to {RESULTS_MD.relative_to(ROOT)}")
