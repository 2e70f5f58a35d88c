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


def _real_hostvars(hosts):
    """Ansible's own HostVars over an inventory of `hosts` (what task_vars['hostvars'] is in a run)."""
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.vars.hostvars import HostVars
    from ansible.vars.manager import VariableManager
    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources=','.join(hosts) + ',')
    manager = VariableManager(loader=loader, inventory=inventory)
    return HostVars(inventory=inventory, variable_manager=manager, loader=loader), manager


def test_registered_results_are_read_without_building_each_hosts_vars(monkeypatch):
    """The check reads what hosts registered from the run's variable manager: no get_vars per host
    (one each, on every host's check, was O(hosts²) per task: 9 s for one check at 16 nodes)."""
    hosts = ['node%d' % i for i in range(16)]
    hostvars, manager = _real_hostvars(hosts)
    manager.set_nonpersistent_facts('node9', {'__serve_state': {'current': False, 'fingerprint': FP}})
    for host in hosts[:9]:
        manager.set_nonpersistent_facts(host, {'__serve_state': {'current': True, 'fingerprint': FP}})

    def no_get_vars(*args, **kwargs):
        raise AssertionError('get_vars called')
    monkeypatch.setattr(manager, 'get_vars', no_get_vars)
    assert drift_in_run(hostvars, hosts, {'common', 'serve'})
    assert not drift_in_run(hostvars, hosts[:9], {'common', 'serve'})


def test_without_the_variable_managers_cache_it_reads_hostvars():
    class Plain(dict):
        """A mapping without Ansible's variable manager behind it"""
    hostvars = Plain({'spark1': {'__common_state': {'current': False, 'fingerprint': FP}}})
    assert drift_in_run(hostvars, ['spark1'], {'common'})


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
