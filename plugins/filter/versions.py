# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Filters for version alignment and venv installs (see module_utils/versions.py, venv_archive.py)."""

from ansible_collections.llmfleet.cluster.plugins.plugin_utils import lazy_import

venv_archive = lazy_import.module_utils('venv_archive')
versions = lazy_import.module_utils('versions')


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
            'version_mismatch': lazy_import.function(versions, 'version_mismatch'),
            'venv_install_plan': venv_install_plan,
        }
