# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""After a deploy: judge what playbooks/validate.yml collected, one check per line; JSON + Markdown. Pure.

Input (``raw``), assembled by the playbook from what each host reported:

- ``groups``: the inventory groups; ``inventory``: ``{host: {llmfleet_cluster, llmfleet_fabric_ip,
  gpus_expected}}`` (hostvars subset, enough for ``topology``);
- ``results``: ``{host: {probe, collective, ray, smoke}}``, each ``None`` when that step did not run
  there (unreachable host, not the head, ...):
  ``probe``: ``{ray_service, serve_units (systemctl list-units text), fabric_nic, mtu, fabric_link_up,
  network_facts (False when Ansible found no interfaces at all: no ``ip`` command),
  fabric_peers ({peer fabric IP: ok|lost} from pings over the fabric, or {error}), rdma
  (rdma_info result), audit_env ({VAR: value} from the env files), fabric_transport, orphans (the
  orphans module's ``orphans``: the collection's units, tables and files the node's plan does not name,
  or {error})}``;
  ``collective``: the ``collective_check`` result; ``ray``: the ``ray_cluster_info`` result (its
  failure included); ``smoke``: the ``serve_smoke`` result with ``url`` and ``model``;
- ``params``: thresholds (``fabric_mtu``, ``bw_floor_gbps``, ``latency_max_s``, ``ray_unit``,
  ``serve_unit``, ``model``, ``audit_files``).

