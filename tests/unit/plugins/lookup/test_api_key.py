"""The api_key lookup: env first, else one 0600 file per cluster, generated once."""
import os
import stat

import pytest
from ansible.errors import AnsibleLookupError

from ansible_collections.llmfleet.cluster.plugins.lookup import api_key


@pytest.fixture
def lookup(monkeypatch, tmp_path):
    monkeypatch.delenv('LLMFLEET_API_KEY', raising=False)
    monkeypatch.setenv('XDG_CONFIG_HOME', str(tmp_path))
    return api_key.LookupModule()


def test_generates_once_0600_under_the_cluster_dir(lookup, tmp_path):
    first = lookup.run(['sim'])[0]
    path = tmp_path / 'llmfleet' / 'sim' / 'api_key'
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert len(first) >= 43 and lookup.run(['sim'])[0] == first
    assert lookup.run(['other'])[0] != first


def test_env_wins_and_writes_nothing(lookup, monkeypatch, tmp_path):
    monkeypatch.setenv('LLMFLEET_API_KEY', 'from-env')
    assert lookup.run(['sim']) == ['from-env']
    assert not (tmp_path / 'llmfleet').exists()
    assert lookup.run(['sim'], use_env=False)[0] != 'from-env'


def test_given_path_and_existing_key(lookup, tmp_path):
    path = tmp_path / 'k'
    path.write_text('kept-key\n')
    os.chmod(path, 0o600)
    assert lookup.run(['sim'], path=str(path)) == ['kept-key']


@pytest.mark.parametrize('content, mode, message', [
    ('k\n', 0o644, 'readable by others'),
    ('\n', 0o600, 'is empty'),
])
def test_refuses_a_bad_key_file(lookup, tmp_path, content, mode, message):
    path = tmp_path / 'k'
    path.write_text(content)
    os.chmod(path, mode)
    with pytest.raises(AnsibleLookupError, match=message):
        lookup.run(['sim'], path=str(path))


@pytest.mark.parametrize('terms', [[], [''], ['a/b'], ['a', 'b']])
def test_refuses_a_bad_cluster_name(lookup, terms):
    with pytest.raises(AnsibleLookupError, match='one cluster name'):
        lookup.run(terms)


def test_refuses_an_unknown_option(lookup):
    with pytest.raises(AnsibleLookupError, match='unknown option'):
        lookup.run(['sim'], file='x')


def test_want_path_names_the_file_and_creates_nothing(lookup, tmp_path):
    assert lookup.run(['sim'], want='path') == [str(tmp_path / 'llmfleet' / 'sim' / 'api_key')]
    assert not (tmp_path / 'llmfleet').exists()


def test_a_named_secret_has_its_own_file_and_ignores_the_api_key_env(lookup, monkeypatch, tmp_path):
    monkeypatch.setenv('LLMFLEET_API_KEY', 'from-env')
    token = lookup.run(['sim'], name='ray_token', use_env=False)[0]
    path = tmp_path / 'llmfleet' / 'sim' / 'ray_token'
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and path.read_text().strip() == token
    assert token != 'from-env' and not (tmp_path / 'llmfleet' / 'sim' / 'api_key').exists()
    assert lookup.run(['sim'], name='ray_token', use_env=False)[0] == token


@pytest.mark.parametrize('name', ['../api_key', 'a b', 'x/y'])
def test_refuses_a_secret_name_that_is_no_file_name(lookup, name):
    with pytest.raises(AnsibleLookupError, match='name must be a file name'):
        lookup.run(['sim'], name=name)


@pytest.fixture
def templated(monkeypatch, tmp_path):
    """The lookup as a play calls it: with a templar, so inventory variables can be templates."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar

    monkeypatch.delenv('LLMFLEET_API_KEY', raising=False)
    monkeypatch.setenv('XDG_CONFIG_HOME', str(tmp_path))
    return api_key.LookupModule(loader=DataLoader(), templar=Templar(loader=DataLoader()))


def test_the_inventory_key_wins_over_env_and_file_and_writes_nothing(templated, monkeypatch, tmp_path):
    monkeypatch.setenv('LLMFLEET_API_KEY', 'from-env')
    variables = {'llmfleet_api_key': 'from-vault'}
    assert templated.run(['sim'], variables=variables) == ['from-vault']
    assert templated.run(['sim'], variables=variables, want='source') == ['inventory']
    assert templated.run(['sim'], variables={'llmfleet_api_key': ''}) == ['']  # the key turned off
    assert not (tmp_path / 'llmfleet').exists()


def test_the_inventory_key_may_be_a_template(templated):
    from ansible.template import trust_as_template  # an inventory's strings are trusted templates

    variables = {'llmfleet_api_key': trust_as_template("{{ 'k' ~ suffix }}"), 'suffix': '42'}
    templated._templar.available_variables = variables
    assert templated.run(['sim'], variables=variables) == ['k42']


def test_the_inventory_key_file_is_the_default_path(templated, tmp_path):
    path = tmp_path / 'site-key'
    path.write_text('site\n')
    os.chmod(path, 0o600)
    variables = {'llmfleet_api_key_file': str(path)}
    assert templated.run(['sim'], variables=variables) == ['site']
    assert templated.run(['sim'], variables=variables, want='path') == [str(path)]
    assert templated.run(['sim'], variables=variables, want='source') == ['file']


def test_source_says_environment_without_creating_the_file(templated, monkeypatch, tmp_path):
    monkeypatch.setenv('LLMFLEET_API_KEY', 'from-env')
    assert templated.run(['sim'], variables={}, want='source') == ['environment']
    monkeypatch.delenv('LLMFLEET_API_KEY')
    assert templated.run(['sim'], variables={}, want='source') == ['file']
    assert not (tmp_path / 'llmfleet').exists()


def test_a_named_secret_reads_neither_inventory_variable(templated, tmp_path):
    variables = {'llmfleet_api_key': 'from-vault', 'llmfleet_api_key_file': str(tmp_path / 'site-key')}
    token = templated.run(['sim'], variables=variables, name='ray_token', use_env=False)[0]
    assert token != 'from-vault' and (tmp_path / 'llmfleet' / 'sim' / 'ray_token').is_file()
    assert not (tmp_path / 'site-key').exists()
