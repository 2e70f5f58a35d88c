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

import json
import re
from collections.abc import Mapping

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

def rdma_expectation(host, groups, hostvars, declared=None, transport='auto', container='none', serving=None):
    """Is the fabric of ``host`` expected to be RDMA (RoCE)? ``{'expected': bool, 'reason': str}``.

    In order: ``preflight_rdma_expected`` (``declared``) when set; ``fabric_transport: socket``
    (NCCL_IB_DISABLE=1, no RDMA used); a container (no RDMA devices there); ``fabric_transport:
    roce``; then, as the fabric role's ``auto`` decides: RoCE only when the host is a RoCE platform
    (:data:`RDMA_ARCHS`) serving with a group whose every host is one too (one Thor in the group
    puts the whole group on sockets). ``serving``: the host's serving group as the cluster plan gives it
    (``llmfleet_plan.serving_group``: with llmfleet_serve_groups, the host's own group); None: its
    cluster's default group (topology.Inventory).
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
    if serving is None:
        serving = topology.Inventory(groups, hostvars).serving_group(cluster)
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


# --------------------------------------------------------------------------- host checks
# The whole per-host table: the probe (roles/preflight/templates/host_probe.sh.j2, parsed into
# ``preflight_probe``), the network facts, gpu_info/rdma_info results and the inventory -> the
# ``ok|skip|WARN|FAIL`` lines, in the order the role prints and preflight_report_json stores them.

LINE_PREFIX = {'ok': 'ok  ', 'skip': 'skip', 'warn': 'WARN', 'fail': 'FAIL'}

NO_PYTHON = 'python3 missing'


def _to_int(value, default=0):
    """Jinja's ``int`` filter: '42' -> 42, '42.5' -> 42, anything else -> ``default``."""
    try:
        return int(value)
    except (TypeError, ValueError):
        try:
            return int(float(value))
        except (TypeError, ValueError, OverflowError):
            return default


def _to_float(value):
    """Jinja's ``float`` filter (0.0 when not a number)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


def _jinja_sorted(items):
    """Jinja's ``sort``: case-insensitive for strings."""
    return sorted(items, key=lambda v: v.lower() if isinstance(v, str) else v)


def fabric_nic(facts, fabric_ip):
    """The interface of the network facts holding ``fabric_ip`` (primary or secondary IPv4), or {}.

    Found by address, never by name: the QSFP port's name differs per platform and image.
    """
    nics = [v for v in (facts or {}).values() if isinstance(v, Mapping) and 'device' in v]
    primary = [n for n in nics if isinstance(n.get('ipv4'), Mapping) and n['ipv4'].get('address') == fabric_ip]
    secondary = [n for n in nics for sec in (n.get('ipv4_secondaries') or [])
                 if isinstance(sec, Mapping) and sec.get('address') == fabric_ip]
    return (primary + secondary or [{}])[0]


def network_from_ip_json(text):
    """The network facts the checks read (interfaces by name with device, mtu, active, ipv4 and
    ipv4_secondaries; all_ipv4_addresses), from the host probe's `ip -j -4 addr show` line, in the
    shape Ansible's setup module gives them; None when the probe has no parsable line (an old
    iproute2 without -j: the role then gathers network facts instead)."""
    try:
        links = json.loads(text) if text else None
    except ValueError:
        return None
    if not isinstance(links, list):
        return None
    facts, everything = {}, []
    for link in links:
        if not isinstance(link, Mapping) or not link.get('ifname'):
            continue
        addresses = [a for a in link.get('addr_info') or [] if isinstance(a, Mapping) and a.get('family', 'inet') == 'inet']
        entries = [{'address': a.get('local'), 'prefix': str(a.get('prefixlen', ''))} for a in addresses if a.get('local')]
        everything.extend(e['address'] for e in entries)
        nic = {'device': link['ifname'], 'mtu': link.get('mtu'), 'active': 'UP' in (link.get('flags') or [])}
        if entries:
            nic['ipv4'] = entries[0]
            nic['ipv4_secondaries'] = entries[1:]
        facts[link['ifname']] = nic
    facts['all_ipv4_addresses'] = everything
    return facts


