# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The simulated lab: N systemd containers on two podman networks.

Each node is a Debian 12 rootfs (debootstrap + ``podman import``, no registry)
running real systemd, reached by Ansible over ssh on a *management* network.
A second *fabric* network stands in for the QSFP/200GbE links: its bridge
carries MTU 9000 while every node's fabric NIC is set back to 1500 at boot, as
on a fresh DGX Spark, so only the fabric role can make jumbo frames pass.
Podman does not keep interface names stable across nodes, so nothing here (or
in the collection) assumes a NIC name: NICs are found by their IP.

Usage:
  simlab.py image                      build the node image if its recipe changed
  simlab.py up [--nodes N] [--name L]  networks + containers + inventory
  simlab.py down [--name L]            remove containers and networks
  simlab.py inventory [--nodes N]      print the inventory for N nodes (YAML)
  simlab.py status [--name L]

Everything is named ``llmfleet-<lab>-*`` and only talks to addresses on the
networks it created.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STATE = Path(os.environ.get("LLMFLEET_LAB_STATE", ROOT / ".lab"))
SUITE = "bookworm"
MIRROR = os.environ.get("LLMFLEET_DEBIAN_MIRROR", "http://deb.debian.org/debian")

# What a node has before any role runs: what a freshly installed Spark/Thor
# (Ubuntu) would have, plus ssh for Ansible. libnuma1/g++/openssl are what the
# vLLM CPU build needs at run time; they are pre-seeded only to save CI
# minutes: the python_env role still declares and installs them.
PACKAGES = [
    "systemd", "systemd-sysv", "dbus", "openssh-server", "python3", "python3-apt",
    "sudo", "iproute2", "iputils-ping", "ca-certificates", "procps", "curl",
    "netplan.io", "systemd-resolved", "kmod", "less", "nftables",
    "libnuma1", "g++", "openssl", "python3-venv", "xz-utils", "rsync",
]

# Commands run inside the rootfs after debootstrap (chroot).
CUSTOMIZE = r"""
set -e
# Each container gets its own machine-id at first boot (empty file = generate).
: > /etc/machine-id
rm -f /var/lib/dbus/machine-id
# Units that make no sense (or hang) in a container.
for u in getty@tty1.service console-getty.service systemd-logind.service \
         systemd-udevd.service systemd-udev-trigger.service systemd-timesyncd.service \
         apt-daily.timer apt-daily-upgrade.timer e2scrub_reap.service; do
  ln -sf /dev/null /etc/systemd/system/$u
done
mkdir -p /root/.ssh && chmod 700 /root/.ssh
sed -i 's/^#\?PermitRootLogin.*/PermitRootLogin prohibit-password/' /etc/ssh/sshd_config
sed -i 's/^#\?UseDNS.*/UseDNS no/' /etc/ssh/sshd_config
# host keys are made per container at first boot
rm -f /etc/ssh/ssh_host_*
mkdir -p /etc/systemd/system/ssh.service.d
printf '[Service]\nExecStartPre=\nExecStartPre=/usr/bin/ssh-keygen -A\nExecStartPre=/usr/sbin/sshd -t\n' \
  > /etc/systemd/system/ssh.service.d/keygen.conf
# networkd/resolved stay off until the fabric role hands an interface to netplan.
systemctl disable systemd-networkd.service systemd-resolved.service 2>/dev/null || true
ln -sf /dev/null /etc/systemd/system/systemd-networkd-wait-online.service
echo 'deb http://deb.debian.org/debian bookworm main' > /etc/apt/sources.list
apt-get clean
rm -rf /var/lib/apt/lists/* /usr/share/doc/* /usr/share/man/*
# a fresh node has never run apt-get update: make apt's cache look stale, not 'just updated'
touch -d @0 /var/lib/apt/lists
"""

RECIPE_VERSION = "4"


def recipe_hash() -> str:
    h = hashlib.sha256()
    for part in (RECIPE_VERSION, SUITE, " ".join(PACKAGES), CUSTOMIZE):
        h.update(part.encode())
    return h.hexdigest()[:12]


def image_ref() -> str:
    return f"localhost/llmfleet-node:{recipe_hash()}"


