"""raynet: where Ray registers a node, RAY_ADDRESS for engines on Ray, LimitNOFILE under PID 1's hard limit."""
import os

import pytest

from ansible_collections.llmfleet.cluster.plugins.module_utils import raynet
from ansible_collections.llmfleet.cluster.plugins.filter.raynet import FilterModule

FIX = os.path.join(os.path.dirname(__file__), '..', '..', 'fixtures', 'limits')


def fixture(name):
    with open(os.path.join(FIX, name)) as f:
        return f.read()


# ip -> a problem is reported (Ray rewrites exactly 127.0.0.1 and localhost; seen on the GPU host)
@pytest.mark.parametrize('ip, problem', [
    ('127.0.0.1', True),
    ('localhost', True),
    (' 127.0.0.1 ', True),
    ('', True),
    (None, True),
    ('127.0.0.2', False),
    ('10.0.0.11', False),
    ('192.0.2.2', False),
])
def test_node_ip_problem(ip, problem):
    why = raynet.node_ip_problem(ip)
    assert bool(why) is problem
    if problem and ip and ip.strip():
        assert 'resolve_ip_for_localhost' in why and '127.0.0.2' in why


@pytest.mark.parametrize('backend, head, port, want', [
    ('ray', '10.0.0.11', 6379, {'RAY_ADDRESS': '10.0.0.11:6379'}),
    ('ray', '127.0.0.2', '6400', {'RAY_ADDRESS': '127.0.0.2:6400'}),
    ('native', '10.0.0.11', 6379, {}),
    ('mp', '10.0.0.11', 6379, {}),
    ('ray', '', 6379, {}),
    (None, '10.0.0.11', 6379, {}),
])
def test_engine_ray_env(backend, head, port, want):
    assert raynet.engine_ray_env(backend, head, port) == want


AUTH = {'RAY_AUTH_MODE': 'token', 'RAY_AUTH_TOKEN_PATH': '/etc/llmfleet/ray-auth-token'}


@pytest.mark.parametrize('backend, want', [
    ('ray', dict(AUTH, RAY_ADDRESS='10.0.0.11:6379')),
    ('native', {}),
    ('mp', {}),
])
def test_engine_ray_env_carries_the_nodes_ray_auth_on_ray_only(backend, want):
    assert raynet.engine_ray_env(backend, '10.0.0.11', 6379, auth=AUTH) == want


def test_parse_limits_real_proc_file():
    lim = raynet.parse_limits(fixture('controller_pid1.txt'))
    assert lim['Max open files'] == (32768, 32768)
    assert lim['Max cpu time'] == (None, None)
    assert lim['Max stack size'] == (8388608, None)
    # the two-word unit-less rows parse too
    assert lim['Max realtime priority'] == (0, 0)


# requested, /proc/1/limits text, expected LimitNOFILE
@pytest.mark.parametrize('requested, limits, want', [
    (65536, 'controller_pid1.txt', 32768),     # above PID 1's hard limit: clamped (the GPU run's failure)
    (20000, 'controller_pid1.txt', 20000),     # below: unchanged
    ('65536', 'controller_pid1.txt', 32768),   # as Ansible hands it in (a string)
    (65536, None, 65536),                      # /proc/1/limits unreadable: unchanged
    (65536, 'Limit Soft Limit Hard Limit Units\nMax open files unlimited unlimited files\n', 65536),
])
def test_clamp_nofile(requested, limits, want):
    text = fixture(limits) if limits and limits.endswith('.txt') else (limits or '')
    assert raynet.clamp_nofile(requested, text) == want


HEADER = 'Limit Soft Limit Hard Limit Units\n'


# requested, PID 1's 'Max locked memory' row, expected LimitMEMLOCK
@pytest.mark.parametrize('requested, row, want', [
    ('infinity', 'Max locked memory unlimited unlimited bytes', 'infinity'),     # a GPU host
    ('infinity', 'Max locked memory 8388608 8388608 bytes', '8388608'),          # the sim's podman default
    ('1048576', 'Max locked memory 8388608 8388608 bytes', '1048576'),
    ('unlimited', None, 'infinity'),                                             # unreadable: as asked
    (4096, None, '4096'),
])
def test_clamp_memlock(requested, row, want):
    assert raynet.clamp_memlock(requested, HEADER + row + '\n' if row else '') == want


def test_filters_exposed():
    f = FilterModule().filters()
    assert f['nofile_clamp'](65536, fixture('controller_pid1.txt')) == 32768
    assert f['ray_engine_env']('ray', '127.0.0.2', 6379) == {'RAY_ADDRESS': '127.0.0.2:6379'}
    assert f['ray_node_ip_problem']('127.0.0.1')


@pytest.mark.parametrize('limits, want', [
    ('controller_pid1.txt', 96365),            # a real /proc/1/limits
    ('Limit Soft Limit Hard Limit Units\nMax processes 4096 4096 processes\n', 4096),  # the sim's nodes (podman --ulimit)
    ('Limit Soft Limit Hard Limit Units\nMax processes unlimited unlimited processes\n', None),
    (None, None),                              # unreadable: nothing to pass on
])
def test_hard_nproc(limits, want):
    text = fixture(limits) if limits and limits.endswith('.txt') else (limits or '')
    assert raynet.hard_nproc(text) == want
