# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Filters: where a Ray node registers, RAY_ADDRESS for engines on Ray, LimitNOFILE/LimitMEMLOCK under the hard limit.

The computation is in plugins/module_utils/raynet.py (pure, unit-tested).
"""

from ansible_collections.llmfleet.cluster.plugins.module_utils import raynet


class FilterModule:
    def filters(self):
        return {
            'ray_node_ip_problem': raynet.node_ip_problem,
            'ray_engine_env': raynet.engine_ray_env,
            'nofile_clamp': raynet.clamp_nofile,
            'memlock_clamp': raynet.clamp_memlock,
        }