def sh(*args: str, check: bool = True, capture: bool = False, **kw) -> subprocess.CompletedProcess:
    # check=False: a failure is raised below with the command's captured output, not as CalledProcessError.
    r = subprocess.run(list(args), text=True, check=False,
                       stdout=subprocess.PIPE if capture else None,
                       stderr=subprocess.PIPE if capture else None, **kw)
    if check and r.returncode != 0:
        # A captured command's own message is the diagnosis (CI once showed only "exit status 125").
        raise SystemExit(f"[simlab] {shlex.join(args)}: exit {r.returncode}\n{r.stdout or ''}{r.stderr or ''}")
    return r


def log(msg: str) -> None:
    print(f"[simlab] {msg}", flush=True)


# --------------------------------------------------------------------- image
def build_image(force: bool = False) -> str:
    ref = image_ref()
    if not force and sh("podman", "image", "exists", ref, check=False).returncode == 0:
        log(f"image {ref} is current")
        return ref
    log(f"building {ref} with debootstrap ({SUITE}); takes a few minutes once")
    work = Path(tempfile.mkdtemp(prefix="llmfleet-rootfs-"))
    rootfs = work / "rootfs"
    try:
        sh("debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}",
           SUITE, str(rootfs), MIRROR)
        sh("chroot", str(rootfs), "/bin/sh", "-c", CUSTOMIZE)
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "--numeric-owner", "-cf", "-", "."],
                               stdout=subprocess.PIPE)
        sh("podman", "import", "--change", 'CMD ["/sbin/init"]', "--change", "STOPSIGNAL=SIGRTMIN+3",
           "--change", "ENV=container=podman", "-", ref, stdin=tar.stdout)
        if tar.wait() != 0:
            raise SystemExit("tar of the rootfs failed")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    # keep only the current recipe's image
    out = sh("podman", "images", "--format", "{{.Repository}}:{{.Tag}}", capture=True).stdout
    for line in out.split():
        if line.startswith("localhost/llmfleet-node:") and line != ref:
            sh("podman", "rmi", "-f", line, check=False)
    log(f"built {ref}")
    return ref


# --------------------------------------------------------------------- layout
def lab_index(name: str) -> int:
    """A stable small number per lab name, so several labs get disjoint subnets."""
    return 0 if name == "sim" else 1 + int(hashlib.sha256(name.encode()).hexdigest(), 16) % 60


def nodes_for(count: int) -> list[dict]:
    """Up to four: spark1..sparkK + thor1..thorK (half GB10, half Thor), as in the notes' lab. More:
    those four keep their places (and addresses), then spark3, thor3, spark4, ... (the sim's
    replicas of the real model run on spark3 and thor3)."""
    if count < 2:
        raise SystemExit("--nodes must be at least 2")
    first = min(count, 4)
    sparks = (first + 1) // 2
    names = [f"spark{i}" for i in range(1, sparks + 1)] + [f"thor{i}" for i in range(1, first - sparks + 1)]
    names += [f"{'spark' if k % 2 == 0 else 'thor'}{3 + k // 2}" for k in range(count - first)]
    return [{"name": n, "index": i, "arch": "sm_121" if n.startswith("spark") else "sm_110"}
            for i, n in enumerate(names)]


def subnets(name: str) -> tuple[str, str]:
    k = lab_index(name)
    return f"10.231.{2 * k}", f"10.231.{2 * k + 1}"


def layout(name: str, count: int) -> list[dict]:
    mgmt, fabric = subnets(name)
    nodes = nodes_for(count)
    for n in nodes:
        n["mgmt_ip"] = f"{mgmt}.{11 + n['index']}"
        n["fabric_ip"] = f"{fabric}.{11 + n['index']}"
        n["container"] = f"llmfleet-{name}-{n['name']}"
    return nodes


SIM_KEY_EXPR = "~/.cache/llmfleet/simlab/ssh/id_ed25519"


def inventory_yaml(name: str, count: int, key: str) -> str:
    """The inventory for a lab: same groups and variables as inventories/lab."""
    nodes = layout(name, count)
    lines = [
        f"# Simulated lab '{name}' ({count} nodes): generated by tools/simlab/simlab.py.",
        "# ansible_host = management network, llmfleet_fabric_ip = fabric network.",
        "---",
        "all:",
        "  vars:",
        "    ansible_user: root",
        f"    ansible_ssh_private_key_file: {key}",
        "  children:",
        "    gb10:",
        "      hosts:",
    ]
    for n in nodes:
        if n["arch"] == "sm_121":
            lines += [f"        {n['name']}:", f"          ansible_host: {n['mgmt_ip']}",
                      f"          llmfleet_fabric_ip: {n['fabric_ip']}"]
    lines += ["    thor:", "      hosts:"]
    for n in nodes:
        if n["arch"] == "sm_110":
            lines += [f"        {n['name']}:", f"          ansible_host: {n['mgmt_ip']}",
                      f"          llmfleet_fabric_ip: {n['fabric_ip']}"]
    lines += ["    ray_head:", "      hosts:", f"        {nodes[0]['name']}:",
              "    ray_workers:", "      hosts:"]
    lines += [f"        {n['name']}:" for n in nodes[1:]]
    lines += ["    serve_nodes:", "      hosts:"]
    lines += [f"        {n['name']}:" for n in nodes[:2]]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------- lab
