# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The single place that computes each host's communication environment.

Input: per-host facts ``{host: {fabric_ip, fabric_iface, rdma_up_netdevs, nccl_ib_hca}}``
(``rdma_up_netdevs``/``nccl_ib_hca`` as returned by ``llmfleet.cluster.rdma_info``),
the serving group's host list, and user overrides. Output: ``{host: {VAR: 'value'}}``.

Rules (from the field notes):

* The cluster transport is ``roce`` only when EVERY host of the serving group has
  Up RDMA devices; otherwise ``socket`` for all. Mixing transports (Spark on RoCE,
  Thor on sockets) fails in NCCL with "wrong type 3 != 4", so ``socket`` sets
  ``NCCL_IB_DISABLE=1`` on every node.
* ``NCCL_SOCKET_IFNAME``, ``GLOO_SOCKET_IFNAME``, ``TP_SOCKET_IFNAME`` name the host's
  own fabric interface, never an exclusion list such as ``^lo,docker`` (NCCL then
  picks unconnected IPv6 link-local interfaces: "Network is unreachable").
* ``VLLM_HOST_IP`` is the host's own fabric IP (Ray/vLLM IP consistency), and so is
  ``SGLANG_HOST_IP``: without it SGLang takes the default route's address for what it binds
  itself (the multi-node TP broadcast queue's ZeroMQ socket), i.e. the management network.
* ``UCX_NET_DEVICES``: the fabric interface; with RoCE the host's Up RDMA netdevs.
* ``NCCL_IB_HCA`` only with RoCE.
* Overrides: global first, then per host; the last one wins. A ``None`` value
  removes the variable.

Every host's env is built from that host's facts only.
"""

import ipaddress
import re

TRANSPORTS = ('roce', 'socket')
TRANSPORT_CHOICES = ('auto',) + TRANSPORTS

SOCKET_IFNAME_VARS = ('NCCL_SOCKET_IFNAME', 'GLOO_SOCKET_IFNAME', 'TP_SOCKET_IFNAME')
HOST_IP_VARS = ('VLLM_HOST_IP', 'SGLANG_HOST_IP')

ENV_FILE_HEADER = (
    '# Managed by Ansible (llmfleet.cluster): communication environment for NCCL, Gloo,\n'
    '# UCX and vLLM. Local edits are overwritten; set overrides in the inventory instead.\n'
)

_ENV_NAME_RE = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*$')
_IFACE_RE = re.compile(r'^[A-Za-z0-9_.:@-]{1,15}$')  # Linux IFNAMSIZ - 1
_UNQUOTED_RE = re.compile(r'^[A-Za-z0-9_@%+=:,./^-]+$')

_FIX_IFACE = (
    "give it llmfleet_fabric_ip (its data-plane IPv4) in the inventory so the fabric "
    "interface carrying that address can be resolved, or set its fabric_iface explicitly"
)


class CommEnvError(ValueError):
    """Bad input to the communication environment computation (message names host and fix)."""


# ----------------------------------------------------------------- normalizing

def _as_list(value):
    """A list of non-empty strings from a list or a comma-separated string."""
    if value is None:
        return []
    if isinstance(value, str):
        items = value.split(',')
    elif isinstance(value, (list, tuple)):
        items = value
    else:
        raise CommEnvError('expected a list or a comma-separated string, got %r' % (value,))
    out = []
    for item in items:
        item = str(item).strip()
        if item and item not in out:
            out.append(item)
    return out


def _group_hosts(group):
    if group is None or isinstance(group, (str, bytes)) or not hasattr(group, '__iter__'):
        raise CommEnvError(
            'the serving group must be a list of inventory hostnames, got %r' % (group,))
    hosts = []
    for host in group:
        host = str(host)
        if host not in hosts:
            hosts.append(host)
    if not hosts:
        raise CommEnvError(
            'the serving group is empty: put the serving hosts in ray_head/ray_workers '
            '(or serve_nodes) in the inventory')
    return hosts


def _host_facts(facts, host):
    if not hasattr(facts, 'get'):
        raise CommEnvError('per-host facts must be a dict {host: {...}}, got %r' % (facts,))
    data = facts.get(host)
    if data is None:
        return {}
    if not hasattr(data, 'get'):
        raise CommEnvError('facts for host %r must be a dict, got %r' % (host, data))
    return data


def has_rdma(host_facts):
    """True when the host has at least one Up RDMA netdev and HCA."""
    return bool(_as_list(host_facts.get('rdma_up_netdevs'))) and \
        bool(_as_list(host_facts.get('nccl_ib_hca')))


def hosts_without_rdma(facts, group):
    """Hosts of the group with no Up RDMA device (in group order)."""
    return [h for h in _group_hosts(group) if not has_rdma(_host_facts(facts, h))]


def cluster_transport(facts, group, transport='auto', planned=''):
    """``'roce'`` when every host of ``group`` has Up RDMA devices, else ``'socket'``.

    ``transport`` may force ``'socket'`` (always allowed) or ``'roce'`` (raises
    CommEnvError naming the hosts that lack RDMA). ``planned``: the transport the cluster plan
    laid the serving group's layout out on (its ``serve.transport``; '' for none): a detected
    transport that differs raises CommEnvError naming both.
    """
    detected = _detected_transport(facts, group, transport)
    if planned and detected != planned:
        missing = hosts_without_rdma(facts, group)
        why = ('no Up RDMA device on %s' % ', '.join(missing) if missing
               else 'every host of the group has Up RDMA devices')
        fix = ('bring up their ConnectX ports (ibdev2netdev shows (Up)), or set fabric_transport: socket on '
               'the group\'s hosts (the layout is then planned for sockets)' if planned == 'roce' else
               'set fabric_transport: roce on the group\'s hosts (the layout is then planned for RoCE), or '
               'fabric_transport: socket to keep sockets')
        raise CommEnvError('the plan lays the serving group (%s) out on %s (the transport its platforms imply), '
                           'but the fabric detected %s: %s. Fix: %s.'
                           % (', '.join(_group_hosts(group)), planned, detected, why, fix))
    return detected


def _detected_transport(facts, group, transport):
    if transport not in TRANSPORT_CHOICES:
        raise CommEnvError('transport must be one of %s, got %r'
                           % (', '.join(TRANSPORT_CHOICES), transport))
    missing = hosts_without_rdma(facts, group)
    if transport == 'socket':
        return 'socket'
    if transport == 'roce' and missing:
        raise CommEnvError(
            'transport roce was requested but these hosts of the serving group have no Up '
            'RDMA device: %s. Fix: cable/bring up their ConnectX ports (ibdev2netdev shows '
            '(Up)), take them out of the serving group, or use transport auto/socket.'
            % ', '.join(missing))
    return 'socket' if missing else 'roce'


def _check_iface(host, iface, one_host=False):
    if iface is None or (isinstance(iface, str) and not iface.strip()):
        return 'host %r in the serving group has no fabric_iface. Fix: %s.' % (host, _FIX_IFACE)
    iface = str(iface).strip()
    if iface.startswith('^') or ',' in iface or not _IFACE_RE.match(iface):
        return ('host %r has fabric_iface %r, which is not a single interface name. Fix: set '
                'the one data-plane interface (e.g. enp1s0f1np1); exclusion lists such as '
                '^lo,docker make NCCL try unconnected IPv6 link-local interfaces.'
                % (host, iface))
    if iface == 'lo' and not one_host:
        return ('host %r has fabric_iface lo (loopback), but the serving group has several hosts that '
                'cannot reach each other over it (lo is fine only when the group is this one host). '
                'Fix: %s.' % (host, _FIX_IFACE))
    return None


def _check_ip(host, ip, one_host=False):
    if ip is None or (isinstance(ip, str) and not ip.strip()):
        return ('host %r in the serving group has no fabric_ip. Fix: set llmfleet_fabric_ip '
                '(its data-plane IPv4) for it in the inventory.' % (host,))
    try:
        addr = ipaddress.ip_address(str(ip).strip())
    except ValueError:
        addr = None
    if addr is not None and addr.is_loopback and not one_host:
        return ('host %r has fabric_ip %r, a loopback address, in a serving group of several hosts (loopback '
                'is fine only when the group is this one host). Fix: set llmfleet_fabric_ip to its '
                'data-plane IPv4 in the inventory.' % (host, ip))
    if addr is None or addr.version != 4 or addr.is_unspecified:
        return ('host %r has fabric_ip %r, which is not a usable IPv4 address. Fix: set '
                'llmfleet_fabric_ip to its data-plane IPv4 in the inventory.' % (host, ip))
    return None


def validate(facts, group):
    """Raise CommEnvError listing every host whose fabric_iface/fabric_ip is missing or bad."""
    problems = []
    hosts = _group_hosts(group)
    # every GPU in one machine: NCCL/Gloo over lo (and NVLink/PCIe). Emulated nodes name their
    # machine (the plan's emulation.machine, fact ``machine``); any other host is a machine of its own.
    one_host = len({_host_facts(facts, h).get('machine') or h for h in hosts}) == 1
    for host in hosts:
        data = _host_facts(facts, host)
        for problem in (_check_iface(host, data.get('fabric_iface'), one_host),
                        _check_ip(host, data.get('fabric_ip'), one_host)):
            if problem:
                problems.append(problem)
    if problems:
        raise CommEnvError('comm_env: ' + ' '.join(problems))


# -------------------------------------------------------------------- overrides

def to_env_value(value):
    """Environment string for a YAML scalar: bools -> '1'/'0', numbers -> str."""
    if isinstance(value, bool):
        return '1' if value else '0'
    if isinstance(value, (int, float, str)):
        return str(value)
    raise CommEnvError('environment values must be strings, numbers or booleans, got %r'
                       % (value,))


def _apply_overrides(env, overrides, where):
    if not overrides:
        return
    if not hasattr(overrides, 'items'):
        raise CommEnvError('%s overrides must be a dict {VAR: value}, got %r' % (where, overrides))
    for key, value in overrides.items():
        key = str(key)
        if not _ENV_NAME_RE.match(key):
            raise CommEnvError('%s override %r is not a valid environment variable name'
                               % (where, key))
        if value is None:
            env.pop(key, None)
        else:
            env[key] = to_env_value(value)


# ------------------------------------------------------------------------ main

def host_env(host_facts, transport):
    """The computed (pre-override) environment of one host from its own facts."""
    iface = str(host_facts['fabric_iface']).strip()
    env = {name: iface for name in SOCKET_IFNAME_VARS}
    for name in HOST_IP_VARS:
        env[name] = str(host_facts['fabric_ip']).strip()
    if transport == 'roce':
        env['NCCL_IB_DISABLE'] = '0'
        env['NCCL_IB_HCA'] = ','.join(_as_list(host_facts.get('nccl_ib_hca')))
        env['UCX_NET_DEVICES'] = ','.join(_as_list(host_facts.get('rdma_up_netdevs')))
    else:
        env['NCCL_IB_DISABLE'] = '1'
        env['UCX_NET_DEVICES'] = iface
    # an emulated node (several inventory hosts on one machine): its GPUs and NCCL host identity
    # (the plan's emulation.env); a real node's facts hold none
    for name, value in sorted((host_facts.get('emulation_env') or {}).items()):
        env[name] = to_env_value(value)
    return env


def env_names(emulation_env=None, overrides=None, host_overrides=None):
    """The names a host's communication environment (host_env, then the overrides) can hold on either
    transport, without its facts: what a process started elsewhere must not carry over to this host
    (vLLM's ray_non_carry_over_env_vars, written by the ray_node role from the cluster plan)."""
    names = dict.fromkeys(SOCKET_IFNAME_VARS + HOST_IP_VARS + ('NCCL_IB_DISABLE', 'NCCL_IB_HCA', 'UCX_NET_DEVICES'))
    names.update(dict.fromkeys(emulation_env or {}))
    for layer in (overrides, host_overrides):
        for key, value in (layer.items() if hasattr(layer, 'items') else ()):
            if value is None:
                names.pop(str(key), None)
            else:
                names[str(key)] = None
    return sorted(names)


def compute_comm_env(facts, group, overrides=None, host_overrides=None, transport='auto'):
    """``{host: env}`` for every host of the serving group.

    :param facts: ``{host: {fabric_ip, fabric_iface, rdma_up_netdevs, nccl_ib_hca}}``, plus, for an
        emulated node, ``machine`` and ``emulation_env`` (the plan's emulation).
    :param group: the serving group's hostnames.
    :param overrides: ``{VAR: value}`` applied to every host.
    :param host_overrides: ``{host: {VAR: value}}`` applied after ``overrides``.
    :param transport: ``auto`` (default), ``roce`` or ``socket``.
    """
    hosts = _group_hosts(group)
    validate(facts, hosts)
    chosen = cluster_transport(facts, hosts, transport)
    if host_overrides is not None and not hasattr(host_overrides, 'get'):
        raise CommEnvError('host_overrides must be a dict {host: {VAR: value}}, got %r'
                           % (host_overrides,))
    result = {}
    for host in hosts:
        env = host_env(_host_facts(facts, host), chosen)
        _apply_overrides(env, overrides, 'global')
        _apply_overrides(env, (host_overrides or {}).get(host), 'host %r' % (host,))
        result[host] = env
    return result


# ------------------------------------------------------------------- env file

def _quote(value):
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise ValueError('environment value %r holds a control character (newline?)' % (value,))
    if value == '':
        return '""'
    if _UNQUOTED_RE.match(value):
        return value
    if "'" not in value:
        return "'%s'" % value
    return '"%s"' % value.replace('\\', '\\\\').replace('"', '\\"')


def render_env_file(env, header=ENV_FILE_HEADER):
    """A systemd ``EnvironmentFile`` for ``env``: header comment, then sorted ``KEY=value``.

    Values that are not plain words are quoted; ``None`` values are left out.
    The output depends only on ``env``, so re-runs are idempotent.
    """
    if not hasattr(env, 'items'):
        raise ValueError('env must be a dict, got %r' % (env,))
    text = header or ''
    if text and not text.endswith('\n'):
        text += '\n'
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith('#'):
            raise ValueError('every header line must be a comment starting with #, got %r'
                             % (line,))
    lines = []
    for key, value in sorted(((str(k), v) for k, v in env.items()), key=lambda kv: kv[0]):
        if value is None:
            continue
        if not _ENV_NAME_RE.match(key):
            raise ValueError('%r is not a valid environment variable name' % (key,))
        lines.append('%s=%s\n' % (key, _quote(to_env_value(value))))
    return text + ''.join(lines)
