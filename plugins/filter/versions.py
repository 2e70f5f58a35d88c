# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Filters for version alignment and venv installs (see module_utils/versions.py, venv_archive.py)."""

from ansible_collections.llmfleet.cluster.plugins.module_utils import venv_archive, versions


def venv_install_plan(play_hosts, hostvars, fact='python_env_venv_state', enabled=True):
    """{host: action} for the hosts of the play that set I(fact) (see venv_archive.install_plan)."""
    states = {}
    for host in play_hosts:
        state = hostvars[host].get(fact)
        if state:
            states[host] = dict(state)
    return venv_archive.install_plan(states, enabled=bool(enabled))


class FilterModule:
    def filters(self):
        return {
            'lock_drift': versions.lock_drift,
            'version_mismatch': versions.version_mismatch,
            'parse_lock': versions.parse_lock,
            'venv_archive_key': venv_archive.archive_key,
            'venv_install_plan': venv_install_plan,
        }
