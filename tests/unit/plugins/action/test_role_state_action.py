"""The role_state action's choice: answer a check from the run's snapshot only while no check of the
run has found a host drifted (a role that ran may have changed what later probes watch)."""
import pytest

from ansible_collections.llmfleet.cluster.plugins.action.role_state import ActionModule, drift_in_run

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
    ({'ansible_run_tags': ['all'], 'llmfleet_full_run': 'true'}, 'llmfleet_full_run is set'),
])
def test_a_tags_or_full_run_finds_no_node_current(task_vars, reason):
    action = ActionModule.__new__(ActionModule)
    action._templar = _Templar()
    assert action._forced(task_vars) == reason
