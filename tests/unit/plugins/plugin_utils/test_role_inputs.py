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


def _plan(own_profile, other_profile, default_profile):
    groups = [{'name': 'sparks', 'profile': other_profile}, {'name': 'thors', 'profile': own_profile}]
    return {'host': 'thor1', 'serve': {'name': 'thors', 'profile': own_profile, 'profile_spec': {'name': own_profile}},
            'profile_spec': {'name': default_profile}, 'cluster': {'serve_groups': groups[1:] + groups[:1]}}


def _fp(tmp_path, role, plan, **more):
    path = tmp_path / 'roles' / role
    (path / 'meta').mkdir(parents=True, exist_ok=True)
    (path / 'meta' / 'argument_specs.yml').write_text('argument_specs:\n  main:\n    options:\n      x_port: {type: int}\n')
    variables = dict({'role_path': str(path), 'x_port': 8000, 'llmfleet_plan': plan, 'llmfleet_serve_profile': 'tiny'}, **more)
    return role_inputs.fingerprint(role, variables, lambda value: value)


VARIANT = {'llmfleet_serve_profile': 'tiny-oldflag', 'llmfleet_serve_profiles_extra': {'tiny-oldflag': {'extends': 'tiny'}}}


def test_serve_ignores_the_other_groups_profile(tmp_path):
    """serve on a Thor: a variant of the Sparks' profile (the cluster default) is not its input; its own
    group's profile is, and so is any other part of its plan."""
    first = _fp(tmp_path, 'serve', _plan('sglang-tiny', 'tiny', 'tiny'))
    assert _fp(tmp_path, 'serve', _plan('sglang-tiny', 'tiny-oldflag', 'tiny-oldflag'), **VARIANT) == first
    assert _fp(tmp_path, 'serve', _plan('sglang-other', 'tiny', 'tiny')) != first
    assert _fp(tmp_path, 'serve', dict(_plan('sglang-tiny', 'tiny', 'tiny'), release='sglang-0.5.22')) != first


def test_common_ignores_every_serving_profile_but_not_its_paths(tmp_path):
    first = _fp(tmp_path, 'common', _plan('sglang-tiny', 'tiny', 'tiny'))
    assert _fp(tmp_path, 'common', _plan('sglang-other', 'tiny-oldflag', 'tiny-oldflag'), **VARIANT) == first
    assert _fp(tmp_path, 'common', dict(_plan('sglang-tiny', 'tiny', 'tiny'), paths={'prefix': '/srv'})) != first


def test_other_roles_still_see_the_whole_plan(tmp_path):
    """ray_node gives every Ray node the default profile's required_env: a variant is its input."""
    first = _fp(tmp_path, 'ray_node', _plan('sglang-tiny', 'tiny', 'tiny'))
    assert _fp(tmp_path, 'ray_node', _plan('sglang-tiny', 'tiny-oldflag', 'tiny-oldflag'), **VARIANT) != first


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