# The lab is machine-wide (container names are global), so its key is too: every clone of the
# repo on this machine (a developer's, CI's) reaches the same containers.
KEY_DIR = Path(os.environ.get("LLMFLEET_CACHE", Path.home() / ".cache" / "llmfleet")) / "simlab" / "ssh"


def ssh_key() -> Path:
    key = KEY_DIR / "id_ed25519"
    if not key.exists():
        key.parent.mkdir(parents=True, exist_ok=True)
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "llmfleet-simlab", "-f", str(key))
    return key


def ensure_network(net: str, subnet: str, mtu: int | None) -> None:
    if sh("podman", "network", "exists", net, check=False).returncode == 0:
        return
    args = ["podman", "network", "create", "--subnet", f"{subnet}.0/24"]
    if mtu:
        args += ["--opt", f"mtu={mtu}"]
    sh(*args, net, capture=True)


CNI_LEASES = Path("/var/lib/cni/networks")


def release_leases(addresses: list[tuple[str, str]], leases: Path = CNI_LEASES) -> list[str]:
    """Drop CNI host-local leases on a node's fixed addresses, called only while the node is down.

    A container whose process died with its network namespace (a machine restored from a snapshot, a
    killed conmon) cannot run CNI's DEL when it is removed, so its address file stays under
    /var/lib/cni/networks/<net>/ and the node recreated on the same address fails with "requested IP
    address ... is not available in range set". Each node of a lab owns its addresses (layout()), so while
    its container is absent or stopped any lease on them is stale. netavark keeps its leases under /run,
    which such a restore empties."""
    dropped = []
    for net, ip in addresses:
        f = leases / net / ip
        if f.is_file():
            f.unlink()
            dropped.append(f"{net}/{ip}")
    return dropped


def container_state(c: str) -> dict | None:
    r = sh("podman", "inspect", "--type", "container", c, check=False, capture=True)
    if r.returncode != 0:
        return None
    return json.loads(r.stdout)[0]


def is_alive(st: dict, proc: Path = Path("/proc")) -> bool:
    """Running by podman's record *and* by the kernel's.

    When a session or CI machine is stopped, its processes are killed but podman's database
    still says "running" (seen: `Up 2 hours`, then `exec failed: cannot exec in a stopped
    container`). Such a container is a corpse: only `rm -f` and a fresh run bring it back.
    A recorded pid that exists proves nothing on a restored machine: CI reused thor1's pid 21227
    for one of its own processes, so the corpse passed as alive and boot waited 120 s on an exec
    that could never work. The container's init is pid 1 of its own pid namespace (the last
    `NSpid` field in its status); a host process that took the same number is not.
    """
    pid = st["State"].get("Pid") or 0
    if not st["State"]["Running"] or pid <= 0:
        return False
    try:
        status = (proc / str(pid) / "status").read_text()
    except OSError:
        return False
    nspid = next((line.split()[1:] for line in status.splitlines() if line.startswith("NSpid:")), [])
    return len(nspid) > 1 and nspid[-1] == "1"


def cgroup_args(mountinfo: str | None = None) -> list[str]:
    """The host's cgroup2 hierarchy for the nodes' systemd, on a hybrid-cgroup host.

    On a host whose controllers are on cgroup v1 (this CI machine: /sys/fs/cgroup is a tmpfs,
    cgroup2 at /sys/fs/cgroup/unified), podman gives a container the v1 hierarchies only. systemd
    in the node then gets no "cgroup empty" notice (the v1 release agent works on the host only),
    so every stop of a unit whose processes were reparented (Ray's, vLLM's engine cores) waits
    TimeoutStopSec for nothing, then logs "State 'final-sigterm' timed out" (measured: 10.2 s for
    a unit of two double-forked `sleep`s, 0.04 s with this mount). With the host's cgroup2 mounted
    in, systemd runs in hybrid mode and watches cgroup.events as on a real host; it only writes
    under its own container's cgroup (the path in /proc/self/cgroup), which podman removes with
    the container. A host on cgroup v2 alone gives containers cgroup2 already: nothing to add.
    """
    if mountinfo is None:
        mountinfo = Path("/proc/self/mountinfo").read_text()
    for line in mountinfo.splitlines():
        fields = line.split()
        if fields[4] == "/sys/fs/cgroup/unified" and fields[fields.index("-") + 1] == "cgroup2":
            return ["-v", "/sys/fs/cgroup/unified:/sys/fs/cgroup/unified:rw"]
    return []


