"""The role_state action's choice: answer a check from the run's snapshot only while no check of the
run has found a host drifted (a role that ran may have changed what later probes watch)."""
import pytest

from ansible.errors import AnsibleActionFail

from ansible_collections.llmfleet.cluster.plugins.action.role_state import ActionModule, drift_in_run, not_current
from ansible_collections.llmfleet.cluster.plugins.plugin_utils import role_inputs

FP = 'f' * 64


def test_no_drift_yet_lets_the_snapshot_answer():
    hostvars = {'spark1': {'__common_state': {'current': True, 'fingerprint': FP}},
                'spark2': {'__common_state': {'current': True, 'fingerprint': FP},
                           '__fabric_state': {'current': True, 'fingerprint': FP}}}
    assert not drift_in_run(hostvars, ['spark1', 'spark2'], {'common', 'fabric', 'serve'})


def test_one_drifted_check_anywhere_means_observe_again():
    hostvars = {'spark1': {'__common_state': {'current': True, 'fingerprint': FP}},
                'thor2': {'__fabric_state': {'current': False, 'fingerprint': FP}}}
    assert drift_in_run(hostvars, ['spark1', 'thor2'], {'common', 'fabric'})


def test_a_skipped_registration_is_not_a_check():
    hostvars = {'spark1': {'__fabric_state': {'skipped': True, 'changed': False}}}
    assert not drift_in_run(hostvars, ['spark1'], {'fabric'})


class _Templar:
    def copy_with_new_env(self, available_variables):
        return self

    @staticmethod
    def template(value):
        return value


@pytest.mark.parametrize('task_vars, reason', [
    ({'ansible_run_tags': ['all']}, ''),
    ({'ansible_run_tags': ['all'], 'llmfleet_full_run': False}, ''),
    ({'ansible_run_tags': ['fabric_configure']}, 'a run limited by --tags runs the tasks it selects'),
    ({'ansible_run_tags': ['serve', 'fabric_configure']}, 'a run limited by --tags runs the tasks it selects'),
    # the role's own tag asks for the whole role, which the check answers; so do other roles' tags
    # (fabric's dependency common runs its check under --tags fabric)
    ({'ansible_run_tags': ['fabric']}, ''),
    ({'ansible_run_tags': ['serve']}, ''),
    ({'ansible_run_tags': ['all'], 'llmfleet_full_run': 'true'}, 'llmfleet_full_run is set'),
])
def test_a_tags_or_full_run_finds_no_node_current(task_vars, reason):
    action = ActionModule.__new__(ActionModule)
    action._templar = _Templar()
    assert action._forced(task_vars, 'fabric') == reason


@pytest.mark.parametrize('result, reasons, expected', [
    ({'current': True, 'drift': [], 'facts': {'a': 1}}, ['', ''], {'current': True, 'drift': [], 'facts': {'a': 1}}),
    ({'current': True, 'drift': [], 'facts': {'a': 1}}, ['', 'serve_state is restarted'],
     {'current': False, 'drift': ['serve_state is restarted'], 'facts': {}}),
    ({'current': False, 'drift': ['files /x: absent'], 'facts': {}}, ['llmfleet_full_run is set', 'serve_state is restarted'],
     {'current': False, 'drift': ['llmfleet_full_run is set', 'serve_state is restarted', 'files /x: absent'], 'facts': {}}),
    ({'failed': True, 'msg': 'x'}, ['serve_state is restarted'], {'failed': True, 'msg': 'x'}),
])
def test_a_forced_run_or_a_rerun_makes_the_check_not_current(result, reasons, expected):
    assert not_current(result, reasons) == expected


class _Listed:
    def __init__(self, name):
        self.name = name

    def get_name(self):
        return self.name


class _Node:
    def __init__(self, parent=None, play=None):
        self._parent, self._play = parent, play


def _action_in(play):
    action = ActionModule.__new__(ActionModule)
    action._task = _Node(parent=_Node(parent=_Node(play=play)))  # a task in an imported file of the play's pre_tasks
    return action


def test_a_plays_check_uses_the_collections_path_of_a_role_the_play_lists():
    play = _Node()
    play.roles = [_Listed('llmfleet.cluster.plan'), _Listed('llmfleet.cluster.fabric')]
    assert _action_in(play)._play_role_path('fabric') == role_inputs.role_path('fabric')
    assert role_inputs.role_path('fabric').endswith('/roles/fabric')


def test_a_plays_check_of_a_role_it_does_not_list_fails():
    play = _Node()
    play.roles = [_Listed('llmfleet.cluster.plan')]
    with pytest.raises(AnsibleActionFail, match="in a play that lists it under roles"):
        _action_in(play)._play_role_path('fabric')