def machine_id_twins(host, hosts, hostvars, machine_id):
    """The other hosts of the run whose probe read the same /etc/machine-id (in run order)."""
    twins = []
    for h in hosts:
        probe = (hostvars.get(h) or {}).get('preflight_probe') if h != host else None
        if isinstance(probe, Mapping) and 'machine_id' in probe and probe['machine_id'] == machine_id:
            twins.append(h)
    return twins


def _network(hv):
    """The host's network facts: from its probe's `ip -j` line, else the gathered network facts."""
    probe = hv.get('preflight_probe') if isinstance(hv.get('preflight_probe'), Mapping) else {}
    return network_from_ip_json(probe.get('ip_addr')) or hv.get('ansible_facts') or {}


def _python_check(host, p, python_ok):
    return check(good='python3 at %s' % p.get('python', '?'), problem='' if python_ok else (
        '%s: no python3 in PATH; install it (apt-get install -y python3): every Ansible module, and so '
        'the fabric and GPU checks, need it' % host))


def _disk_check(host, p, cfg):
    free = round(_to_int(p.get('disk_avail_kb', 0)) / 1048576, 1)
    path = p.get('disk_path', '?')
    return check(
        good='disk: %s GB free at %s for weights in %s (>= %s GB)' % (free, path, cfg['weights_dir'],
                                                                      cfg['min_disk_gb']),
        problem='' if free >= _to_float(cfg['min_disk_gb']) else (
            '%s: only %s GB free at %s (filesystem of %s), preflight_min_disk_gb is %s; free space there or put '
            'the weights on a larger disk (preflight_weights_dir)' % (host, free, path, cfg['weights_dir'],
                                                                      cfg['min_disk_gb'])))


def _machine_id_check(host, p, hosts, hostvars):
    mid = p.get('machine_id', '')
    problem = ''
    if not mid:
        problem = '%s: /etc/machine-id is empty or missing; run `systemd-machine-id-setup` (then reboot)' % host
    else:
        twins = machine_id_twins(host, hosts, hostvars, mid)
        if twins:
            problem = ("%s: /etc/machine-id %s duplicates %s's (cloned image: systemd, DHCP and Ray node ids "
                       "collide); on all but one of %s run `rm /etc/machine-id && systemd-machine-id-setup` and "
                       "reboot" % (host, mid, "'s, ".join(twins), ', '.join(_jinja_sorted([host] + twins))))
    return check(good='/etc/machine-id %s unique among the %d host(s) of this run' % (mid, len(hosts)),
                 problem=problem)


def _ray_port_check(host, p, cfg, is_head):
    port = cfg['ray_port']
    if not is_head:
        return check(skip='Ray port %s: not a ray_head' % port)
    listening = 'port_listening' in p
    unit = p.get('port_unit', '')
    if not listening:
        return check(good='Ray port %s free' % port)
    if re.search(cfg['ray_unit_regex'], unit or ''):
        return check(good='Ray port %s held by our %s' % (port, unit))
    return check(problem=(
        '%s: port %s (Ray GCS) is held by %s (pid %s%s), not by our Ray unit; %s or move Ray to a free port '
        '(ray_node_port)' % (
            host, port, p.get('port_comm', '') or 'an unknown process', p.get('port_pid', '') or '?',
            (', unit %s' % unit) if unit else ', not in a systemd service',
            ('stop it (systemctl disable --now %s)' % unit) if unit else 'stop that process')))


def _ray_session_check(host, p, cfg):
    severity = 'fail' if cfg['stale_session_fatal'] else 'warn'
    session = p.get('ray_session')
    raylet = p.get('raylet', '') == 'yes'
    if 'ray_session' in p and raylet:
        return check(severity=severity, good='Ray session in use (raylet running)')
    good = 'no stale Ray session in %s' % ', '.join(str(d) for d in cfg['ray_temp_dirs'])
    if 'ray_session' not in p:
        return check(severity=severity, good=good)
    return check(severity=severity, good=good, problem=(
        '%s: stale Ray session %s with no raylet running; remove it: rm -rf %s (Ray recreates it; a leftover '
        'owned by another user breaks ray start)' % (host, session, session.split('/session_latest')[0])))


