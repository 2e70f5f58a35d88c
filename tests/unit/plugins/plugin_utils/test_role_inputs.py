"""The role_state action's fingerprint (plugin_utils/role_inputs.py): one digest over a role's declared
variables (templated), llmfleet_* and the code; it moves when any of them does and not when an unrelated
variable, llmfleet_plans or llmfleet_full_run does. And a check answered from the run's snapshot."""
import pytest

from ansible_collections.llmfleet.cluster.plugins.plugin_utils import role_inputs


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
    return role_inputs.fingerprint('fabric', base, lambda value: value)


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


def test_a_failing_template_counts_as_its_error_type(role):
    def template(value):
        if value == 'later':
            raise KeyError('registered later')
        return value
    base = {'role_path': str(role), 'fabric_mtu': 'later'}
    assert role_inputs.fingerprint('fabric', base, template) == role_inputs.fingerprint('fabric', base, template)


def test_refuses_outside_its_role(role):
    with pytest.raises(role_inputs.RoleInputsError, match='must run inside that role'):
        digest(role, role_path='/somewhere/else')


FP = 'f' * 64


@pytest.mark.parametrize('entry, current, drift', [
    ({'fingerprint': FP, 'drift': [], 'facts': {'x': 1}}, True, []),
    ({'fingerprint': 'e' * 64, 'drift': [], 'facts': {'x': 1}}, False,
     ["the role's inputs changed (inventory, profile, plan or the collection's code)"]),
    ({'fingerprint': FP, 'drift': ['units ray.service: failed'], 'facts': {}}, False, ['units ray.service: failed']),
])
def test_from_snapshot(entry, current, drift):
    out = role_inputs.from_snapshot('ray_node', FP, {'ray_node': entry})
    assert out['current'] is current and out['drift'] == drift and out['from_snapshot']
    assert out['facts'] == ({'x': 1} if current else {})
    assert role_inputs.from_snapshot('serve', FP, {'ray_node': entry}) is None
