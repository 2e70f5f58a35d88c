# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The state each source patch should be in on a host (documentation in patch_states.yml)."""

from ansible.errors import AnsibleFilterError

from ansible_collections.llmfleet.cluster.plugins.plugin_utils import lazy_import

source_patch = lazy_import.module_utils('source_patch')


def patch_states(patches, enabled, arch, variant, state='present'):
    if state not in ('present', 'absent'):
        raise AnsibleFilterError("patch_states: state must be 'present' or 'absent', got %r" % (state,))
    family = str(variant or '').split('-', 1)[0]
    return [{'id': patch.get('id'), 'patch': patch, 'state': wanted} for patch, wanted in
            source_patch.desired_states(dict(patches or {}), list(enabled or []), str(arch or ''), family, state)]


class FilterModule:
    def filters(self):
        return {'patch_states': patch_states}
