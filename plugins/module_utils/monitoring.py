# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Prometheus scrape jobs of one cluster, from the cluster plan of its hosts. Pure, no I/O.

The monitoring role renders these into prometheus.yml on the cluster's monitoring node. Every target
carries the labels an operator filters by: ``cluster``, ``node`` (inventory hostname), and where the
node serves, ``group`` (serving group), ``rank`` (its node rank in the group) and ``engine``.

Jobs:

* ``engine``: each serving group's API rank (rank 0), the only rank whose engine serves HTTP: vLLM
  exports ``/metrics`` on the API port always, SGLang only with ``--enable-metrics`` in its profile.
  The other ranks of a group run no HTTP server; their liveness comes from the ``node`` job
  (node exporter's systemd collector watches the node's engine unit).
* ``ray``: every Ray node's metrics export port (``ray start --metrics-export-port``).
* ``node``: node exporter on every host of the cluster.
* ``gateway``: the cluster's gateway (roles/gateway), its router's metrics port (``sgl_router_*``).
* ``prometheus``: the server itself (its own rule evaluation and scrape health).
"""

import re

JOBS = ('engine', 'ray', 'node', 'gateway', 'prometheus')
# SGLang's /metrics names its series sglang:<name> in the text format but sglang_<name> in the
# OpenMetrics one, which Prometheus asks for first (seen with SGLang 0.5.21, prometheus_client 0.26;
# vLLM keeps its colon in both): the engine job names them as SGLang documents them, in both cases.
ENGINE_METRIC_RELABEL = [{'source_labels': ['__name__'], 'regex': 'sglang_(.+)', 'target_label': '__name__',
                          'replacement': 'sglang:$1'}]


class MonitoringError(ValueError):
    """The plan cannot be monitored as asked; the message names host, value and fix."""


def _truthy(value):
    if isinstance(value, str):
        return value.strip().lower() in ('1', 'true', 'yes', 'on')
    return bool(value)


def exports_metrics(group, head_plan):
    """Whether the API rank of a serving group serves Prometheus metrics on its API port."""
    engine = group.get('engine') or (head_plan.get('serve') or {}).get('engine', '')
    if engine == 'vllm':
        return True
    if engine == 'sglang':
        args = ((head_plan.get('serve') or {}).get('profile_spec') or {}).get('args') or {}
        return _truthy(args.get('--enable-metrics', False))
    return False


def _labels(cluster, host, plan):
    labels = {'cluster': cluster, 'node': host}
    serve = plan.get('serve') or {}
    if serve:
        labels.update(group=str(serve.get('name', '')), rank=str(serve.get('node_rank', '')),
                      engine=str(serve.get('engine', '')))
    return labels


def _target(address, port):
    return '%s:%s' % (address, port)


def _address(host, plan):
    address = plan.get('fabric_ip') or ''
    if not address:
        raise MonitoringError('%s: no llmfleet_fabric_ip in its plan; Prometheus scrapes each node at its '
                              'fabric address: set llmfleet_fabric_ip' % host)
    return address


def scrape_configs(plans, server, prometheus_port=9090, node_exporter_port=9100, interval='10s', timeout='5s'):
    """The ``scrape_configs`` list of prometheus.yml for the cluster of ``server``.

    plans: {host: llmfleet_plan} of the cluster's hosts (at least every host the server's plan names);
    server: the monitoring node. Each Ray node's metrics port is its plan's (ray_ports.metrics_port: emulated
    nodes of one machine each have their own).
    """
    if server not in plans:
        raise MonitoringError('monitoring node %r has no plan in this play: it must be a host of the cluster '
                              '(monitoring_server)' % (server,))
    cluster = plans[server]['cluster']
    name = cluster['name']
    hosts = [h for h in cluster['hosts'] if h in plans]
    missing = [h for h in cluster['hosts'] if h not in plans]
    if missing:
        raise MonitoringError('%s: hosts of cluster %s without a plan in this play: %s; run the monitoring play '
                              'on every host of the cluster' % (server, name, ', '.join(missing)))
    engine, ray, node = [], [], []
    for group in cluster.get('serve_groups') or []:
        head = group.get('head')
        if head not in plans or not exports_metrics(group, plans[head]):
            continue
        address = group.get('head_address') or _address(head, plans[head])
        labels = _labels(name, head, plans[head])
        engine.append({'targets': [_target(address, group['port'])], 'labels': labels})
    for host in hosts:
        plan = plans[host]
        labels = _labels(name, host, plan)
        address = _address(host, plan)
        if host in cluster.get('ray_nodes', []):
            ray.append({'targets': [_target(address, plan['ray_ports']['metrics_port'])],
                        'labels': dict(labels, ray_role='head' if host == cluster.get('ray_head') else 'worker')})
        node.append({'targets': [_target(address, node_exporter_port)], 'labels': labels})
    gateway = []
    gate = cluster.get('gateway') or {}
    if gate.get('metrics_port') and gate.get('host') in plans:
        gateway.append({'targets': [_target(_address(gate['host'], plans[gate['host']]), gate['metrics_port'])],
                        'labels': {'cluster': name, 'node': gate['host']}})  # it fronts every group
    server_labels = {'cluster': name, 'node': server}
    jobs = [('engine', engine), ('ray', ray), ('node', node), ('gateway', gateway),
            ('prometheus', [{'targets': [_target('127.0.0.1', prometheus_port)], 'labels': server_labels}])]
    configs = [{'job_name': job, 'scrape_interval': interval, 'scrape_timeout': timeout,
                'static_configs': static} for job, static in jobs if static]
    for config in configs:
        if config['job_name'] == 'engine':
            config['metric_relabel_configs'] = [dict(r) for r in ENGINE_METRIC_RELABEL]
    return configs


def unit_include(plan):
    """node exporter's --collector.systemd.unit-include for a node: its engine unit ('' when it serves none)."""
    unit = (plan.get('serve') or {}).get('unit') or ''
    # a unit name holds [A-Za-z0-9:_.@-] (the gate's safe names): '.' is its only regex character
    return (unit + '.service').replace('.', '\\.') if unit else ''


def retention_bytes(size):
    """Prometheus' --storage.tsdb.retention.size ('512MB', '2GB', '1TB') in bytes; MonitoringError when
    it is none."""
    match = re.match(r'^\s*(\d+)\s*(B|KB|MB|GB|TB|PB)\s*$', str(size))
    if not match:
        raise MonitoringError('retention size %r is not a size Prometheus reads: a whole number and a unit, '
                              'e.g. 2GB or 512MB' % (size,))
    power = ('B', 'KB', 'MB', 'GB', 'TB', 'PB').index(match.group(2))
    return int(match.group(1)) * 1024 ** power
