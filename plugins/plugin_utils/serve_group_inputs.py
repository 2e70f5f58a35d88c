# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The serving groups and engine variant of a host, read from the inventory's hostvars on the controller
(plugins/module_utils/serve_groups.py does the planning). The cluster_plan filter builds the plan with
them; they are no filters of their own (roles read the plan, never the inventory model twice).
"""
import os

import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.llmfleet.cluster.plugins.plugin_utils.plain_data import plain
from ansible_collections.llmfleet.cluster.plugins.plugin_utils import lazy_import
from ansible_collections.llmfleet.cluster.plugins.filter.serving import serve_profile

_release = lazy_import.module_utils('engine_release')
_profiles = lazy_import.module_utils('profiles')
_groups = lazy_import.module_utils('serve_groups')
_topology = lazy_import.module_utils('topology')

VARIANTS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                            'roles', 'python_env', 'vars', 'variants')
_VARIANTS_CACHE = {}


def _var(hostvars, host, name, default=None):
    value = (hostvars.get(host) or {}).get(name)
    return default if value is None else plain(value)


def _cluster(groups, hostvars, host):
    """(the inventory model, `host`'s cluster): module_utils/topology.Inventory, as the gate reads it."""
    inventory = _topology.Inventory(plain(groups), hostvars, (host,))
    return inventory, inventory.cluster[host]


def serve_group_members(host, groups, hostvars):
    """{group name: hosts} of `host`'s cluster (membership only: no profile is resolved)."""
    inventory, cluster = _cluster(groups, hostvars, host)
    try:
        return inventory.group_members(cluster, _var(hostvars, host, 'llmfleet_serve_groups'))
    except _groups.ServeGroupError as exc:
        raise AnsibleFilterError('%s: %s' % (host, exc)) from exc


def serve_groups(host, groups, hostvars):
    """The serving groups of `host`'s cluster (list, by name), each with its profile's engine, backend,
    served name, sizes, port, unit and release."""
    spec = _var(hostvars, host, 'llmfleet_serve_groups')
    extras = _var(hostvars, host, 'llmfleet_serve_profiles_extra', {})
    defaults = {'profile': _var(hostvars, host, 'llmfleet_serve_profile'),
                'port': _var(hostvars, host, 'serve_port'),
                'release': _var(hostvars, host, 'llmfleet_release'),
                'unit_prefix': _var(hostvars, host, 'serve_unit_prefix')}
    if not spec and not defaults['profile']:
        return []  # an inventory that serves nothing (no profile, no groups): no groups to plan
    names = {g.get('profile') for g in (spec or {}).values() if isinstance(g, dict)} | {defaults['profile']}
    try:
        profiles = {n: serve_profile(n, extras) for n in names if n}
        inventory, cluster = _cluster(groups, hostvars, host)
        cluster_hosts = inventory.cluster_hosts(cluster)
        addresses = {h: _var(hostvars, h, 'serve_host') or _var(hostvars, h, 'llmfleet_fabric_ip') for h in cluster_hosts}
        unit_names = {h: _var(hostvars, h, 'serve_unit_name') for h in cluster_hosts}
        return _groups.plan(spec, cluster_hosts, inventory.groups, inventory.serving_group(cluster),
                            profiles, defaults, addresses, {h: n for h, n in unit_names.items() if n})
    except (_groups.ServeGroupError, _profiles.ProfileError) as exc:
        raise AnsibleFilterError('%s: %s' % (host, exc)) from exc


def serve_group_of(host, groups, hostvars):
    """The serving group `host` belongs to ({} when it serves nothing)."""
    return _groups.group_of(serve_groups(host, groups, hostvars), host) or {}


def _load_variants(variant_dir):
    """{file stem: python_env_variant mapping} of the variant files in variant_dir, cached per
    (directory, files' names and mtimes): the filter runs for every host, the files rarely change."""
    variant_dir = os.path.expanduser(variant_dir)
    try:
        entries = sorted(e for e in os.listdir(variant_dir) if e.endswith(('.yml', '.yaml')) and not e.startswith('.'))
        stats = tuple((e, os.stat(os.path.join(variant_dir, e)).st_mtime_ns) for e in entries)
    except OSError as exc:
        raise AnsibleFilterError('engine_variant: cannot read the variants directory %s (%s); fix llmfleet_variants_dir'
                                 % (variant_dir, exc)) from exc
    key = (variant_dir, stats)
    if key not in _VARIANTS_CACHE:
        out = {}
        for entry in entries:
            path = os.path.join(variant_dir, entry)
            try:
                with open(path, encoding='utf-8') as handle:
                    data = yaml.safe_load(handle) or {}
            except (OSError, yaml.YAMLError) as exc:
                raise AnsibleFilterError('engine_variant: cannot read the variant file %s (%s); fix it'
                                         % (path, str(exc).splitlines()[0])) from exc
            variant = data.get('python_env_variant') if isinstance(data, dict) else None
            out.setdefault(os.path.splitext(entry)[0], variant if isinstance(variant, dict) else {})
        _VARIANTS_CACHE.clear()
        _VARIANTS_CACHE[key] = out
    return _VARIANTS_CACHE[key]


def engine_variant(host, groups, hostvars, release=None, variant_dir=None):
    """The python_env variant file `host` installs: its group's engine and device and its GPU arch name
    the family (cpu, sm_121, sglang_cpu), its release the engine version within it
    (module_utils/engine_release.select_variant). A node outside every group takes llmfleet_engine
    (default vllm) on the device of llmfleet_serve_profile.

    release: the release to install (default: its group's release, else llmfleet_release).
    variant_dir: the variants directory (default: llmfleet_variants_dir when the inventory sets it,
    else the collection's roles/python_env/vars/variants)."""
    group = serve_group_of(host, groups, hostvars)
    if group:
        engine, device = group['engine'], group['device']
    else:
        engine = _var(hostvars, host, 'llmfleet_engine', 'vllm')
        prof = _var(hostvars, host, 'llmfleet_serve_profile')
        device = serve_profile(prof, _var(hostvars, host, 'llmfleet_serve_profiles_extra', {})).get('device') if prof else 'gpu'
    inventory_release = _var(hostvars, host, 'llmfleet_release', '')
    release_var = 'llmfleet_release'
    if release is None:
        release = group.get('release') if group else inventory_release
        if group and release != inventory_release:
            release_var = 'llmfleet_serve_groups.%s.release' % group['name']
    elif release != inventory_release:
        release_var = 'engine_variant release'
    variant_dir = variant_dir or _var(hostvars, host, 'llmfleet_variants_dir') or VARIANTS_DIR
    try:
        return _release.select_variant(engine, device, _var(hostvars, host, 'llmfleet_gpu_arch'), release,
                                       _load_variants(variant_dir), release_var)
    except (_groups.ServeGroupError, _release.ReleaseError) as exc:
        raise AnsibleFilterError('%s: %s' % (host, exc)) from exc
