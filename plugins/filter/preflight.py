# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Filters for the host-side preflight checks (see module_utils/preflight.py).

``host | llmfleet.cluster.preflight_host_checks(hostvars, ansible_play_hosts_all, groups, cfg)`` is
the whole host check table: the ``ok|skip|WARN|FAIL`` lines of ``host`` from its probe, network
facts, gpu_info/rdma_info results and inventory (driver/CUDA parity per arch within the cluster and
the RDMA port of the fabric NIC among them: module_utils/preflight.py host_report); given ``fleet``
(``ansible_play_hosts_all | llmfleet.cluster.preflight_fleet(hostvars)``, once per run) it reads the
other hosts there.
``host | llmfleet.cluster.preflight_rdma_expectation(groups, hostvars, declared, transport,
container)`` says whether its fabric should be RoCE (the role probes rdma_info only there).
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.llmfleet.cluster.plugins.plugin_utils import lazy_import

preflight = lazy_import.module_utils('preflight')


def _mapping(value, what):
    if value is None:
        return {}
    if not hasattr(value, 'get'):
        raise AnsibleFilterError('%s must be a mapping, got %r' % (what, type(value).__name__))
    return value


def rdma_expectation(host, groups, hostvars, declared=None, transport='auto', container='none', serving=None):
    return preflight.rdma_expectation(host, _mapping(groups, 'preflight_rdma_expectation: groups'),
                                      _mapping(hostvars, 'preflight_rdma_expectation: hostvars'),
                                      declared=declared, transport=transport, container=container,
                                      serving=list(serving) if serving is not None else None)


class _FleetHostvars:
    """hostvars as host_checks reads them: ``host``'s own in full, the other hosts' from the fleet view
    (preflight_fleet, computed once per run), any host outside the view from hostvars."""

    def __init__(self, host, hostvars, fleet):
        self._host, self._hostvars, self._fleet = host, hostvars, fleet

    def get(self, name, default=None):
        if name != self._host and name in self._fleet:
            return self._fleet[name]
        return self._hostvars.get(name, default)


def host_checks(host, hostvars, hosts, groups, cfg, fleet=None):
    cfg = _mapping(cfg, 'preflight_host_checks: cfg')
    missing = sorted(set(HOST_CFG_KEYS) - set(cfg))
    if missing:
        raise AnsibleFilterError('preflight_host_checks: cfg lacks %s' % ', '.join(missing))
    hostvars = _mapping(hostvars, 'preflight_host_checks: hostvars')
    if fleet is not None:
        hostvars = _FleetHostvars(host, hostvars, _mapping(fleet, 'preflight_host_checks: fleet'))
    return preflight.host_report(host, list(hosts or []), hostvars, _mapping(groups, 'preflight_host_checks: groups'), cfg)


def fleet(hosts, hostvars):
    return preflight.fleet_view(list(hosts or []), _mapping(hostvars, 'preflight_fleet: hostvars'))


HOST_CFG_KEYS = ('min_disk_gb', 'weights_dir', 'fabric_mtu', 'mtu_fatal', 'ray_port', 'ray_unit_regex',
                 'ray_temp_dirs', 'stale_session_fatal', 'clock_fatal', 'min_cuda', 'rdma_fatal')


class FilterModule:
    def filters(self):
        return {
            'preflight_host_checks': host_checks,
            'preflight_fleet': fleet,
            'preflight_rdma_expectation': rdma_expectation,
        }
