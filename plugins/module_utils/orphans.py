# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The plan is the desired state: what the collection installed on a node that its plan no longer
assigns to it (an orphan) is found here and removed by the module llmfleet.cluster.orphans. Pure.

Two halves:

- ``owned_set``: what the plan assigns to one node (computed on the controller by cluster_plan.py,
  the key ``owned`` of ``llmfleet_plan``): the collection's systemd units and timers, nftables tables
  and files of that node, by the names the roles give them (serve, safeguards, ray_node).
- ``installed`` / ``orphans`` / ``actions``: what a node holds, read from ``systemctl list-unit-files``,
  ``systemctl list-units``, ``nft list tables`` and the collection's directories, classified by the
  collection's naming convention, compared with the owned set, and the commands that remove the rest.

What the collection installs on a node, by role (the names the roles' templates and tasks use):

==================  ======================================================  ============================
role                units (/etc/systemd/system)                             files / nft tables
==================  ======================================================  ============================
serve               <prefix>-<model>.service (engine; llm_server stamps     <config_dir>/<unit>.env,
                    ``# llmfleet-serve-hash:``; with the Ray backend on      <config_dir>/firewall-<unit>.nft,
                    node rank 0 only: owned on every node of the group, the  table inet llmfleet_serve_<model>
                    serve role removes the others), llmfleet-firewall-<unit
                    less llmfleet->.service (every node of the group)
safeguards          llmfleet-watchdog@<unit>.timer (enabled instance), its  <unit>.service.d/50-llmfleet-
                    @.service/-restart@/headroom@ instances; the template    safeguards.conf,
                    units themselves are kept (shared by every unit)        <config_dir>/safeguards/<unit>.json
ray_node            llmfleet-ray.service (ray_node_unit),                    <config_dir>/ray.env, ray.nft,
                    llmfleet-ray-firewall.service                            table inet llmfleet_ray
fabric/python_env/  none                                                     comm.env, engine.env, nccl.env
nccl                                                                         (every node: always owned)
monitoring          llmfleet-monitoring-firewall.service (kept: not planned) table inet llmfleet_monitoring (kept)
gateway             llmfleet-gateway.service, llmfleet-gateway-firewall.     <config_dir>/llmfleet-gateway.env,
                    service (the plan's gateway host only)                   table inet llmfleet_gateway
serve (container    none                                                     on an image's source node: one
runtime)                                                                     line per copying node in
                                                                             serve_image_authorized_keys,
                                                                             ending ``llmfleet-image-<host>``
==================  ======================================================  ============================

The owned set errs on the side of keeping: a firewall unit is owned on every node of a serving group or
Ray cluster whatever the firewall switches say (a role that installs something the set misses would be
undone by the next converge; one the set keeps too much leaves a switched-off firewall where it was).
"""

import posixpath
import re

UNIT_DIR = '/etc/systemd/system'
SERVE_PREFIX = 'llmfleet-serve'
RAY_UNIT = 'llmfleet-ray'
GATEWAY_UNIT = 'llmfleet-gateway'
GATEWAY_TABLE = 'inet llmfleet_gateway'
HASH_MARK = '# llmfleet-serve-hash: '
SAFEGUARDS_DROPIN = '50-llmfleet-safeguards.conf'
# the safeguards' per-engine-unit instances (of template units every engine unit shares)
INSTANCE_TEMPLATES = ('llmfleet-watchdog@', 'llmfleet-watchdog-restart@', 'llmfleet-headroom@')
WATCHDOG_TIMER = 'llmfleet-watchdog@%s.timer'
# never touched here: the template units (one per node, shared by every engine unit) and what the
# monitoring role installs (monitoring is not part of the plan)
KEPT_UNITS = ('llmfleet-watchdog@.service', 'llmfleet-watchdog@.timer', 'llmfleet-watchdog-restart@.service',
              'llmfleet-headroom@.service', 'llmfleet-monitoring-firewall.service')
KEPT_TABLES = ('inet llmfleet_monitoring',)
# env files every node keeps (fabric, python_env, nccl write them on every node they run on)
NODE_ENV = ('comm', 'engine', 'nccl')
# the comment that ends the line of a copying node's image key in its source's authorized_keys
# (roles/serve/tasks/container_copy.yml writes it)
IMAGE_KEY_COMMENT = 'llmfleet-image-'
_IMAGE_KEY_RE = re.compile(r'\s%s(?P<host>\S+)\s*$' % re.escape(IMAGE_KEY_COMMENT))
# a unit that is not stopped: anything but inactive (failed is stopped, but still listed: reset-failed)
_RUNNING = ('active', 'activating', 'deactivating', 'reloading', 'refreshing')


def serve_firewall(unit, config_dir, prefix=SERVE_PREFIX):
    """The serve role's firewall of engine unit `unit` (roles/serve/tasks/firewall.yml names them so):
    {unit (with .service), table ('inet <name>'), file}."""
    short = unit[len(prefix) + 1:] if unit.startswith(prefix + '-') else unit
    return {
        'unit': 'llmfleet-firewall-%s.service' % re.sub('^llmfleet-', '', unit),
        'table': 'inet llmfleet_serve_%s' % re.sub('[^A-Za-z0-9_]', '_', short),
        'file': '%s/firewall-%s.nft' % (config_dir, unit),
    }


def node_assignment(host, group, ray_node, serve_unit_name=''):
    """What one node runs, from its serving group (cluster_plan's planned group, or None) and whether
    it is a Ray node: its group's engine unit, the units safeguards watches there (every node of the
    group), the group's unit prefix and the Ray flag.

    The engine unit is the node's on every node of its group, also where the Ray backend places the
    node's rank as a Ray worker and the serve role runs no unit there: that role removes a unit left
    from another backend itself, in its own order (the API rank drained first, then the others), which
    a removal at the start of the run would undo (a headless rank killed under a serving API rank)."""
    if not group:
        return {'host': host, 'engine_units': [], 'watched': [], 'prefix': SERVE_PREFIX, 'ray': bool(ray_node)}
    unit = group['unit']
    engine = [serve_unit_name or unit]
    return {'host': host, 'engine_units': engine, 'watched': sorted({unit} | set(engine)),
            'prefix': group.get('unit_prefix') or SERVE_PREFIX, 'ray': bool(ray_node)}


def owned_set(nodes, config_dir, ray_unit=RAY_UNIT, watched_extra=(), complete=True, gateway=False, image_keys=None):
    """What the plan assigns to a machine: `nodes` are node_assignment()s of the inventory hosts on it
    (one for a real node; every emulated node of the machine, this host's first). Units and tables
    are the machine's (one systemd and one nftables per machine), files this host's (its config_dir).
    watched_extra: units safeguards_serve_units names. complete: False where the machine also runs
    nodes of another cluster, which this plan does not know (the module then only reports).
    gateway: whether the plan puts the cluster's gateway (roles/gateway) on this machine.
    image_keys: {file, hosts}: the authorized_keys file of this host and the copying nodes whose image
    keys it authorizes there (cluster_plan.image_copiers); another node's line there is an orphan."""
    own = nodes[0]
    units, tables, files, prefixes, engines = set(), set(), set(), {SERVE_PREFIX}, set()
    for node in nodes:
        prefixes.add(node['prefix'])
        for unit in node['engine_units']:
            units.add(unit + '.service')
            engines.add(unit)
        for unit in node['watched']:
            fw = serve_firewall(unit, config_dir, node['prefix'])
            units.update([fw['unit'], WATCHDOG_TIMER % unit])
            tables.add(fw['table'])
            files.add('%s/%s.service.d/%s' % (UNIT_DIR, unit, SAFEGUARDS_DROPIN))
        if node['ray']:
            units.update([ray_unit + '.service', ray_unit + '-firewall.service'])
            tables.add('inet llmfleet_ray')
    for unit in watched_extra:
        units.add(WATCHDOG_TIMER % unit)
        files.add('%s/%s.service.d/%s' % (UNIT_DIR, unit, SAFEGUARDS_DROPIN))
    files.update('%s/%s.env' % (config_dir, name) for name in NODE_ENV)
    for unit in own['engine_units']:
        files.add('%s/%s.env' % (config_dir, unit))
    for unit in sorted(set(own['watched']) | set(watched_extra)):
        files.update([serve_firewall(unit, config_dir, own['prefix'])['file'],
                      '%s/safeguards/%s.json' % (config_dir, unit)])
    if own['ray']:
        files.update(['%s/ray.env' % config_dir, '%s/ray.nft' % config_dir])
    if gateway:
        units.update([GATEWAY_UNIT + '.service', GATEWAY_UNIT + '-firewall.service'])
        tables.add(GATEWAY_TABLE)
        files.add('%s/%s.env' % (config_dir, GATEWAY_UNIT))
    return {
        'config_dir': config_dir,
        'unit_dir': UNIT_DIR,
        # the unit names the module lists (systemctl patterns): the collection's, and a serve prefix of the inventory's
        'patterns': sorted({'llmfleet-*'} | {p + '-*' for p in prefixes if not p.startswith('llmfleet-')}),
        'serve_prefixes': sorted(prefixes),
        'ray_units': sorted({RAY_UNIT, ray_unit}),
        'engine_units': sorted(engines),
        'units': sorted(units),
        'nft_tables': sorted(tables),
        'files': sorted(files),
        'image_keys': {'file': (image_keys or {}).get('file') or '', 'hosts': sorted((image_keys or {}).get('hosts') or [])},
        'complete': bool(complete),
    }


# ---- what a node holds ------------------------------------------------------------------------

_UNIT_FILE_RE = re.compile(r'^(?P<unit>\S+\.(?:service|timer))\s+(?P<state>\S+)(?:\s+(?P<preset>\S+))?\s*$')
_UNIT_RE = re.compile(r'^\s*(?:[\u25cf*]\s+)?(?P<unit>\S+\.(?:service|timer))\s+(?P<load>\S+)\s+(?P<active>\S+)'
                      r'\s+(?P<sub>\S+)(?:\s+(?P<desc>.*))?$')
_TABLE_RE = re.compile(r'^table\s+(?P<family>\S+)\s+(?P<name>\S+)\s*$')


def parse_unit_files(text):
    """``systemctl list-unit-files --no-legend --full`` (the header and the "N unit files listed."
    footer tolerated) -> {unit: state} (enabled, disabled, static, indirect, ...)."""
    out = {}
    for line in (text or '').splitlines():
        match = _UNIT_FILE_RE.match(line.strip())
        if match:
            out[match.group('unit')] = match.group('state')
    return out


def parse_units(text):
    """``systemctl list-units --all --plain --no-legend --full`` -> {unit: {load, active, sub, description}}."""
    out = {}
    for line in (text or '').splitlines():
        match = _UNIT_RE.match(line)
        if match:
            out[match.group('unit')] = {'load': match.group('load'), 'active': match.group('active'),
                                        'sub': match.group('sub'), 'description': (match.group('desc') or '').strip()}
    return out


def parse_tables(text):
    """``nft list tables`` -> ['<family> <name>', ...]."""
    out = []
    for line in (text or '').splitlines():
        match = _TABLE_RE.match(line.strip())
        if match:
            out.append('%s %s' % (match.group('family'), match.group('name')))
    return out


def unit_kind(unit, owned, text=None):
    """The kind of a collection unit by the collection's naming convention (and, for an engine unit of
    another prefix, llm_server's hash stamp in its file text): engine, serve_firewall, watchdog
    (a safeguards instance; 'parent' names its engine unit), ray, ray_firewall, gateway,
    gateway_firewall, kept or unknown."""
    if unit in KEPT_UNITS:
        return 'kept', ''
    base, _dot, suffix = unit.rpartition('.')
    for template in INSTANCE_TEMPLATES:
        if base.startswith(template) and len(base) > len(template):
            return 'watchdog', base[len(template):]
    if unit.startswith('llmfleet-firewall-') and suffix == 'service':
        return 'serve_firewall', ''
    # before the engine units: llm_server runs the gateway too (its file carries the hash stamp)
    if base == GATEWAY_UNIT and suffix == 'service':
        return 'gateway', ''
    if base == GATEWAY_UNIT + '-firewall' and suffix == 'service':
        return 'gateway_firewall', ''
    for ray in owned.get('ray_units') or [RAY_UNIT]:
        if base == ray and suffix == 'service':
            return 'ray', ''
        if base == ray + '-firewall' and suffix == 'service':
            return 'ray_firewall', ''
    if suffix == 'service' and (any(base.startswith(p + '-') for p in owned.get('serve_prefixes') or [SERVE_PREFIX])
                                or HASH_MARK in (text or '')):
        return 'engine', ''
    return 'unknown', ''


def installed(unit_files, units, unit_texts=None, wanted_instances=()):
    """{unit: {'state': list-unit-files state or '', 'enabled': bool, 'file': bool, 'load', 'active', 'sub'}}
    of every unit either listing names (parse_unit_files / parse_units), plus instances enabled through a
    .wants/ symlink (list-unit-files lists only their template). unit_texts: {unit: text} of the unit
    files read from the unit directory (the collection writes its units there and nowhere else): a unit
    has its file there only if it was read (a generated or vendor unit file is not the collection's)."""
    out = {}
    unit_texts = unit_texts or {}
    for unit in sorted(set(unit_files) | set(units) | set(wanted_instances)):
        state = unit_files.get(unit, '')
        run = units.get(unit) or {}
        out[unit] = {'state': state, 'enabled': state in ('enabled', 'enabled-runtime', 'linked', 'linked-runtime',
                                                          'alias') or unit in wanted_instances,
                     'file': unit in unit_texts, 'load': run.get('load', ''),
                     'active': run.get('active', 'inactive'), 'sub': run.get('sub', ''),
                     'description': run.get('description', ''), 'text': unit_texts.get(unit)}
    return out


def orphans(owned, units, tables=(), files=()):
    """What a node holds and its plan does not assign to it.

    units: installed(); tables: parse_tables(); files: the collection's files found on the node
    (env files, firewall files, safeguards drop-ins and settings). Returns {'units': [{unit, kind,
    active, sub, enabled, file, running}], 'nft_tables': [...], 'files': [...], 'unknown': [units]}:
    a unit is listed where it runs, is enabled, failed or has its file (a stopped, disabled unit
    without a file is gone); a safeguards instance follows its engine unit's watchdog timer."""
    owned_units, out, unknown = set(owned.get('units') or []), [], []
    for unit, info in sorted(units.items()):
        kind, parent = unit_kind(unit, owned, info.get('text'))
        if kind == 'kept':
            continue
        if kind == 'unknown':
            unknown.append(unit)
            continue
        if kind == 'watchdog':
            if (WATCHDOG_TIMER % parent) in owned_units:
                continue
        elif unit in owned_units:
            continue
        running = info.get('active') in _RUNNING
        if not (running or info.get('enabled') or info.get('active') == 'failed' or info.get('file')):
            continue
        out.append({'unit': unit, 'kind': kind, 'active': info.get('active') or 'inactive', 'sub': info.get('sub', ''),
                    'enabled': bool(info.get('enabled')), 'file': bool(info.get('file')), 'running': running})
    owned_tables = set(owned.get('nft_tables') or []) | set(KEPT_TABLES)
    extra_tables = [t for t in tables if t not in owned_tables and _collection_table(t)]
    owned_files = set(owned.get('files') or [])
    return {'units': out, 'nft_tables': sorted(extra_tables),
            'files': sorted(f for f in files if f not in owned_files), 'unknown': sorted(unknown)}


def stale_image_keys(text, hosts):
    """The lines of an authorized_keys `text` that authorize an image key the plan no longer grants:
    (the copying nodes they name, the text without them). `hosts`: the nodes that copy from this one."""
    keep, stale = [], []
    for line in (text or '').splitlines(True):
        match = _IMAGE_KEY_RE.search(line)
        if match and match.group('host') not in hosts:
            stale.append(match.group('host'))
        else:
            keep.append(line)
    return stale, ''.join(keep)


def image_key_parts(found):
    """'image key of <node> in <file>' for each stale image key of orphans' result (the module adds
    ``image_keys`` and ``image_key_file``): summary() and validate's report name them so."""
    return ['image key of %s in %s' % (h, found.get('image_key_file') or 'authorized_keys') for h in found.get('image_keys') or []]


def _collection_table(table):
    name = table.split(' ', 1)[-1]
    return name in ('llmfleet_ray', 'llmfleet_gateway') or name.startswith('llmfleet_serve_')


def collection_files(config_dir, config_names, safeguards_names, dropin_units, unit_dir=UNIT_DIR):
    """The collection's files on a node, from what the module listed: `config_names` (the file names
    directly in config_dir), `safeguards_names` (in config_dir/safeguards), `dropin_units` (engine
    units with a safeguards drop-in in the unit directory). Env files, firewall rule files and the
    safeguards' settings; node.json, monitoring.nft and the models' keys are not the reconcile's."""
    out = ['%s/%s' % (config_dir, n) for n in config_names
           if n.endswith('.env') or (n.startswith('firewall-') and n.endswith('.nft')) or n == 'ray.nft']
    out += ['%s/safeguards/%s' % (config_dir, n) for n in safeguards_names if n.endswith('.json')]
    out += ['%s/%s.service.d/%s' % (unit_dir, u, SAFEGUARDS_DROPIN) for u in dropin_units]
    return sorted(out)


def actions(found, unit_dir=UNIT_DIR):
    """The commands (argv) that remove orphans(), in order, and the files to delete between them:
    [('run', argv) | ('remove', path)]. Timers and the safeguards instances stop first (a watchdog
    would restart the engine it watches), then the engine, firewall and Ray units; disabled; their
    files removed; systemd reloaded and failed units reset. Tables are left to the caller (a stopped
    firewall unit deletes its own table: list them again after the stops)."""
    units = found.get('units') or []
    first = [u['unit'] for u in units if u['running'] and (u['kind'] == 'watchdog' or u['unit'].endswith('.timer'))]
    rest = [u['unit'] for u in units if u['running'] and u['unit'] not in first]
    steps = []
    if first:
        steps.append(('run', ['systemctl', 'stop'] + first))
    if rest:
        steps.append(('run', ['systemctl', 'stop'] + rest))
    enabled = [u['unit'] for u in units if u['enabled']]
    if enabled:
        steps.append(('run', ['systemctl', 'disable'] + enabled))
    removed = [posixpath.join(unit_dir, u['unit']) for u in units if u['file'] and u['kind'] != 'watchdog']
    removed += list(found.get('files') or [])
    steps += [('remove', path) for path in removed]
    if removed:
        steps.append(('run', ['systemctl', 'daemon-reload']))
    failed = [u['unit'] for u in units if u['active'] == 'failed' or (u['running'] and u['kind'] != 'watchdog')]
    if failed:
        steps.append(('run', ['systemctl', 'reset-failed'] + failed))
    return steps


def summary(host, found, verb='found'):
    """One line per node: what is (verb: removed, would remove, found) or nothing."""
    parts = ['%s (%s%s)' % (u['unit'], u['kind'], ', running' if u['running'] else '') for u in found.get('units') or []]
    parts += ['nft table %s' % t for t in found.get('nft_tables') or []]
    parts += list(found.get('files') or [])
    parts += image_key_parts(found)
    return '%s: %s' % (host, '%s %s' % (verb, '; '.join(parts)) if parts else 'nothing the plan does not assign')