``evaluate`` returns the report: ``checks`` (``{status, target, check, detail}``; status PASS, WARN
or FAIL), ``lines`` (``STATUS target: check: detail``), ``clusters`` (topology: nodes, roles,
fabric IPs, transport per link, who serves what) and ``summary``. ``render_markdown`` turns it into
a document that opens with a Mermaid diagram of that topology.
"""

import re

from ansible_collections.llmfleet.cluster.plugins.module_utils import orphans as _orphans
from ansible_collections.llmfleet.cluster.plugins.module_utils import topology

PASS, WARN, FAIL = 'PASS', 'WARN', 'FAIL'
_RANK = {PASS: 0, WARN: 1, FAIL: 2}

# Variables that legitimately differ per host (the node's own NIC/IP); all others in the audited env
# files must agree across a serving group (NCCL_IB_DISABLE on one node only = "wrong type 3 != 4").
# (NCCL_HOSTID, CUDA_VISIBLE_DEVICES and the token file's path: each emulated node's own, from its
# plan's emulation and config directory; a real node sets no NCCL_HOSTID and shares the path)
PER_HOST_VARS = ('VLLM_HOST_IP', 'SGLANG_HOST_IP', 'NCCL_SOCKET_IFNAME', 'GLOO_SOCKET_IFNAME', 'TP_SOCKET_IFNAME',
                 'UCX_NET_DEVICES', 'NCCL_IB_HCA', 'OMPI_MCA_btl_tcp_if_include', 'RAY_NODE_IP',
                 'HOSTNAME', 'NCCL_HOSTID', 'CUDA_VISIBLE_DEVICES', 'RAY_AUTH_TOKEN_PATH')

# Default all-reduce bus-bandwidth floors in Gbit/s per measured transport. RoCE on a DGX Spark's
# 200GbE port: ~90-110 Gbit/s busbw; TCP over the same link: ~10-20; gloo on the CPU sim: ~1.
DEFAULT_BW_FLOORS = {'IB': 50.0, 'Socket': 5.0, 'gloo/TCP': 0.2}

TRANSPORT_LABELS = {'IB': 'RDMA (NET/IB)', 'Socket': 'TCP (NET/Socket)', 'gloo/TCP': 'TCP (gloo)',
                    'mixed': 'mixed RDMA/TCP', None: 'unknown'}

_UNIT_LINE_RE = re.compile(r'^\s*[\u25cf*]?\s*(?P<unit>\S+\.service)\s+(?P<load>\S+)\s+(?P<active>\S+)\s+(?P<sub>\S+)\s*(?P<desc>.*)$')
_DESC_RE = re.compile(r'^(?P<engine>\S+)\s+(?P<model>\S+)\s+rank\s+(?P<rank>\d+)(?:\s+\((?P<kind>[^)]*)\))?')


def check(status, target, name, detail):
    return {'status': status, 'target': target, 'check': name, 'detail': detail}


def line(c):
    return '%s %s: %s: %s' % (c['status'], c['target'], c['check'], c['detail'])


def parse_serve_units(text):
    """``systemctl list-units --all --plain --no-legend`` lines -> [{unit, load, active, sub, description,
    engine, model, rank, api}]."""
    units = []
    for raw in (text or '').splitlines():
        m = _UNIT_LINE_RE.match(raw)
        if not m:
            continue
        u = {'unit': m.group('unit')[:-len('.service')], 'load': m.group('load'), 'active': m.group('active'),
             'sub': m.group('sub'), 'description': m.group('desc').strip(), 'engine': None, 'model': None,
             'rank': None, 'api': False}
        d = _DESC_RE.match(u['description'])
        if d:
            u.update(engine=d.group('engine'), model=d.group('model'), rank=int(d.group('rank')),
                     api=(d.group('kind') or '') == 'API')
        units.append(u)
    return units


def journal_tail(text, unit, lines=6, width=240):
    """The last `lines` journal lines about `unit` in ``journalctl --output=with-unit`` text (the
    unit's own, "<unit>.service[pid]: ...", and systemd's, "init.scope[1]: <unit>.service: Failed
    with result 'timeout'."), each without its date and host and cut at `width` characters."""
    name = unit + '.service'
    out = []
    for raw in (text or '').splitlines():
        parts = raw.split(None, 5)  # weekday, date, time, zone, host, "ident[pid]: message"
        if len(parts) == 6 and name in parts[5]:
            out.append(parts[5].replace('init.scope[1]: ', 'systemd: ', 1)[:width])
    return out[-lines:]


def _num(value, default=0.0):
    try:
        return float(value)
    except (TypeError, ValueError):
        return default


def _fmt(value):
    v = _num(value)
    return ('%d' % v) if v == int(v) else ('%g' % round(v, 3))


def bw_floor(params, transport):
    """The floor (Gbit/s) for a measured transport: ``bw_floor_gbps`` a number, or ``{transport: n}``."""
    floor = (params or {}).get('bw_floor_gbps')
    if isinstance(floor, dict):
        merged = dict(DEFAULT_BW_FLOORS)
        merged.update({k: _num(v) for k, v in floor.items()})
        return merged.get(transport, merged.get('Socket'))
    if floor not in (None, ''):
        return _num(floor)
    return DEFAULT_BW_FLOORS.get(transport, DEFAULT_BW_FLOORS['Socket'])


def _printable(text):
    """A completion's text fit for one report line (a random test model emits control bytes)."""
    return ' '.join(''.join(ch if ch.isprintable() and ch != '\ufffd' else ' ' for ch in str(text or '')).split())


def _rdma_up(probe):
    rdma = (probe or {}).get('rdma') or {}
    return bool(rdma.get('rdma_up_netdevs')) and bool(rdma.get('nccl_ib_hca'))


def _rdma_desc(probe):
    rdma = (probe or {}).get('rdma') or {}
    up = [d for d in rdma.get('rdma_devices') or [] if d.get('state') == 'Up']
    if not up:
        return 'none'
    kinds = sorted({'RoCE' if d.get('link_layer') == 'Ethernet' else (d.get('link_layer') or 'RDMA') for d in up})
    return '%s %s' % ('/'.join(kinds), ','.join('%s(%s)' % (d.get('ibdev'), d.get('netdev')) for d in up))


def _planned_serving_group(candidates, inv):
    """The serving group the plan gives the cluster's first serving node (its `serving_group`): a node
    of `serve_nodes` that no group of llmfleet_serve_groups names is a Ray node only, not a rank. Raw
    data written before the inventory carried the plan's group keeps the `serve_nodes` order."""
    if not any('serving_group' in (inv.get(h) or {}) for h in candidates):
        return candidates
    return next((list(inv[h]['serving_group']) for h in candidates if (inv.get(h) or {}).get('serving_group')), [])


class _Cluster:
    """Everything about one cluster of the inventory while it is judged."""

    def __init__(self, name, raw):
        groups, inv = raw.get('groups') or {}, raw.get('inventory') or {}
        self.name = name
        self.target = 'cluster/%s' % name
        model = topology.Inventory(groups, inv)
        self.ray_nodes = model.cluster_ray_nodes(name)
        self.head = model.ray_head(name)
        self.serving = _planned_serving_group(model.serving_group(name), inv)
        self.hosts = self.ray_nodes + [h for h in self.serving if h not in self.ray_nodes]
        self.inv = inv
        self.results = raw.get('results') or {}
        self.params = dict(raw.get('params') or {})
        api = (inv.get(self.serving[0]) or {}) if self.serving else {}
        for key in ('model', 'serve_unit'):
            self.params[key] = self.params.get(key) or api.get(key) or ''

    def res(self, host, key):
        value = (self.results.get(host) or {}).get(key)
        # a registered result of a skipped task is no result
        return None if isinstance(value, dict) and value.get('skipped') else value

    def ip(self, host):
        return (self.inv.get(host) or {}).get('llmfleet_fabric_ip') or ''

    def gpus_expected(self, host):
        return int(_num((self.inv.get(host) or {}).get('gpus_expected'), 1))


def _ray_result(cl):
    return cl.res(cl.head, 'ray') if cl.head else None


def _alive_by_ip(ray):
    return {n.get('ip'): n for n in (ray or {}).get('nodes') or []}


def _ray_worker_rank(cl, host, probe):
    """True for a serving node whose plan runs no engine unit (serve.runs_unit false, backend ray): its
    rank is a Ray worker of the engine on the group's first node. The fact arrives as text from Ansible."""
    return host in cl.serving and bool(cl.params.get('model')) and str(probe.get('runs_unit')).lower() == 'false'


def _host_checks(cl, host, out):
    probe = cl.res(host, 'probe')
    if probe is None:
        out.append(check(FAIL, host, 'reachable', 'no data from this host (unreachable, or its probe failed); '
                         'check `ansible %s -m ping` and rerun' % host))
        return
    ray_unit = cl.params.get('ray_unit') or 'llmfleet-ray'
    if host in cl.ray_nodes:
        state = (probe.get('ray_service') or 'unknown').strip()
        if state == 'active':
            out.append(check(PASS, host, 'ray service', '%s active' % ray_unit))
        else:
            out.append(check(FAIL, host, 'ray service', '%s is %s; fix: `systemctl start %s` on %s '
                             '(`journalctl -u %s -n 50` says why it stopped)' % (ray_unit, state, ray_unit, host, ray_unit)))
        ray = _ray_result(cl)
        if ray is not None and ray.get('nodes') is not None:
            node = _alive_by_ip(ray).get(cl.ip(host))
            want = cl.gpus_expected(host)
            if node is None:
                out.append(check(FAIL, host, 'ray node', 'not alive in the Ray cluster of %s at %s; fix: `systemctl restart '
                                 '%s` on %s (it must register --node-ip-address=%s)' % (cl.head, cl.ip(host), ray_unit, host, cl.ip(host))))
            elif _num(node.get('gpus')) < want:
                out.append(check(FAIL, host, 'ray node', 'alive at %s but offers %s GPU(s), %d expected; fix: check '
                                 '`nvidia-smi` on %s and ray_node_num_gpus / llmfleet_gpus_per_node'
                                 % (cl.ip(host), _fmt(node.get('gpus')), want, host)))
            else:
                out.append(check(PASS, host, 'ray node', 'alive at %s: %s CPUs, %s GPU(s) (%d expected)'
                                 % (cl.ip(host), _fmt(node.get('cpus')), _fmt(node.get('gpus')), want)))
            drift = [d for d in ray.get('env_drift') or [] if d.get('host') in (host, cl.ip(host))]
            audited = probe.get('audit_env') or {}
            files = ', '.join(cl.params.get('audit_files') or []) or 'the env files'
            if node is None:
                pass  # the ray node line already says it; no worker to audit
            elif drift:
                out.append(check(FAIL, host, 'env audit', 'the Ray worker process differs from %s: %s; fix: `systemctl '
                                 'restart %s` on %s (it started before the env file changed) and redeploy the engine'
                                 % (files, '; '.join('%s=%r (should be %r)' % (d['var'], d.get('actual'), d.get('expected'))
                                                     for d in drift), ray_unit, host)))
            elif audited:
                out.append(check(PASS, host, 'env audit', '%d variable(s) of %s as the Ray worker process sees them'
                                 % (len(audited), files)))
            else:
                out.append(check(WARN, host, 'env audit', 'nothing to audit: %s missing or empty (fabric role not run?)' % files))
    want_mtu = int(_num(cl.params.get('fabric_mtu'), 9000))
    nic = probe.get('fabric_nic') or ''
    if not nic and str(probe.get('network_facts')).lower() == 'false':
        # Ansible reads interfaces with `ip`: without iproute2 its network facts are empty, which says
        # nothing about the inventory (the ping check WARNs the same way about a missing ping)
        out.append(check(WARN, host, 'fabric MTU', 'could not read the interfaces: `ip` not installed (iproute2), so '
                         "Ansible's network facts are empty; the NIC holding %s and its MTU were not checked; "
                         'fix: install iproute2 on %s' % (cl.ip(host), host)))
    elif not nic:
        out.append(check(FAIL, host, 'fabric MTU', 'no interface holds llmfleet_fabric_ip %s; fix the inventory or the '
                         'NIC address (ansible-playbook site.yml --tags fabric --limit %s)' % (cl.ip(host), host)))
    elif not int(_num(probe.get('mtu'))):
        out.append(check(WARN, host, 'fabric MTU', '%s (%s): its MTU was not read (Ansible reads it with `ip`; '
                         'iproute2 missing?); fix: install iproute2 on %s' % (nic, cl.ip(host), host)))
    elif int(_num(probe.get('mtu'))) < want_mtu:
        out.append(check(FAIL, host, 'fabric MTU', '%s (%s) has MTU %s < %d; fix: `ansible-playbook site.yml --tags '
                         'fabric --limit %s` (netplan sets it persistently)' % (nic, cl.ip(host), _fmt(probe.get('mtu')), want_mtu, host)))
    else:
        out.append(check(PASS, host, 'fabric MTU', '%s (%s) MTU %s' % (nic, cl.ip(host), _fmt(probe.get('mtu')))))
    model = cl.params.get('model')
    unit_name = cl.params.get('serve_unit')
    units = [u for u in parse_serve_units(probe.get('serve_units')) if not unit_name or u['unit'] == unit_name]
    if _ray_worker_rank(cl, host, probe):
        # backend ray: the engine's unit runs on the group's first node, this node's rank is a Ray worker
        # of it (validate's Ray lines check the node; the smoke checks the engine)
        out.append(check(PASS, host, 'serve unit', 'no unit here: its rank is a Ray worker of the engine on the '
                         "group's first node"))
    elif host in cl.serving and model:
        active = [u for u in units if u['active'] == 'active']
        if active:
            u = active[0]
            out.append(check(PASS, host, 'serve unit', '%s active: %s' % (u['unit'], u['description'] or model)))
        else:
            if units:
                gone = '' if units[0]['load'] == 'loaded' else ' (unit file %s)' % units[0]['load']
                state = '%s is %s/%s%s' % (units[0]['unit'], units[0]['active'], units[0]['sub'], gone)
            else:
                state = '%s not installed' % (unit_name or 'no llmfleet-serve unit')
            said = journal_tail(probe.get('serve_journal'), units[0]['unit']) if units else []
            out.append(check(FAIL, host, 'serve unit', '%s%s; fix: `journalctl -u %s -n 100` on %s, then '
                             '`ansible-playbook site.yml --tags serve -e serve_state=restarted`'
                             % (state, '; its journal ends: ' + ' | '.join(said) if said else '',
                                unit_name or 'llmfleet-serve-*', host)))
    elif host not in cl.serving and any(u['active'] == 'active' for u in units):
        out.append(check(WARN, host, 'serve unit', '%s runs although %s is not in the serving group; fix: '
                         '`systemctl disable --now %s`' % (units[0]['unit'], host, units[0]['unit'])))
    _orphan_checks(host, probe, out)


def _orphan_checks(host, probe, out):
    """The collection's units on `host` that its plan does not name (the orphans module's listing, in
    check mode): one running is a FAIL naming node and unit; stopped leftovers (enabled units, files,
    nftables tables, the image key of a node that no longer copies a container image from this one) a
    WARN; none a PASS. No line where the listing did not run (older data)."""
    if 'orphans' not in probe or probe.get('orphans') is None:
        return
    found = probe.get('orphans') or {}
    fix = '`ansible-playbook site.yml --limit %s` (the converge removes what the plan does not assign)' % host
    if found.get('error'):
        out.append(check(WARN, host, 'collection units', 'could not list them: %s' % found['error']))
        return
    units = found.get('units') or []
    running = [u for u in units if u.get('running')]
    if running:
        out.append(check(FAIL, host, 'collection units', '%s on %s, which the plan does not assign %s; fix: %s, or '
                         '`systemctl disable --now %s` on %s'
                         % (', '.join('%s runs (%s, %s/%s)' % (u['unit'], u.get('kind'), u.get('active'), u.get('sub'))
                                      for u in running), host, 'it' if len(running) == 1 else 'them', fix,
                            ' '.join(u['unit'] for u in running), host)))
        return
    left = ['%s (%s, %s)' % (u['unit'], u.get('kind'), u.get('active')) for u in units]
    left += ['nft table %s' % t for t in found.get('nft_tables') or []] + list(found.get('files') or [])
    left += _orphans.image_key_parts(found)
    if left:
        out.append(check(WARN, host, 'collection units', 'left over on %s, not in its plan: %s; fix: %s'
                         % (host, '; '.join(left), fix)))
    else:
        out.append(check(PASS, host, 'collection units', 'every llmfleet unit, table and env file on %s is in its plan'
                         % host))


def _fabric_reach_checks(cl, out):
    """Who reaches whom over the fabric (each node pinged the others from its fabric IP).

    A node that reaches none of its peers while none of them reaches it is *cut off*: the FAIL
    names it, its NIC and link state. A node that only misses cut-off peers gets a WARN pointing
    there; one that misses peers which others reach gets a FAIL of its own (a one-way block).
    Probes without ping data (older reports) give no line.
    """
    seen = {}
    for h in cl.hosts:
        probe = cl.res(h, 'probe') or {}
        peers = probe.get('fabric_peers')
        if isinstance(peers, dict):
            seen[h] = peers
    if not seen:
        return
    by_ip = {cl.ip(h): h for h in cl.hosts}

    def reach(a, b):
        """True/False when a pinged b, None when a did not (or could not) ping b."""
        state = (seen.get(a) or {}).get(cl.ip(b))
        return None if state is None else state == 'ok'

    def peers_of(h):
        return [p for p in cl.hosts if p != h]

    cut = set()
    for h in cl.hosts:
        outward = [reach(h, p) for p in peers_of(h)]
        inward = [reach(p, h) for p in peers_of(h)]
        probed = [r for r in outward + inward if r is not None]
        if probed and not any(probed):
            cut.add(h)
    for h in cl.hosts:
        if h not in seen:
            continue
        probe = cl.res(h, 'probe') or {}
        nic = probe.get('fabric_nic') or '?'
        link = probe.get('fabric_link_up')
        where = '%s on %s, link %s' % (cl.ip(h), nic, 'DOWN' if link is False else ('up' if link else 'state unknown'))
        if 'error' in seen[h]:
            out.append(check(WARN, h, 'fabric reachability', 'could not ping the peers: %s' % seen[h]['error']))
            continue
        unknown = sorted(ip for ip in seen[h] if ip not in by_ip)
        lost = [p for p in peers_of(h) if reach(h, p) is False]
        reached = [p for p in peers_of(h) if reach(h, p)]
        if h in cut:
            out.append(check(FAIL, h, 'fabric reachability', 'CUT OFF: %s (%s) reaches none of %s over the fabric and none '
                             'of them reaches it; fix: %s on %s, then the cable/port and switch '
                             '(`nft list ruleset` shows a firewall dropping the fabric)' % (
                                 h, where, ', '.join('%s (%s)' % (p, cl.ip(p)) for p in lost),
                                 '`ip link set %s up`' % nic if link is False else '`ip link show %s`' % nic, h)))
        elif [p for p in lost if p not in cut]:
            out.append(check(FAIL, h, 'fabric reachability', 'from %s (%s) no answer from %s over the fabric; '
                             'fix: a firewall or route on %s or on them (`nft list ruleset`, `ip route get <ip>`)' % (
                                 h, where, ', '.join('%s (%s)' % (p, cl.ip(p)) for p in lost if p not in cut), h)))
        elif lost:
            out.append(check(WARN, h, 'fabric reachability', 'reaches %s; not %s (cut off, see its line)' % (
                ', '.join(reached) or 'no peer', ', '.join(lost))))
        else:
            out.append(check(PASS, h, 'fabric reachability', 'reaches %s from %s' % (
                ', '.join('%s (%s)' % (p, cl.ip(p)) for p in reached) or 'no peer (one-node cluster)', where)))
        if unknown:
            out.append(check(WARN, h, 'fabric reachability', 'pinged %s, no host of this cluster' % ', '.join(unknown)))


def _cluster_ray_check(cl, out):
    if not cl.head:
        out.append(check(FAIL, cl.target, 'ray cluster', 'no ray_head in this cluster'))
        return
    ray = _ray_result(cl)
    if ray is None:
        out.append(check(FAIL, cl.target, 'ray cluster', 'no result from the head %s (unreachable?)' % cl.head))
        return
    if ray.get('nodes') is None:
        out.append(check(FAIL, cl.target, 'ray cluster', 'the Ray probe on the head %s failed: %s; fix: `systemctl status '
                         '%s` on %s' % (cl.head, (ray.get('msg') or '?')[:300], cl.params.get('ray_unit') or 'llmfleet-ray', cl.head)))
        return
    alive = _alive_by_ip(ray)
    missing = [h for h in cl.ray_nodes if cl.ip(h) not in alive]
    want_gpus = sum(cl.gpus_expected(h) for h in cl.ray_nodes)
    gpus = _num(ray.get('gpus'))
    detail = '%d/%d nodes alive, %s GPU(s) offered (%d expected), %s CPUs' % (
        len(cl.ray_nodes) - len(missing), len(cl.ray_nodes), _fmt(gpus), want_gpus, _fmt(ray.get('cpus')))
    if missing:
        out.append(check(FAIL, cl.target, 'ray cluster', detail + '; missing: %s' % ', '.join(
            '%s (%s)' % (h, cl.ip(h)) for h in missing)))
    elif gpus < want_gpus:
        out.append(check(FAIL, cl.target, 'ray cluster', detail + '; fix: the nodes offering fewer GPUs are named above'))
    else:
        out.append(check(PASS, cl.target, 'ray cluster', detail))
    extra = sorted(ip for ip in alive if ip not in {cl.ip(h) for h in cl.ray_nodes})
    if extra:
        out.append(check(WARN, cl.target, 'ray unexpected nodes', 'alive nodes at %s belong to no host of this cluster '
                         '(a node registered its management/LAN address?)' % ', '.join(extra)))


def _env_consistency(cl, out):
    envs = {h: (cl.res(h, 'probe') or {}).get('audit_env') for h in cl.serving}
    envs = {h: e for h, e in envs.items() if e}
    if len(envs) < 2:
        return
    names = sorted({k for e in envs.values() for k in e if k not in PER_HOST_VARS})
    differ = []
    for name in names:
        values = {h: envs[h].get(name) for h in envs}
        if len(set(values.values())) > 1:
            differ.append('%s (%s)' % (name, ', '.join('%s=%s' % (h, values[h] if values[h] is not None else 'unset')
                                                       for h in sorted(values))))
    if differ:
        out.append(check(FAIL, cl.target, 'env consistency', 'serving nodes disagree on %s; fix: set them once for the '
                         'group (fabric_env_overrides / group_vars), then redeploy' % '; '.join(differ)))
    else:
        out.append(check(PASS, cl.target, 'env consistency', '%d shared variable(s) identical on %s'
                         % (len(names), ', '.join(sorted(envs)))))


def _collective_checks(cl, out):
    """Transport really used and all-reduce bandwidth; returns the per-link transport map."""
    results = {h: cl.res(h, 'collective') for h in cl.serving}
    forced_socket = any(((cl.res(h, 'probe') or {}).get('fabric_transport') or 'auto') == 'socket' for h in cl.serving)
    rdma_expected = bool(cl.serving) and all(_rdma_up(cl.res(h, 'probe')) for h in cl.serving) and not forced_socket
    info = {'rdma_expected': rdma_expected, 'transport': None, 'busbw_gbps': None, 'backend': None, 'links': {}}
    if len(cl.serving) < 2:
        out.append(check(WARN, cl.target, 'collective transport', 'one serving node: nothing crosses the fabric'))
        return info
    missing = [h for h in cl.serving if not results.get(h)]
    failed = [h for h in cl.serving if results.get(h) and (results[h].get('error') or results[h].get('failed')
                                                           or results[h].get('unreachable'))]
    if missing or failed:
        why = ['%s: %s' % (h, (results[h].get('error') or results[h].get('msg') or '?')[:300]) for h in failed]
        why += ['%s: did not run (unreachable?)' % h for h in missing]
        out.append(check(FAIL, cl.target, 'all-reduce', 'the all-reduce across %s failed: %s; fix: the fabric IPs must '
                         'reach each other (ping -M do between them) and port %s must be free on %s'
                         % (', '.join(cl.serving), '; '.join(why), cl.params.get('collective_port') or 29533, cl.serving[0])))
        return info
    rank0 = results[cl.serving[0]]
    info['backend'] = rank0.get('backend')
    transports = sorted({r.get('transport') or 'none' for r in results.values()})
    info['transport'] = transports[0] if len(transports) == 1 else 'mixed'
    worst = max((r.get('transport_status') or WARN for r in results.values()), key=lambda s: _RANK.get(s, 1))
    at_worst = [h for h in cl.serving if (results[h].get('transport_status') or WARN) == worst]
    if len({results[h].get('transport_detail') or '' for h in at_worst}) == 1:
        details = [results[at_worst[0]].get('transport_detail') or '']
    else:
        details = ['%s: %s' % (h, results[h].get('transport_detail') or '') for h in at_worst]
    if len(transports) > 1:
        worst = FAIL
        details = ['ranks used different transports: %s; every node of the group must use the same one' % ', '.join(
            '%s=%s' % (h, results[h].get('transport')) for h in cl.serving)]
    out.append(check(worst, cl.target, 'collective transport', '%s (%s, %s): %s' % (
        TRANSPORT_LABELS.get(info['transport'], info['transport']), info['backend'],
        'RDMA Up on every serving node' if rdma_expected else 'RDMA not Up on every serving node', ' | '.join(details))))
    from ansible_collections.llmfleet.cluster.plugins.module_utils import nccl_debug
    ranks = dict(enumerate(cl.serving))
    for r in results.values():
        for key, t in nccl_debug.link_transports(r.get('nccl') or {}, ranks).items():
            prev = info['links'].get(key)
            info['links'][key] = t if prev in (None, t) else 'mixed'
    slowest = min(results.values(), key=lambda r: _num(r.get('busbw_gbps')))
    bus = _num(slowest.get('busbw_gbps'))
    info['busbw_gbps'] = bus
    floor = bw_floor(cl.params, info['transport'])
    size_mb = _num(slowest.get('size_bytes')) / 1048576
    detail = 'busbw %s Gbit/s (algbw %s Gbit/s, %s MiB in %s ms, %d ranks over %s), floor %s Gbit/s' % (
        _fmt(bus), _fmt(slowest.get('algbw_gbps')), _fmt(size_mb), _fmt(_num(slowest.get('time_s')) * 1000),
        len(cl.serving), ', '.join(cl.ip(h) for h in cl.serving), _fmt(floor))
    if not all(r.get('correct') for r in results.values()):
        out.append(check(FAIL, cl.target, 'all-reduce', 'wrong sum on %s; %s' % (
            ', '.join(h for h in cl.serving if not results[h].get('correct')), detail)))
    elif bus < floor:
        out.append(check(FAIL, cl.target, 'all-reduce', detail + '; below the floor: check MTU, the NIC in '
                         'NCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME and a TCP fallback (validate_bw_floor_gbps sets the floor)'))
    else:
        out.append(check(PASS, cl.target, 'all-reduce', detail))
    return info


def _serve_checks(cl, out):
    model = cl.params.get('model')
    if not model:
        return None
    smoke = None
    for h in [cl.serving[0]] if cl.serving else []:
        smoke = cl.res(h, 'smoke')
    if smoke is None:
        out.append(check(FAIL, cl.target, 'serve smoke', 'no completion attempted (API node %s unreachable?)'
                         % (cl.serving[0] if cl.serving else '?')))
        return None
    url = smoke.get('url') or '?'
    if not smoke.get('ok'):
        out.append(check(FAIL, cl.target, 'serve smoke', '%s at %s: %s; fix: `journalctl -u %s -n 100` on %s' % (
            model, url, smoke.get('error') or smoke.get('msg') or 'failed', cl.params.get('serve_unit') or 'llmfleet-serve-*',
            cl.serving[0])))
        return smoke
    # a reasoning parser moves the thinking out of content: show both parts, apart
    reasoning = ', reasoning %r' % _printable(smoke['reasoning'])[:60] if smoke.get('reasoning') else ''
    out.append(check(PASS, cl.target, 'serve smoke', '%d completion(s) of %s from the controller via %s/v1: %s token(s)%s, '
                     'content %r' % (len(smoke.get('latencies_s') or []), model, url,
                                     _fmt(max(smoke.get('completion_tokens') or [0])), reasoning,
                                     _printable(smoke.get('text'))[:60])))
    stream = smoke.get('stream') or {}
    if stream:
        out.append(check(PASS, cl.target, 'serve stream', 'streamed chat completion: %d content and %d reasoning chunk(s), '
                         'first after %s s, closed with [DONE]' % (stream.get('content_chunks') or 0,
                                                                   stream.get('reasoning_chunks') or 0,
                                                                   _fmt(stream.get('first_chunk_s')))))
    limit = _num(cl.params.get('latency_max_s'), 30)
    p50, worst = _num(smoke.get('p50_s')), _num(smoke.get('max_s'))
    detail = 'p50 %s s, max %s s, %s tokens/s (limit %s s)' % (_fmt(p50), _fmt(worst), _fmt(smoke.get('tokens_per_s')), _fmt(limit))
    if p50 > limit:
        out.append(check(FAIL, cl.target, 'serve latency', detail + '; the engine is overloaded or on the wrong '
                         'transport (see the all-reduce line)'))
    else:
        out.append(check(PASS, cl.target, 'serve latency', detail))
    return smoke


def _monitoring_checks(cl, smoke, out):
    """The cluster's Prometheus (roles/monitoring): every scrape target up (asked on the Ray head's
    play), and the engine counter that the smoke completions moved (asked around them)."""
    if not cl.params.get('monitoring'):
        return
    prom = cl.res(cl.head, 'monitoring') if cl.head else None
    if prom is None:
        out.append(check(FAIL, cl.target, 'scrape targets', 'Prometheus was not asked (Ray head %s unreachable?)' % cl.head))
    elif prom.get('error') or not prom.get('targets'):
        out.append(check(FAIL, cl.target, 'scrape targets', '%s: %s; fix: ansible-playbook playbooks/monitoring.yml '
                         '(or -e validate_monitoring=false where the cluster runs no Prometheus)'
                         % (prom.get('url') or '?', prom.get('error') or 'no targets')))
    else:
        targets = prom['targets']
        down = [t for t in targets if t.get('health') != 'up']
        jobs = {}
        for t in targets:
            jobs[t.get('job')] = jobs.get(t.get('job'), 0) + 1
        counts = ', '.join('%s %d' % (j, n) for j, n in sorted(jobs.items()))
        if down:
            out.append(check(FAIL, cl.target, 'scrape targets', '%d of %d down at %s: %s' % (
                len(down), len(targets), prom.get('url'), '; '.join('%s %s (%s): %s' % (
                    t.get('job'), t.get('instance'), t.get('node') or '?', t.get('error') or t.get('health')) for t in down))))
        else:
            out.append(check(PASS, cl.target, 'scrape targets', 'all %d up at %s (%s)' % (len(targets), prom.get('url'), counts)))
    if not smoke or not smoke.get('ok'):
        return  # the smoke line says why; nothing was sent to move a counter
    counter = cl.res(cl.serving[0], 'counter') if cl.serving else None
    if counter is None:
        out.append(check(FAIL, cl.target, 'engine counter', 'not read from Prometheus around the smoke completions'))
        return
    before, after = counter.get('before'), counter.get('after')
    shown = ['none' if value is None else _fmt(_num(value)) for value in (before, after)]
    detail = '%s: %s before the smoke, %s after' % (counter.get('query'), shown[0], shown[1])
    if after is not None and _num(after) > _num(before):
        out.append(check(PASS, cl.target, 'engine counter', detail))
    else:
        out.append(check(FAIL, cl.target, 'engine counter', detail + ' (%s); Prometheus does not see the engine: its '
                         'engine target, or the API rank\'s /metrics' % (counter.get('error') or 'not moved')))


def _topology(cl, coll, smoke):
    ray = _ray_result(cl) or {}
    alive = _alive_by_ip(ray)
    nodes = []
    for h in cl.hosts:
        probe = cl.res(h, 'probe') or {}
        units = parse_serve_units(probe.get('serve_units'))
        serves = sorted({u['model'] or u['unit'] for u in units if u['active'] == 'active'})
        if not serves and _ray_worker_rank(cl, h, probe):
            serves = ['%s (Ray worker)' % cl.params['model']]  # its rank runs in the engine on the group's first node
        node = alive.get(cl.ip(h))
        nodes.append({
            'host': h, 'fabric_ip': cl.ip(h),
            'ray_role': 'head' if h == cl.head else ('worker' if h in cl.ray_nodes else 'none'),
            'serve_rank': cl.serving.index(h) if h in cl.serving else None,
            'api': bool(cl.serving) and h == cl.serving[0],
            'fabric_nic': probe.get('fabric_nic') or '', 'mtu': probe.get('mtu'),
            'rdma': _rdma_desc(probe), 'ray_alive': node is not None,
            'gpus': _num(node.get('gpus')) if node else None, 'gpus_expected': cl.gpus_expected(h),
            'ray_service': probe.get('ray_service') or ('unreachable' if not probe else ''),
            'serves': serves,
        })
    links = []
    group_t = coll.get('transport')
    for i, a in enumerate(cl.serving):
        for b in cl.serving[i + 1:]:
            t = coll['links'].get(tuple(sorted((a, b)))) or group_t
            links.append({'a': a, 'b': b, 'kind': 'collective', 'transport': t,
                          'label': TRANSPORT_LABELS.get(t, 'NET/%s' % t)})
    for h in cl.ray_nodes:
        if h != cl.head and h not in cl.serving:
            links.append({'a': cl.head, 'b': h, 'kind': 'ray', 'transport': 'TCP', 'label': 'Ray control (TCP)'})
    return {'name': cl.name, 'head': cl.head, 'serving': cl.serving, 'api_host': cl.serving[0] if cl.serving else None,
            'model': cl.params.get('model'), 'url': (smoke or {}).get('url'), 'rdma_expected': coll.get('rdma_expected'),
            'transport': group_t, 'backend': coll.get('backend'), 'busbw_gbps': coll.get('busbw_gbps'),
            'bw_floor_gbps': bw_floor(cl.params, group_t),
            'latency_p50_s': (smoke or {}).get('p50_s'), 'nodes': nodes, 'links': links}


def clusters_of(raw):
    groups, inv = raw.get('groups') or {}, raw.get('inventory') or {}
    hosts = set(groups.get('ray_head') or []) | set(groups.get('ray_workers') or []) | set(groups.get('serve_nodes') or [])
    return sorted({topology.cluster_of(inv, h) for h in hosts})


def evaluate(raw):
    """The whole report from what the playbook collected (see the module docstring)."""
    checks, clusters = [], []
    for name in clusters_of(raw):
        cl = _Cluster(name, raw)
        host_checks = []
        for h in cl.hosts:
            _host_checks(cl, h, host_checks)
        _fabric_reach_checks(cl, host_checks)
        cluster_checks = []
        _cluster_ray_check(cl, cluster_checks)
        _env_consistency(cl, cluster_checks)
        coll = _collective_checks(cl, cluster_checks)
        smoke = _serve_checks(cl, cluster_checks)
        _monitoring_checks(cl, smoke, cluster_checks)
        checks.extend(host_checks + cluster_checks)
        clusters.append(_topology(cl, coll, smoke))
    counts = {s: sum(1 for c in checks if c['status'] == s) for s in (PASS, WARN, FAIL)}
    failed_targets = sorted({c['target'] for c in checks if c['status'] == FAIL})
    return {'generated_at': raw.get('generated_at'), 'ok': counts[FAIL] == 0, 'summary': counts,
            'failed_targets': failed_targets, 'checks': checks, 'lines': [line(c) for c in checks],
            'clusters': clusters, 'params': raw.get('params') or {}}


# ----------------------------------------------------------------------------- Markdown
def _mid(name):
    return 'n_' + re.sub(r'\W', '_', name)


def _esc(text):
    return str(text).replace('"', '#quot;').replace('<', '#lt;').replace('>', '#gt;')


def mermaid(report):
    """A ``flowchart`` of every cluster: nodes (roles, fabric IPs, models served) and links (transport)."""
    out = ['flowchart LR']
    for cl in report.get('clusters') or []:
        out.append('  subgraph %s["cluster %s"]' % (_mid('c_' + cl['name']), _esc(cl['name'])))
        for n in cl['nodes']:
            roles = ['ray %s' % n['ray_role']] if n['ray_role'] != 'none' else []
            if n['serve_rank'] is not None:
                roles.append('serve rank %d%s' % (n['serve_rank'], ' (API)' if n['api'] else ''))
            label = '<b>%s</b><br/>%s<br/>%s%s<br/>%s' % (
                _esc(n['host']), _esc(' · '.join(roles) or 'no role'), _esc(n['fabric_ip']),
                (' %s MTU %s' % (_esc(n['fabric_nic']), _esc(n['mtu']))) if n['fabric_nic'] else '',
                _esc('serves ' + ', '.join(n['serves']) if n['serves'] else 'serves nothing'))
            out.append('    %s["%s"]' % (_mid(n['host']), label))
        out.append('  end')
        for link in cl['links']:
            arrow = '<-->' if link['kind'] == 'collective' else '-.-'
            out.append('  %s %s|"%s"| %s' % (_mid(link['a']), arrow, _esc(link['label']), _mid(link['b'])))
        for n in cl['nodes']:
            if n['ray_service'] not in ('', 'active') or (n['ray_role'] != 'none' and not n['ray_alive']):
                out.append('  style %s stroke:#d00,stroke-width:3px' % _mid(n['host']))
    return '\n'.join(out)


def _cell(value):
    if value is None or value == '':
        return '-'
    return str(value).replace('|', '\\|').replace('\n', ' ')


def render_markdown(report):
    """The Markdown report: Mermaid topology first, then nodes, links, measurements and every check."""
    s = report.get('summary') or {}
    md = ['# llmfleet validation report', '', '```mermaid', mermaid(report), '```', '',
          '**%s**: %d PASS, %d WARN, %d FAIL (generated %s)' % (
              'OK' if report.get('ok') else 'FAILED', s.get(PASS, 0), s.get(WARN, 0), s.get(FAIL, 0),
              report.get('generated_at') or '?'), '']
    for cl in report.get('clusters') or []:
        md += ['## Cluster %s' % cl['name'], '',
               '- Ray head: %s; serving group: %s (API on %s)' % (
                   cl['head'] or '-', ', '.join(cl['serving']) or '-', cl['api_host'] or '-'),
               '- Model: %s%s' % (cl['model'] or '-', (' at %s/v1' % cl['url']) if cl['url'] else ''),
               '- Collective: %s via %s, busbw %s Gbit/s (floor %s); RDMA %s' % (
                   TRANSPORT_LABELS.get(cl['transport'], cl['transport']), cl['backend'] or '-',
                   _fmt(cl['busbw_gbps']) if cl['busbw_gbps'] is not None else '-', _fmt(cl['bw_floor_gbps']),
                   'Up on every serving node' if cl['rdma_expected'] else 'not on every serving node'),
               '- Serve latency p50: %s s' % (_fmt(cl['latency_p50_s']) if cl['latency_p50_s'] is not None else '-'),
               '', '### Nodes', '',
               '| Node | Ray role | Serve rank | Fabric IP | NIC / MTU | RDMA | Transport | Ray | GPUs (expected) | Serves |',
               '|---|---|---|---|---|---|---|---|---|---|']
        for n in cl['nodes']:
            t = cl['transport'] if n['serve_rank'] is not None else 'TCP (Ray control)'
            md.append('| %s |' % ' | '.join(_cell(v) for v in (
                n['host'], n['ray_role'], ('%d%s' % (n['serve_rank'], ' (API)' if n['api'] else '')) if n['serve_rank'] is not None else None,
                n['fabric_ip'], '%s / %s' % (n['fabric_nic'] or '?', n['mtu'] if n['mtu'] is not None else '?'), n['rdma'],
                TRANSPORT_LABELS.get(t, t), ('alive' if n['ray_alive'] else 'DOWN (%s)' % (n['ray_service'] or '?'))
                if n['ray_role'] != 'none' else None,
                ('%s (%d)' % (_fmt(n['gpus']), n['gpus_expected'])) if n['gpus'] is not None else '- (%d)' % n['gpus_expected'],
                ', '.join(n['serves']))))
        md += ['', '### Links', '', '| From | To | Kind | Transport |', '|---|---|---|---|']
        for link in cl['links']:
            md.append('| %s | %s | %s | %s |' % (link['a'], link['b'], link['kind'], _cell(link['label'])))
        md.append('')
    md += ['## Checks', '', '| Status | Target | Check | Detail |', '|---|---|---|---|']
    for c in report.get('checks') or []:
        md.append('| %s | %s | %s | %s |' % (c['status'], _cell(c['target']), _cell(c['check']), _cell(c['detail'])))
    md.append('')
    return '\n'.join(md)
