"""The role_inputs lookup: one digest over a role's declared variables (templated), llmfleet_* and the
code; it moves when any of them does and not when an unrelated variable or llmfleet_plans does."""
import pytest
from ansible.errors import AnsibleLookupError
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.llmfleet.cluster.plugins.lookup import role_inputs


@pytest.fixture
def role(tmp_path):
    path = tmp_path / 'roles' / 'fabric'
    (path / 'meta').mkdir(parents=True)
    (path / 'meta' / 'argument_specs.yml').write_text(
        'argument_specs:\n  main:\n    options:\n      fabric_mtu: {type: int}\n      fabric_env_file: {type: path}\n')
    (path / 'tasks').mkdir()
    (path / 'tasks' / 'main.yml').write_text('---\n[]\n')
    return path


def digest(role, **variables):
    base = {'role_path': str(role), 'fabric_mtu': 9000, 'llmfleet_plan': {'host': 'spark1'}, 'unrelated': 1}
    base.update(variables)
    loader = DataLoader()
    lookup = role_inputs.LookupModule(loader=loader, templar=Templar(loader=loader, variables=base))
    return lookup.run(['fabric'], variables=base)[0]


def test_moves_with_declared_and_shared_inputs_and_code(role):
    first = digest(role)
    assert len(first) == 64 and digest(role) == first
    assert digest(role, unrelated=2) == first
    assert digest(role, llmfleet_plans={'spark2': {}}) == first
    assert digest(role, llmfleet_full_run=True) == first
    assert digest(role, fabric_mtu=1500) != first
    assert digest(role, fabric_env_file='/etc/x.env') != first
    assert digest(role, llmfleet_release='vllm-0.31.0') != first
    assert digest(role, llmfleet_plan={'host': 'spark2'}) != first
    (role / 'tasks' / 'main.yml').write_text('---\n- name: new task\n')
    assert digest(role) != first


def test_refuses_outside_its_role(role):
    with pytest.raises(AnsibleLookupError, match='must run inside that role'):
        digest(role, role_path='/somewhere/else')
