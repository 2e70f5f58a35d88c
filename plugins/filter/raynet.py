# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Filters: where a Ray node registers, RAY_ADDRESS for engines on Ray, LimitNOFILE/LimitMEMLOCK under the hard limit.

The computation is in plugins/module_utils/raynet.py (pure, unit-tested).
"""

from ansible_collections.llmfleet.cluster.plugins.plugin_utils import lazy_import

raynet = lazy_import.module_utils('raynet')


class FilterModule:
    def filters(self):
        return {
            'ray_node_ip_problem': lazy_import.function(raynet, 'node_ip_problem'),
            'ray_engine_env': lazy_import.function(raynet, 'engine_ray_env'),
            'nofile_clamp': lazy_import.function(raynet, 'clamp_nofile'),
            'memlock_clamp': lazy_import.function(raynet, 'clamp_memlock'),
        }
