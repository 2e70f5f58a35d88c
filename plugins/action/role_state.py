# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Action plugin for llmfleet.cluster.role_state: computes the role's input fingerprint on the
controller (plugin_utils/role_inputs.py), then either answers a check from the snapshot the common
role's check took at the start of the run (no node contact: the run's first role_state call observed
every role's probes at once) or runs the module on the node. A run limited by --tags, or one with llmfleet_full_run, finds no
node current (the role runs in full, as asked), and so does a check given `rerun` (a reason: a restart
asked for is an action, whatever the record says). Outside a role (a play's pre_tasks), the check is of a
role the play lists: its defaults and vars are the play's, and its path is the collection's, as the
role's own tasks see it in role_path.

The snapshot answers only while no role_state check of this run has found a host drifted: a role
that ran its tasks may have changed what a later role's probes watch, so from then on every check
observes the node again."""

from collections.abc import Mapping

from ansible.errors import AnsibleActionFail
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from ansible_collections.llmfleet.cluster.plugins.plugin_utils import role_inputs
from ansible_collections.llmfleet.cluster.plugins.plugin_utils.registered import registered_vars

# The result the common role registers with `snapshot: true` (common runs first, once per run).
SNAPSHOT_RESULT = '__common_state'


def drift_in_run(hostvars, hosts, roles):
    """Whether a role_state check registered in this run (as __<role>_state) found any host drifted."""
    names = ['__%s_state' % role for role in roles]
    for host in hosts:
        host_vars = registered_vars(hostvars, host)
        for name in names:
            if name in host_vars:
                result = host_vars[name]
                if isinstance(result, Mapping) and 'fingerprint' in result and result.get('current') is not True:
                    return True
    return False


def not_current(result, reasons):
    """The check's result made not current by each non-empty reason (a run that runs every role in
    full, a restart asked for), first in its drift; a failed check is left as it is."""
    for reason in reversed([r for r in reasons if r]):
        if not result.get('failed') and reason not in (result.get('drift') or []):
            result.update(current=False, drift=[reason] + list(result.get('drift') or []), facts={})
    return result


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(('role', 'fingerprint', 'probes', 'facts', 'state', 'state_dir', 'snapshot', 'host', 'rerun'))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        task_vars = task_vars or {}
        args = dict(self._task.args)
        role = str(args.get('role') or '')
        args.setdefault('host', str(task_vars.get('inventory_hostname') or ''))
        if not args.get('fingerprint'):
            variables = task_vars
            if self._task._role is None:
                variables = dict(task_vars, role_path=self._play_role_path(role))
            templar = self._templar.copy_with_new_env(available_variables=variables)
            try:
                args['fingerprint'] = role_inputs.fingerprint(role, variables, templar.template)
            except role_inputs.RoleInputsError as exc:
                raise AnsibleActionFail('role_state: %s' % exc)
        checking = args.get('state', 'check') == 'check'
        answer = None
        if checking and not args.get('snapshot') and not args.get('probes'):
            answer = self._from_snapshot(role, args['fingerprint'], task_vars)
        if answer is None:
            answer = self._execute_module(module_name='llmfleet.cluster.role_state', module_args=args,
                                          task_vars=task_vars)
        result.update(answer)
        if checking:
            not_current(result, [self._forced(task_vars, role), str(args.get('rerun') or '')])
        return result

    def _play_role_path(self, role):
        """The path of `role` where the check is a play's task, not the role's (a play's pre_tasks: the
        defaults and vars of the roles a play lists are the play's too). The role must be one of them;
        its path is the collection's, as the role's own tasks see it in role_path."""
        node, play = self._task, None
        while node is not None and play is None:
            node = getattr(node, '_parent', None)
            play = getattr(node, '_play', None)
        for listed in getattr(play, 'roles', None) or []:
            if listed.get_name().rsplit('.', 1)[-1] == role:
                return role_inputs.role_path(role)
        raise AnsibleActionFail('role_state: role %r: run the check inside that role, or in a play that lists it '
                                'under roles' % role)

    def _forced(self, task_vars, role):
        """Why this run runs `role` in full whatever the record says ('' when it does not): a run limited
        by --tags to some of the role's tasks (a tag <role>_*) runs what it selected, and
        llmfleet_full_run asks for everything. The role's own tag (--tags serve) asks for the role as a
        whole, which its check answers like a full run's: a node as the last full run left it changes
        nothing, so a tagged re-run costs no more than the no-op of site.yml."""
        tags = task_vars.get('ansible_run_tags') or ['all']
        if 'all' not in tags and any(str(t).startswith(role + '_') for t in tags):
            return 'a run limited by --tags runs the tasks it selects'
        templar = self._templar.copy_with_new_env(available_variables=task_vars)
        if boolean(templar.template(task_vars.get('llmfleet_full_run', False)), strict=False):
            return 'llmfleet_full_run is set'
        return ''

    def _from_snapshot(self, role, fp, task_vars):
        taken = task_vars.get(SNAPSHOT_RESULT)
        snapshot = taken.get('snapshot') if isinstance(taken, dict) else None
        if not snapshot or role not in snapshot:
            return None
        hostvars = task_vars.get('hostvars') or {}
        hosts = (task_vars.get('groups') or {}).get('all') or []
        if drift_in_run(hostvars, hosts, set(snapshot) | {'common'}):
            return None
        return role_inputs.from_snapshot(role, fp, snapshot)
