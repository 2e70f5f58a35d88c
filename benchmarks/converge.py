# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Fleet converge speed and scale on the simulated lab (issue #12).

Two series, each on a fresh lab of its own, one lab at a time:

  full   (lab `bench`, 4 nodes): full `site.yml` on fresh nodes, then the same command again
         (the no-op re-run: must report changed=0), with the floor `ansible all -m ping` on the
         same nodes measured in the same run (median of 3, taken right before and after the
         no-op). Goal: no-op re-run <= 10 x the ping floor.
  scale  (lab `scale`, 4, 8 and 16 nodes by default): for each size a fresh lab, one converge
         with --scale-tags, then --scale-rounds no-op re-runs with the same tags (the median
         kept: the first follows the engine loads of the converge), and the ping floor.
         Goal: 16-node no-op <= 2 x the 4-node no-op.
         The default tag set (preflight,common,fabric) leaves out the engine venvs (~3 GB a
         node), Ray and serving: 16 full nodes do not fit a 2-core / 24 GiB machine that other
         labs share. The results say which tags ran.

  noop   (an already converged lab: --inventory, default inventories/sim): the no-op `site.yml`
         with Ansible's linear strategy, with Mitogen's mitogen_linear (PyPI `mitogen`,
         re-runs only: docs/operations.md) and (`base`) with the linear strategy from another
         checkout (--base-tree), --rounds times each in a row (with `base`, after one untimed
         run per tree: each tree's role_state inputs cover its own code), between ping floors. Same run, same lab:
         the ratios mitogen / linear and linear / base, and each over the ping floor.
         Goal (issue 19): no-op <= 15 x the ping floor.

  tagged (an already converged lab: --inventory): the no-op `site.yml` and `site.yml --tags <role>`
         for each of --tagged-roles, interleaved, --rounds times each. Same run, same lab: each
         tagged re-run over the whole no-op. Goal (issue 38): a tagged re-run <= the whole no-op.

The no-op runs carry the ansible.posix.profile_tasks callback (a timestamp per task: no
measurable cost), and their slowest tasks are written to the results.

  benchmarks/converge.py [--series full,scale,noop,tagged] [--scale-nodes 4,8,16] [--scale-tags TAGS]
                         [--scale-rounds 3]
                         [--inventory inventories/sim] [--rounds 2] [--keep-lab] [--no-record]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib as bl  # noqa: E402

NOOP_GOAL = 10.0
NOOP_STRATEGY_GOAL = 15.0
TAGGED_GOAL = 1.0
SCALE_GOAL = 2.0


def inv_args(inv) -> list[str]:
    """-i for one inventory path, or for each of a list (a real inventory and its overlay)."""
    return [arg for p in (inv if isinstance(inv, list) else [inv]) for arg in ("-i", str(p))]


def ping_floor(inv, env: dict, logs: Path, tag: str, n: int = 3) -> list[float]:
    times = []
    for i in range(n):
        secs, _rc, out = bl.timed(["ansible", "all", *inv_args(inv), "-m", "ansible.builtin.ping"],
                                  logs / f"ping-{tag}-{i}.log", env=env)
        if "UNREACHABLE" in out or "FAILED" in out:
            raise SystemExit(f"ping failed, see {logs}")
        times.append(round(secs, 2))
    return times


def mitogen_env() -> dict:
    """Mitogen's strategy for ansible-playbook (the mitogen package in the venv)."""
    import importlib.util
    spec = importlib.util.find_spec("ansible_mitogen")
    if spec is None or not spec.origin:
        raise SystemExit("mitogen is not installed in this interpreter (requirements-dev.txt has it)")
    return {"ANSIBLE_STRATEGY_PLUGINS": str(Path(spec.origin).parent / "plugins" / "strategy"),
            "ANSIBLE_STRATEGY": "mitogen_linear"}


def playbook(inv, env: dict, logs: Path, tag: str, tags: str | None,
             extra_env: dict | None = None, cwd: Path = bl.ROOT) -> dict:
    cmd = ["ansible-playbook", *inv_args(inv), "site.yml"]
    if tags:
        cmd += ["--tags", tags]
    e = dict(env, **(extra_env or {}))
    load0 = bl.loadavg()
    secs, _rc, out = bl.timed(cmd, logs / f"{tag}.log", env=e, cwd=cwd)
    res = {"seconds": round(secs, 1), "recap": bl.recap_totals(out), "load_start": load0,
           "load_end": bl.loadavg(), "command": " ".join(["ansible-playbook", "site.yml"] + cmd[2 + len(inv_args(inv)):])}
    if extra_env and "ANSIBLE_CALLBACKS_ENABLED" in extra_env:
        res["top_tasks_s"] = bl.profile_top(out, 15)
    bl.log(f"{tag}: {secs:.1f}s changed={res['recap']['changed']} failed={res['recap']['failed']}")
    if res["recap"]["failed"] or res["recap"]["unreachable"]:
        raise SystemExit(f"{tag}: failures, see {logs / (tag + '.log')}")
    return res


PROFILE_ENV = {"ANSIBLE_CALLBACKS_ENABLED": "ansible.posix.profile_tasks", "PROFILE_TASKS_TASK_OUTPUT_LIMIT": "all"}


def series_full(a, stamp: str, logs: Path) -> dict:
    if not a.force:
        # 4 engine venvs (~6 GB each with uv's cache), Ray on 4 nodes, vLLM CPU TP=2 (~4 GiB)
        bl.require_room(8, 30, "full series")
    env = bl.ansible_env(a.full_lab, stamp)
    inv = bl.lab_up(a.full_lab, a.full_nodes)
    try:
        res: dict = {"lab": a.full_lab, "nodes": a.full_nodes, "tags": None}
        res["ping_before_converge"] = ping_floor(inv, env, logs, "full-0", 1)
        res["converge"] = playbook(inv, env, logs, "full-1-converge", None)
        res["ping_floor_before"] = ping_floor(inv, env, logs, "full-before")
        res["noop"] = playbook(inv, env, logs, "full-2-noop", None, PROFILE_ENV)
        res["ping_floor_after"] = ping_floor(inv, env, logs, "full-after")
    finally:
        if not a.keep_lab:
            bl.lab_down(a.full_lab)
    floor = bl.median(res["ping_floor_before"] + res["ping_floor_after"])
    res["ping_floor_s"] = floor
    res["noop_over_ping"] = round(res["noop"]["seconds"] / floor, 1)
    res["noop_changed"] = res["noop"]["recap"]["changed"]
    res["goal"] = f"no-op <= {NOOP_GOAL} x ping floor, changed=0"
    res["goal_met"] = res["noop_over_ping"] <= NOOP_GOAL and res["noop_changed"] == 0
    return res


def base_tree(path: str) -> tuple[dict, Path]:
    """The `base` strategy: the linear strategy run from another checkout (an earlier commit's
    worktree), with its own ansible.cfg and collection link, so two trees are timed on one lab."""
    base = Path(path).resolve()
    if not (base / "site.yml").is_file():
        raise SystemExit(f"--base-tree {base}: not a checkout of this collection (no site.yml)")
    link = base / ".build" / "collections" / "ansible_collections" / "llmfleet" / "cluster"
    if not link.is_symlink():
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(base)
    return {"ANSIBLE_CONFIG": str(base / "ansible.cfg"),
            "ANSIBLE_COLLECTIONS_PATH": str(base / ".build" / "collections")}, base


def converged_lab(a, stamp: str) -> tuple[list[Path], dict]:
    """The inventories (--inventory) and Ansible environment of the already converged lab that the noop
    and tagged series time."""
    inv = [(bl.ROOT / p).resolve() for p in a.inventory.split(",")]  # e.g. inventories/lab,inventories/lab-twin
    env = bl.ansible_env("sim", stamp)
    env["ANSIBLE_CACHE_PLUGIN_CONNECTION"] = str(bl.ROOT / ".cache" / "facts")  # the lab's own
    return inv, env


def series_noop(a, stamp: str, logs: Path) -> dict:
    inv, env = converged_lab(a, stamp)
    # The sim's throwaway containers: its inventories turn host key checking off through
    # ansible_ssh_common_args, which Mitogen's own ssh does not read (it follows host_key_checking).
    env["ANSIBLE_HOST_KEY_CHECKING"] = "False"
    strategies = {name: (mitogen_env() if name == "mitogen" else {}) for name in a.strategies}
    cwds = {name: bl.ROOT for name in a.strategies}
    if "base" in strategies:
        strategies["base"], cwds["base"] = base_tree(a.base_tree)
    hosts_file = inv[-1] / "hosts.yml" if inv[-1].is_dir() else inv[-1]
    res: dict = {"inventory": a.inventory, "nodes": len(bl.inventory_hosts(hosts_file)), "rounds": a.rounds,
                 "runs": {k: [] for k in strategies}}
    res["ping_floor_before"] = ping_floor(inv, env, logs, "noop-before")
    res["settle"] = {}
    for name, extra in strategies.items():
        # the base tree runs its own copy of the inventory (same lab, its own group_vars)
        tinv = [cwds[name] / p.relative_to(bl.ROOT) for p in inv] if name == "base" else inv
        if "base" in strategies:
            # each tree's role_state fingerprint covers its own code: after the other tree's run, its
            # first run re-runs the roles; that settling run is not timed, its rounds follow in a row
            res["settle"][name] = playbook(tinv, env, logs, f"noop-settle-{name}", None, dict(PROFILE_ENV, **extra),
                                           cwd=cwds[name])["seconds"]
        for r in range(1, a.rounds + 1):
            res["runs"][name].append(playbook(tinv, env, logs, f"noop-{r}-{name}", None, dict(PROFILE_ENV, **extra),
                                              cwd=cwds[name]))
    res["ping_floor_after"] = ping_floor(inv, env, logs, "noop-after")
    floor = res["ping_floor_s"] = bl.median(res["ping_floor_before"] + res["ping_floor_after"])
    for name, runs in res["runs"].items():
        res[f"{name}_s"] = bl.median([x["seconds"] for x in runs])
        res[f"{name}_over_ping"] = round(res[f"{name}_s"] / floor, 1)
        res[f"{name}_changed"] = max(x["recap"]["changed"] for x in runs)
    if "mitogen" in strategies and "linear" in strategies:
        res["mitogen_over_linear"] = round(res["mitogen_s"] / res["linear_s"], 2)
    if "base" in strategies and "linear" in strategies:
        res["base_tree"] = a.base_tree
        res["linear_over_base"] = round(res["linear_s"] / res["base_s"], 2)
    res["goal"] = f"no-op <= {NOOP_STRATEGY_GOAL} x ping floor, changed=0"
    mine = [k for k in strategies if k != "base"]  # the goal is this tree's
    res["goal_met"] = (min(res[f"{k}_over_ping"] for k in mine) <= NOOP_STRATEGY_GOAL
                       and all(res[f"{k}_changed"] == 0 for k in strategies))
    return res


def series_scale(a, stamp: str, logs: Path) -> dict:
    res: dict = {"lab": a.scale_lab, "tags": a.scale_tags, "sizes": {}}
    for n in a.scale_nodes:
        env = bl.ansible_env(a.scale_lab, f"{stamp}-{n}")
        inv = bl.lab_up(a.scale_lab, n)
        try:
            r: dict = {"nodes": n}
            r["ping_before_converge"] = ping_floor(inv, env, logs, f"scale{n}-0", 1)
            r["converge"] = playbook(inv, env, logs, f"scale{n}-1-converge", a.scale_tags)
            r["ping_floor_before"] = ping_floor(inv, env, logs, f"scale{n}-before")
            # several no-ops in a row, the median kept: the first follows the converge's engine loads
            r["noop_runs"] = [playbook(inv, env, logs, f"scale{n}-2-noop-{i}", a.scale_tags, PROFILE_ENV)
                              for i in range(1, a.scale_rounds + 1)]
            r["noop"] = sorted(r["noop_runs"], key=lambda x: x["seconds"])[len(r["noop_runs"]) // 2]
            r["ping_floor_after"] = ping_floor(inv, env, logs, f"scale{n}-after")
        finally:
            bl.lab_down(a.scale_lab)
        r["ping_floor_s"] = bl.median(r["ping_floor_before"] + r["ping_floor_after"])
        r["noop_over_ping"] = round(r["noop"]["seconds"] / r["ping_floor_s"], 1)
        res["sizes"][str(n)] = r
    lo, hi = str(min(a.scale_nodes)), str(max(a.scale_nodes))
    res["ratio_max_over_min"] = round(res["sizes"][hi]["noop"]["seconds"] / res["sizes"][lo]["noop"]["seconds"], 2)
    res["goal"] = f"{hi}-node no-op <= {SCALE_GOAL} x {lo}-node no-op"
    res["goal_met"] = (res["ratio_max_over_min"] <= SCALE_GOAL
                       and all(x["recap"]["changed"] == 0 for s in res["sizes"].values()
                               for x in s.get("noop_runs", [s["noop"]])))
    return res


def series_tagged(a, stamp: str, logs: Path) -> dict:
    """The no-op site.yml and a re-run per role tag, interleaved round by round (load drift hits all)."""
    inv, env = converged_lab(a, stamp)
    names = ["all"] + a.tagged_roles
    runs: dict = {name: [] for name in names}
    playbook(inv, env, logs, "tagged-warmup", None)  # records where an earlier run left a role drifted
    for i in range(a.rounds):
        for name in names:
            runs[name].append(playbook(inv, env, logs, f"tagged-{name}-{i}", None if name == "all" else name))
    med = {name: bl.median([r["seconds"] for r in rs]) for name, rs in runs.items()}
    res: dict = {"inventory": a.inventory, "rounds": a.rounds, "runs": runs,
                 "seconds": med, "changed": {n: max(r["recap"]["changed"] for r in rs) for n, rs in runs.items()},
                 "over_noop": {n: round(med[n] / med["all"], 2) for n in a.tagged_roles}}
    res["goal"] = f"every --tags <role> re-run <= {TAGGED_GOAL:g} x the no-op site.yml"
    res["goal_met"] = all(v <= TAGGED_GOAL for v in res["over_noop"].values()) and not any(res["changed"].values())
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--series", default="full,scale", help="full, scale or both (default)")
    ap.add_argument("--full-nodes", type=int, default=4)
    ap.add_argument("--full-lab", default="bench", choices=bl.LAB_NAMES)
    ap.add_argument("--scale-lab", default="scale", choices=bl.LAB_NAMES)
    ap.add_argument("--scale-nodes", default="4,8,16")
    ap.add_argument("--scale-tags", default="preflight,common,fabric",
                    help="tags of the scale series ('' = the whole site.yml)")
    ap.add_argument("--inventory", default="inventories/sim", help="noop series: a converged lab's inventory (comma-separated: an inventory and its overlay)")
    ap.add_argument("--rounds", type=int, default=2, help="noop and tagged series: runs per strategy / tag")
    ap.add_argument("--tagged-roles", default="fabric,ray,serve", help="tagged series: the role tags timed")
    ap.add_argument("--scale-rounds", type=int, default=3, help="scale series: no-op runs per size (the median is kept)")
    ap.add_argument("--strategies", default="linear,mitogen",
                    help="noop series: linear, mitogen, base (linear from --base-tree), comma-separated")
    ap.add_argument("--base-tree", default="", help="noop series, strategy base: another checkout of this "
                    "collection (e.g. `git worktree add .cache/base <rev>`), timed on the same lab")
    ap.add_argument("--keep-lab", action="store_true", help="leave the full series' lab up")
    ap.add_argument("--force", action="store_true", help="skip the free memory/disk check")
    ap.add_argument("--no-record", action="store_true", help="do not append to RESULTS.md")
    a = ap.parse_args(argv)
    a.scale_nodes = [int(x) for x in a.scale_nodes.split(",") if x]
    a.tagged_roles = [x for x in a.tagged_roles.split(",") if x]
    a.strategies = [x for x in a.strategies.split(",") if x]
    if not set(a.strategies) <= {"linear", "mitogen", "base"} or not a.strategies:
        raise SystemExit("--strategies: linear, mitogen, base")
    if "base" in a.strategies and not a.base_tree:
        raise SystemExit("--strategies base needs --base-tree")
    a.scale_tags = a.scale_tags or None
    series = [s.strip() for s in a.series.split(",") if s.strip()]

    bl.stop_cleanly_on_sigterm()
    stamp = bl.utc_stamp()
    logs = bl.ROOT / ".cache" / "bench-logs" / f"converge-{stamp}"
    bl.ensure_collection_link()
    m = bl.machine()
    data: dict = {"benchmark": "converge", "stamp": stamp, "date": bl.utc_now(), "machine": m,
                  "load_start": bl.loadavg(), "other_containers_start": bl.other_labs(),
                  "logs": str(logs.relative_to(bl.ROOT))}
    rows: list[dict] = []
    ok = True
    if "full" in series:
        f = data["full"] = series_full(a, stamp, logs)
        ok &= f["goal_met"]
        rows += [{"series": "full", "nodes": f["nodes"], "tags": "all", "step": "converge (fresh)",
                  "seconds": f["converge"]["seconds"], "changed": f["converge"]["recap"]["changed"],
                  "load1_start": f["converge"]["load_start"][0], "load1_end": f["converge"]["load_end"][0]},
                 {"series": "full", "nodes": f["nodes"], "tags": "all", "step": "no-op re-run",
                  "seconds": f["noop"]["seconds"], "changed": f["noop"]["recap"]["changed"],
                  "load1_start": f["noop"]["load_start"][0], "load1_end": f["noop"]["load_end"][0]},
                 {"series": "full", "nodes": f["nodes"], "tags": "-", "step": "ping floor (median of 6)",
                  "seconds": f["ping_floor_s"]}]
    if "noop" in series:
        n = data["noop"] = series_noop(a, stamp, logs)
        ok &= n["goal_met"]
        for name in a.strategies:
            rows.append({"series": "noop", "nodes": n["nodes"],
                         "tags": "all", "step": f"no-op {name} (median of {a.rounds})", "seconds": n[f"{name}_s"],
                         "changed": n[f"{name}_changed"], "over_ping": n[f"{name}_over_ping"]})
        rows.append({"series": "noop", "nodes": "-", "tags": "-", "step": "ping floor (median of 6)",
                     "seconds": n["ping_floor_s"]})
    if "tagged" in series:
        t = data["tagged"] = series_tagged(a, stamp, logs)
        ok &= t["goal_met"]
        for name, secs in t["seconds"].items():
            rows.append({"series": "tagged", "nodes": "-", "tags": name, "step": f"re-run (median of {a.rounds})",
                         "seconds": secs, "changed": t["changed"][name], "over_ping": t["over_noop"].get(name, 1.0)})
    if "scale" in series:
        s = data["scale"] = series_scale(a, stamp, logs)
        ok &= s["goal_met"]
        for n, r in s["sizes"].items():
            for step, key in (("converge (fresh)", "converge"), ("no-op re-run", "noop")):
                rows.append({"series": "scale", "nodes": int(n), "tags": a.scale_tags or "all", "step": step,
                             "seconds": r[key]["seconds"], "changed": r[key]["recap"]["changed"],
                             "load1_start": r[key]["load_start"][0], "load1_end": r[key]["load_end"][0]})
            rows.append({"series": "scale", "nodes": int(n), "tags": "-", "step": "ping floor (median of 6)",
                         "seconds": r["ping_floor_s"]})
    data["load_end"] = bl.loadavg()
    data["goal_met"] = ok
    bl.write_results("converge", stamp, data, rows)

    print(f"\nconverge benchmark {data['date']} ({bl.machine_short(m)}), load {data['load_start']} -> {data['load_end']}")
    if "full" in data:
        f = data["full"]
        print(f"  full site.yml, {f['nodes']} fresh nodes: converge {f['converge']['seconds']} s, "
              f"no-op {f['noop']['seconds']} s (changed={f['noop_changed']}), ping floor {f['ping_floor_s']} s "
              f"-> {f['noop_over_ping']}x (goal <= {NOOP_GOAL}x: {'MET' if f['goal_met'] else 'NOT met'})")
        for name, secs, runs in f["noop"].get("top_tasks_s", [])[:10]:
            print(f"      {secs:6.2f}s  {runs}x  {name}")
    if "noop" in data:
        n = data["noop"]
        each = ", ".join(f"{k} {n[k + '_s']} s ({n[k + '_over_ping']}x ping)" for k in a.strategies)
        ratio = f"; mitogen/linear {n['mitogen_over_linear']}" if "mitogen_over_linear" in n else ""
        ratio += f"; linear/base {n['linear_over_base']}" if "linear_over_base" in n else ""
        print(f"  no-op site.yml on {n['nodes']} nodes ({n['inventory']}), median of {n['rounds']}: {each}{ratio} "
              f"(goal <= {NOOP_STRATEGY_GOAL}x: {'MET' if n['goal_met'] else 'NOT met'})")
    if "tagged" in data:
        t = data["tagged"]
        each = ", ".join(f"--tags {n} {t['seconds'][n]} s ({t['over_noop'][n]}x)" for n in a.tagged_roles)
        print(f"  tagged re-runs ({t['inventory']}), median of {t['rounds']}: no-op site.yml {t['seconds']['all']} s; "
              f"{each} (goal <= {TAGGED_GOAL:g}x: {'MET' if t['goal_met'] else 'NOT met'})")
    if "scale" in data:
        s = data["scale"]
        for n, r in s["sizes"].items():
            runs = ", ".join(str(x["seconds"]) for x in r.get("noop_runs", [r["noop"]]))
            print(f"  scale {n:>2} nodes [{s['tags']}]: converge {r['converge']['seconds']} s, no-op "
                  f"{r['noop']['seconds']} s (median of {runs}; changed={r['noop']['recap']['changed']}), "
                  f"ping {r['ping_floor_s']} s")
        print(f"  scale ratio {s['ratio_max_over_min']}x (goal <= {SCALE_GOAL}x: {'MET' if s['goal_met'] else 'NOT met'})")

    if not a.no_record:
        load = f"{data['load_start'][0]}→{data['load_end'][0]}"

        def on_lab_command(series, run, option, values):
            # the noop and tagged series time a lab that is already up (--inventory, --rounds of the run)
            return (f"benchmarks/converge.py --series {series} --inventory {run['inventory']} --rounds {run['rounds']} "
                    f"{option} {','.join(values)}")

        def record(benchmark, command, numbers, goal, met, row_load=load):
            bl.append_results_md({"date": data["date"], "benchmark": benchmark, "machine": bl.machine_short(m),
                                  "load": row_load, "command": command, "numbers": numbers, "goal": goal,
                                  "met": "yes" if met else "**no**"})

        if "full" in data:
            f = data["full"]
            record(f"converge no-op vs ping (#12), {f['nodes']} nodes, full site.yml",
                   "benchmarks/converge.py --series full",
                   (f"fresh converge {f['converge']['seconds']} s; no-op {f['noop']['seconds']} s "
                    f"(changed={f['noop_changed']}); ping floor {f['ping_floor_s']} s → "
                    f"**{f['noop_over_ping']}×**"),
                   f"no-op ≤ {NOOP_GOAL:g}× ping", f["goal_met"],
                   row_load=f"{f['converge']['load_start'][0]}→{f['noop']['load_end'][0]}")
        if "noop" in data:
            n = data["noop"]
            each = "; ".join(f"{k} {n[k + '_s']} s (**{n[k + '_over_ping']}×** ping, changed={n[k + '_changed']})"
                             for k in a.strategies)
            ratio = f"; mitogen ÷ linear {n['mitogen_over_linear']}×" if "mitogen_over_linear" in n else ""
            ratio += (f"; this tree ÷ base ({n['base_tree']}) {n['linear_over_base']}×"
                      if "linear_over_base" in n else "")
            record(f"no-op site.yml, {' vs '.join(a.strategies)} (#19), {n['nodes']} nodes",
                   on_lab_command("noop", n, "--strategies", a.strategies),
                   f"{each}; ping floor {n['ping_floor_s']} s{ratio}",
                   f"no-op ≤ {NOOP_STRATEGY_GOAL:g}× ping", n["goal_met"])
        if "tagged" in data:
            t = data["tagged"]
            each = "; ".join(f"--tags {n} {t['seconds'][n]} s (**{t['over_noop'][n]}×**, changed={t['changed'][n]})"
                             for n in a.tagged_roles)
            record("tagged re-runs vs the no-op site.yml (#38 item 7)",
                   on_lab_command("tagged", t, "--tagged-roles", a.tagged_roles),
                   f"no-op {t['seconds']['all']} s (changed={t['changed']['all']}); {each}",
                   f"each ≤ {TAGGED_GOAL:g}× no-op", t["goal_met"])
        if "scale" in data:
            s = data["scale"]
            nums = "; ".join(f"{n}: no-op {r['noop']['seconds']} s (median of "
                             f"{', '.join(str(x['seconds']) for x in r.get('noop_runs', [r['noop']]))}; "
                             f"ping {r['ping_floor_s']} s, converge {r['converge']['seconds']} s)"
                             for n, r in s["sizes"].items())
            record(f"converge scale (#12), tags {s['tags'] or 'all'}",
                   "benchmarks/converge.py --series scale --scale-tags " + (s["tags"] or "''"),
                   nums + f" → **{s['ratio_max_over_min']}×**",
                   f"{max(a.scale_nodes)}-node ≤ {SCALE_GOAL:g}× {min(a.scale_nodes)}-node", s["goal_met"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
