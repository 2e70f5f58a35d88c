# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The fingerprint of everything a role's full run depends on, for the role_state module."""

DOCUMENTATION = r"""
name: role_inputs
author:
  - llmfleet maintainers (@llmfleet)
version_added: "0.2.0"
short_description: sha256 of a role's inputs on this host (variables, cluster plan, the collection's code)
description:
  - Returns one sha256 hex digest over, for the host the task runs for, the templated value of every
    variable the role declares in its C(meta/argument_specs.yml), the host's cluster plan (C(llmfleet_plan))
    and every other C(llmfleet_*) variable, and the content of the role's directory, the collection's
    C(plugins/) and C(profiles/) (and C(llmfleet_variants_dir) when set).
  - The M(llmfleet.cluster.role_state) module records it after a role's full run and compares it on the
    next run; any change of inventory, profile, plan or code runs the role in full again.
  - A variable whose template fails (it names a result the role registers later) counts as the failure's
    type, which is the same on every run that reaches the same point.
  - Runs on the controller; reads files only.
options:
  _terms:
    description: The role's name (the role must be the one running the task, for its C(role_path)).
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: Is this node as the role's last full run left it?
  llmfleet.cluster.role_state:
    role: fabric
    fingerprint: "{{ lookup('llmfleet.cluster.role_inputs', 'fabric') }}"
"""

RETURN = r"""
_raw:
  description: One sha256 hex digest.
  type: list
  elements: str
"""

import hashlib
import json
import os

import yaml

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Inventory-wide names every role may read; llmfleet_plans is every host's plan (this host's is
# llmfleet_plan), so another host's change does not re-run this host's roles on its own.
SHARED_PREFIX = 'llmfleet_'
# llmfleet_full_run only forces a full run: it does not change what the run leaves.
EXCLUDED = frozenset(['llmfleet_plans', 'llmfleet_full_run'])


def tree_digest(paths):
    """sha256 over the relative path and content of every file under the given directories (sorted)."""
    digest = hashlib.sha256()
    for top in paths:
        if not top or not os.path.isdir(top):
            continue
        for root, dirs, files in os.walk(top):
            dirs[:] = sorted(d for d in dirs if d not in ('__pycache__', '.pytest_cache'))
            for name in sorted(files):
                if name.endswith('.pyc'):
                    continue
                full = os.path.join(root, name)
                digest.update(os.path.relpath(full, top).encode('utf-8') + b'\0')
                with open(full, 'rb') as handle:
                    digest.update(handle.read())
                digest.update(b'\0')
    return digest.hexdigest()


def declared_variables(role_path):
    """The option names of every entry point of the role's argument specs."""
    path = os.path.join(role_path, 'meta', 'argument_specs.yml')
    try:
        with open(path) as handle:
            specs = (yaml.safe_load(handle) or {}).get('argument_specs') or {}
    except FileNotFoundError:
        raise AnsibleLookupError('role_inputs: %s is missing (every role declares its variables there)' % path)
    names = set()
    for entry in specs.values():
        names.update((entry or {}).get('options') or {})
    return names


def _plain(value):
    """JSON-able, order-stable form of a templated value."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        if len(terms) != 1 or not str(terms[0]).strip():
            raise AnsibleLookupError('role_inputs takes one role name, got %r' % (terms,))
        variables = variables or {}
        role_path = variables.get('role_path')
        if not role_path or os.path.basename(str(role_path)) != str(terms[0]).strip():
            raise AnsibleLookupError('role_inputs(%r) must run inside that role (role_path is %r)' % (terms[0], role_path))
        names = declared_variables(str(role_path))
        names.update(n for n in variables if n.startswith(SHARED_PREFIX))
        names -= EXCLUDED
        values = {}
        for name in sorted(names):
            if name not in variables:
                values[name] = '<undefined>'
                continue
            try:
                values[name] = _plain(self._templar.template(variables[name]))
            except Exception as exc:  # a template naming a later result fails the same way every run
                values[name] = '<error: %s>' % type(exc).__name__
        dirs = [str(role_path), os.path.join(COLLECTION_ROOT, 'plugins'), os.path.join(COLLECTION_ROOT, 'profiles')]
        variants = values.get('llmfleet_variants_dir')
        if isinstance(variants, str):
            dirs.append(variants)
        digest = hashlib.sha256()
        digest.update(json.dumps(values, sort_keys=True).encode('utf-8'))
        digest.update(tree_digest(dirs).encode('ascii'))
        return [digest.hexdigest()]
