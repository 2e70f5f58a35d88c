# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Filters over the serving-groups plan (plugins/module_utils/serve_groups.py).

Documentation of each filter lives beside this file in <filter_name>.yml (ansible-doc -t filter).
"""
from ansible.errors import AnsibleFilterError

from ansible_collections.llmfleet.cluster.plugins.plugin_utils.plain_data import plain
from ansible_collections.llmfleet.cluster.plugins.module_utils import profiles as _profiles
from ansible_collections.llmfleet.cluster.plugins.module_utils import serve_groups as _groups
from ansible_collections.llmfleet.cluster.plugins.module_utils import topology as _topology
from ansible_collections.llmfleet.cluster.plugins.filter.serving import serve_profile


def _var(hostvars, host, name, default=None):
    value = (hostvars.get(host) or {}).get(name)
    return default if value is None else plain(value)


def _cluster_hosts(groups, hostvars, host):
    cluster = _topology.cluster_of(hostvars, host)
    return [h for h in groups.get('all') or [] if _topology.cluster_of(hostvars, h) == cluster]


def serve_group_members(host, groups, hostvars):
    """{group name: hosts} of `host`'s cluster (membership only: no profile is resolved)."""
    try:
        return _groups.members(_var(hostvars, host, 'llmfleet_serve_groups'), _cluster_hosts(groups, hostvars, host),
                               plain(groups), _topology.serving_group(groups, hostvars, _topology.cluster_of(hostvars, host)))
    except _groups.ServeGroupError as exc:
        raise AnsibleFilterError('%s: %s' % (host, exc)) from exc


def serve_groups(host, groups, hostvars):
    """The serving groups of `host`'s cluster (list, by name), each with its profile's engine, backend,
    served name, sizes, port, unit and release."""
    spec = _var(hostvars, host, 'llmfleet_serve_groups')
    extras = _var(hostvars, host, 'llmfleet_serve_profiles_extra', {})
    defaults = {'profile': _var(hostvars, host, 'llmfleet_serve_profile'),
                'port': _var(hostvars, host, 'serve_port'),
                'release': _var(hostvars, host, 'llmfleet_release')}
    names = {g.get('profile') for g in (spec or {}).values() if isinstance(g, dict)} | {defaults['profile']}
    try:
        profiles = {n: serve_profile(n, extras) for n in names if n}
        cluster_hosts = _cluster_hosts(groups, hostvars, host)
        addresses = {h: _var(hostvars, h, 'serve_host') or _var(hostvars, h, 'llmfleet_fabric_ip') for h in cluster_hosts}
        return _groups.plan(spec, cluster_hosts, plain(groups),
                            _topology.serving_group(groups, hostvars, _topology.cluster_of(hostvars, host)),
                            profiles, defaults, addresses)
    except (_groups.ServeGroupError, _profiles.ProfileError) as exc:
        raise AnsibleFilterError('%s: %s' % (host, exc)) from exc


def serve_group_of(host, groups, hostvars):
    """The serving group `host` belongs to ({} when it serves nothing)."""
    return _groups.group_of(serve_groups(host, groups, hostvars), host) or {}


def engine_variant(host, groups, hostvars):
    """The python_env variant `host` installs: its group's engine and device, and its GPU arch.
    A node outside every group takes llmfleet_engine (default vllm) on the device of
    llmfleet_serve_profile."""
    group = serve_group_of(host, groups, hostvars)
    if group:
        engine, device = group['engine'], group['device']
    else:
        engine = _var(hostvars, host, 'llmfleet_engine', 'vllm')
        prof = _var(hostvars, host, 'llmfleet_serve_profile')
        device = serve_profile(prof, _var(hostvars, host, 'llmfleet_serve_profiles_extra', {})).get('device') if prof else 'gpu'
    try:
        return _groups.variant_name(engine, device, _var(hostvars, host, 'llmfleet_gpu_arch'))
    except _groups.ServeGroupError as exc:
        raise AnsibleFilterError('%s: %s' % (host, exc)) from exc


def serve_endpoint_line(group, url, tensor_parallel_size=None, pipeline_parallel_size=None):
    """One `Endpoint: ...` summary line of a serving group."""
    return _groups.endpoint_line(plain(group), str(url), tensor_parallel_size, pipeline_parallel_size)


class FilterModule:
    """llmfleet.cluster serving-group filters."""

    def filters(self):
        return {
            'serve_groups': serve_groups,
            'serve_group_of': serve_group_of,
            'serve_group_members': serve_group_members,
            'engine_variant': engine_variant,
            'serve_endpoint_line': serve_endpoint_line,
        }
