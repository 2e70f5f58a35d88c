# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Which transport NCCL really used, from its ``NCCL_DEBUG=INFO`` output. Pure, no I/O.

NCCL falls back from RDMA (``NET/IB``: InfiniBand or RoCE) to kernel TCP (``NET/Socket``) without
an error: a container without ``/dev/infiniband``, a missing ``libibverbs``, ``NCCL_IB_DISABLE=1``
left in an env file. The job runs, up to ten times slower. The only evidence is a few INFO lines:

- ``NET/IB : Using [0]rocep1s0f1:1/RoCE [RO]; OOB enp1s0f1np1:192.168.100.10<0>``: IB devices found
- ``NET/IB : No device found.``, ``Failed to open libibverbs.so[.1]``: why there is no IB
- ``NCCL_IB_DISABLE set by environment to 1.``: switched off on purpose (or by a stale env file)
- ``Using network IB`` / ``Using network Socket``: the network plugin the communicator took
- ``Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA``: the transport of one peer link

``summarize`` folds a log into one dict; ``verdict`` says whether that matches what the hosts can
do (RDMA detected by ``rdma_info`` but NCCL on sockets is a silent fallback).
"""

import re

_PREFIX = r'(?:.*?\bNCCL INFO\s+)'
_NETWORK_RE = re.compile(_PREFIX + r'Using network\s+(?P<net>.+?)\s*$')
_IB_USING_RE = re.compile(_PREFIX + r'NET/IB\s*:\s*Using\s+(?P<devs>.*?)(?:;\s*OOB\s+(?P<oob>\S+))?\s*$')
_IB_NONE_RE = re.compile(_PREFIX + r'NET/IB\s*:\s*No device found')
_SOCKET_USING_RE = re.compile(_PREFIX + r'NET/Socket\s*:\s*Using\s+(?P<devs>.*?)\s*$')
_IB_DISABLE_RE = re.compile(_PREFIX + r'NCCL_IB_DISABLE set by environment to\s*(?P<value>\S+?)\.?\s*$')
_IBVERBS_RE = re.compile(r'(?:Failed to open libibverbs|libibverbs\.so.*(?:cannot open|not found)|'
                         r'Call to ibv_\w+ failed)')
_CHANNEL_RE = re.compile(
    _PREFIX + r'Channel\s+(?P<channel>\d+)(?:/\d+)?\s*:\s*(?P<src>\d+)(?:\[\d+\])?\s*->\s*(?P<dst>\d+)(?:\[\d+\])?'
    r'(?:\s*\[(?P<dir>send|receive)\])?\s+via\s+(?P<via>\S+)')
_VERSION_RE = re.compile(r'NCCL version\s+(?P<version>\d+\.\d+\.\d+)')
# One IB device in "[0]rocep1s0f1:1/RoCE" or "[0]={[0] rocep130s0:1/RoCE, [1] rocep130s0:2/RoCE}"
_IB_DEV_RE = re.compile(r'(?P<dev>[A-Za-z0-9_.-]+):(?P<port>\d+)/(?P<layer>RoCE|IB)\b')
_SOCKET_DEV_RE = re.compile(r'\[\d+\](?P<dev>[A-Za-z0-9_.@-]+):(?P<ip>[0-9a-fA-F.:%]+)<')

# The transport names a summary reports.
IB = 'IB'
SOCKET = 'Socket'


def _net_kind(via):
    """'NET/IB/0/GDRDMA' -> 'IB'; 'NET/Socket/1' -> 'Socket'; 'P2P/IPC' -> 'P2P'; 'SHM/direct/direct' -> 'SHM'."""
    parts = via.split('/')
    if parts[0] == 'NET' and len(parts) > 1:
        return parts[1]
    return parts[0]


def parse_line(line):
    """One event dict for an INFO line that says something about the transport, else None."""
    line = line.rstrip('\n')
    m = _CHANNEL_RE.match(line)
    if m:
        via = m.group('via')
        return {'kind': 'channel', 'channel': int(m.group('channel')), 'src': int(m.group('src')),
                'dst': int(m.group('dst')), 'direction': m.group('dir') or '', 'via': via,
                'transport': _net_kind(via), 'gdr': via.endswith('/GDRDMA') or via.endswith('/GDR')}
    m = _NETWORK_RE.match(line)
    if m:
        return {'kind': 'network', 'network': m.group('net')}
    m = _IB_NONE_RE.match(line)
    if m:
        return {'kind': 'ib_none'}
    m = _IB_USING_RE.match(line)
    if m:
        devs = [{'device': d.group('dev'), 'port': int(d.group('port')), 'link_layer': d.group('layer')}
                for d in _IB_DEV_RE.finditer(m.group('devs'))]
        return {'kind': 'ib_devices', 'devices': devs, 'oob': m.group('oob') or ''}
    m = _SOCKET_USING_RE.match(line)
    if m:
        devs = [{'device': d.group('dev'), 'ip': d.group('ip')} for d in _SOCKET_DEV_RE.finditer(m.group('devs'))]
        return {'kind': 'socket_devices', 'devices': devs}
    m = _IB_DISABLE_RE.match(line)
    if m:
        return {'kind': 'ib_disabled', 'value': m.group('value')}
    if 'NCCL' in line and _IBVERBS_RE.search(line):
        return {'kind': 'ibverbs_missing', 'line': line.strip()}
    m = _VERSION_RE.search(line)
    if m:
        return {'kind': 'version', 'version': m.group('version')}
    return None


def summarize(text):
    """What a process's NCCL INFO output says about its transport.

    Returns ``{transport, networks, link_layers, gdr, channels, net_channels, ib_devices,
    socket_devices, ib_none, ib_disabled_by_env, ibverbs_missing, version, evidence}``:
    ``transport`` is ``IB`` or ``Socket`` (or a plugin name such as ``Libfabric``), ``mixed`` when the
    peer links disagree, and ``None`` when the output holds no transport line (NCCL_DEBUG unset).
    """
    out = {'transport': None, 'networks': [], 'link_layers': [], 'gdr': False, 'channels': [],
           'net_channels': {}, 'ib_devices': [], 'socket_devices': [], 'ib_none': False,
           'ib_disabled_by_env': False, 'ibverbs_missing': False, 'version': None, 'evidence': []}
    seen_channels = set()
    for raw in (text or '').splitlines():
        ev = parse_line(raw)
        if ev is None:
            continue
        kind = ev['kind']
        if kind != 'version' and len(out['evidence']) < 20 and raw.strip() not in out['evidence']:
            out['evidence'].append(raw.strip())
        if kind == 'network':
            if ev['network'] not in out['networks']:
                out['networks'].append(ev['network'])
        elif kind == 'ib_none':
            out['ib_none'] = True
        elif kind == 'ib_devices':
            for d in ev['devices']:
                if d not in out['ib_devices']:
                    out['ib_devices'].append(d)
                if d['link_layer'] not in out['link_layers']:
                    out['link_layers'].append(d['link_layer'])
        elif kind == 'socket_devices':
            for d in ev['devices']:
                if d not in out['socket_devices']:
                    out['socket_devices'].append(d)
        elif kind == 'ib_disabled':
            out['ib_disabled_by_env'] = ev['value'] not in ('0', '')
        elif kind == 'ibverbs_missing':
            out['ibverbs_missing'] = True
        elif kind == 'version':
            out['version'] = out['version'] or ev['version']
        elif kind == 'channel':
            key = (ev['src'], ev['dst'], ev['channel'], ev['direction'])
            if key in seen_channels:
                continue
            seen_channels.add(key)
            out['channels'].append({k: ev[k] for k in ('channel', 'src', 'dst', 'direction', 'transport', 'gdr')})
            if ev['transport'] not in ('P2P', 'SHM', 'NVLS', 'CollNet'):
                out['net_channels'][ev['transport']] = out['net_channels'].get(ev['transport'], 0) + 1
            out['gdr'] = out['gdr'] or ev['gdr']
    net_kinds = sorted(out['net_channels'])
    if len(net_kinds) > 1:
        out['transport'] = 'mixed'
    elif net_kinds:
        out['transport'] = net_kinds[0]
    elif len(out['networks']) > 1:
        out['transport'] = 'mixed'
    elif out['networks']:
        out['transport'] = out['networks'][0]
    return out


def link_transports(summary, ranks):
    """Per peer link ``{(host_a, host_b): transport}`` from the channel lines (``ranks``: rank -> host)."""
    links = {}
    for ch in summary.get('channels') or []:
        if ch['transport'] in ('P2P', 'SHM', 'NVLS', 'CollNet'):
            continue
        a, b = ranks.get(ch['src']), ranks.get(ch['dst'])
        if a is None or b is None or a == b:
            continue
        key = tuple(sorted((a, b)))
        prev = links.get(key)
        links[key] = ch['transport'] if prev in (None, ch['transport']) else 'mixed'
    return links


def _why_socket(summary):
    reasons = []
    if summary.get('ib_disabled_by_env'):
        reasons.append('NCCL_IB_DISABLE=1 is set in the engine environment (remove it from the env files, '
                       'or set fabric_transport: roce)')
    if summary.get('ibverbs_missing'):
        reasons.append('libibverbs could not be opened (install rdma-core/libibverbs1; in a container pass '
                       '--device=/dev/infiniband --cap-add=IPC_LOCK --ulimit memlock=-1)')
    if summary.get('ib_none'):
        reasons.append('NCCL found no IB device (check NCCL_IB_HCA against ibdev2netdev, and /dev/infiniband '
                       'in containers)')
    if summary.get('ib_devices') and not reasons:
        reasons.append('IB devices were found but the Socket network was chosen (NCCL_NET=Socket? a mismatched '
                       'transport on a peer?)')
    return '; '.join(reasons) or 'no reason in the log; rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET'


def describe(summary):
    """Short human form: 'NET/IB (RoCE, GDRDMA)', 'NET/Socket (TCP)', 'none logged'."""
    t = summary.get('transport')
    if t is None:
        return 'none logged'
    if t == IB:
        extra = ', '.join((summary.get('link_layers') or []) + (['GDRDMA'] if summary.get('gdr') else []))
        return 'NET/IB' + (' (%s)' % extra if extra else '')
    if t == SOCKET:
        return 'NET/Socket (TCP)'
    if t == 'mixed':
        return 'mixed (%s)' % ', '.join('NET/%s x%d' % kv for kv in sorted(summary.get('net_channels', {}).items()))
    return 'NET/%s' % t


def verdict(summary, rdma_expected):
    """``(status, detail)``: PASS / WARN / FAIL of the transport a log shows against the hosts.

    ``rdma_expected``: every rank's host has an Up RDMA device (``rdma_info``) and the fabric
    transport was not forced to sockets, so NCCL should be on ``NET/IB``.
    """
    t = summary.get('transport')
    if t is None:
        return ('WARN', 'NCCL logged no transport line; run the check with NCCL_DEBUG=INFO '
                        'NCCL_DEBUG_SUBSYS=INIT,NET')
    if t == 'mixed':
        return ('FAIL', 'peer links disagree: %s; every node of the group must use the same transport '
                        '(NCCL_IB_DISABLE and NCCL_IB_HCA identical across the group)' % describe(summary))
    if t == IB:
        return ('PASS', '%s%s' % (describe(summary), '' if rdma_expected else ' (RDMA used although not every '
                                  'node reported an Up RDMA port)'))
    if t == SOCKET and rdma_expected:
        return ('FAIL', 'silent fallback to TCP: RDMA is Up on every node (rdma_info) but NCCL used '
                        'NET/Socket; %s' % _why_socket(summary))
    if t == SOCKET:
        return ('PASS', 'NET/Socket (TCP), as expected without RDMA on every node')
    return ('PASS', describe(summary))
