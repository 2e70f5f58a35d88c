# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Engine stack install on 4 sim nodes: cluster wheelhouse vs each node resolving from PyPI.

Issue #4, "must show": installing the sim stack (vLLM CPU 0.32.0, torch 2.13.0+cpu, Ray 2.60.0 and
their ~150 dependencies; roles/python_env/vars/variants/cpu.yml) on 4 nodes from the cluster
wheelhouse is at least 3x faster than each node resolving from the registry. Both sides run in one
invocation, on the same fresh lab, one after the other (never at the same time: they would share
the 2 CPU cores), and end with the same package set (checked per node at the end).

  wheelhouse side = the collection's real path, timed as a whole, in two passes:
      ansible-playbook playbooks/python_env.yml --tags python_env_install
    i.e. the controller's wheelhouse check (build_wheelhouse.py: up to date, cached under
    $LLMFLEET_CACHE/wheelhouse/cpu-vllm-0.32.0), the lock and manifest to every node, and the
    venv install the role chooses per node (module_utils/venv_archive.py), plus Ansible's overhead:
    - "first": this release's first install, no venv archive on the controller yet: one node gets
      the wheels (rsync), bootstraps uv, runs the offline `uv pip sync --require-hashes
      --compile-bytecode` from lock.txt and packs the new venv (tar + zstd), the archive is pulled
      to the controller, and the other nodes get it and unpack it.
    - "cached": every node wiped back to a fresh node (/opt/llmfleet removed, untimed), the same
      command again with the archive on the controller: every node copies and unpacks it. That is
      the install of every further node, rebuilt node or cluster of this release, and the number
      the goal is judged on: the archive, like the wheelhouse itself, is made once per
      (arch, release) and cached on the controller.
    The one-off wheelhouse build (resolve + download on the controller) is measured separately
    with --cold-build (a fresh directory, pip cache off) and reported as its own number. At the
    end a sha256 over every file of each node's venv shows whether they are byte-identical.

  registry side = every node on its own, all 4 in parallel, no shared or warm cache:
      python3 -m venv boot && boot/bin/pip install uv==0.13.9          (from PyPI)
      boot/bin/uv venv venv
      boot/bin/uv pip install -r requirements.in --excludes excludes.txt --exclude-newer ...
          --index-url https://pypi.org/simple --find-links local/ --compile-bytecode
          --link-mode hardlink   (uv's default; the role copies, which costs more: this favours
                                  the registry side, and keeps the disk use of 4 nodes in bounds)
    with the same package specs, excludes and exclude-newer date as the wheelhouse build. uv is
    the registry installer (pip resolves this set far slower: uv is the stronger baseline).
    torch 2.13.0+cpu is not on PyPI (its home is the PyTorch CPU index, unreachable here): it and
    the 1 KB `vllm` alias wheel are rsynced from the controller to each node as `local/`, and that
    copy is timed on the registry side. A local copy is faster than a download would be, so
    this favours the registry side.

Untimed set-up on both sides: lab up, the variant's apt packages on every node (the role's apt
task then finds them present: no apt traffic in either timing), and, for the registry side, the
controller's CA bundle on every node (--ca-bundle; egress here goes through a TLS-inspecting
proxy whose CA the controller trusts; the wheelhouse side needs no registry access at all).

  benchmarks/wheelhouse_vs_registry.py [--nodes 4] [--lab bench] [--cold-build] [--keep-lab]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib as bl  # noqa: E402

VARIANT = bl.ROOT / "roles" / "python_env" / "vars" / "variants" / "cpu.yml"
BUILDER = bl.ROOT / "roles" / "python_env" / "files" / "build_wheelhouse.py"
GOAL = 3.0
REG = "/opt/bench-registry"
# The controller's CA bundle, copied to the nodes untimed: where egress to the registry goes
# through a TLS-inspecting proxy, the nodes must trust what the controller trusts.
NODE_CA = "/opt/bench-ca.crt"

