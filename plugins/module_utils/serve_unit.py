# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Serve units: render the systemd unit and env file of one engine process, hash them. Pure.

The hash covers what changes the running engine (argv, environment, release); the module compares
it with the hash stamped in the installed unit, so a changed flag restarts and an unchanged run is a
no-op. Secrets live only in the env file (0600), never in argv or the unit.
"""
import hashlib
import json
import os
import shlex

HASH_MARK = '# llmfleet-serve-hash: '

# The sandbox of the engine units (the level of the safeguards units, less what an engine needs):
# no PrivateDevices/ProtectClock (both put a device allow-list on the unit: the GPUs' /dev/nvidia*,
# /dev/infiniband would be refused), no MemoryDenyWriteExecute (torch.compile/Triton JIT write
# and run code), no SystemCallFilter (CUDA/NCCL/numa calls vary by driver). /dev/shm (Ray's object
# store, NCCL's shared memory) stays writable under ProtectSystem=strict; the home directory (torch
# compile, Triton, HF caches, Ray's temp dir) is named in ReadWritePaths=.
HARDENING = (
    'NoNewPrivileges=yes',
    'CapabilityBoundingSet=',
    'AmbientCapabilities=',
    'ProtectSystem=strict',
    'ProtectHome=yes',
    'PrivateTmp=yes',
    'ProtectKernelTunables=yes',
    'ProtectKernelModules=yes',
    'ProtectKernelLogs=yes',
    'ProtectControlGroups=yes',
    'ProtectHostname=yes',
    'RestrictNamespaces=yes',
    'RestrictSUIDSGID=yes',
    'LockPersonality=yes',
    'RestrictRealtime=yes',
    'SystemCallArchitectures=native',
    # netlink: interface discovery (getifaddrs, psutil) and RDMA's rdma_cm
    'RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK',
    'UMask=0077',
)


def serve_hash(argv, env, release, secret_env=None):
    """Stable hash of what the engine runs with (secrets included, but only as a digest)."""
    doc = {'argv': list(argv), 'env': dict(sorted((env or {}).items())), 'release': release or '',
           'secrets': hashlib.sha256(json.dumps(secret_env or {}, sort_keys=True).encode()).hexdigest()}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def systemd_quote(arg):
    """Quote one argv element for systemd's ExecStart= (it splits like a shell, no expansion of ${})."""
    arg = str(arg)
    if arg and all(c.isalnum() or c in '@+=:,./-_' for c in arg):
        return arg
    return '"' + arg.replace('\\', '\\\\').replace('"', '\\"').replace('$', '$$').replace('%', '%%') + '"'


def render_unit(name, argv, user, group, env_files, workdir, description, digest,
                restart_sec=5, memory_max='', kill_timeout=60, hardening=True, after=(), limit_nofile=20000,
                limit_memlock='infinity'):
    """Text of ``/etc/systemd/system/<name>.service``."""
    lines = [
        '# Managed by Ansible (llmfleet.cluster llm_server). Edit the inventory, not this file.',
        HASH_MARK + digest,
        '[Unit]',
        'Description=%s' % description,
        'After=network-online.target %s' % ' '.join(after),
        'Wants=network-online.target',
        'StartLimitIntervalSec=0',
        '',
        '[Service]',
        'Type=simple',
        'User=%s' % user,
        'Group=%s' % group,
        'WorkingDirectory=%s' % workdir,
    ]
    lines += ['EnvironmentFile=%s' % f for f in env_files]
    lines += [
        'ExecStart=' + ' '.join(systemd_quote(a) for a in argv),
        # the engine's workers are children: SIGTERM to the main process, then the cgroup
        'KillMode=mixed',
        'TimeoutStopSec=%d' % kill_timeout,
        'Restart=always',
        'RestartSec=%d' % restart_sec,
        'LimitNOFILE=%d' % limit_nofile,
        # RDMA/RoCE registers (locks) NCCL's buffers: without it NCCL falls back to TCP silently
        'LimitMEMLOCK=%s' % limit_memlock,
    ]
    if memory_max:
        lines.append('MemoryMax=%s' % memory_max)
    if hardening:
        lines += list(HARDENING)
        lines.append('ReadWritePaths=%s' % workdir)
    lines += ['', '[Install]', 'WantedBy=multi-user.target', '']
    return '\n'.join(lines)


# A digest-pinned image reference (name@sha256:<64 hex>) or a local image ID (sha256:<64 hex>): a tag
# can move, a digest cannot, so what a unit runs is what the inventory (or the image build) named.
IMAGE_DIGEST_CHARS = frozenset('0123456789abcdef')


def image_digest(image):
    """The sha256 digest an image reference pins ('' when it pins none, e.g. a bare tag)."""
    image = str(image or '')
    _name, sep, digest = image.rpartition('sha256:')
    if not sep or len(digest) != 64 or not set(digest) <= IMAGE_DIGEST_CHARS:
        return ''
    if _name and not _name.endswith('@'):
        return ''
    return digest


