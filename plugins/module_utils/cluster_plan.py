# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""One host's plan: everything the roles need to know about the cluster, computed once per play.

Pure, no I/O. The filter llmfleet.cluster.cluster_plan (plugins/filter/cluster_plan.py) hands in
the inventory values, the serving groups of the host's cluster (serve_groups.plan, profiles already
resolved), the resolved profile of the host's group and its python_env variant; the role
llmfleet.cluster.plan stores the result as the fact ``llmfleet_plan``, first in every play. Roles
read that fact instead of resolving profiles, groups, unit names, URLs and paths themselves, and
instead of reading each other's variables.

Paths come from one prefix (``common_prefix``, default /opt/llmfleet) and one configuration
directory (``common_config_dir``, default /etc/llmfleet).
"""

import os

from ansible_collections.llmfleet.cluster.plugins.module_utils import serve_groups as _groups
from ansible_collections.llmfleet.cluster.plugins.module_utils import topology as _topology
# the inventory cannot be planned: one error type for the layout (planner) and the host's plan
from ansible_collections.llmfleet.cluster.plugins.module_utils.planner import PlanError

DEFAULT_PREFIX = '/opt/llmfleet'
DEFAULT_CONFIG_DIR = '/etc/llmfleet'
DEFAULT_SERVICE = {'user': 'llmfleet', 'group': 'llmfleet', 'home': '/var/lib/llmfleet'}
DEFAULT_RAY_PORT = 6379
CURRENT = 'current'

# The inventory variables the plan reads (per host); everything else it derives.
INPUTS = (
    'llmfleet_cluster', 'llmfleet_fabric_ip', 'llmfleet_gpu_arch', 'llmfleet_gpus_per_node', 'llmfleet_release',
    'serve_host', 'serve_unit_prefix', 'common_prefix', 'common_config_dir', 'common_service_user',
    'common_service_group', 'common_service_home', 'ray_node_port', 'ray_node_firewall', 'llmfleet_variants_dir',
)


def _get(hostvars, host, name, default=None):
    value = (hostvars.get(host) or {}).get(name)
    return default if value is None or value == '' else value


def _flag(value):
    """An inventory boolean as Ansible's `bool` filter reads it (strings included)."""
    if isinstance(value, str):
        return value.strip().lower() in ('1', 'true', 'yes', 'on', 'y', 't')
    return bool(value)


def variants_dir(hostvars, host, default=''):
    """The directory on the controller of the python_env variant files `host` chooses from:
    ``llmfleet_variants_dir`` (a site's own variants), else ``default`` (the collection's); ``~`` expanded."""
    directory = _get(hostvars, host, 'llmfleet_variants_dir', default)
    if not isinstance(directory, str):
        raise PlanError('%s: llmfleet_variants_dir %r is not a directory path; set it to the directory of your '
                        'variant files, or leave it unset for the collection\'s' % (host, directory))
    directory = os.path.expanduser(directory)
    return directory.rstrip('/') or directory[:1]


def paths(prefix=DEFAULT_PREFIX, config_dir=DEFAULT_CONFIG_DIR, release=''):
    """The directory layout below one prefix and one configuration directory."""
    for name, value in (('common_prefix', prefix), ('common_config_dir', config_dir)):
        if not isinstance(value, str) or not value.startswith('/'):
            raise PlanError('%s %r is not an absolute path; set it to one (e.g. %s)'
                            % (name, value, DEFAULT_PREFIX if name == 'common_prefix' else DEFAULT_CONFIG_DIR))
    prefix, config_dir = prefix.rstrip('/') or '/', config_dir.rstrip('/') or '/'
    venvs = prefix + '/venvs'
    return {
        'prefix': prefix,
        'config_dir': config_dir,
        'venvs': venvs,
        'current': '%s/%s' % (venvs, CURRENT),
        'release_venv': '%s/%s' % (venvs, release) if release else '',
        'wheelhouse': prefix + '/wheelhouse',
        'build': prefix + '/build',
        'models': prefix + '/models',
        'files': prefix + '/files',
        'lib': prefix + '/lib',
        'libexec': prefix + '/libexec',
        'nccl': prefix + '/nccl',
    }


def env_files(config_dir=DEFAULT_CONFIG_DIR, unit=''):
    """The env files the roles write under the configuration directory and the units load.

    comm (fabric), engine (python_env), nccl (nccl), ray (ray_node); serve: the engine unit's own
    0600 file with the API key (llm_server writes <config_dir>/<unit>.env); engine_unit: what every
    engine unit loads before its own, in order (a leading '-' lets systemd skip a missing file).
    """
    files = {name: '%s/%s.env' % (config_dir, name) for name in ('comm', 'engine', 'nccl', 'ray')}
    files['serve'] = '%s/%s.env' % (config_dir, unit) if unit else ''
    files['engine_unit'] = [files['comm'], '-' + files['engine'], '-' + files['nccl']]
    return files