def _clock_check(host, p, cfg):
    container = p.get('container', 'none')
    if container != 'none':
        return check(skip='clock sync: container (%s), the container host keeps the clock' % container)
    leap = p.get('chrony_leap', '')
    synced = p.get('ntp_synced', '') == 'yes' or leap == 'Normal'
    return check(
        severity='fail' if cfg['clock_fatal'] else 'warn',
        good='clock synchronized (%s)' % ('chrony' if leap == 'Normal' else 'timedatectl'),
        problem='' if synced else (
            '%s: clock not synchronized (timedatectl NTPSynchronized=%s, NTP=%s, chrony leap status=%s); enable '
            'time sync: `timedatectl set-ntp true` (systemd-timesyncd) or install and start chrony, then wait for '
            '"System clock synchronized: yes"' % (host, p.get('ntp_synced', '') or 'n/a',
                                                  p.get('ntp_active', '') or 'n/a', leap or 'n/a')))


def _fabric_nic_check(host, hv, nic, python_ok):
    if not python_ok:
        return check(skip=NO_PYTHON)
    if 'llmfleet_fabric_ip' not in hv:
        return check(skip='fabric NIC: llmfleet_fabric_ip not set')
    ip = hv['llmfleet_fabric_ip']
    addresses = (_network(hv).get('all_ipv4_addresses') or [])
    return check(good='fabric NIC %s holds %s' % (nic.get('device', '?'), ip), problem='' if nic else (
        "%s: no interface holds llmfleet_fabric_ip '%s' (IPv4 here: %s); fix llmfleet_fabric_ip, or give the "
        "QSFP port that address" % (host, ip, ', '.join(str(a) for a in addresses) or 'none')))


def _fabric_mtu_check(host, hv, nic, cfg, python_ok):
    if not python_ok:
        return check(skip=NO_PYTHON)
    if not nic:
        return check(skip='fabric MTU: no fabric NIC')
    device, mtu = nic.get('device', '?'), nic.get('mtu', '?')
    return check(
        severity='fail' if cfg['mtu_fatal'] else 'warn',
        good='fabric NIC %s MTU %s' % (device, mtu),
        problem='' if _to_int(nic.get('mtu', 0)) >= _to_int(cfg['fabric_mtu']) else (
            '%s: fabric NIC %s (%s) has MTU %s < %s (preflight_fabric_mtu); the fabric role raises it later in '
            'site.yml (--tags fabric), validate fails on it'
            % (host, device, hv.get('llmfleet_fabric_ip', ''), mtu, cfg['fabric_mtu'])))


def _gpu_arch_check(host, hv, gpu_result, python_ok):
    if not python_ok:
        return check(skip=NO_PYTHON)
    count = gpu_result.get('gpu_count', 0)
    if _to_int(count) <= 0:
        return check(skip='GPU arch: no GPU detected (declared %s; sim or CPU node)'
                     % hv.get('llmfleet_gpu_arch', 'nothing'))
    arch = gpu_result.get('gpu_arch', '')
    declared = hv.get('llmfleet_gpu_arch', '')
    problem = ''
    if not arch:
        problem = '%s: %s GPUs of different archs (%s); serve from one kind of GPU per host' % (
            host, count, ', '.join(str(g.get('arch')) for g in gpu_result.get('gpus') or []))
    elif declared != arch:
        problem = ("%s: llmfleet_gpu_arch '%s' declared but nvidia-smi reports %s; set llmfleet_gpu_arch: %s for "
                   "%s (or move it to the right platform group)" % (host, declared, arch, arch, host))
    elif _to_int(count) < _to_int(hv.get('llmfleet_gpus_per_node', 1)):
        problem = ('%s: llmfleet_gpus_per_node %s but only %s GPU(s) detected; lower llmfleet_gpus_per_node or '
                   'check the driver (nvidia-smi)' % (host, hv.get('llmfleet_gpus_per_node'), count))
    return check(good='GPU arch %s on %s GPU(s) as declared' % (gpu_result.get('gpu_arch', '?'), count),
                 problem=problem)


