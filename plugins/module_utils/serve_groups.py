# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Serving groups: which nodes of a cluster serve which model, with which engine, on which port.

Pure functions, no I/O: plugins/plugin_utils/serve_group_inputs.py hands in the inventory
and the resolved profiles. The plan is computed once per cluster and read by every role (python_env
picks each node's engine variant and release from it, serve its profile, port and unit, the
summary one endpoint line per group).

Inventory shape (cluster level, e.g. group_vars/all.yml; docs/serving-groups.md):

  llmfleet_serve_groups:
    sparks: {group: gb10, profile: sim-tiny-llama}
    thors:
      hosts: [thor1, thor2]
      profile: sim-tiny-llama-sglang
      port: 8001
      release: sim-sglang-0.5.21-cpu

Per group: ``hosts`` (a list) or ``group`` (an inventory group), ``profile`` (default
llmfleet_serve_profile), ``port`` (default serve_port, 8000), ``unit`` (default
llmfleet-serve-<served model name>), ``release`` (default llmfleet_release) and optionally
``engine``, which must then equal the profile's (the profile is the one source of the engine), and
``replicas`` (default 1): N copies of the group's layout on disjoint slices of its hosts, in inventory
order, each a group of its own named ``<name>-<i>`` (i = 1..N) with the same profile, port, unit and
release; the gateway balances the model across them. ``runtime`` (default venv): ``container`` runs the
engine inside an image, ``image`` (pinned by digest, name@sha256:<64 hex>; without it the node builds
localhost/llmfleet-engine:<release> from the release's wheelhouse), with ``container_engine`` podman or
docker (default podman). Groups that share a served model name (replicas,
or groups written out by hand) must serve the same model with the same engine.
Without llmfleet_serve_groups the cluster has one group, ``default``: its serve_nodes (else its
Ray nodes) serving llmfleet_serve_profile, as before.
"""

import re

from ansible_collections.llmfleet.cluster.plugins.module_utils import serve_unit as _serve_unit
from ansible_collections.llmfleet.cluster.plugins.module_utils.profiles import DEFAULT_PORT

DEFAULT_GROUP = 'default'
UNIT_PREFIX = 'llmfleet-serve'
GROUP_KEYS = {'hosts', 'group', 'profile', 'port', 'unit', 'release', 'engine', 'replicas', 'runtime', 'image',
              'container_engine'}
# How a group's engine runs: from the release's venv on the node, or inside a container image
RUNTIMES = ('venv', 'container')
CONTAINER_ENGINES = ('podman', 'docker')
# The image the container runtime builds on the node when the group names none: the release's engine
# venv installed from the cluster's wheelhouse (roles/serve/tasks/container_image.yml)
BUILT_IMAGE = 'localhost/llmfleet-engine'
_NAME = re.compile(r'^[A-Za-z0-9][A-Za-z0-9_.-]*$')
_UNIT = re.compile(r'^[A-Za-z0-9][A-Za-z0-9_.@-]*$')
FIX = 'fix llmfleet_serve_groups in the inventory (docs/serving-groups.md)'


class ServeGroupError(ValueError):
    """The serving groups of the inventory are inconsistent; the message names group, key, value and fix."""


def unit_name(served_model_name, prefix=UNIT_PREFIX):
    """systemd unit of a served model: <prefix>-<name, characters systemd dislikes as '-'>."""
    return '%s-%s' % (prefix, re.sub(r'[^A-Za-z0-9_.-]', '-', str(served_model_name)))


def variant_name(engine, device, gpu_arch):
    """The python_env variant file of an engine on a node: vLLM keeps the bare arch (cpu, sm_121),
    any other engine is prefixed (sglang_cpu, sglang_sm_121). A CPU profile uses the cpu variant
    whatever GPU arch the inventory names (the sim's nodes are named for the lab's archs)."""
    arch = 'cpu' if device == 'cpu' else gpu_arch
    if not arch:
        raise ServeGroupError('no GPU arch for a %s node on device %s: set llmfleet_gpu_arch' % (engine, device))
    return str(arch) if engine == 'vllm' else '%s_%s' % (engine, arch)


def replicas_of(group):
    """The group's replica count (an int >= 1), or None when its ``replicas`` is not one."""
    value = group.get('replicas', 1)
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None


def entry(spec, name):
    """(the key in llmfleet_serve_groups a planned group comes from, that entry, its replica number, the
    replica count): a group of N replicas plans as <name>-1 .. <name>-N; a plain group is (name, entry, 1, 1)."""
    spec = spec or {}
    if name in spec:
        return name, spec[name], 1, 1
    base, _sep, index = str(name).rpartition('-')
    group = spec.get(base)
    if isinstance(group, dict) and index.isdigit() and (replicas_of(group) or 1) > 1:
        return base, group, int(index), replicas_of(group)
    return name, {}, 1, 1


def members(spec, cluster_hosts, groups, default_members):
    """{group name: [hosts in inventory order]}; checks membership only (no profiles needed).

    spec: llmfleet_serve_groups (a mapping, or empty for the single default group).
    cluster_hosts: the cluster's hosts in inventory order; groups: the inventory's groups.
    """
    if not spec:
        return {DEFAULT_GROUP: list(default_members)}
    if not isinstance(spec, dict):
        raise ServeGroupError('llmfleet_serve_groups: expected a mapping of group name -> {hosts or group, profile, ...}, '
                              'got %s; %s' % (type(spec).__name__, FIX))
    out, owner, problems = {}, {}, []
    order = list(cluster_hosts)
    for name, group in spec.items():
        where = 'llmfleet_serve_groups.%s' % name
        if not isinstance(name, str) or not _NAME.match(name):
            problems.append('%s: the name must be letters, digits, . _ -' % where)
        if not isinstance(group, dict):
            problems.append('%s: expected a mapping, got %r' % (where, group))
            continue
        unknown = sorted(set(group) - GROUP_KEYS)
        if unknown:
            problems.append('%s: unknown key(s) %s (known: %s)' % (where, ', '.join(unknown), ', '.join(sorted(GROUP_KEYS))))
        if ('hosts' in group) == ('group' in group):
            problems.append('%s: give exactly one of hosts (a list) or group (an inventory group)' % where)
            continue
        if 'group' in group:
            if group['group'] not in groups:
                problems.append('%s.group: no inventory group %r' % (where, group['group']))
                continue
            hosts = [h for h in groups[group['group']] if h in order]
        else:
            hosts = group['hosts']
            if not isinstance(hosts, list) or not hosts or not all(isinstance(h, str) for h in hosts):
                problems.append('%s.hosts: expected a non-empty list of host names, got %r' % (where, hosts))
                continue
            stray = [h for h in hosts if h not in order]
            if stray:
                problems.append('%s.hosts: %s not in this cluster' % (where, ', '.join(stray)))
                continue
        if not hosts:
            problems.append('%s: no hosts of this cluster' % where)
            continue
        for h in hosts:
            if h in owner:
                problems.append('%s: host %s is already in group %s (a node serves one group)' % (where, h, owner[h]))
            owner.setdefault(h, name)
        hosts = sorted(set(hosts), key=order.index)
        count = replicas_of(group)
        if count is None:
            problems.append('%s.replicas: %r is not a count (an integer >= 1)' % (where, group.get('replicas')))
        elif count > 1 and len(hosts) % count:
            problems.append('%s.replicas: %d replicas do not split its %d host(s) (%s) into equal slices; give it a '
                            'multiple of %d hosts' % (where, count, len(hosts), ', '.join(hosts), count))
        elif count > 1:
            size = len(hosts) // count
            for i in range(count):
                replica = '%s-%d' % (name, i + 1)
                if replica in spec:
                    problems.append('%s.replicas: its replica %s has the name of another group' % (where, replica))
                out[replica] = hosts[i * size:(i + 1) * size]
            continue
        out[name] = hosts
    if problems:
        raise ServeGroupError('; '.join(problems) + '; ' + FIX)
    return out


def _container(group, where, profile):
    """({engine, image, build} of a container group, or {} for a venv one; the problem, or '')."""
    runtime = group.get('runtime') or 'venv'
    if runtime not in RUNTIMES:
        return {}, '%s.runtime: %r is not a runtime (one of: %s)' % (where, runtime, ', '.join(RUNTIMES))
    if runtime == 'venv':
        stray = sorted(k for k in ('image', 'container_engine') if group.get(k))
        if stray:
            return {}, '%s: %s set, but runtime is venv (set runtime: container, or drop them)' % (where, ', '.join(stray))
        return {}, ''
    engine = group.get('container_engine') or 'podman'
    if engine not in CONTAINER_ENGINES:
        return {}, '%s.container_engine: %r is not one of %s' % (where, engine, ', '.join(CONTAINER_ENGINES))
    image = group.get('image') or ''
    if image and not _serve_unit.image_digest(image):
        return {}, ('%s.image: %r is not pinned by digest: a tag can move under a running cluster; name it as '
                    'name@sha256:<64 hex> (podman/docker image inspect --format {{.Digest}})' % (where, image))
    if profile.get('backend') == 'ray':
        return {}, ('%s.runtime: container, but profile %s runs on the Ray backend, whose ranks are actors of the '
                    "node's Ray (run from the venv): serve it with runtime venv, or a profile of backend mp/native"
                    % (where, profile.get('name') or profile.get('model')))
    return {'engine': engine, 'image': image, 'build': not image}, ''


def plan(spec, cluster_hosts, groups, default_members, profiles, defaults, addresses=None, unit_names=None):
    """The cluster's serving groups, head first in each, as a list (sorted by group name).

    profiles: {profile name: resolved profile} for every profile the groups name.
    defaults: profile, port, release (the single-group values: llmfleet_serve_profile, serve_port,
      llmfleet_release).
      unit_prefix (optional): serve_unit_prefix, the prefix of every unit named after its served model.
    addresses: {host: the address its API binds} (serve_host, else llmfleet_fabric_ip); gives url.
    unit_names: {host: serve_unit_name} where the inventory names a group head's unit itself.
    Each item: name, hosts, head, nnodes, profile, engine, backend, device, served_model_name,
      tensor_parallel_size, pipeline_parallel_size, port, unit, release, url ('' without an address),
      runtime (venv or container) and container ({engine, image, build}; {} for a venv group).
    """
    addresses = addresses or {}
    spec = spec or {}
    hosts_of = members(spec, cluster_hosts, groups, default_members)
    out, problems = [], []
    for name in sorted(hosts_of):
        key, group, replica, replicas = entry(spec, name)
        where = 'llmfleet_serve_groups.%s' % key if spec else 'llmfleet_serve_profile'
        prof_name = group.get('profile') or defaults.get('profile')
        if not prof_name:
            problems.append('%s: no profile (set profile, or llmfleet_serve_profile)' % where)
            continue
        prof = profiles.get(prof_name)
        if prof is None:
            problems.append('%s.profile: %r was not resolved' % (where, prof_name))
            continue
        engine = prof.get('engine')
        if group.get('engine') not in (None, engine):
            problems.append('%s.engine: %r, but profile %s is served by %s (the profile decides: drop engine or '
                            'pick a %s profile)' % (where, group['engine'], prof_name, engine, group['engine']))
        port = group.get('port', defaults.get('port') or DEFAULT_PORT)
        if isinstance(port, str) and port.isdigit():
            port = int(port)
        if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
            problems.append('%s.port: %r is not a TCP port' % (where, port))
        served = prof.get('served_model_name') or prof.get('model')
        unit = group.get('unit') or unit_name(served)
        if not isinstance(unit, str) or not _UNIT.match(unit):
            problems.append('%s.unit: %r is not a systemd unit name' % (where, unit))
        release = group.get('release') or defaults.get('release') or ''
        hosts = hosts_of[name]
        # the head's serve_unit_name, else the group's unit, unless the inventory renames every unit
        # with another prefix (<prefix>-<served model name>); the serve and safeguards roles read it
        prefix = defaults.get('unit_prefix') or UNIT_PREFIX
        unit = (unit_names or {}).get(hosts[0]) or (unit if prefix == UNIT_PREFIX else unit_name(served, prefix))
        container, problem = _container(group, where, prof)
        if problem:
            problems.append(problem)
        out.append({
            'name': name, 'hosts': hosts, 'head': hosts[0], 'nnodes': len(hosts),
            'profile': prof_name, 'engine': engine, 'backend': prof.get('backend'),
            'device': prof.get('device', 'gpu'), 'served_model_name': served,
            'tensor_parallel_size': prof.get('tensor_parallel_size'),
            'pipeline_parallel_size': prof.get('pipeline_parallel_size'),
            'port': port, 'unit': unit, 'release': release,
            'url': 'http://%s:%s' % (addresses[hosts[0]], port) if addresses.get(hosts[0]) else '',
            'replica': replica, 'replicas': replicas, 'model': prof.get('model'),
            'runtime': 'container' if container else 'venv', 'container': container,
        })
    by_name = {}
    for g in out:
        by_name.setdefault(g['served_model_name'], []).append(g)
    for served, same in sorted(by_name.items(), key=lambda i: str(i[0])):
        kinds = {(g['model'], g['engine']) for g in same}
        if len(kinds) > 1:
            problems.append('groups %s serve one model name %r but %s; the gateway sends a request for a name to any '
                            'of them: give them one model and engine, or each its own served_model_name'
                            % (', '.join(g['name'] for g in same), served,
                               ', '.join('%s: %s on %s' % (g['name'], g['model'], g['engine']) for g in same)))
    engines_of_release = {}
    for g in out:
        engines_of_release.setdefault(g['release'], set()).add(g['engine'])
    for release, engines in sorted(engines_of_release.items()):
        if len(engines) > 1:
            names = ', '.join(g['name'] for g in out if g['release'] == release)
            problems.append('groups %s run %s under one release %r: a release is one engine; give each group '
                            'its own release' % (names, ' and '.join(sorted(engines)), release))
    if problems:
        raise ServeGroupError('; '.join(problems) + '; ' + FIX)
    return out


def group_of(plan_groups, host):
    """The group `host` serves in, or None."""
    for group in plan_groups:
        if host in group['hosts']:
            return group
    return None
