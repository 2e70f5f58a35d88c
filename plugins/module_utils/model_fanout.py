# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Fan-out of model weights node to node over the fabric (the models role, models_distribution fabric).

Pure Python, no I/O. The controller plans; the nodes copy: in every round each node that holds a
complete copy sends it to one node that lacks it (the receiver pulls with rsync over ssh between
fabric addresses), so the number of holders doubles per round and n nodes need ceil(log2(n)) rounds.
The controller carries no weight bytes. The checks here run on the controller before the first byte
moves and name the host, the cause and the fix.
"""
import posixpath
import re

GIB = 1 << 30
_IPV4 = re.compile(r"^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$")
# AES-GCM first: with AES instructions (x86 AES-NI, Arm's crypto extension on GB10/Thor) it is several
# times faster than OpenSSH's default chacha20-poly1305, and ssh's cipher is what bounds a copy over
# a fast link; chacha20 stays as the fallback.
CIPHERS = "aes128-gcm@openssh.com,aes256-gcm@openssh.com,chacha20-poly1305@openssh.com"
_PUBKEY = re.compile(r"^ssh-ed25519 [A-Za-z0-9+/=]+( \S+)?$")


class FanoutError(ValueError):
    """The fan-out cannot start; the message names the host, the cause and the fix."""


def plan_rounds(holders, targets):
    """Rounds of copies: [{receiver: sender}, ...]; every holder sends to one target per round.

    holders: hosts with a complete copy (the first is the source); targets: hosts lacking one
    (holders are removed from them). Deterministic: hosts keep the order given.
    """
    have = list(dict.fromkeys(holders))
    if not have:
        raise FanoutError("no node holds a complete copy of the model: nothing to fan out from. "
                          "Fix: fetch or generate the model on the source node first (models_source)")
    want = [h for h in dict.fromkeys(targets) if h not in have]
    rounds = []
    while want:
        step = {}
        for sender in list(have):
            if not want:
                break
            receiver = want.pop(0)
            step[receiver] = sender
        have.extend(step)
        rounds.append(step)
    return rounds


def check_fabric_ips(hosts, fabric_ips):
    """Every host of the fan-out needs an IPv4 fabric address (llmfleet_fabric_ip)."""
    problems = []
    for host in hosts:
        ip = fabric_ips.get(host)
        match = _IPV4.match(str(ip or ""))
        if not match or any(int(part) > 255 for part in match.groups()):
            problems.append(f"{host}: llmfleet_fabric_ip '{ip or ''}' is not an IPv4 address. Fix: set it to the "
                            f"node's fabric (data-plane) address, or use models_distribution: controller")
    seen = {}
    for host in hosts:
        ip = fabric_ips.get(host)
        if ip and ip in seen:
            problems.append(f"{host}: llmfleet_fabric_ip {ip} is also {seen[ip]}'s. Fix: give every node its own")
        seen.setdefault(ip, host)
    if problems:
        raise FanoutError("; ".join(problems))
    return True


def check_free_space(need_bytes, free_bytes, reserve_bytes=0):
    """Hosts whose disk cannot take the missing bytes (+ reserve); checked before the first byte.

    need_bytes: {host: bytes still missing there}; free_bytes: {host: bytes free in models_dir's
    filesystem}. Returns [] or one line per host naming host, cause and fix.
    """
    problems = []
    for host in sorted(need_bytes):
        need = int(need_bytes[host])
        if need <= 0:
            continue
        free = free_bytes.get(host)
        if free is None:
            problems.append(f"{host}: free space of the models directory unknown. Fix: check the path exists")
            continue
        if int(free) < need + int(reserve_bytes):
            problems.append(
                f"{host}: {need / GIB:.2f} GiB to copy (+ {int(reserve_bytes) / GIB:.2f} GiB reserve, "
                f"models_min_free_gb) but {int(free) / GIB:.2f} GiB free. Fix: free space there or point "
                f"models_dir at a larger disk; no byte was copied")
    return problems


def missing_bytes(manifest, bad):
    """Bytes of the files `bad` (relative paths) in the source manifest {rel: {size}}."""
    return sum(int(manifest[rel]["size"]) for rel in bad if rel in manifest)


def relative_model_path(models_path, models_dir):
    """models_path relative to models_dir: the receiver asks for it (rrsync serves models_dir only)."""
    base = posixpath.normpath(str(models_dir))
    path = posixpath.normpath(str(models_path))
    if not path.startswith(base + "/"):
        raise FanoutError(f"models_path '{models_path}' is not inside models_dir '{models_dir}': the fabric "
                          f"key only reads models_dir. Fix: put the model under models_dir, or use "
                          f"models_distribution: controller")
    return posixpath.relpath(path, base)


def authorized_key_line(pubkey, peers, models_dir):
    """authorized_keys line for the cluster key: read-only rsync of models_dir, from the fabric peers only."""
    pubkey = str(pubkey).strip()
    if not _PUBKEY.match(pubkey):
        raise FanoutError(f"cluster key: '{pubkey[:40]}' is not an ssh-ed25519 public key. Fix: remove the key "
                          f"pair so the models role makes a new one")
    peers = sorted(dict.fromkeys(str(p) for p in peers if p))
    if not peers:
        raise FanoutError("cluster key: no fabric peer to authorize")
    check_fabric_ips(peers, {p: p for p in peers})
    options = (f'command="/usr/bin/rrsync -ro {posixpath.normpath(str(models_dir))}",'
               f'from="{",".join(peers)}",restrict')
    return f"{options} {pubkey.split()[0]} {pubkey.split()[1]} llmfleet-models-fabric"


def rsync_argv(sender_ip, rel_path, dest, key_file, known_hosts, port=22, timeout=30, probe=False):
    """argv a receiver runs to pull files from a sender over the fabric; the file list comes on stdin.

    Only the files the receiver lacks or holds wrong are named (--files-from=-, the manifest's `bad`);
    --ignore-times sends them even when size and mtime happen to match. An interrupted file stays in
    .llmfleet-partial (hidden: not part of the model) and is the basis of the next run's transfer.
    probe: list the sender's models_dir instead (reach + host key + cluster key + rrsync, no bytes
    copied); not the model directory, which a later round's sender gets only in an earlier round.
    """
    ssh = (f"ssh -i {key_file} -p {int(port)} -o BatchMode=yes -o IdentitiesOnly=yes "
           f"-o UserKnownHostsFile={known_hosts} -o StrictHostKeyChecking=yes "
           f"-o ConnectTimeout={int(timeout)} -o Ciphers={CIPHERS}")
    remote = f"{sender_ip}:{rel_path.rstrip('/')}/"
    if probe:
        return ["rsync", "--list-only", "--timeout", str(int(timeout)), "-e", ssh, f"{sender_ip}:./"]
    return ["rsync", "-rt", "--ignore-times", "--partial-dir=.llmfleet-partial", "--files-from=-",
            "--timeout", str(int(timeout) * 4), "--stats", "-e", ssh,
            remote, f"{str(dest).rstrip('/')}/"]


# ssh's and rsync's words for a peer that did not answer (ssh(1), rsync(1) messages)
UNREACHABLE_MARKERS = ("connection refused", "timed out", "io timeout", "no route", "network is unreachable")


def classify_rsync_failure(host, sender, sender_ip, rc, stderr):
    """Host, cause and fix of a failed pull (rsync's exit code and ssh's message)."""
    text = (stderr or "").strip().splitlines()
    last = text[-1] if text else ""
    low = (stderr or "").lower()
    # rsync's own --timeout (exit 30, "io timeout") can fire before ssh's ConnectTimeout on a loaded
    # machine, as both have the same length: the peer did not answer in time either way. When ssh
    # fails to connect, rsync exits 255 or, if it reads the closed pipe before it reaps ssh, 12
    # ("error in rsync protocol data stream", seen with the link down): ssh's own line decides
    ssh_failed = "ssh: connect to host" in low or any(m in low for m in UNREACHABLE_MARKERS)
    if rc in (255, 30) or ssh_failed or "host key verification failed" in low or "permission denied (publickey" in low:
        if "host key verification failed" in low:
            cause = f"{sender}'s ssh host key at {sender_ip} is not the one recorded"
            fix = (f"check that {sender_ip} is {sender}'s fabric address (llmfleet_fabric_ip); re-run the "
                   f"models role to refresh the fabric known_hosts")
        elif "permission denied" in low:
            cause = f"ssh to {sender} ({sender_ip}) refused the cluster key"
            fix = (f"re-run the models role so {sender}'s authorized_keys holds the cluster key "
                   f"for the fabric peers")
        else:
            cause = f"cannot reach {sender} at its fabric address {sender_ip} over ssh"
            fix = (f"check the fabric link and that sshd on {sender} listens on {sender_ip} (ping -I over the "
                   f"fabric), or use models_distribution: controller")
    elif rc in (11, 12) and "no space" in low:
        cause = "the disk filled up while copying"
        fix = "free space in models_dir (the partial file is kept; a re-run resumes)"
    else:
        cause = f"rsync from {sender} ({sender_ip}) exited {rc}: {last}"
        fix = "re-run the models role; rsync resumes from the partial files"
    return f"{host}: {cause}. Fix: {fix}"


def probe_problems(hosts, probes, fabric_ips):
    """One line per failed probe: hosts[i]'s registered loop `probes[i]` (items = senders)."""
    problems = []
    for host, probe in zip(hosts, probes):
        for result in (probe or {}).get("results", []):
            if result.get("skipped") or result.get("rc", 0) == 0:
                continue
            sender = result.get("item")
            problems.append(classify_rsync_failure(host, sender, fabric_ips.get(sender), result.get("rc"),
                                                   result.get("stderr", "")))
    return problems