# What runs on each node for the registry side (a fresh directory, no cache anywhere).
REGISTRY_SCRIPT = r"""
set -eu
R={reg}
export UV_CACHE_DIR=$R/uv-cache PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 UV_NO_CONFIG=1
if [ -s {ca} ]; then export SSL_CERT_FILE={ca} PIP_CERT={ca}; fi
t0=$(date +%s.%N)
python3 -m venv $R/boot
$R/boot/bin/pip install -q --index-url {index} uv=={uv}
t1=$(date +%s.%N)
$R/boot/bin/uv venv -q --python /usr/bin/python3 $R/venv
$R/boot/bin/uv pip install -q --python $R/venv/bin/python --index-url {index} \
  --index-strategy first-index --find-links $R/local --excludes $R/excludes.txt \
  --exclude-newer {exclude_newer} --compile-bytecode --link-mode hardlink -r $R/requirements.in
t2=$(date +%s.%N)
awk "BEGIN {{ printf \"TIMES uv_bootstrap=%.1f resolve_download_install=%.1f\\n\", $t1 - $t0, $t2 - $t1 }}"
"""

LIST_PKGS = ("import importlib.metadata as m, json; print(json.dumps(sorted("
             "(d.metadata['Name'].lower().replace('_', '-'), d.version) for d in m.distributions())))")


def load_variant() -> dict:
    import yaml
    return yaml.safe_load(VARIANT.read_text())["python_env_variant"]


def ssh_base(hv: dict) -> list[str]:
    return ["ssh", "-i", str(Path(hv["ansible_ssh_private_key_file"]).expanduser()),
            "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
            "-o", "LogLevel=ERROR", "-o", "BatchMode=yes", f"root@{hv['ansible_host']}"]


