# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""A cluster's secret on the controller (its API key, Ray's token): given, from the environment, or generated once into a 0600 file."""

DOCUMENTATION = r"""
name: api_key
author:
  - llmfleet maintainers (@llmfleet)
version_added: "0.2.0"
short_description: The OpenAI API key of a cluster (or another of its secrets), generated on first use
description:
  - Returns the API key of one cluster, taken in this order from the inventory variable
    C(llmfleet_api_key) (a key kept in a vault; empty turns the key off), the controller's environment
    variable C(LLMFLEET_API_KEY), then the key file I(path), which is created on first use with a
    cryptographically random key (Python C(secrets), 256 bits, URL-safe text), mode 0600 in a 0700
    directory.
  - This is the one place that order is written. The engines (serve), the gateway, validate, bench and
    the summary all call this lookup with the cluster's name only, so they always hold the same key.
  - With I(name), another secret of the cluster kept the same way in its own file (C(ray_token) is Ray's
    authentication token, with I(use_env=false)); a named secret reads neither inventory variable.
  - Concurrent first uses (forks) agree on one key; the file is created exclusively and a loser reads
    the winner's key.
  - Runs on the controller only; the key is never printed. Check mode still creates the file (a
    controller-side file, so that the key a check run shows in diffs is the one a real run uses).
options:
  _terms:
    description: The cluster name (C(llmfleet_cluster)); names the default path.
    type: list
    elements: str
    required: true
  path:
    description:
      - The key file. Empty means the inventory variable C(llmfleet_api_key_file) (for the API key only),
        else C(~/.config/llmfleet/<cluster>/<name>) (C($XDG_CONFIG_HOME) when set).
    type: str
    default: ""
  name:
    description: The secret's file name in the cluster's directory (letters, digits, C(_) and C(-)).
    type: str
    default: api_key
  use_env:
    description: Take C(LLMFLEET_API_KEY) from the controller's environment when it is set.
    type: bool
    default: true
  want:
    description:
      - C(key) returns the key; C(path) returns the key file's path; C(source) says where the key comes
        from (C(inventory), C(environment) or C(file)). With C(path) and C(source) nothing is read or created.
    type: str
    default: key
    choices: [key, path, source]
"""

EXAMPLES = r"""
- name: Ray's token of the cluster (its own file, never from the environment)
  ansible.builtin.set_fact:
    ray_node_auth_token: "{{ lookup('llmfleet.cluster.api_key', llmfleet_cluster, name='ray_token', use_env=false) }}"
  no_log: true

- name: Where the cluster's key comes from (llmfleet_api_key, LLMFLEET_API_KEY or the file)
  ansible.builtin.debug:
    msg: "{{ lookup('llmfleet.cluster.api_key', llmfleet_plan.cluster.name, want='source') }}"

- name: Call the API with the cluster's key (the header is no_log)
  ansible.builtin.uri:
    url: http://10.231.1.11:8000/v1/models
    headers:
      Authorization: "Bearer {{ lookup('llmfleet.cluster.api_key', llmfleet_cluster) }}"
  no_log: true
"""

RETURN = r"""
_raw:
  description: One element, the key (or with I(want=path) the key file's path, with I(want=source) where the key comes from).
  type: list
  elements: str
"""

import os
import re
import secrets

from ansible.errors import AnsibleLookupError
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.lookup import LookupBase


def default_path(cluster, name='api_key'):
    base = os.environ.get('XDG_CONFIG_HOME') or os.path.join(os.path.expanduser('~'), '.config')
    return os.path.join(base, 'llmfleet', cluster, name)


def read_or_create(path):
    """The key in ``path``; a new random one written there (0600, exclusive create) if absent."""
    directory = os.path.dirname(path)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(fd, 'w') as handle:
            handle.write(secrets.token_urlsafe(32) + '\n')
    with open(path) as handle:
        key = handle.read().strip()
    if os.stat(path).st_mode & 0o077:
        raise AnsibleLookupError('secret file %s is readable by others: chmod 600 %s' % (path, path))
    if not key:
        raise AnsibleLookupError('secret file %s is empty: delete it (a new one is generated) or write the secret into it' % path)
    return key


class LookupModule(LookupBase):
    def _inventory_value(self, variables, name):
        """The inventory variable ``name`` templated (a vault value decrypted), None when it is not set."""
        if not variables or name not in variables:
            return None
        value = self._templar.template(variables[name])
        return None if value is None else str(value)

    def run(self, terms, variables=None, **kwargs):
        unknown = sorted(set(kwargs) - {'path', 'use_env', 'want', 'name'})
        if unknown:
            raise AnsibleLookupError('api_key: unknown option(s) %s (path, use_env, want, name)' % ', '.join(unknown))
        name = str(kwargs.get('name') or 'api_key')
        if not re.match(r'^[A-Za-z0-9_-]+$', name):
            raise AnsibleLookupError('api_key: name must be a file name of letters, digits, _ and -, got %r' % (name,))
        want = kwargs.get('want', 'key')
        if want not in ('key', 'path', 'source'):
            raise AnsibleLookupError('api_key: want must be key, path or source, got %r' % (want,))
        if len(terms) != 1 or not str(terms[0]).strip() or '/' in str(terms[0]):
            raise AnsibleLookupError('api_key takes one cluster name (llmfleet_cluster), got %r' % (terms,))
        # the inventory's key and key file are the API key's only: a named secret (Ray's token) has its own file
        inventory = variables if name == 'api_key' else None
        path = str(kwargs.get('path') or '') or self._inventory_value(inventory, 'llmfleet_api_key_file') or ''
        path = os.path.expanduser(path or default_path(str(terms[0]).strip(), name))
        if want == 'path':
            return [path]
        given = self._inventory_value(inventory, 'llmfleet_api_key')
        from_env = boolean(kwargs.get('use_env', True), strict=False) and os.environ.get('LLMFLEET_API_KEY')
        if want == 'source':
            return ['inventory' if given is not None else 'environment' if from_env else 'file']
        if given is not None:
            return [given]
        if from_env:
            return [os.environ['LLMFLEET_API_KEY']]
        try:
            return [read_or_create(path)]
        except OSError as exc:
            raise AnsibleLookupError('cannot read or create the secret file %s: %s' % (path, exc))
