# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Fan-out filters of the models role (models_distribution: fabric). Documentation beside this file
in <name>.yml. The computation is in plugins/module_utils/model_fanout.py; this adapts errors."""

from ansible_collections.llmfleet.cluster.plugins.plugin_utils import lazy_import
from ansible_collections.llmfleet.cluster.plugins.plugin_utils.filter_errors import reraise_as_filter_error
from ansible_collections.llmfleet.cluster.plugins.plugin_utils.plain_data import plain as _plain

_fan = lazy_import.module_utils('model_fanout')
_catch = reraise_as_filter_error((_fan, 'FanoutError'))


@_catch
def model_fanout_plan(holders, targets):
    """Rounds [{receiver: sender}]: every holder sends to one target per round."""
    return _fan.plan_rounds(list(_plain(holders)), list(_plain(targets)))


@_catch
def model_fanout_check_ips(hosts, fabric_ips):
    """True, or an error naming each host without its own IPv4 llmfleet_fabric_ip."""
    hosts = list(_plain(hosts))
    return _fan.check_fabric_ips(hosts, dict(zip(hosts, list(_plain(fabric_ips)))))


@_catch
def model_fanout_relpath(models_path, models_dir):
    """models_path relative to models_dir (what rrsync serves)."""
    return _fan.relative_model_path(models_path, models_dir)


def model_fanout_missing_bytes(bad, manifest):
    """Bytes of the files `bad` according to the source manifest."""
    return _fan.missing_bytes(_plain(manifest), list(_plain(bad or [])))


def model_fanout_space_problems(need, free, reserve=0):
    """One line per host whose disk cannot take what it lacks (+ reserve)."""
    return _fan.check_free_space(_plain(need), _plain(free), int(reserve))


@_catch
def model_fanout_authorized_key(pubkey, peers, models_dir):
    """authorized_keys line: read-only rrsync of models_dir, from the fabric peers only."""
    return _fan.authorized_key_line(pubkey, list(_plain(peers)), models_dir)


def model_fanout_rsync_argv(sender_ip, rel_path, dest, key_file, known_hosts, port=22, timeout=30, probe=False):
    """argv of a receiver's pull (or probe) from sender_ip over the fabric."""
    return _fan.rsync_argv(sender_ip, rel_path, dest, key_file, known_hosts, port, timeout, probe)


def model_fanout_probe_problems(hosts, probes, fabric_ips):
    """Host, cause and fix of every failed probe."""
    return _fan.probe_problems(list(_plain(hosts)), list(_plain(probes)), _plain(fabric_ips))


def model_fanout_rsync_problem(host, sender, sender_ip, rc, stderr):
    """Host, cause and fix of a failed pull."""
    return _fan.classify_rsync_failure(host, sender, sender_ip, rc, stderr)


class FilterModule:
    """llmfleet.cluster model fan-out filters."""

    def filters(self):
        return {f.__name__: f for f in (
            model_fanout_plan, model_fanout_check_ips, model_fanout_relpath, model_fanout_missing_bytes,
            model_fanout_space_problems, model_fanout_authorized_key, model_fanout_rsync_argv,
            model_fanout_probe_problems, model_fanout_rsync_problem)}
