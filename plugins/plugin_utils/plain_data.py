# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Controller-side: turn Ansible's lazy/tagged containers into plain Python data."""

from collections.abc import Mapping


def plain(value, unknown=None):
    """Plain dicts/lists/scalars from Ansible values; ``unknown`` converts any other type
    (default: returned as it is)."""
    if isinstance(value, Mapping):
        return {str(k): plain(v, unknown) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [plain(v, unknown) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    return unknown(value) if unknown else value
