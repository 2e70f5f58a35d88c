# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The environment a set of systemd EnvironmentFile=s declares, without I/O (env_files_info)."""

import re

from ansible_collections.llmfleet.cluster.plugins.module_utils.nccl import parse_env_file


def declared_env(texts, include=''):
    """Merge env files' texts in order (a later file's value wins, as systemd loads them); None
    stands for a missing file and adds nothing. Keep only the names `include` matches at their
    start (re.match; '' keeps all)."""
    merged = {}
    for text in texts:
        if text is not None:
            merged.update(parse_env_file(text))
    pattern = re.compile(include) if include else None
    return {key: value for key, value in merged.items() if pattern is None or pattern.match(key)}