def env_names(text):
    """The variable names an EnvironmentFile= defines (comments and blank lines skipped), in order."""
    names = []
    for line in (text or '').splitlines():
        line = line.strip()
        if not line or line.startswith(('#', ';')) or '=' not in line:
            continue
        name = line.split('=', 1)[0].strip()
        if name.startswith('export '):
            name = name[len('export '):].strip()
        if name and name not in names:
            names.append(name)
    return names


def container_argv(name, argv, container, env_names_, user_ids, workdir, limit_nofile=20000, limit_memlock='infinity',
                   limit_nproc=None):
    """The container engine's command line that runs ``argv`` inside ``container['image']``.

    The unit keeps its EnvironmentFile= lines: systemd loads every value (quoted as systemd quotes
    them) into the container engine's environment, and ``--env NAME`` (a name, never a value) passes
    each into the container, so a secret stays out of argv and of the engine's own env-file parser
    (podman and docker take an --env-file's quotes literally). Host network and IPC as the engines'
    multi-node setups need them (NCCL over the fabric NIC, /dev/shm shared with Ray), memlock
    unlimited for RDMA (the unit's limit), the service user's uid:gid inside, ``--cgroups=disabled`` on
    podman so the engine stays in the unit's cgroup (MemoryMax=, the stop's SIGKILL of the whole cgroup)."""
    engine = container.get('engine') or 'podman'
    podman = os.path.basename(engine).startswith('podman')
    # the unit's own limits (llm_server lowers them to PID 1's where those are lower: a container
    # asking for more than its engine may grant fails at create)
    memlock = '-1' if str(limit_memlock) == 'infinity' else str(limit_memlock)
    # podman's --replace: a container of this name left by a killed run would refuse the start
    out = [engine, 'run', '--rm'] + (['--replace'] if podman else []) + [
        '--name', name, '--network', 'host', '--ipc', 'host',
        '--ulimit', 'memlock=%s:%s' % (memlock, memlock), '--ulimit', 'nofile=%d:%d' % (limit_nofile, limit_nofile),
        '--user', user_ids, '--workdir', workdir, '--volume', '%s:%s' % (workdir, workdir)]
    if limit_nproc:
        # the service manager's hard process limit (raynet.hard_nproc): the engine's own default can be
        # above it, which the runtime may not raise to (crun's setrlimit EPERM)
        out += ['--ulimit', 'nproc=%d:%d' % (limit_nproc, limit_nproc)]
    if podman:
        out += ['--cgroups', 'disabled']
    # the engine's output reaches the journal once, as the unit's (the container engine runs in the
    # foreground, attached): a logging driver would write every line a second time (podman's default,
    # journald, did: each line under the unit's name and again under podman's)
    out += ['--log-driver', 'none']
    for mount in container.get('mounts') or []:
        out += ['--volume', mount]
    for device in container.get('devices') or []:
        out += ['--device', device]
    if container.get('gpus'):
        # the NVIDIA container toolkit's CDI names (podman) / its --gpus flag (docker)
        out += ['--device', 'nvidia.com/gpu=all'] if podman else ['--gpus', 'all']
    for env_name in env_names_:
        out += ['--env', env_name]
    out.append(container['image'])
    out += list(argv)
    return out


def installed_hash(unit_text):
    for line in (unit_text or '').splitlines():
        if line.startswith(HASH_MARK):
            return line[len(HASH_MARK):].strip()
    return None


def render_env(env):
    """EnvironmentFile text: sorted KEY=value, values quoted for systemd."""
    out = ['# Managed by Ansible (llmfleet.cluster llm_server); may hold secrets: mode 0600']
    for key in sorted(env):
        value = str(env[key])
        if '\n' in value:
            raise ValueError('environment value of %s holds a newline' % key)
        out.append('%s=%s' % (key, shlex.quote(value) if value else '""'))
    return '\n'.join(out) + '\n'


# /metrics gauges of requests an engine holds: running in a batch, or queued for one
IN_FLIGHT_GAUGES = ('vllm:num_requests_running', 'vllm:num_requests_waiting',
                    'sglang:num_running_reqs', 'sglang:num_queue_reqs')


def running_requests(metrics_text):
    """Requests in flight: the sum of vLLM's ``vllm:num_requests_running`` and
    ``vllm:num_requests_waiting`` gauges (SGLang: ``sglang:num_running_reqs`` and
    ``sglang:num_queue_reqs``). A queued request is cut by a stop as surely as a running one, and a
    request that arrived a moment before the read is still queued on a busy engine."""
    total = 0.0
    found = False
    for line in (metrics_text or '').splitlines():
        if line.startswith('#'):
            continue
        for name in IN_FLIGHT_GAUGES:
            if line.startswith(name + '{') or line.startswith(name + ' '):
                try:
                    total += float(line.rsplit(' ', 1)[1])
                    found = True
                except ValueError:
                    pass
    return total if found else None
