# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Pure parsers for RDMA discovery: ``ibdev2netdev`` output, sysfs, ``ip -j addr``.

Nothing here does I/O. The sysfs walker is handed two callables (``listdir`` and
``read_text``) so the module supplies the real filesystem and the tests a dict.

A device entry is a dict::

    {'ibdev': 'rocep1s0f1', 'port': 1, 'netdev': 'enp1s0f1np1', 'state': 'Up',
     'port_state': 'ACTIVE' | 'DOWN' | ... | None,   # IB port state, when known
     'link_layer': 'Ethernet' | 'InfiniBand' | None,
     'ipv4': '192.168.100.10' | None, 'mtu': 9000 | None}

``state`` is ``'Up'`` only when the netdev link is up *and* the RDMA port is ACTIVE
(where the port state is known); anything else ('Down', 'NA', unknown) is ``'Down'``.
"""

import ipaddress
import json
import posixpath
import re

# /sys/class/infiniband/<dev>/ports/<n>/state is "<num>: <NAME>" (ib_verbs port states)
PORT_STATE_NAMES = {
    0: 'NOP',
    1: 'DOWN',
    2: 'INIT',
    3: 'ARMED',
    4: 'ACTIVE',
    5: 'ACTIVE_DEFER',
}

LINK_LAYERS = ('Ethernet', 'InfiniBand')

# `ibdev2netdev`:    "rocep1s0f1 port 1 ==> enp1s0f1np1 (Up)"
_PLAIN_RE = re.compile(
    r'^(?P<ibdev>[^\s()]+)\s+port\s+(?P<port>\d+)\s+==>\s+(?P<netdev>[^\s()]+)'
    r'\s+\((?P<link>[^)]*)\)(?:\s+.*)?$'
)

# `ibdev2netdev -v` (mlnx-tools print_verbose_info):
#   "<pci> <ibdev> (<MT devid> - <part id>) <description> fw <fw> port <n> (<PORT STATE>) ==> <netdev> (<Up|Down>)"
# e.g. "0000:02:00.0 mlx5_0 (MT4115 - MT1523X04353) CX456A - ConnectX-4 QSFP fw 12.23.1020 port 1 (ACTIVE) ==> enp2s0f0 (Up)"
# The PCI address is empty for devices without one (soft RoCE), the port state is
# padded ("(DOWN  )") and the description may itself hold parentheses.
_VERBOSE_RE = re.compile(
    r'^(?:(?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s+)?'
    r'(?P<ibdev>[^\s()]+)\s+\((?P<ids>[^)]*)\)\s*(?P<desc>.*?)\s*\bfw\s+(?P<fw>\S+)'
    r'\s+port\s+(?P<port>\d+)\s+\(\s*(?P<pstate>[A-Za-z_]*)\s*\)'
    r'\s+==>\s+(?P<netdev>[^\s()]+)\s+\((?P<link>[^)]*)\)(?:\s+.*)?$'
)

_LINK_LOCAL_V4 = ipaddress.ip_network('169.254.0.0/16')


def _clean(text):
    if text is None:
        return None
    text = text.strip()
    return text or None


def normalize_state(link_state, port_state=None):
    """Return 'Up' when the link is up and the port (if known) is ACTIVE, else 'Down'."""
    link_up = (link_state or '').strip().lower() == 'up'
    port_ok = port_state is None or port_state == 'ACTIVE'
    return 'Up' if link_up and port_ok else 'Down'


def new_entry(ibdev, port, netdev, state, port_state=None, link_layer=None):
    """Build a device entry with every key present (unknown values are None)."""
    return {
        'ibdev': ibdev,
        'port': int(port),
        'netdev': netdev,
        'state': state,
        'port_state': port_state,
        'link_layer': link_layer,
        'ipv4': None,
        'mtu': None,
    }


def parse_ibdev2netdev_line(line):
    """Parse one line of ``ibdev2netdev`` or ``ibdev2netdev -v``.

    Returns a device entry, or None when the line is not recognised.
    """
    line = line.strip()
    m = _VERBOSE_RE.match(line)
    if m:
        pstate = m.group('pstate').upper() or None
        if pstate == 'NA':
            pstate = None
        return new_entry(
            m.group('ibdev'), m.group('port'), m.group('netdev'),
            normalize_state(m.group('link'), pstate), port_state=pstate,
        )
    m = _PLAIN_RE.match(line)
    if m:
        return new_entry(
            m.group('ibdev'), m.group('port'), m.group('netdev'),
            normalize_state(m.group('link')),
        )
    return None


def parse_ibdev2netdev(text):
    """Parse the whole output of ``ibdev2netdev`` (plain or ``-v``).

    Returns ``(devices, malformed)``: ``devices`` is a list of entries in output
    order; ``malformed`` lists ``{'line_number': n, 'line': text}`` for every
    non-blank line that was not understood (never raises on bad input).
    """
    devices = []
    malformed = []
    for number, raw in enumerate((text or '').splitlines(), start=1):
        if not raw.strip():
            continue
        entry = parse_ibdev2netdev_line(raw)
        if entry is None:
            malformed.append({'line_number': number, 'line': raw.rstrip()})
        else:
            devices.append(entry)
    return devices, malformed


# --------------------------------------------------------------------------- sysfs

def parse_port_state(text):
    """``'4: ACTIVE'`` -> ``'ACTIVE'``, ``'1: DOWN'`` -> ``'DOWN'``; None if unreadable."""
    text = _clean(text)
    if text is None:
        return None
    m = re.match(r'^(\d+)\s*:\s*([A-Za-z_]+)$', text)
    if m:
        return m.group(2).upper()
    m = re.match(r'^(\d+)$', text)
    if m:
        return PORT_STATE_NAMES.get(int(m.group(1)))
    if re.match(r'^[A-Za-z_]+$', text):
        return text.upper()
    return None


def parse_link_layer(text):
    """``'Ethernet'`` / ``'InfiniBand'`` (case-insensitive); None for anything else."""
    text = _clean(text)
    if text is None:
        return None
    for known in LINK_LAYERS:
        if text.lower() == known.lower():
            return known
    return None


def parse_int(text):
    text = _clean(text)
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        return None


def parse_carrier(text):
    """``/sys/class/net/<dev>/carrier``: ``'1'`` -> True, ``'0'`` -> False, else None."""
    value = parse_int(text)
    if value is None:
        return None
    return value == 1


def _join(*parts):
    return posixpath.join(*parts)


def _ports(listdir, ibdev_dir):
    names = [p for p in (listdir(_join(ibdev_dir, 'ports')) or []) if p.isdigit()]
    return sorted(names, key=int)


def _sysfs_netdev(listdir, read_text, root, ibdev, port):
    """The netdev behind an RDMA port, the way ibdev2netdev finds it.

    1. ``ports/<n>/gid_attrs/ndevs/0`` (RoCE; gives ``bond0`` for a bond device);
    2. ``device/net/<netdev>``: the single entry, or the one whose ``dev_port``
       matches the port (multi-port functions), else the first by name.
    """
    ibdir = _join(root, 'class', 'infiniband', ibdev)
    ndev = _clean(read_text(_join(ibdir, 'ports', str(port), 'gid_attrs', 'ndevs', '0')))
    if ndev:
        return ndev
    candidates = sorted(listdir(_join(ibdir, 'device', 'net')) or [])
    if not candidates:
        return None
    if len(candidates) == 1:
        return candidates[0]
    for name in candidates:
        dev_port = parse_int(read_text(_join(root, 'class', 'net', name, 'dev_port')))
        if dev_port is not None and dev_port == int(port) - 1:
            return name
    return candidates[0]


def sysfs_netdev_info(read_text, root, netdev):
    """``{'carrier': bool|None, 'mtu': int|None}`` for ``/sys/class/net/<netdev>``."""
    if not netdev:
        return {'carrier': None, 'mtu': None}
    ndir = _join(root, 'class', 'net', netdev)
    return {
        'carrier': parse_carrier(read_text(_join(ndir, 'carrier'))),
        'mtu': parse_int(read_text(_join(ndir, 'mtu'))),
    }


def collect_sysfs(listdir, read_text, root='/sys'):
    """Walk ``<root>/class/infiniband`` and return device entries.

    ``listdir(path)`` returns a list of names ([] or None when absent) and
    ``read_text(path)`` the file's text (None when absent or unreadable).
    Every RDMA port is returned, with ``netdev`` None when no netdev is bound
    (pure InfiniBand without IPoIB). ``state`` is 'Up' when the port is ACTIVE and
    the netdev carrier is not known to be down. ``mtu`` comes from the netdev.
    """
    base = _join(root, 'class', 'infiniband')
    entries = []
    for ibdev in sorted(listdir(base) or []):
        ibdir = _join(base, ibdev)
        for port in _ports(listdir, ibdir):
            pdir = _join(ibdir, 'ports', port)
            port_state = parse_port_state(read_text(_join(pdir, 'state')))
            link_layer = parse_link_layer(read_text(_join(pdir, 'link_layer')))
            netdev = _sysfs_netdev(listdir, read_text, root, ibdev, port)
            info = sysfs_netdev_info(read_text, root, netdev)
            up = port_state == 'ACTIVE' and info['carrier'] is not False
            entry = new_entry(ibdev, port, netdev, 'Up' if up else 'Down',
                              port_state=port_state, link_layer=link_layer)
            entry['mtu'] = info['mtu']
            entries.append(entry)
    return entries


def merge_sysfs(devices, sysfs_entries):
    """Fill unknown fields of ``devices`` (e.g. from ibdev2netdev) from sysfs entries.

    Matching is by ``(ibdev, port)``. Returns new dicts; inputs are not modified.
    ``state`` is not changed: the tool's view wins.
    """
    index = {(e['ibdev'], e['port']): e for e in sysfs_entries}
    merged = []
    for dev in devices:
        dev = dict(dev)
        extra = index.get((dev['ibdev'], dev['port']))
        if extra:
            for key in ('port_state', 'link_layer', 'mtu'):
                if dev.get(key) is None and extra.get(key) is not None:
                    dev[key] = extra[key]
        merged.append(dev)
    return merged


def fs_from_mapping(files):
    """Build ``(listdir, read_text)`` over ``{path: text}`` (a fake sysfs for tests/dry runs).

    Directories are implied by the paths; a value of None makes an empty directory.
    """
    contents = {}
    dirs = {}
    for path, text in files.items():
        path = posixpath.normpath(path)
        if text is not None:
            contents[path] = text
        else:
            dirs.setdefault(path, set())
        child = path
        parent = posixpath.dirname(child)
        while parent and parent != child:
            dirs.setdefault(parent, set()).add(posixpath.basename(child))
            child, parent = parent, posixpath.dirname(parent)

    def listdir(path):
        return sorted(dirs.get(posixpath.normpath(path), ()))

    def read_text(path):
        return contents.get(posixpath.normpath(path))

    return listdir, read_text


# ------------------------------------------------------------------ ip -j addr

def _pick_ipv4(addr_info):
    candidates = []
    for addr in addr_info or []:
        if not isinstance(addr, dict) or addr.get('family') != 'inet':
            continue
        local = addr.get('local')
        try:
            ip = ipaddress.ip_address(local)
        except ValueError:
            continue
        if ip.is_loopback or addr.get('scope') == 'host':
            continue
        # global scope first, then non-link-local (169.254/16 last), then output order
        rank = (addr.get('scope', 'global') != 'global', ip in _LINK_LOCAL_V4)
        candidates.append((rank, len(candidates), str(ip)))
    if not candidates:
        return None
    return min(candidates)[2]


def parse_ip_addr_json(text):
    """Parse ``ip -j addr show`` into ``{ifname: {'ipv4': str|None, 'mtu': int|None}}``.

    Invalid or empty input gives ``{}``. ``ipv4`` is the first global-scope IPv4
    address, preferring routable over 169.254/16 link-local ones.
    """
    try:
        data = json.loads(text or '')
    except ValueError:
        return {}
    if not isinstance(data, list):
        return {}
    result = {}
    for link in data:
        if not isinstance(link, dict) or not link.get('ifname'):
            continue
        mtu = link.get('mtu')
        result[link['ifname']] = {
            'ipv4': _pick_ipv4(link.get('addr_info')),
            'mtu': mtu if isinstance(mtu, int) and not isinstance(mtu, bool) else None,
        }
    return result


def annotate_addresses(devices, addresses):
    """Return copies of ``devices`` with ``ipv4``/``mtu`` filled from ``parse_ip_addr_json`` output."""
    out = []
    for dev in devices:
        dev = dict(dev)
        info = addresses.get(dev.get('netdev') or '')
        if info:
            if info.get('ipv4') is not None:
                dev['ipv4'] = info['ipv4']
            if info.get('mtu') is not None:
                dev['mtu'] = info['mtu']
        out.append(dev)
    return out


# ------------------------------------------------------------------- summaries

def _unique(values):
    seen = set()
    out = []
    for value in values:
        if value and value not in seen:
            seen.add(value)
            out.append(value)
    return out


def rdma_up_netdevs(devices):
    """Netdevs of Up RDMA ports, de-duplicated, in device order."""
    return _unique(d.get('netdev') for d in devices if d.get('state') == 'Up')


def nccl_ib_hca(devices):
    """Comma-joined ibdevs with an Up port, de-duplicated, in device order ('' if none)."""
    return ','.join(_unique(d.get('ibdev') for d in devices if d.get('state') == 'Up'))


def summarize(devices):
    return {
        'rdma_devices': devices,
        'rdma_up_netdevs': rdma_up_netdevs(devices),
        'nccl_ib_hca': nccl_ib_hca(devices),
    }
