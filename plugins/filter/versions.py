# Copyright: llmfleet maintainers
# Apache License 2.0 (see galaxy.yml)
"""Filters for version alignment (see module_utils/versions.py)."""

from ansible_collections.llmfleet.cluster.plugins.module_utils import versions


class FilterModule:
    def filters(self):
        return {
            'lock_drift': versions.lock_drift,
            'version_mismatch': versions.version_mismatch,
            'parse_lock': versions.parse_lock,
        }