def host_checks(host, hosts, hostvars, groups, cfg):
    """Every host check of ``host``, in report order, each a :func:`check` dict.

    ``hosts``: the hosts of the run (``ansible_play_hosts_all``; machine-ids and drivers are
    compared among them); ``hostvars``: per host ``preflight_probe`` (its ``ip_addr`` line is the network;
    else ``ansible_facts``, gathered network facts),
    ``preflight_gpu``/``preflight_rdma`` (the modules' results), the inventory's ``llmfleet_*``,
    ``fabric_transport`` and ``preflight_rdma_expected``; ``groups``: the inventory groups;
    ``cfg``: the role's settings (vars/main.yml ``preflight_host_cfg``: ``min_disk_gb``,
    ``weights_dir``, ``fabric_mtu``, ``mtu_fatal``, ``ray_port``, ``ray_unit_regex``,
    ``ray_temp_dirs``, ``stale_session_fatal``, ``clock_fatal``, ``min_cuda``, ``rdma_fatal``).
    """
    hosts = list(hosts or [])
    hv = hostvars.get(host) or {}
    p = hv.get('preflight_probe') or {}
    python_ok = len(p.get('python', '') or '') > 0
    nic = fabric_nic(_network(hv), hv.get('llmfleet_fabric_ip', ''))
    gpu_result = hv.get('preflight_gpu') if isinstance(hv.get('preflight_gpu'), Mapping) else {}
    checks = [
        _python_check(host, p, python_ok),
        _disk_check(host, p, cfg),
        _machine_id_check(host, p, hosts, hostvars),
        _ray_port_check(host, p, cfg, host in (groups.get('ray_head') or [])),
        _ray_session_check(host, p, cfg),
        _clock_check(host, p, cfg),
        _fabric_nic_check(host, hv, nic, python_ok),
        _fabric_mtu_check(host, hv, nic, cfg, python_ok),
        _gpu_arch_check(host, hv, gpu_result, python_ok),
    ]
    if not python_ok:
        checks.append(check(skip='driver/CUDA parity: ' + NO_PYTHON))
        checks.append(check(skip='RDMA state: ' + NO_PYTHON))
        return checks
    fleet = gpu_fleet(hosts if host in hosts else hosts + [host], hostvars)
    checks.append(gpu_parity_check(host, fleet, dict(cfg.get('min_cuda') or {})))
    expectation = rdma_expectation(host, groups, hostvars, declared=hv.get('preflight_rdma_expected'),
                                   transport=hv.get('fabric_transport', 'auto'), container=p.get('container', 'none'),
                                   serving=cfg.get('serving_group'))
    checks.append(rdma_check(host, hv.get('preflight_rdma'), expectation,
                             fabric_ip=hv.get('llmfleet_fabric_ip', '') or '', fabric_nic=nic.get('device', '') or '',
                             fatal=cfg['rdma_fatal']))
    return checks


# What host_checks reads of the other hosts of the run (machine-ids, GPU fleet, clusters, the serving
# group's archs): fleet_view collects them once per run instead of once per host (O(hosts²) hostvars).
FLEET_KEYS = ('llmfleet_cluster', 'llmfleet_gpu_arch', 'preflight_probe', 'preflight_gpu')


def fleet_view(hosts, hostvars):
    """``{host: {key: value}}`` of :data:`FLEET_KEYS` for each of ``hosts`` (keys a host lacks left out)."""
    view = {}
    for h in hosts or []:
        hv = hostvars.get(h) or {}
        view[h] = dict((k, hv[k]) for k in FLEET_KEYS if k in hv)
    return view


def report_lines(checks):
    """The checks as ``ok  |skip|WARN|FAIL <text>`` lines (a text with a line break becomes several)."""
    out = []
    for c in checks:
        skip = str(c.get('skip') or '').strip()
        problem = str(c.get('problem') or '').strip()
        status = 'skip' if skip else (c.get('severity') or 'fail') if problem else 'ok'
        text = skip if status == 'skip' else problem or str(c.get('good') or '').strip()
        out.append('%s %s' % (LINE_PREFIX[status], text))
    return [line.strip() for line in '\n'.join(out).splitlines() if line.strip()]


def host_report(host, hosts, hostvars, groups, cfg):
    """:func:`host_checks` rendered as the report's lines."""
    return report_lines(host_checks(host, hosts, hostvars, groups, cfg))
