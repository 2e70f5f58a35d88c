# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Where a Ray node registers, how an engine finds the collection's Ray, what LimitNOFILE a unit may ask. Pure.

Three findings of the GPU run (issue 11, benchmarks/gpu/README.md "Collection findings"):

- ``ray start --node-ip-address=127.0.0.1`` (or ``localhost``) does NOT register the node at
  127.0.0.1: Ray's ``services.resolve_ip_for_localhost`` replaces exactly those two with the
  address of the host's default route (seen: 192.0.2.2), so every check that looks for the node
  at its fabric IP misses it. Any other address, other loopback ones (127.0.0.2) included, is
  kept as given. :func:`node_ip_problem` names the problem before a unit is written.
- vLLM's Ray executor (and SGLang ``--use-ray``) call ``ray.init()`` without an address. Ray then
  joins an existing cluster only through ``RAY_ADDRESS`` or the ``ray_current_cluster`` file in
  /tmp/ray; the Ray unit runs with ``--temp-dir`` elsewhere and the engine unit with
  ``PrivateTmp=``, so without ``RAY_ADDRESS`` the engine starts a private Ray of its own (seen with
  Ray 2.60). :func:`engine_ray_env` gives the variable for the engine unit.
- ``LimitNOFILE=`` above the hard limit of the service manager fails the unit at exec
  (status 205/LIMITS in a container whose PID 1 lacks CAP_SYS_RESOURCE; ``setrlimit`` EPERM in a
  VM without systemd). :func:`clamp_nofile` keeps the request under PID 1's hard limit, read
  from ``/proc/1/limits``.
"""

REWRITTEN_BY_RAY = ('127.0.0.1', 'localhost')


def node_ip_problem(ip):
    """Why Ray would not register a node started with ``--node-ip-address=ip`` under ``ip``; '' if it would."""
    text = str(ip or '').strip()
    if not text:
        return 'no address given (llmfleet_fabric_ip is empty)'
    if text in REWRITTEN_BY_RAY:
        return ('Ray replaces --node-ip-address=%s with the address of the default route '
                '(ray._private.services.resolve_ip_for_localhost), so the node would register under another '
                'IP than llmfleet_fabric_ip; a one-host cluster uses another loopback address, e.g. 127.0.0.2 '
                '(all of 127.0.0.0/8 is local on Linux), or the host\'s own address' % text)
    return ''


def engine_ray_env(backend, head_ip, port=6379, auth=None):
    """``{'RAY_ADDRESS': 'head_ip:port'}`` plus ``auth`` (the node's Ray authentication environment,
    the plan's ``ray_auth.env``) for an engine that joins the collection's Ray (backend ``ray``), else ``{}``."""
    if str(backend or '') != 'ray' or not head_ip:
        return {}
    return dict(auth or {}, RAY_ADDRESS='%s:%d' % (head_ip, int(port)))


def parse_limits(text):
    """``/proc/<pid>/limits`` text -> ``{'Max open files': (soft, hard), ...}``; ``None`` = unlimited."""
    out = {}
    for raw in (text or '').splitlines()[1:]:
        parts = raw.split()
        # the name is every word before the first number/'unlimited'; then soft, hard, [units]
        for i, word in enumerate(parts):
            if word == 'unlimited' or word.isdigit():
                if i + 1 < len(parts):
                    name = ' '.join(parts[:i])
                    soft, hard = (None if v == 'unlimited' else int(v) for v in parts[i:i + 2])
                    out[name] = (soft, hard)
                break
    return out


def clamp_nofile(requested, limits_text):
    """``requested`` (int), lowered to the hard 'Max open files' of ``limits_text`` (PID 1's), when that is lower.

    An unreadable or empty ``limits_text`` leaves ``requested`` as is.
    """
    requested = int(requested)
    hard = parse_limits(limits_text).get('Max open files', (None, None))[1]
    if hard is None:
        return requested
    return min(requested, hard)


def hard_nproc(limits_text):
    """PID 1's hard 'Max processes' from ``limits_text`` (int), or None where unlimited or unread.

    A container engine picks its own process limit for a container (rootful podman: far above a
    container host's), and its runtime cannot raise a limit past the hard one it was started with
    without CAP_SYS_RESOURCE (crun: "setrlimit RLIMIT_NPROC: Operation not permitted"): the engine
    unit passes the service manager's instead.
    """
    return parse_limits(limits_text).get('Max processes', (None, None))[1]


def clamp_memlock(requested, limits_text):
    """LimitMEMLOCK= value: ``requested`` ('infinity' or bytes), lowered to PID 1's hard 'Max locked memory'.

    RDMA/RoCE registers (locks) the buffers NCCL sends from; a unit asking above the service
    manager's hard limit fails at exec (205/LIMITS, as in a container), so the unit gets that limit
    instead. An unreadable ``limits_text`` leaves ``requested`` as is.
    """
    text = str(requested).strip().lower()
    wanted = None if text in ('infinity', 'unlimited') else int(text)
    hard = parse_limits(limits_text).get('Max locked memory', (None, 'unread'))[1]
    if hard == 'unread' or hard is None:
        return 'infinity' if wanted is None else str(wanted)
    return str(hard if wanted is None else min(wanted, hard))
