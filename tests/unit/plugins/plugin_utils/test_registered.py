"""What hosts registered in this run, read from Ansible's variable manager instead of every host's
hostvars (plugin_utils/registered.py): role_state's drift check and the drifted_hosts /
converge_drift filters ask every play host, on every host."""
import pytest
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.vars.hostvars import HostVars
from ansible.vars.manager import VariableManager

from ansible_collections.llmfleet.cluster.plugins.action.role_state import drift_in_run
from ansible_collections.llmfleet.cluster.plugins.filter.role_state import converge_drift, drifted_hosts
from ansible_collections.llmfleet.cluster.plugins.plugin_utils.registered import registered_vars

FP = 'f' * 64
HOSTS = ['node%d' % i for i in range(16)]


@pytest.fixture
def run(monkeypatch):
    """Ansible's own HostVars over 16 hosts (what task_vars['hostvars'] is in a run): node0-8 checked
    current, node9 drifted, the rest unchecked; building any host's variables fails the test (one
    get_vars per host, on every host, was O(hosts²) per task: 9 s for one check at 16 nodes)."""
    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources=','.join(HOSTS) + ',')
    manager = VariableManager(loader=loader, inventory=inventory)
    hostvars = HostVars(inventory=inventory, variable_manager=manager, loader=loader)
    for host in HOSTS[:9]:
        manager.set_nonpersistent_facts(host, {'__serve_state': {'current': True, 'fingerprint': FP}})
    manager.set_nonpersistent_facts('node9', {'__serve_state': {'current': False, 'fingerprint': FP}})

    def no_get_vars(*args, **kwargs):
        raise AssertionError('get_vars called')
    monkeypatch.setattr(manager, 'get_vars', no_get_vars)
    return hostvars


def test_the_role_state_action_reads_registered_results(run):
    assert drift_in_run(run, HOSTS, {'common', 'serve'})
    assert not drift_in_run(run, HOSTS[:9], {'common', 'serve'})


def test_the_filters_read_registered_results(run):
    assert drifted_hosts(HOSTS, run, '__serve_state') == HOSTS[9:]
    assert drifted_hosts(HOSTS[:9], run, '__serve_state') == []
    assert converge_drift(HOSTS, run) == {'checked': 10, 'drifted': ['node9: serve'], 'unchanged': False}


def test_without_the_variable_managers_cache_it_reads_hostvars():
    hostvars = {'spark1': {'__common_state': {'current': False, 'fingerprint': FP}}}
    assert registered_vars(hostvars, 'spark1') == hostvars['spark1']
    assert registered_vars(hostvars, 'spark2') == {}
    assert drift_in_run(hostvars, ['spark1'], {'common'})
