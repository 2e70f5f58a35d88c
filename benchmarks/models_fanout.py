"""Benchmark: a generated multi-GB model onto N nodes via the fabric path vs the controller path of
the REAL models role, on a lab of network namespaces built here (not the shared sim lab).

Hosts are network namespaces on this machine (root needed): each node lfbI has a "management" veth
on bridge lfb-mgmt (10.242.0.I/24; the controller is 10.242.0.254 on that bridge) and a "fabric"
veth on bridge lfb-fab (10.242.1.I/24; the controller has no address there). An sshd per namespace
listens on both addresses. The management network is shaped to a real LAN, 1 Gbit/s (tc tbf on the
bridge's egress = the controller's NIC, and on every node's management interface = the nodes'
NICs); the fabric is left unshaped (the lab's 200 Gb/s link is faster than this machine's disk).
Each node gets its own models_dir, key dir and authorized_keys (host vars): the filesystem is shared.

    sudo python3 benchmarks/models_fanout.py run --nodes 4 8 --size-gb 4 --out benchmarks/results/models_fanout.json
    sudo python3 benchmarks/models_fanout.py down        # removes namespaces, bridges, files
    python3 benchmarks/models_fanout.py up --nodes 3 --no-shape   # (the integration test uses this)

Every ansible-playbook run is bounded (--timeout per command) and the lab is removed at the end.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# LFB_PREFIX / LFB_NET / LFB_DIR let a second lab (the integration test's) exist beside this one
PREFIX = os.environ.get("LFB_PREFIX", "lfb")
NET = os.environ.get("LFB_NET", "10.242")
BASE = Path(os.environ.get("LFB_DIR", f"/var/tmp/{PREFIX}bench"))
MGMT, FAB = f"{PREFIX}-mgmt", f"{PREFIX}-fab"
CONTROLLER_IP = f"{NET}.0.254"
RATE = "1gbit"
MODEL = "bench-model"


def sh(*argv, check=True, ns=None, **kw):
    cmd = (["ip", "netns", "exec", ns] if ns else []) + [str(a) for a in argv]
    return subprocess.run(cmd, check=check, text=True, capture_output=True, **kw)


def node(i):
    return f"{PREFIX}{i}"


def mgmt_ip(i):
    return f"{NET}.0.{i}"


def fab_ip(i):
    return f"{NET}.1.{i}"


def ndir(i):
    return BASE / node(i)


def up(nodes, shape=True):
    down(quiet=True)
    BASE.mkdir(parents=True, exist_ok=True)
    Path("/run/sshd").mkdir(exist_ok=True)
    key = BASE / "controller_ed25519"
    sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key)
    for bridge in (MGMT, FAB):
        sh("ip", "link", "add", bridge, "type", "bridge")
        sh("ip", "link", "set", bridge, "up")
    sh("ip", "addr", "add", f"{CONTROLLER_IP}/24", "dev", MGMT)
    if shape:
        # the controller's NIC: everything it sends to the nodes
        sh("tc", "qdisc", "add", "dev", MGMT, "root", "tbf", "rate", RATE, "burst", "512kb", "latency", "50ms")
    for i in range(1, nodes + 1):
        ns, d = node(i), ndir(i)
        (d / "models").mkdir(parents=True)
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "set", "lo", "up", ns=ns)
        for kind, bridge, ip in (("m", MGMT, mgmt_ip(i)), ("f", FAB, fab_ip(i))):
            outer, inner = f"{PREFIX}{kind}{i}", "mgmt" if kind == "m" else "fab"
            sh("ip", "link", "add", outer, "type", "veth", "peer", "name", f"{outer}x")
            sh("ip", "link", "set", f"{outer}x", "netns", ns)
            sh("ip", "link", "set", f"{outer}x", "name", inner, ns=ns)
            sh("ip", "addr", "add", f"{ip}/24", "dev", inner, ns=ns)
            sh("ip", "link", "set", inner, "up", ns=ns)
            sh("ip", "link", "set", outer, "master", bridge)
            sh("ip", "link", "set", outer, "up")
        if shape:
            # the node's NIC on the management LAN (what it sends to the controller)
            sh("tc", "qdisc", "add", "dev", "mgmt", "root", "tbf", "rate", RATE, "burst", "512kb",
               "latency", "50ms", ns=ns)
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", d / "ssh_host_ed25519_key")
        shutil.copy(f"{key}.pub", d / "authorized_keys")
        os.chmod(d / "authorized_keys", 0o600)
        (d / "sshd_config").write_text(
            f"ListenAddress {mgmt_ip(i)}\nListenAddress {fab_ip(i)}\nHostKey {d}/ssh_host_ed25519_key\n"
            f"PidFile {d}/sshd.pid\nAuthorizedKeysFile {d}/authorized_keys\nPermitRootLogin prohibit-password\n"
            f"PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
            f"MaxStartups 100\nSubsystem sftp internal-sftp\n")
        sh("/usr/sbin/sshd", "-f", d / "sshd_config", ns=ns)
    write_inventory(nodes)
    for i in range(1, nodes + 1):   # wait for every sshd
        for _attempt in range(50):
            if sh("ssh", "-i", key, "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                  "-o", "BatchMode=yes", "-o", "ConnectTimeout=2", f"root@{mgmt_ip(i)}", "true", check=False).returncode == 0:
                break
            time.sleep(0.2)
        else:
            raise SystemExit(f"sshd of {node(i)} does not answer on {mgmt_ip(i)}")


def write_inventory(nodes):
    hosts = {}
    for i in range(1, nodes + 1):
        d = ndir(i)
        hosts[node(i)] = {
            "ansible_host": mgmt_ip(i), "llmfleet_fabric_ip": fab_ip(i),
            "models_dir": f"{d}/models", "models_path": f"{d}/models/{MODEL}",
            "models_fabric_key_dir": f"{d}/fabric-key", "models_fabric_authorized_keys": f"{d}/authorized_keys",
            "models_fabric_host_key": f"{d}/ssh_host_ed25519_key.pub"}
    inv = {"all": {
        "vars": {"ansible_user": "root", "ansible_ssh_private_key_file": str(BASE / "controller_ed25519"),
                 # throwaway namespaces with fresh host keys each run (as the sim's inventory does)
                 "ansible_ssh_common_args": "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null",
                 "ansible_python_interpreter": "/usr/bin/python3", "llmfleet_cluster": "lfbench",
                 # the role's common dependency would make a service account on this (shared) machine
                 "common_applied": True, "llmfleet_gpu_arch": "sm_121",
                 "models_profile": {"name": "bench", "model": MODEL}, "models_files": [],
                 "models_source": "path", "models_cache": str(BASE / "controller-cache"),
                 "models_verify_hashes": False, "models_min_free_gb": 1},
        "children": {"ray_head": {"hosts": {node(1): hosts[node(1)]}},
                     "ray_workers": {"hosts": dict(list(hosts.items())[1:])}}}}
    (BASE / "inventory.json").write_text(json.dumps(inv, indent=1))


def our_sshds():
    """PIDs of the sshds this lab started: their command line names a config under BASE."""
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if cmd.startswith("/usr/sbin/sshd -f ") and f"{BASE}/{PREFIX}" in cmd or \
                    cmd.startswith(f"sshd: /usr/sbin/sshd -f {BASE}/{PREFIX}"):
                pids.append(int(proc.name))
    return pids


def down(quiet=False):
    for pid in our_sshds():
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
    names = sh("ip", "netns", "list", check=False).stdout.split()
    for ns in [n for n in names if re.fullmatch(rf"{PREFIX}\d+", n)]:
        # every process left in the namespace: the sshds' sessions ("sshd: root@notty") do not match
        # our_sshds() and would outlive the namespace
        for pid in sh("ip", "netns", "pids", ns, check=False).stdout.split():
            try:
                os.kill(int(pid), signal.SIGTERM)
            except OSError:
                pass
        sh("ip", "netns", "del", ns, check=False)
    links = sh("ip", "-o", "link", "show", check=False).stdout
    for name in re.findall(rf"^\d+: ({PREFIX}(?:-mgmt|-fab|[mf]\d+))[@:]", links, re.M):
        sh("ip", "link", "del", name, check=False)
    if BASE.exists():
        shutil.rmtree(BASE)
    if not quiet:
        print("lab removed")


def generate(size_gb, files=4):
    """Random weights (incompressible) in `files` shards + a config on lfb1: the source copy."""
    d = ndir(1) / "models" / MODEL
    d.mkdir(parents=True, exist_ok=True)
    per = int(size_gb * (1 << 30)) // files
    for k in range(files):
        path = d / f"model-{k + 1:05d}-of-{files:05d}.safetensors"
        if not path.exists() or path.stat().st_size != per:
            # openssl's AES-CTR stream is random-looking and far faster than /dev/urandom
            subprocess.run(f"openssl enc -aes-256-ctr -pass pass:{k} -nosalt -pbkdf2 </dev/zero 2>/dev/null "
                           f"| head -c {per} > {path}", shell=True, check=True)
    (d / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "bench": True}))
    return per * files


def counters():
    def read(dev, what):
        return int(Path(f"/sys/class/net/{dev}/statistics/{what}").read_text())
    ports = [p.name for p in Path("/sys/class/net").iterdir() if re.fullmatch(rf"{PREFIX}f\d+", p.name)]
    return {"controller_mgmt_bytes": read(MGMT, "rx_bytes") + read(MGMT, "tx_bytes"),
            "fabric_bytes": sum(read(p, "tx_bytes") for p in ports)}


def wipe_copies(nodes):
    for i in range(2, nodes + 1):
        shutil.rmtree(ndir(i) / "models" / MODEL, ignore_errors=True)
    shutil.rmtree(BASE / "controller-cache", ignore_errors=True)


def play(nodes, distribution, timeout, extra=None):
    playbook = BASE / "models.yml"
    playbook.write_text("- name: Models\n  hosts: all\n  gather_facts: false\n  roles:\n    - role: llmfleet.cluster.models\n")
    timeline = BASE / "timeline.json"
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_CACHE_PLUGIN="memory",
               ANSIBLE_CALLBACK_PLUGINS=str(ROOT / "benchmarks/callback_plugins"),
               ANSIBLE_CALLBACKS_ENABLED="llmfleet_timeline", LLMFLEET_TIMELINE_FILE=str(timeline),
               ANSIBLE_COLLECTIONS_PATH=str(ROOT / ".build/collections"), ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_SSH_CONTROL_PATH_DIR=str(BASE / "cp"))
    argv = [str(ROOT / ".venv/bin/ansible-playbook"), "-i", str(BASE / "inventory.json"), str(playbook),
            "-e", json.dumps(dict({"models_distribution": distribution}, **(extra or {}))),
            "--limit", ",".join(node(i) for i in range(1, nodes + 1))]
    before, start = counters(), time.monotonic()
    try:
        res = subprocess.run(argv, env=env, text=True, capture_output=True, timeout=timeout, check=False)
        rc, out = res.returncode, res.stdout + res.stderr
    except subprocess.TimeoutExpired as exc:
        rc, out = 124, (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
    seconds = time.monotonic() - start
    after = counters()
    changed = sum(int(m) for m in re.findall(r"changed=(\d+)", out))
    return {"nodes": nodes, "distribution": distribution, "rc": rc, "seconds": round(seconds, 1),
            "copy_seconds": copy_phase(timeline), "changed": changed,
            **{k: after[k] - before[k] for k in after}}, out


# The byte-moving phase, from the task starts the timeline callback records: the fabric rounds, or
# the controller's fetch from the source node + its copies to the nodes (both end where the copies
# are verified). The rest of a run is Ansible's own per-task cost, the same on both paths.
COPY_START = ("Pull the model from this round's sender over the fabric",
              "Fetch the files some node lacks from the source node to the controller")
COPY_END = "Verify the copied files"


def copy_phase(timeline):
    try:
        tasks = json.loads(timeline.read_text())["tasks"]
        timeline.unlink()
    except (OSError, ValueError, KeyError):
        return None
    starts = [t["start"] for t in tasks if any(t["task"].endswith(n) for n in COPY_START)]
    ends = [t["start"] for t in tasks if t["task"].endswith(COPY_END)]
    return round(ends[-1] - starts[0], 1) if starts and ends else None


def run(args):
    results = []
    try:
        for nodes in args.nodes:
            up(nodes, shape=not args.no_shape)
            size = generate(args.size_gb)
            for distribution in args.paths:
                wipe_copies(nodes)
                res, out = play(nodes, distribution, args.timeout)
                res["model_bytes"] = size
                if res["rc"] != 0:
                    (BASE.parent / f"{PREFIX}bench-{nodes}-{distribution}.log").write_text(out)
                if distribution == "fabric" and res["rc"] == 0:
                    again, out2 = play(nodes, distribution, args.timeout)
                    res["second_run_changed"] = again["changed"]
                    res["second_run_seconds"] = again["seconds"]
                print(json.dumps(res), flush=True)
                results.append(res)
            down(quiet=True)
    finally:
        down(quiet=True)
    if args.out:
        Path(args.out).write_text(json.dumps({"size_gb": args.size_gb, "shaped": not args.no_shape,
                                              "rate": RATE, "results": results}, indent=1) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p_up = sub.add_parser("up")
    p_up.add_argument("--nodes", type=int, default=3)
    p_up.add_argument("--no-shape", action="store_true")
    sub.add_parser("down")
    p_run = sub.add_parser("run")
    p_run.add_argument("--nodes", type=int, nargs="+", default=[4, 8])
    p_run.add_argument("--paths", nargs="+", default=["fabric", "controller"])
    p_run.add_argument("--size-gb", type=float, default=4)
    p_run.add_argument("--timeout", type=int, default=900, help="seconds per ansible-playbook run")
    p_run.add_argument("--no-shape", action="store_true")
    p_run.add_argument("--out")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (network namespaces, tc, sshd)")
    if args.cmd == "up":
        up(args.nodes, shape=not args.no_shape)
        print(BASE / "inventory.json")
    elif args.cmd == "down":
        down()
    else:
        run(args)


if __name__ == "__main__":
    main()