def iface_of(container: str, ip: str) -> str:
    out = sh("podman", "exec", container, "ip", "-j", "-4", "addr", "show", capture=True).stdout
    for link in json.loads(out):
        for a in link.get("addr_info", []):
            if a.get("local") == ip:
                return link["ifname"]
    raise SystemExit(f"{container}: no interface holds {ip}")


def wait_booted(container: str, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        st = container_state(container)
        if not st or not is_alive(st):
            logs = sh("podman", "logs", "--tail", "20", container, check=False, capture=True)
            raise SystemExit(f"{container}: exited during boot:\n{logs.stdout}{logs.stderr}")
        r = sh("podman", "exec", container, "systemctl", "is-system-running", check=False, capture=True)
        state = r.stdout.strip()
        if state in ("running", "degraded"):
            r = sh("podman", "exec", container, "systemctl", "is-active", "ssh", check=False, capture=True)
            if r.stdout.strip() == "active":
                return
        time.sleep(1)
    raise SystemExit(f"{container}: systemd did not reach running within {timeout}s")


# Nodes that run a container engine inside (docs/containers.md, "The sim"): thor1 and thor2 always, as
# inventories/sim serves its SGLang group `thors` from a container image; spark3 and thor3 too with
# LLMFLEET_SIM_NESTED=1 (`make integration-container`, the SmolLM2 replicas as container groups). Rootful
# podman in a podman container needs to mount (SYS_ADMIN), make device nodes (MKNOD), fuse where the host
# has it, and the syscalls the default seccomp profile refuses (without that filter, sshd's audit write for
# a tty session needs AUDIT_WRITE, or it drops the session); its engine containers run with
# --cgroups=disabled (llm_server), since this lab's nodes cannot make cgroups. The other nodes keep a fresh
# node's privileges.
NESTED_CONTAINER_NODES = {"thor1", "thor2"} | ({"spark3", "thor3"} if os.environ.get("LLMFLEET_SIM_NESTED") == "1" else set())


def nested_container_args() -> list[str]:
    args = ["--cap-add", "SYS_ADMIN,MKNOD,AUDIT_WRITE", "--security-opt", "seccomp=unconfined", "--security-opt", "label=disable"]
    return args + (["--device", "/dev/fuse"] if os.path.exists("/dev/fuse") else [])


FRESH_DONE = "/run/llmfleet-simlab-node-ready"


def up(name: str, count: int, write_inventory: Path | None) -> None:
    ref = build_image()
    key = ssh_key()
    mgmt, fabric = subnets(name)
    mgmt_net, fabric_net = f"llmfleet-{name}-mgmt", f"llmfleet-{name}-fabric"
    ensure_network(mgmt_net, mgmt, None)
    ensure_network(fabric_net, fabric, 9000)
    pub = key.with_suffix(".pub")
    cgroups = cgroup_args()
    config = hashlib.sha256(f"{ref}{pub.read_text()}{mgmt}{fabric}{cgroups}".encode()).hexdigest()[:12]
    nodes = layout(name, count)
    for n in nodes:
        c = n["container"]
        nested = nested_container_args() if n["name"] in NESTED_CONTAINER_NODES else []
        node_config = hashlib.sha256(f"{config}{nested}".encode()).hexdigest()[:12] if nested else config
        st = container_state(c)
        if st and st["Config"]["Labels"].get("llmfleet.config") != node_config:
            log(f"{c}: recipe changed, recreating")
            sh("podman", "rm", "-f", "-t", "5", c, capture=True)
            st = None
        elif st and st["State"]["Running"] and not is_alive(st):
            log(f"{c}: podman says running but its process {st['State'].get('Pid')} is gone; recreating")
            sh("podman", "rm", "-f", "-t", "0", c, check=False, capture=True)
            st = None
        if st is None or not st["State"]["Running"]:
            for lease in release_leases([(mgmt_net, n["mgmt_ip"]), (fabric_net, n["fabric_ip"])]):
                log(f"{c}: released the stale address lease {lease}")
        if st is None:
            sh("podman", "run", "-d", "--name", c, "--hostname", n["name"],
               "--label", f"llmfleet.lab={name}", "--label", f"llmfleet.config={node_config}",
               "--runtime", "runc", "--systemd", "always",
               "--cap-add", "NET_ADMIN,NET_RAW,SYS_NICE,IPC_LOCK", *nested,
               "--ulimit", "nofile=20000:20000", "--ulimit", "nproc=4096:4096",
               "--shm-size", "2g",
               "--network", f"{mgmt_net}:ip={n['mgmt_ip']}",
               "--network", f"{fabric_net}:ip={n['fabric_ip']}",
               "-v", f"{pub}:/root/.ssh/authorized_keys:ro,Z", *cgroups,
               ref, "/sbin/init", capture=True)
        elif not st["State"]["Running"]:
            sh("podman", "start", c, capture=True)
    for n in nodes:
        wait_booted(n["container"])
    for n in nodes:
        # Set up once per boot of a node's container: the marker lives in its /run (a tmpfs), so a node
        # started by an earlier `up` that stopped before this point (CI once did, on a failed run) still
        # gets it, and a converged node is left as it is.
        if sh("podman", "exec", n["container"], "test", "-e", FRESH_DONE, check=False).returncode == 0:
            continue
        # A node recreated on its old addresses has a new MAC: the controller's neighbour entries still
        # name the old container's, and the first SSH connect timed out (seen: `make integration-container`
        # recreating thor3). Forget them; the next packet asks again.
        for ip in (n["mgmt_ip"], n["fabric_ip"]) if shutil.which("ip") else ():
            sh("ip", "neigh", "flush", "to", ip, check=False, capture=True)
        # A fresh Spark's QSFP port comes up at 1500: only the fabric role may raise it.
        nic = iface_of(n["container"], n["fabric_ip"])
        sh("podman", "exec", n["container"], "ip", "link", "set", "dev", nic, "mtu", "1500")
        sh("podman", "exec", n["container"], "touch", FRESH_DONE)
    inv = inventory_yaml(name, count, str(key))
    target = write_inventory or (STATE / name / "hosts.yml")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(inv)
    # the generated inventory shares the sim's group_vars and host_vars (one source of settings)
    for kind in ("group_vars", "host_vars"):
        link = target.parent / kind
        if not link.exists():
            link.symlink_to(ROOT / "inventories" / "sim" / kind)
    log(f"lab '{name}' up: {count} nodes ({', '.join(n['name'] for n in nodes)}); inventory {target}")


def down(name: str) -> None:
    out = sh("podman", "ps", "-a", "--filter", f"label=llmfleet.lab={name}", "--format", "{{.Names}}",
             capture=True).stdout.split()
    if out:
        sh("podman", "rm", "-f", "-t", "5", *out, capture=True)
    for net in (f"llmfleet-{name}-mgmt", f"llmfleet-{name}-fabric"):
        sh("podman", "network", "rm", "-f", net, check=False, capture=True)
    log(f"lab '{name}' down ({len(out)} containers removed)")


def status(name: str) -> None:
    sh("podman", "ps", "-a", "--filter", f"label=llmfleet.lab={name}",
       "--format", "table {{.Names}} {{.Status}} {{.Networks}}")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=["image", "up", "down", "inventory", "status"])
    p.add_argument("--nodes", type=int, default=int(os.environ.get("LAB_NODES", 6)))
    p.add_argument("--name", default=os.environ.get("LAB_NAME", "sim"))
    p.add_argument("--inventory", type=Path, help="where `up` writes the inventory")
    p.add_argument("--force", action="store_true", help="rebuild the image even if current")
    a = p.parse_args(argv)
    if a.command == "image":
        build_image(a.force)
    elif a.command == "up":
        up(a.name, a.nodes, a.inventory)
    elif a.command == "down":
        down(a.name)
    elif a.command == "inventory":
        # `--name sim --nodes 4` is what inventories/sim/hosts.yml holds (a unit test compares)
        key = SIM_KEY_EXPR if a.name == "sim" else str(KEY_DIR / "id_ed25519")
        sys.stdout.write(inventory_yaml(a.name, a.nodes, key))
    else:
        status(a.name)


if __name__ == "__main__":
    main()
