# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Decisions of the host-side preflight checks that compare hosts or read module results.

Pure functions (no I/O): the play hands them what ``llmfleet.cluster.gpu_info`` and
``llmfleet.cluster.rdma_info`` returned, the inventory variables and the probe's values; they
return one *check* in the shape ``playbooks/preflight.yml`` renders as one line::

    {'skip': str,      # non-empty: not checked, and why (a `skip` line)
     'problem': str,   # non-empty: what is wrong, on which host, the values and the fix
     'good': str,      # the `ok` line when there is neither a skip nor a problem
     'severity': 'fail' | 'warn'}   # how a problem is reported

Driver/CUDA parity (:func:`gpu_parity_check`): every host of one GPU arch within a cluster
(``llmfleet_cluster``, default ``default``) must report the same NVIDIA driver and CUDA version,
and at least the CUDA version its arch needs (:data:`MIN_CUDA`, from the field notes: the sm_121
and sm_110 wheels are the cu130 builds).

RDMA state (:func:`rdma_expectation`, :func:`rdma_check`): where the fabric is expected to be
RoCE, an RDMA port must be bound to the fabric NIC (the one holding ``llmfleet_fabric_ip``), Up,
``ACTIVE`` and of link layer Ethernet; otherwise NCCL silently falls back to ``NET/Socket``.
"""

import re

from ansible_collections.llmfleet.cluster.plugins.module_utils import topology

# Lowest CUDA version (as nvidia-smi's header reports it: the highest the driver supports) per
# arch, where the notes give one. sm_121 (DGX Spark GB10) and sm_110 (Jetson Thor) run the cu130
# stack (vLLM +cu130 wheels, torch from the cu130 index, sgl-kernel cu130, CUDA_HOME=cuda-13);
# Hopper runs the cu12x or the cu130 builds.
MIN_CUDA = {
    'sm_121': '13.0',
    'sm_110': '13.0',
    'sm_90': '12.0',
}

ARCH_NAMES = {
    'sm_121': 'DGX Spark GB10',
    'sm_110': 'Jetson Thor',
    'sm_90': 'Hopper',
}

# How to get a newer CUDA on each platform (the driver carries the CUDA version).
MIN_CUDA_FIX = {
    'sm_121': 'update DGX OS (NVIDIA driver 580 or later) until nvidia-smi reports CUDA Version 13.0 or later',
    'sm_110': 'flash JetPack 7 or later (driver 580, CUDA 13.0)',
    'sm_90': 'install an NVIDIA driver of the 525 series or later (CUDA 12.0 or later)',
}

# Platforms whose fabric NIC is a ConnectX RoCE port (fabric_transport auto expects RDMA there)
# and platforms without RoCE (sockets).
RDMA_ARCHS = {'sm_121': 'DGX Spark GB10, ConnectX-7 RoCE'}
SOCKET_ARCHS = {'sm_110': 'Jetson Thor: no RoCE NIC, NCCL over sockets'}

TRANSPORTS = ('auto', 'roce', 'socket')

_VERSION_RE = re.compile(r'^\d+(\.\d+)*$')


def parse_version(text):
    """``'580.95.05'`` -> ``(580, 95, 5)``; None for anything that is not dotted digits."""
    text = str(text or '').strip()
    if not _VERSION_RE.match(text):
        return None
    return tuple(int(p) for p in text.split('.'))


def check(skip='', problem='', good='', severity='fail'):
    return {'skip': skip, 'problem': problem, 'good': good, 'severity': severity}


def _as_bool(value):
    if isinstance(value, bool):
        return value
    if value is None:
        return None
    text = str(value).strip().lower()
    if text in ('', 'none', 'null'):
        return None
    return text in ('1', 'true', 'yes', 'on', 'y')


# ------------------------------------------------------------------ driver / CUDA parity

def gpu_host_entry(cluster, declared_arch, gpu_result):
    """Normalize one host's inventory values and ``gpu_info`` result (or None).

    Returns ``{'cluster', 'declared_arch', 'status', 'arch', 'count', 'driver', 'cuda', 'error'}``
    where ``status`` is ``gpus`` (GPUs detected), ``none`` (no nvidia-smi or no GPU),
    ``error`` (nvidia-smi failed), ``unprobed`` (the module did not run: skipped, failed, missing).
    """
    result = gpu_result if isinstance(gpu_result, dict) else {}
    entry = {
        'cluster': cluster or topology.DEFAULT_CLUSTER,
        'declared_arch': declared_arch or '',
        'status': 'unprobed',
        'arch': None,
        'count': 0,
        'driver': None,
        'cuda': None,
        'error': None,
    }
    if not result or result.get('skipped') or result.get('failed') or 'gpu_count' not in result:
        entry['error'] = result.get('msg') if result.get('failed') else None
        return entry
    try:
        entry['count'] = int(result.get('gpu_count') or 0)
    except (TypeError, ValueError):
        entry['count'] = 0
    entry['driver'] = result.get('driver_version') or None
    entry['cuda'] = result.get('cuda_version') or None
    entry['error'] = result.get('nvidia_smi_error') or None
    if entry['count'] > 0:
        entry['status'] = 'gpus'
        entry['arch'] = result.get('gpu_arch') or None
    elif entry['error']:
        entry['status'] = 'error'
    else:
        entry['status'] = 'none'
    return entry


def _versions(entry):
    return '%s / CUDA %s' % (entry['driver'] or '?', entry['cuda'] or '?')


def _pick_target(pairs):
    """The (driver, cuda) most hosts run; a tie goes to the newest driver."""
    counts = {}
    for pair in pairs:
        counts[pair] = counts.get(pair, 0) + 1
    return max(counts, key=lambda p: (counts[p], parse_version(p[0]) or (), parse_version(p[1]) or ()))


def gpu_parity_check(host, fleet, min_cuda=None):
    """The driver/CUDA check of ``host``.

    ``fleet``: ``{host: gpu_host_entry(...)}`` for every host of the run (the host itself
    included). ``min_cuda``: ``{arch: 'major.minor'}`` merged over :data:`MIN_CUDA` (a None or
    empty value drops the arch's minimum).
    """
    mins = dict(MIN_CUDA)
    mins.update(min_cuda or {})
    me = fleet.get(host)
    if me is None or me['status'] == 'unprobed':
        return check(skip='driver/CUDA parity: GPUs not probed (gpu_info did not run%s)'
                     % ((': ' + me['error']) if me and me['error'] else ''))
    if me['status'] == 'error':
        return check(problem=(
            "%s: nvidia-smi failed (%s), so the NVIDIA driver and CUDA version cannot be compared "
            "(llmfleet_gpu_arch '%s' is declared); fix the driver (`nvidia-smi` must list the GPU: "
            "reinstall or load the NVIDIA kernel module, then reboot)"
            % (host, me['error'], me['declared_arch'] or 'not set')))
    if me['status'] == 'none':
        return check(skip=(
            'driver/CUDA parity: no GPU detected (no nvidia-smi or no device: a sim or CPU node; '
            'declared %s)' % (me['declared_arch'] or 'no llmfleet_gpu_arch')))
    arch = me['arch'] or me['declared_arch']
    if not me['arch']:
        return check(skip=('driver/CUDA parity: GPUs of different archs on this host (see the GPU arch '
                           'line); not compared'))
    if not me['driver'] or not me['cuda']:
        return check(severity='warn', problem=(
            '%s: nvidia-smi did not report the %s (driver %s, CUDA %s), so it cannot be compared '
            'with the other %s hosts; check `nvidia-smi` (its header shows Driver Version and CUDA Version)'
            % (host, 'driver version' if not me['driver'] else 'CUDA version', me['driver'] or '?',
               me['cuda'] or '?', arch)))

    problems = []
    floor = mins.get(arch)
    if floor and (parse_version(me['cuda']) or ()) < (parse_version(floor) or ()):
        problems.append(
            '%s: CUDA %s (driver %s) on %s (%s), which needs CUDA >= %s (the cu130 stack of the notes '
            'for sm_121/sm_110; override with preflight_min_cuda); %s'
            % (host, me['cuda'], me['driver'], arch, ARCH_NAMES.get(arch, arch), floor,
               MIN_CUDA_FIX.get(arch, 'install a newer NVIDIA driver')))

    peers = sorted(h for h, e in fleet.items()
                   if e['status'] == 'gpus' and e['arch'] == arch and e['cluster'] == me['cluster']
                   and e['driver'] and e['cuda'])
    mine = (me['driver'], me['cuda'])
    others = [h for h in peers if h != host and (fleet[h]['driver'], fleet[h]['cuda']) != mine]
    if others:
        target = _pick_target((fleet[h]['driver'], fleet[h]['cuda']) for h in peers)
        off = [h for h in peers if (fleet[h]['driver'], fleet[h]['cuda']) != target]
        problems.append(
            "%s: NVIDIA driver %s differs from %s (%s hosts of cluster '%s' must run one driver and "
            "CUDA version: the engine wheels and NCCL of a release are built and tested against it); "
            "install driver %s (CUDA %s) on %s, or upgrade every %s host of the cluster together"
            % (host, _versions(me),
               ', '.join("%s's %s" % (h, _versions(fleet[h])) for h in others),
               arch, me['cluster'], target[0], target[1], ', '.join(off), arch))
    if problems:
        return check(problem=' -- '.join(problems))
    same = [h for h in peers if h != host]
    return check(good='driver %s / CUDA %s on %s%s, %s' % (
        me['driver'], me['cuda'], arch,
        (' (>= CUDA %s)' % floor) if floor else ' (no minimum known)',
        ("same as %s (cluster '%s')" % (', '.join(same), me['cluster'])) if same
        else "the only %s host of cluster '%s'" % (arch, me['cluster'])))


def gpu_fleet(hosts, hostvars, gpu_var='preflight_gpu'):
    """``{host: gpu_host_entry}`` from hostvars-like mappings (plain dicts in tests)."""
    fleet = {}
    for h in hosts:
        hv = hostvars.get(h) or {}
        fleet[h] = gpu_host_entry(hv.get('llmfleet_cluster'), hv.get('llmfleet_gpu_arch'), hv.get(gpu_var))
    return fleet


# --------------------------------------------------------------------------- RDMA state

def rdma_expectation(host, groups, hostvars, declared=None, transport='auto', container='none'):
    """Is the fabric of ``host`` expected to be RDMA (RoCE)? ``{'expected': bool, 'reason': str}``.

    In order: ``preflight_rdma_expected`` (``declared``) when set; ``fabric_transport: socket``
    (NCCL_IB_DISABLE=1, no RDMA used); a container (no RDMA devices there); ``fabric_transport:
    roce``; then, as the fabric role's ``auto`` decides: RoCE only when the host is a RoCE platform
    (:data:`RDMA_ARCHS`) serving with a group whose every host is one too (one Thor in the group
    puts the whole group on sockets).
    """
    hv = hostvars.get(host) or {}
    arch = hv.get('llmfleet_gpu_arch') or ''
    flag = _as_bool(declared)
    if flag is True:
        return {'expected': True, 'reason': 'preflight_rdma_expected is true'}
    if flag is False:
        return {'expected': False, 'reason': 'RDMA state: preflight_rdma_expected is false'}
    transport = str(transport or 'auto').strip().lower()
    if transport not in TRANSPORTS:
        transport = 'auto'
    if transport == 'socket':
        return {'expected': False, 'reason': (
            'RDMA state: fabric_transport socket (NCCL_IB_DISABLE=1, NCCL over TCP), RDMA not used')}
    if container and container != 'none':
        return {'expected': False, 'reason': (
            'RDMA state: container (%s), no RDMA devices inside; set preflight_rdma_expected: true '
            'to check anyway' % container)}
    if transport == 'roce':
        return {'expected': True, 'reason': 'fabric_transport roce'}
    cluster = topology.cluster_of(hostvars, host)
    serving = topology.serving_group(groups, hostvars, cluster)
    if arch not in RDMA_ARCHS:
        why = SOCKET_ARCHS.get(arch) or ('%s is not a known RoCE platform' % (arch or 'no llmfleet_gpu_arch'))
        return {'expected': False, 'reason': (
            'RDMA state: %s (fabric_transport auto; set preflight_rdma_expected: true to check)' % why)}
    if host not in serving:
        return {'expected': False, 'reason': (
            "RDMA state: not in the serving group of cluster '%s' (no NCCL traffic here)" % cluster)}
    socket_peers = [h for h in serving if (hostvars.get(h) or {}).get('llmfleet_gpu_arch') not in RDMA_ARCHS]
    if socket_peers:
        return {'expected': False, 'reason': (
            "RDMA state: the serving group of cluster '%s' includes %s (no RoCE): fabric_transport "
            "auto puts the whole group on sockets (NCCL_IB_DISABLE=1)" % (
                cluster, ', '.join('%s (%s)' % (h, (hostvars.get(h) or {}).get('llmfleet_gpu_arch') or 'arch not set')
                                   for h in socket_peers)))}
    return {'expected': True, 'reason': '%s serving on RoCE (fabric_transport auto)' % RDMA_ARCHS[arch]}


def _port_text(dev):
    return '%s port %s -> %s (%s)' % (
        dev.get('ibdev'), dev.get('port'), dev.get('netdev') or 'no netdev', dev.get('state') or '?')


def _port_ok(dev):
    return (dev.get('state') == 'Up' and dev.get('port_state') == 'ACTIVE'
            and dev.get('link_layer') == 'Ethernet')


def rdma_check(host, rdma_result, expectation, fabric_ip='', fabric_nic='', fatal=False):
    """The RDMA state check of ``host``.

    ``rdma_result``: what ``llmfleet.cluster.rdma_info`` returned (None or a skipped result when it
    did not run); ``expectation``: :func:`rdma_expectation`'s answer; ``fabric_nic``: the
    interface holding ``fabric_ip`` ('' when none does).
    """
    severity = 'fail' if _as_bool(fatal) else 'warn'
    exp = expectation if isinstance(expectation, dict) else {}
    if not exp.get('expected'):
        return check(skip=exp.get('reason') or 'RDMA state: not expected on this host')
    if not fabric_nic:
        return check(skip='RDMA state: no interface holds llmfleet_fabric_ip (see the fabric NIC line)')
    result = rdma_result if isinstance(rdma_result, dict) else {}
    fallback = 'NCCL would fall back to NET/Socket (TCP, 10-20x slower) without saying so'
    if not result or result.get('skipped') or 'rdma_devices' not in result:
        return check(severity=severity, problem=(
            '%s: RDMA devices not read (rdma_info %s), RDMA is expected (%s); %s. Fix: make '
            'llmfleet.cluster.rdma_info run on the host (python3, /sys/class/infiniband readable)'
            % (host, ('failed: %s' % result.get('msg')) if result.get('failed') else 'did not run',
               exp.get('reason'), fallback)))
    devices = [d for d in result.get('rdma_devices') or [] if isinstance(d, dict)]
    bound = [d for d in devices if d.get('netdev') == fabric_nic]
    where = "fabric NIC %s (llmfleet_fabric_ip %s)" % (fabric_nic, fabric_ip)
    good = [d for d in bound if _port_ok(d)]
    if good:
        d = good[0]
        return check(good='RDMA %s port %s on %s: Up, ACTIVE, Ethernet (RoCE; %s)' % (
            d.get('ibdev'), d.get('port'), where, exp.get('reason')))
    if not devices:
        return check(severity=severity, problem=(
            '%s: no RDMA device at all (ibdev2netdev and /sys/class/infiniband show none; source %s), '
            'but RDMA is expected on %s (%s); %s. Fix: install rdma-core and the ConnectX driver '
            '(modprobe mlx5_ib; DOCA-OFED on DGX OS) until `ibdev2netdev` lists the port, or set '
            'fabric_transport: socket (or preflight_rdma_expected: false) if this host has no RoCE NIC'
            % (host, result.get('source') or 'none', where, exp.get('reason'), fallback)))
    if not bound:
        up = [d for d in devices if d.get('state') == 'Up' and d.get('netdev')]
        up_nics = sorted({d['netdev'] for d in up})
        hint = ('RDMA is Up on %s: put llmfleet_fabric_ip on %s (or set llmfleet_fabric_ip to its address)'
                % (', '.join(up_nics), 'that port' if len(up_nics) == 1 else 'one of those ports')) if up else \
            'cable a ConnectX port, bring it up and give it llmfleet_fabric_ip'
        return check(severity=severity, problem=(
            '%s: no RDMA device is bound to %s (RDMA ports here: %s); %s. Fix: %s'
            % (host, where, ', '.join(_port_text(d) for d in devices), fallback, hint)))
    d = bound[0]
    state = '%s (port state %s, link layer %s)' % (d.get('state') or '?', d.get('port_state') or 'unknown',
                                                   d.get('link_layer') or 'unknown')
    if d.get('link_layer') == 'InfiniBand':
        fix = ('the port runs InfiniBand, not Ethernet (RoCE): set it to Ethernet '
               '(mlxconfig -d %s set LINK_TYPE_P%s=2, then reboot)' % (d.get('ibdev'), d.get('port')))
    elif d.get('state') != 'Up' or d.get('port_state') not in ('ACTIVE', None):
        fix = ('check the QSFP cable and the peer port, `ip link set %s up`, then `ibdev2netdev` must show '
               '(Up) and /sys/class/infiniband/%s/ports/%s/state 4: ACTIVE'
               % (fabric_nic, d.get('ibdev'), d.get('port')))
    else:
        fix = ('sysfs does not say the port is ACTIVE on Ethernet: read /sys/class/infiniband/%s/ports/%s/'
               '{state,link_layer} and fix the RDMA driver (rdma-core, mlx5_ib)' % (d.get('ibdev'), d.get('port')))
    return check(severity=severity, problem=(
        '%s: RDMA device %s port %s on %s is %s, expected Up / ACTIVE / Ethernet (%s); %s. Fix: %s'
        % (host, d.get('ibdev'), d.get('port'), where, state, exp.get('reason'), fallback, fix)))