def ssh(hv: dict, script: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(ssh_base(hv) + ["sh", "-c", shlex.quote(script)], text=True,
                          capture_output=True, check=False)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{hv['ansible_host']}: rc={proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return proc


def rsync_to(hv: dict, src: str, dest: str) -> None:
    rsh = " ".join(shlex.quote(x) for x in ssh_base(hv)[:-1])
    subprocess.run(["rsync", "-a", "-e", rsh, src, f"root@{hv['ansible_host']}:{dest}"],
                   check=True, capture_output=True, text=True)


def registry_node(host: str, hv: dict, staged: Path, variant: dict, out: dict) -> None:
    t0 = time.monotonic()
    try:
        ssh(hv, f"rm -rf {REG} && mkdir -p {REG}")
        # torch+cpu and the alias wheel (not on PyPI) + the requirement files: timed here
        rsync_to(hv, f"{staged}/", f"{REG}/")
        t_copy = time.monotonic() - t0
        script = REGISTRY_SCRIPT.format(reg=REG, ca=NODE_CA, index=variant.get("index_url", "https://pypi.org/simple"),
                                        uv=variant_uv(variant), exclude_newer=variant["exclude_newer"])
        proc = ssh(hv, script)
        times = {}
        for line in proc.stdout.splitlines():
            if line.startswith("TIMES "):
                times = {k: float(v) for k, v in (kv.split("=") for kv in line.split()[1:])}
        out[host] = {"ok": True, "seconds": time.monotonic() - t0, "copy_local_wheels_s": t_copy, **times}
    except Exception as exc:  # pylint: disable=broad-except  # reported per node
        out[host] = {"ok": False, "seconds": time.monotonic() - t0, "error": str(exc)[-3000:]}


def variant_uv(variant: dict) -> str:
    for p in variant["packages"]:
        if p.split("#")[0].strip().startswith("uv=="):
            return p.split("==", 1)[1].split()[0]
    raise SystemExit("the variant pins no uv")


def stage_registry_inputs(variant: dict, wheelhouse: Path, tmp: Path) -> Path:
    """local/ (torch+cpu + alias wheel), requirements.in, excludes.txt for the registry side."""
    manifest = json.loads((wheelhouse / "manifest.json").read_text())
    staged = tmp / "registry"
    (staged / "local").mkdir(parents=True)
    for w in manifest["wheels"]:
        if w["name"] in ("torch",) or w["name"] in manifest.get("aliases", []):
            (staged / "local" / w["file"]).hardlink_to(wheelhouse / w["file"])
    reqs = [p.split("#")[0].strip() for p in variant["packages"]]
    (staged / "requirements.in").write_text("\n".join(r for r in reqs if r) + "\n")
    (staged / "excludes.txt").write_text("\n".join(manifest["excludes"]) + "\n")
    return staged


def list_packages(hosts: dict, venv: str) -> dict:
    return {h: json.loads(ssh(hv, f"{venv}/bin/python -c {shlex.quote(LIST_PKGS)}").stdout)
            for h, hv in hosts.items()}


def package_sets(hosts: dict, venv_a: str, registry: dict) -> dict:
    res = {}
    wheelhouse = list_packages(hosts, venv_a)
    for h in hosts:
        sa, sb = {tuple(x) for x in wheelhouse[h]}, {tuple(x) for x in registry[h]}
        res[h] = {"wheelhouse_packages": len(sa), "registry_packages": len(sb),
                  "only_wheelhouse": sorted("==".join(x) for x in sa - sb),
                  "only_registry": sorted("==".join(x) for x in sb - sa)}
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--nodes", type=int, default=4)
    ap.add_argument("--lab", default="bench", choices=bl.LAB_NAMES)
    ap.add_argument("--cold-build", action="store_true",
                    help="also time a from-scratch wheelhouse build (new dir, no pip cache)")
    ap.add_argument("--keep-lab", action="store_true", help="leave the lab up afterwards")
    ap.add_argument("--ca-bundle", default=os.environ.get("SSL_CERT_FILE") or os.environ.get("PIP_CERT") or "",
                    help="CA bundle the nodes use to reach the registry (default: the controller's "
                         "$SSL_CERT_FILE / $PIP_CERT; '' = the nodes' own trust store)")
    ap.add_argument("--force", action="store_true", help="skip the free memory/disk check")
    ap.add_argument("--no-record", action="store_true", help="do not append to RESULTS.md")
    a = ap.parse_args(argv)

    bl.stop_cleanly_on_sigterm()
    stamp = bl.utc_stamp()
    logs = bl.ROOT / ".cache" / "bench-logs" / f"wheelhouse-{stamp}"
    variant = load_variant()
    cache = Path(bl.ansible_env(a.lab, stamp).get("LLMFLEET_CACHE") or Path.home() / ".cache" / "llmfleet")
    wh_name = f"{variant['arch']}-{variant['release']}"
    wheelhouse = cache / "wheelhouse" / wh_name
    data: dict = {"benchmark": "wheelhouse_vs_registry", "stamp": stamp, "date": bl.utc_now(),
                  "machine": bl.machine(), "nodes": a.nodes, "lab": a.lab, "variant": str(VARIANT.relative_to(bl.ROOT)),
                  "load_start": bl.loadavg(), "other_containers_start": bl.other_labs()}
    bl.ensure_collection_link()
    if not a.force:
        # peak per node: wheelhouse 0.7 GB + venv 2.7 GB + uv cache 2.4 GB
        bl.require_room(4, 28, "wheelhouse_vs_registry")
    data["mem_available_gib_start"] = round(bl.mem_available_gib(), 1)
    data["disk_free_gib_start"] = round(bl.disk_free_gib(), 1)
    env = bl.ansible_env(a.lab, stamp)
    inv = bl.lab_up(a.lab, a.nodes)
    try:
        hosts = bl.inventory_hosts(inv)
        # --- untimed set-up: the wheelhouse must exist (cached), system packages on the nodes
        bl.log("set-up: wheelhouse present/up to date, apt packages on the nodes (untimed)")
        bl.timed([str(bl.VENV_BIN / "python"), str(BUILDER), str(VARIANT), "--root", str(cache / "wheelhouse")],
                 logs / "0-wheelhouse-check.log", env=env)
        manifest = json.loads((wheelhouse / "manifest.json").read_text())
        pkgs = ",".join(variant["system_packages"] + ["rsync"])
        bl.timed(["ansible", "all", "-i", str(inv), "-m", "ansible.builtin.apt",
                  "-a", f"name={pkgs} state=present update_cache=true"], logs / "0-apt.log", env=env)

        if a.ca_bundle:
            bl.timed(["ansible", "all", "-i", str(inv), "-m", "ansible.builtin.copy",
                      "-a", f"src={a.ca_bundle} dest={NODE_CA} mode=0644"], logs / "0-ca.log", env=env)

        # --- registry side: each node resolves + downloads from PyPI, 4 in parallel
        with tempfile.TemporaryDirectory(prefix="bench-registry-", dir=bl.ROOT / ".cache") as tmp:
            staged = stage_registry_inputs(variant, wheelhouse, Path(tmp))
            bl.log(f"registry side: {len(hosts)} nodes resolving from {variant['index_url']} in parallel")
            load_reg0 = bl.loadavg()
            cpu_n0, cpu_c0 = bl.lab_cpu_seconds(a.lab), bl.children_cpu_seconds()
            per_node: dict = {}
            t0 = time.monotonic()
            threads = [threading.Thread(target=registry_node, args=(h, hv, staged, variant, per_node))
                       for h, hv in hosts.items()]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            t_registry = time.monotonic() - t0
            cpu_reg = (bl.lab_cpu_seconds(a.lab) - cpu_n0, bl.children_cpu_seconds() - cpu_c0)
        (logs / "1-registry.json").write_text(json.dumps(per_node, indent=1))
        failed = {h: r for h, r in per_node.items() if not r["ok"]}
        if failed:
            raise SystemExit(f"registry side failed: {json.dumps(failed, indent=1)}")
        bl.log(f"registry side: {t_registry:.1f}s")
        # its package set, then free the disk (untimed): the machine's disk is shared
        registry_sets = list_packages(hosts, f"{REG}/venv")
        for hv in hosts.values():
            ssh(hv, f"rm -rf {REG}")
        data["registry"] = {"seconds": round(t_registry, 1), "load_start": load_reg0, "load_end": bl.loadavg(),
                            "node_cpu_s": round(cpu_reg[0], 1), "controller_cpu_s": round(cpu_reg[1], 1),
                            "per_node": per_node,
                            "command": "uv pip install -r requirements.in --excludes ... --index-url "
                                       f"{variant['index_url']} --compile-bytecode (per node, fresh cache)"}

        # --- wheelhouse side: the collection's real path, the whole playbook timed, twice.
        # first: this release's first install (no venv archive yet: one node syncs from the
        # wheelhouse and packs, the others clone); then every node wiped back to a fresh node
        # (untimed) and installed again with the archive on the controller (what every further
        # node, rebuilt node or cluster of this release gets).
        venv_a = f"/opt/llmfleet/venvs/{release_of(inv, env, logs)}"
        with tempfile.TemporaryDirectory(prefix="bench-venv-archives-", dir=bl.ROOT / ".cache") as adir:
            for n, label in enumerate(("first", "cached")):
                if label == "cached":
                    data["trees_first"] = venv_trees(hosts, venv_a)
                    for hv in hosts.values():
                        ssh(hv, "rm -rf /opt/llmfleet")
                data[f"wheelhouse_{label}"] = wheelhouse_pass(a, inv, env, logs, n, label, adir)
        data["wheelhouse"] = data["wheelhouse_cached"]
        data["wheelhouse"].update(wheelhouse_bytes=manifest["total_bytes"], packages=manifest["packages"])
        data["trees_cached"] = venv_trees(hosts, venv_a)
        data["byte_identical_venvs"] = (len(set(data["trees_first"].values())) == 1
                                        and data["trees_first"] == data["trees_cached"])

        # --- same end state?
        sets = package_sets(hosts, venv_a, registry_sets)
        data["package_sets"] = sets
        identical = all(not s["only_wheelhouse"] and not s["only_registry"] for s in sets.values())
        data["identical_sets"] = identical

        # --- optional: the one-off cold build of the wheelhouse on the controller
        if a.cold_build:
            with tempfile.TemporaryDirectory(prefix="bench-wh-cold-", dir=bl.ROOT / ".cache") as tmp:
                bl.log("cold wheelhouse build (fresh dir, no pip cache)")
                cenv = dict(env, PIP_NO_CACHE_DIR="1", UV_NO_CACHE="1")
                t_cold, _rc, _o = bl.timed([str(bl.VENV_BIN / "python"), str(BUILDER), str(VARIANT),
                                            "--out", str(Path(tmp) / wh_name), "--force"],
                                           logs / "5-cold-build.log", env=cenv)
            data["cold_build_seconds"] = round(t_cold, 1)
    finally:
        if not a.keep_lab:
            bl.lab_down(a.lab)
    data["load_end"] = bl.loadavg()
    data["ratio"] = round(data["registry"]["seconds"] / data["wheelhouse"]["seconds"], 2)
    data["ratio_first_install"] = round(data["registry"]["seconds"] / data["wheelhouse_first"]["seconds"], 2)
    if "cold_build_seconds" in data:
        data["ratio_incl_cold_build"] = round(
            data["registry"]["seconds"] / (data["wheelhouse"]["seconds"] + data["cold_build_seconds"]), 2)
    data["goal"] = f"registry / wheelhouse (release archive cached, like the wheelhouse) >= {GOAL}"
    data["goal_met"] = data["ratio"] >= GOAL and identical and data["byte_identical_venvs"]
    data["logs"] = str(logs.relative_to(bl.ROOT))

    data["cpu_ratio"] = round(data["registry"]["node_cpu_s"] / max(data["wheelhouse"]["node_cpu_s"], 0.1), 2)
    rows = [{"side": "registry", "nodes": a.nodes, "seconds": data["registry"]["seconds"],
             "node_cpu_s": data["registry"]["node_cpu_s"], "controller_cpu_s": data["registry"]["controller_cpu_s"],
             "load1_start": data["registry"]["load_start"][0], "load1_end": data["registry"]["load_end"][0]}]
    for label in ("first", "cached"):
        w = data[f"wheelhouse_{label}"]
        rows.append({"side": f"wheelhouse, {label}", "nodes": a.nodes, "seconds": w["seconds"],
                     "node_cpu_s": w["node_cpu_s"], "controller_cpu_s": w["controller_cpu_s"],
                     "load1_start": w["load_start"][0], "load1_end": w["load_end"][0],
                     "actions": " ".join(f"{h}={x}" for h, x in sorted(w["actions"].items())),
                     **{f"{k}_task_s": v for k, v in w["steps_s"].items()}})
    bl.write_results("wheelhouse_vs_registry", stamp, data, rows)

    print(f"\nwheelhouse vs registry, {a.nodes} nodes, {manifest['packages']} packages "
          f"({manifest['total_bytes'] / 1e6:.0f} MB of wheels)")
    print(f"  registry   (uv, PyPI, per node, parallel)   {data['registry']['seconds']:8.1f} s")
    for label, what in (("first", "first install, no archive yet"), ("cached", "archive cached")):
        w = data[f"wheelhouse_{label}"]
        print(f"  wheelhouse ({what:30s}) {w['seconds']:8.1f} s   [{fmt_steps(w)}]")
        print(f"      actions: {w['actions']}")
    if "cold_build_seconds" in data:
        print(f"  wheelhouse cold build, once               {data['cold_build_seconds']:8.1f} s"
              f"   ratio incl. it: {data['ratio_incl_cold_build']}x")
    print(f"  CPU time on the nodes: registry {data['registry']['node_cpu_s']} s, wheelhouse "
          f"{data['wheelhouse']['node_cpu_s']} s ({data['cpu_ratio']}x); controller: registry "
          f"{data['registry']['controller_cpu_s']} s, wheelhouse {data['wheelhouse']['controller_cpu_s']} s")
    print(f"  venv trees (sha256 of every file) identical on all nodes, first and cached: {data['byte_identical_venvs']}")
    print(f"  ratio first install {data['ratio_first_install']}x")
    print(f"  ratio {data['ratio']}x (goal >= {GOAL}x), identical package sets: {identical}"
          f" -> goal {'MET' if data['goal_met'] else 'NOT met'}")
    print(f"  load average start {data['load_start']} end {data['load_end']}")

    if not a.no_record:
        wf, wc = data["wheelhouse_first"], data["wheelhouse_cached"]
        nums = (f"registry {data['registry']['seconds']} s; wheelhouse, release archive cached {wc['seconds']} s "
                f"({fmt_steps(wc)}) → **{data['ratio']}×**; this release's first install (one node syncs and "
                f"packs, three clone) {wf['seconds']} s ({fmt_steps(wf)}) → {data['ratio_first_install']}×; node CPU "
                f"{data['registry']['node_cpu_s']} s vs {wc['node_cpu_s']} s (cached) / {wf['node_cpu_s']} s (first); "
                f"package sets identical: {identical}; venvs byte-identical: {data['byte_identical_venvs']}")
        if "cold_build_seconds" in data:
            nums += (f"; cold wheelhouse build once {data['cold_build_seconds']} s "
                     f"(→ {data['ratio_incl_cold_build']}× incl. it)")
        bl.append_results_md({
            "date": data["date"], "benchmark": f"wheelhouse vs registry (#4), {a.nodes} nodes",
            "machine": bl.machine_short(data["machine"]),
            "load": f"{data['load_start'][0]}→{data['load_end'][0]}",
            "command": "benchmarks/wheelhouse_vs_registry.py" + (" --cold-build" if a.cold_build else ""),
            "numbers": nums, "goal": f"≥ {GOAL}×", "met": "yes" if data["goal_met"] else "**no**"})
    return 0 if data["goal_met"] else 1


# the role's tasks whose time is reported per pass (found inside profile_tasks' role-prefixed names)
STEPS = {"wheels_rsync": "Copy the wheels to the nodes", "uv_sync": "Sync the venv to the lock",
         "pack": "Pack the new venv", "fetch": "Fetch the archive to the controller",
         "archive_copy": "Copy the release's venv archive", "unpack": "Unpack the archive"}
PLAN_TASK = "Choose how each node gets its venv"


def wheelhouse_pass(a, inv: Path, env: dict, logs: Path, n: int, label: str, archive_dir: str) -> dict:
    bl.log(f"wheelhouse side ({label}): ansible-playbook playbooks/python_env.yml --tags python_env_install")
    load0 = bl.loadavg()
    cpu_n0, cpu_c0 = bl.lab_cpu_seconds(a.lab), bl.children_cpu_seconds()
    penv = dict(env, ANSIBLE_CALLBACKS_ENABLED="ansible.posix.profile_tasks")
    cmd = ["ansible-playbook", "-i", str(inv), "playbooks/python_env.yml", "--tags", "python_env_install",
           "-e", f"python_env_venv_archive_dir={archive_dir}", "-v"]
    t, _rc, out = bl.timed(cmd, logs / f"{2 + n}-wheelhouse-{label}.log", env=penv)
    cpu = (bl.lab_cpu_seconds(a.lab) - cpu_n0, bl.children_cpu_seconds() - cpu_c0)
    bl.log(f"wheelhouse side ({label}): {t:.1f}s")
    top = bl.profile_top(out, 40)
    return {"seconds": round(t, 1), "load_start": load0, "load_end": bl.loadavg(),
            "node_cpu_s": round(cpu[0], 1), "controller_cpu_s": round(cpu[1], 1),
            "command": " ".join(cmd), "recap": bl.recap_totals(out), "top_tasks_s": top[:10],
            "steps_s": {k: next((s for name, s, _c in top if v in name), 0.0) for k, v in STEPS.items()},
            "actions": plan_actions(out)}


def fmt_steps(side: dict) -> str:
    return ", ".join(f"{k.replace('_', ' ')} {v} s" for k, v in side["steps_s"].items() if v)


def plan_actions(output: str) -> dict:
    """{host: none|clone|pack|sync} from the -v output of the role's plan task."""
    part = output.split(PLAN_TASK, 1)[-1].split("TASK [", 1)[0]
    return dict(re.findall(r"ok: \[([^\]]+)\] =>.*?python_env_install_action\"?: \"?(\w+)", part, re.S))


def venv_trees(hosts: dict, venv: str) -> dict:
    """sha256 over every file of the venv (path + content) per node, untimed."""
    script = (f"cd {venv} && find . -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16")
    return {h: ssh(hv, script).stdout.strip() for h, hv in hosts.items()}


def release_of(inv: Path, env: dict, logs: Path) -> str:
    """python_env_release of the first host, as Ansible resolves it (the venv directory name)."""
    _s, _rc, out = bl.timed(["ansible", "all", "-i", str(inv), "-l", "all[0]", "-m", "ansible.builtin.debug",
                             "-a", "var=llmfleet_release", "-o"], logs / "4-release.log", env=env)
    # spark1 | SUCCESS => {"changed": false, "llmfleet_release": "sim-vllm-0.32.0-cpu"}
    return json.loads(out.split("=>", 1)[1])["llmfleet_release"]


if __name__ == "__main__":
    sys.exit(main())
