# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The cluster plan of one host (plugins/module_utils/cluster_plan.py), the fact llmfleet_plan.

Documentation of the filter lives beside this file in cluster_plan.yml (ansible-doc -t filter).
This file only gathers the inputs: the inventory values, the serving groups and the host's resolved
profile (the serve_groups / serve_profile filters) and its python_env variant (engine_variant).
"""
from ansible.errors import AnsibleFilterError

from ansible_collections.llmfleet.cluster.plugins.plugin_utils.plain_data import plain
from ansible_collections.llmfleet.cluster.plugins.plugin_utils import lazy_import
from ansible_collections.llmfleet.cluster.plugins.plugin_utils.serve_group_inputs import VARIANTS_DIR, engine_variant, serve_groups
from ansible_collections.llmfleet.cluster.plugins.filter.serving import serve_profile

_plan = lazy_import.module_utils('cluster_plan')
_groups = lazy_import.module_utils('serve_groups')


def _inputs(hostvars, host):
    """The plan's inputs of `host`, read by name (each hostvars value is templated on access)."""
    values = hostvars.get(host) or {}
    return {name: plain(values[name]) for name in _plan.INPUTS if name in values}


def cluster_plan(host, groups, hostvars):
    """The plan of `host`: cluster, Ray head, serving group, variant, release, paths, env files."""
    host = str(host)
    inputs = {h: _inputs(hostvars, h) for h in set(groups.get('all') or []) | {host}}
    planned = serve_groups(host, groups, hostvars)
    group = _groups.group_of(planned, host)
    values = hostvars.get(host) or {}
    extras = plain(values['llmfleet_serve_profiles_extra']) if 'llmfleet_serve_profiles_extra' in values else {}
    default = plain(values['llmfleet_serve_profile']) if 'llmfleet_serve_profile' in values else None
    profile = serve_profile(group['profile'], extras or {}) if group else None
    default_profile = serve_profile(default, extras or {}) if default else {}
    # the inventory may pin the variant (python_env_variant_name, as the gate reads it), else it follows
    # from the group's engine and device and the host's GPU arch, among the files of the variants
    # directory (llmfleet_variants_dir, else the collection's)
    try:
        directory = _plan.variants_dir(inputs, host, VARIANTS_DIR)
    except _plan.PlanError as exc:
        raise AnsibleFilterError(str(exc)) from exc
    variant = plain(values['python_env_variant_name']) if values.get('python_env_variant_name') else None
    variant_error = ''
    if variant is None:
        try:
            variant = engine_variant(host, groups, hostvars, variant_dir=directory)
        except AnsibleFilterError as exc:
            # a host that cannot name its engine stack (no GPU arch) gets none here; python_env, the one
            # role that installs it, stops with this reason
            variant, variant_error = '', str(exc)
    try:
        return _plan.host_plan(host, plain(groups), inputs, planned, profile, variant, default_profile,
                               VARIANTS_DIR, variant_error, grouped=bool(values.get('llmfleet_serve_groups')))
    except _plan.PlanError as exc:
        raise AnsibleFilterError(str(exc)) from exc


class _Memo:
    """One host's variables, each templated once: Ansible's hostvars template a value on every read,
    and planning every host reads every host's variables (O(hosts^2) templating without this)."""

    def __init__(self, values):
        self._values, self._seen = values, {}

    def _read(self, name):
        if name not in self._seen:
            self._seen[name] = (name in self._values, self._values[name] if name in self._values else None)
        return self._seen[name]

    def __contains__(self, name):
        return self._read(name)[0]

    def __getitem__(self, name):
        present, value = self._read(name)
        if not present:
            raise KeyError(name)
        return value

    def get(self, name, default=None):
        present, value = self._read(name)
        return value if present else default


class _MemoHostvars:
    """hostvars whose hosts' variables are read through _Memo."""

    def __init__(self, hostvars):
        self._hostvars, self._hosts = hostvars, {}

    def get(self, host, default=None):
        if host not in self._hosts:
            values = self._hostvars.get(host)
            self._hosts[host] = _Memo(values) if values is not None else None
        return self._hosts[host] if self._hosts[host] is not None else default

    def __getitem__(self, host):
        values = self.get(host)
        if values is None:
            raise KeyError(host)
        return values

    def __contains__(self, host):
        return self.get(host) is not None


def cluster_plans(hosts, groups, hostvars):
    """{host: plan} for every host of `hosts`, each host's variables templated once."""
    memo = _MemoHostvars(hostvars)
    return {str(host): cluster_plan(host, groups, memo) for host in hosts}


def plan_errors(hosts, groups, hostvars):
    """{host: why its plan cannot be built} over `hosts`, each planned as the plan role plans it.

    The controller gate's last step (plugins/action/inventory_check.py): what the plan refuses stops
    the run there, with every other finding, instead of in the plan role of the first play. Only the
    plan's own refusals count (AnsibleFilterError): a variable that needs facts cannot be templated
    before any host is contacted, and the plan role, which runs after facts, may still build it.
    """
    memo = _MemoHostvars(hostvars)
    out = {}
    for host in hosts:
        try:
            cluster_plan(host, groups, memo)
        except AnsibleFilterError as exc:
            out[str(host)] = str(exc)
    return out


class FilterModule:
    """llmfleet.cluster cluster plan filter."""

    def filters(self):
        return {'cluster_plan': cluster_plan, 'cluster_plans': cluster_plans}
