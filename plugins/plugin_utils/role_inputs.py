# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The fingerprint of everything a role's full run depends on (the role_state action computes it on
the controller): the templated value of every variable the role declares in its
meta/argument_specs.yml and of every llmfleet_* variable (the cluster plan included), and the content
of the role's directory, the collection's plugins/ and profiles/ (and llmfleet_variants_dir)."""

import hashlib
import json
import os

import yaml

COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Inventory-wide names every role may read; llmfleet_plans is every host's plan (this host's is
# llmfleet_plan), so another host's change does not re-run this host's roles on its own;
# llmfleet_full_run only forces a full run: it does not change what the run leaves.
SHARED_PREFIX = 'llmfleet_'
EXCLUDED = frozenset(['llmfleet_plans', 'llmfleet_full_run'])
# Roles that do not depend on the whole serving plan: for them the profile selectors (resolved into
# llmfleet_plan) are not inputs, and of llmfleet_plan only the view below is. serve works for its
# own serving group (llmfleet_plan.serve: its resolved profile, hosts, unit and port); common for
# none (service account, paths, node identity). Without this, a profile variant for the Sparks'
# group re-ran the Thors' SGLang tasks and every node's common tasks in that run and again in the
# next (serve.yml failing its flag check on the Sparks: 47 s; no-op 8 s).
PROFILE_SELECTORS = frozenset(['llmfleet_serve_profile', 'llmfleet_serve_profiles_extra', 'llmfleet_serve_groups'])
PLAN_VIEWS = {'serve': 'own_group', 'common': 'no_serving'}


def role_path(role):
    """The collection's directory of `role` (as Ansible's role_path names it for the role's tasks)."""
    return os.path.join(COLLECTION_ROOT, 'roles', role)


class RoleInputsError(Exception):
    pass


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
        raise RoleInputsError('%s is missing (every role declares its variables there)' % path)
    names = set()
    for entry in specs.values():
        names.update((entry or {}).get('options') or {})
    return names


def _plain(value):
    """JSON-able, order-stable form of a templated value."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def plan_view(plan, view):
    """llmfleet_plan as a role of PLAN_VIEWS depends on it: never the cluster-wide default profile
    (the Ray nodes' required_env) nor the other serving groups; 'no_serving': no serving group at all."""
    if not isinstance(plan, dict):
        return plan
    own = (plan.get('serve') or {}).get('name') if view == 'own_group' else None
    out = dict(plan)
    out.pop('profile_spec', None)
    if view == 'no_serving':
        out.pop('serve', None)
        out.pop('serving_group', None)
    cluster = dict(out.get('cluster') or {})
    cluster['serve_groups'] = [g for g in cluster.get('serve_groups') or []
                               if own is not None and isinstance(g, dict) and g.get('name') == own]
    out['cluster'] = cluster
    return out


def fingerprint(role, variables, template):
    """sha256 hex of the role's inputs for the host whose `variables` are given; `template` renders
    one variable's value. A variable whose template fails (it names a result the role registers
    later) counts as the failure's type, the same on every run that reaches the same point."""
    role_path = variables.get('role_path')
    if not role_path or os.path.basename(str(role_path)) != role:
        raise RoleInputsError('role %r: the task must run inside that role (role_path is %r)' % (role, role_path))
    names = declared_variables(str(role_path))
    names.update(n for n in variables if str(n).startswith(SHARED_PREFIX))
    names -= EXCLUDED
    if role in PLAN_VIEWS:
        names -= PROFILE_SELECTORS
    values = {}
    for name in sorted(names):
        if name not in variables:
            values[name] = '<undefined>'
            continue
        try:
            values[name] = _plain(template(variables[name]))
        except Exception as exc:  # pylint: disable=broad-except
            values[name] = '<error: %s>' % type(exc).__name__
    if role in PLAN_VIEWS and 'llmfleet_plan' in values:
        values['llmfleet_plan'] = plan_view(values['llmfleet_plan'], PLAN_VIEWS[role])
    dirs = [str(role_path), os.path.join(COLLECTION_ROOT, 'plugins'), os.path.join(COLLECTION_ROOT, 'profiles')]
    if isinstance(values.get('llmfleet_variants_dir'), str):
        dirs.append(values['llmfleet_variants_dir'])
    digest = hashlib.sha256()
    digest.update(json.dumps(values, sort_keys=True).encode('utf-8'))
    digest.update(tree_digest(dirs).encode('ascii'))
    return digest.hexdigest()


def from_snapshot(role, fp, snapshot):
    """The check's result from a snapshot of every role's record taken earlier in the run (None when
    the snapshot has no record of the role)."""
    entry = (snapshot or {}).get(role)
    if entry is None:
        return None
    reasons = []
    if entry.get('fingerprint') != fp:
        reasons.append("the role's inputs changed (inventory, profile, plan or the collection's code)")
    reasons.extend(entry.get('drift') or [])
    return {'changed': False, 'current': not reasons, 'drift': reasons, 'path': entry.get('path', ''),
            'fingerprint': fp, 'facts': {} if reasons else entry.get('facts') or {}, 'from_snapshot': True}
