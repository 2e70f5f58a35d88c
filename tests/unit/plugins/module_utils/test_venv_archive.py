import pytest

from ansible_collections.llmfleet.cluster.plugins.module_utils import venv_archive as va
from ansible_collections.llmfleet.cluster.plugins.filter.versions import venv_install_plan

A = 'cpu-vllm-0.32.0/sim-a-0123456789abcdef-py3.11.tar.zst'
B = 'cpu-vllm-0.32.0/sim-b-0123456789abcdef-py3.11.tar.zst'
T = 'sm_110-vllm-0.22.0/lab-fedcba9876543210-py3.12.tar.zst'


def st(key=A, needs_sync=True, venv_exists=False, archive_ready=False):
    return {'key': key, 'needs_sync': needs_sync, 'venv_exists': venv_exists, 'archive_ready': archive_ready}


def test_archive_key_names_wheelhouse_release_lock_and_python_minor():
    assert va.archive_key('cpu-vllm-0.32.0', 'sim-a', '0123456789abcdef0123456789abcdef01234567', '3.11') == A
    # a patch version is not part of the key: site-packages is named by X.Y
    assert va.archive_key('cpu-vllm-0.32.0', 'sim-a', '0123456789abcdef0123', '3.11.2') == A


def test_archive_key_tells_venv_paths_apart():
    a = va.archive_key('cpu-vllm-0.32.0', 'sim-a', '0123456789abcdef', '3.11', '/opt/llmfleet/venvs/sim-a')
    b = va.archive_key('cpu-vllm-0.32.0', 'sim-a', '0123456789abcdef', '3.11', '/srv/venvs/sim-a')
    assert a != b
    assert a.startswith('cpu-vllm-0.32.0/sim-a-') and a.endswith('-0123456789abcdef-py3.11.tar.zst')
    assert a == va.archive_key('cpu-vllm-0.32.0', 'sim-a', '0123456789abcdef', '3.11', '/opt/llmfleet/venvs/sim-a')


@pytest.mark.parametrize('missing', range(4))
def test_archive_key_refuses_an_empty_part(missing):
    parts = ['cpu-vllm-0.32.0', 'sim-a', '0123456789abcdef', '3.11']
    parts[missing] = ''
    with pytest.raises(ValueError, match='archive_key needs'):
        va.archive_key(*parts)


@pytest.mark.parametrize('hosts,expected', [
    # a fresh cluster: the first host by name packs, the rest clone its archive
    ({'thor2': st(), 'spark1': st(), 'spark2': st(), 'thor1': st()},
     {'thor2': 'clone', 'spark1': 'pack', 'spark2': 'clone', 'thor1': 'clone'}),
    # the archive is on the controller already: everyone clones (a new cluster, a rebuilt node)
    ({'spark1': st(archive_ready=True), 'spark2': st(archive_ready=True)},
     {'spark1': 'clone', 'spark2': 'clone'}),
    # converged: nothing to do, even with no archive
    ({'spark1': st(needs_sync=False, venv_exists=True), 'spark2': st(needs_sync=False, venv_exists=True)},
     {'spark1': 'none', 'spark2': 'none'}),
    # drift on one node with the archive there: that node re-clones
    ({'spark1': st(needs_sync=False, venv_exists=True), 'thor2': st(venv_exists=True, archive_ready=True)},
     {'spark1': 'none', 'thor2': 'clone'}),
    # drift, archive lost (controller cache wiped): its venv is not pristine, it syncs itself
    ({'spark1': st(needs_sync=False, venv_exists=True), 'thor2': st(venv_exists=True)},
     {'spark1': 'none', 'thor2': 'sync'}),
    # a node added later, archive lost: the new node packs (its venv is new), the drifted one clones it
    ({'spark1': st(venv_exists=True), 'spark3': st()},
     {'spark1': 'clone', 'spark3': 'pack'}),
    # keys are independent: two arches (or two Pythons) each get their packer
    ({'spark1': st(), 'spark2': st(), 'thor1': st(key=T), 'thor2': st(key=T)},
     {'spark1': 'pack', 'spark2': 'clone', 'thor1': 'pack', 'thor2': 'clone'}),
    # an upgrade staging release B beside A: B's key has no archive, one packer
    ({'spark1': st(key=B), 'spark2': st(key=B)}, {'spark1': 'pack', 'spark2': 'clone'}),
])
def test_install_plan(hosts, expected):
    assert va.install_plan(hosts) == expected


def test_install_plan_without_archives_syncs_every_node_that_needs_it():
    hosts = {'spark1': st(), 'spark2': st(archive_ready=True), 'thor1': st(needs_sync=False)}
    assert va.install_plan(hosts, enabled=False) == {'spark1': 'sync', 'spark2': 'sync', 'thor1': 'none'}


def test_filter_reads_the_fact_of_each_play_host_and_skips_hosts_without_it():
    hostvars = {'spark1': {'python_env_venv_state': st()}, 'spark2': {'python_env_venv_state': st()},
                'localhost': {}}
    assert venv_install_plan(['spark2', 'spark1', 'localhost'], hostvars) == {'spark2': 'clone', 'spark1': 'pack'}