def _serve(host, group, profile, unit_prefix, addresses):
    """This host's part of its serving group ({} when it serves nothing)."""
    if not group:
        return {}
    hosts = list(group['hosts'])
    # the unit of the group, unless the inventory renames every unit with another prefix (as the
    # serve role does: <prefix>-<served model name>)
    unit = group['unit'] if unit_prefix == _groups.UNIT_PREFIX else _groups.unit_name(group['served_model_name'], unit_prefix)
    head_address = addresses.get(group['head']) or ''
    url = 'http://%s:%s' % (head_address, group['port']) if head_address else ''
    return dict(group, hosts=hosts, node_rank=hosts.index(host), is_head=host == group['head'],
                unit=unit, unit_prefix=unit_prefix, head_address=head_address, url=url,
                api_url=url + '/v1' if url else '', profile_spec=profile or {})


def host_plan(host, groups, hostvars, serve_groups=None, profile=None, variant='', default_profile=None,
              default_variants_dir='', variant_error='', grouped=False):
    """The plan of `host` (a plain dict; the fact llmfleet_plan).

    groups: the inventory's groups; hostvars: {host: {variable: value}} holding at least INPUTS for
    every host of the inventory; serve_groups: serve_groups.plan() of the host's cluster (its URLs
    are recomputed here from serve_host / the fabric IP); profile: the resolved profile of the
    host's group; variant: its python_env variant ('' when none can be named, variant_error saying
    why); default_profile: the resolved llmfleet_serve_profile (the cluster-wide profile, e.g. whose
    required_env every Ray node gets); default_variants_dir: the collection's variants directory
    (``llmfleet_variants_dir`` overrides it), where the variant was chosen and its file lies;
    grouped: whether the inventory sets llmfleet_serve_groups for the host (it decides serving_group).
    """
    cluster = _topology.cluster_of(hostvars, host)
    order = list(groups.get('all') or [])
    cluster_hosts = [h for h in order if _topology.cluster_of(hostvars, h) == cluster]
    ray_nodes = _topology.ray_nodes(groups, hostvars, cluster)
    head = _topology.ray_head(groups, hostvars, cluster)
    port = _get(hostvars, host, 'ray_node_port', DEFAULT_RAY_PORT)
    head_ip = _get(hostvars, head, 'llmfleet_fabric_ip', '') if head else ''
    addresses = {h: _get(hostvars, h, 'serve_host') or _get(hostvars, h, 'llmfleet_fabric_ip') for h in cluster_hosts}
    unit_prefix = _get(hostvars, host, 'serve_unit_prefix', _groups.UNIT_PREFIX)
    planned = [_serve(g['head'], g, None, unit_prefix, addresses) for g in serve_groups or []]
    for item in planned:
        item.pop('profile_spec')
        item.pop('node_rank')
        item.pop('is_head')
    group = _groups.group_of(serve_groups or [], host)
    serve = _serve(host, group, profile, unit_prefix, addresses)
    serving_hosts = sorted({h for g in planned for h in g['hosts']}, key=order.index)
    # the hosts this one serves with (weights, the fabric check and the engine venv's group reach
    # them): its group of llmfleet_serve_groups (a host in none: every group's hosts); without
    # groups, the cluster's serve_nodes, else its Ray nodes
    if not grouped:
        serving_group = _topology.serving_group(groups, hostvars, cluster)
    else:
        serving_group = list(serve['hosts']) if serve else serving_hosts
    release = (serve.get('release') if serve else '') or _get(hostvars, host, 'llmfleet_release', '')
    prefix = _get(hostvars, host, 'common_prefix', DEFAULT_PREFIX)
    config_dir = _get(hostvars, host, 'common_config_dir', DEFAULT_CONFIG_DIR)
    try:
        layout = paths(prefix, config_dir, release)
    except PlanError as exc:
        raise PlanError('%s: %s' % (host, exc)) from exc
    directory = variants_dir(hostvars, host, default_variants_dir)
    return {
        'host': host,
        'fabric_ip': _get(hostvars, host, 'llmfleet_fabric_ip', ''),
        'gpu_arch': _get(hostvars, host, 'llmfleet_gpu_arch', ''),
        'cluster': {
            'name': cluster,
            'hosts': cluster_hosts,
            'ray_nodes': ray_nodes,
            'ray_head': head or '',
            'ray_head_address': head_ip,
            'ray_port': port,
            'ray_address': '%s:%s' % (head_ip, port) if head_ip else '',
            'serve_groups': planned,
            'serving_hosts': serving_hosts,
        },
        'serving_group': serving_group,
        'serve': serve,
        'profile_spec': default_profile or {},
        'variant': variant or '',
        'variant_error': '' if variant else variant_error or '',
        'variants_dir': directory,
        'variant_file': '%s/%s.yml' % (directory, variant) if variant and directory else '',
        'release': release,
        'service': {key: _get(hostvars, host, 'common_service_' + key, value) for key, value in DEFAULT_SERVICE.items()},
        'firewall': _flag(_get(hostvars, host, 'ray_node_firewall', True)),
        'paths': layout,
        'env_files': env_files(layout['config_dir'], serve.get('unit', '')),
    }
