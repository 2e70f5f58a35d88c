"""The controller_dir lookup: the collection's cache and reports directories on the controller."""
import pytest
from ansible.errors import AnsibleLookupError

from ansible_collections.llmfleet.cluster.plugins.lookup import controller_dir


@pytest.mark.parametrize("which, env, override, want", [
    ("cache", {"HOME": "/home/op"}, "", "/home/op/.cache/llmfleet"),
    ("cache", {"HOME": "/home/op", "LLMFLEET_CACHE": "/srv/cache"}, "", "/srv/cache"),
    ("cache", {"HOME": "/home/op", "LLMFLEET_CACHE": ""}, "", "/home/op/.cache/llmfleet"),   # empty is unset
    ("reports", {"PWD": "/work/site"}, "", "/work/site/reports"),
    ("reports", {"PWD": "/work/site", "LLMFLEET_REPORTS": "/srv/reports"}, "", "/srv/reports"),
    ("reports", {"PWD": "/work/site", "LLMFLEET_REPORTS": "/srv/reports"}, "/inv/reports", "/inv/reports"),
])
def test_the_directory_from_the_environment_and_the_override(which, env, override, want):
    assert controller_dir.controller_dir(which, env, override) == want


def test_the_lookup_reads_the_controllers_environment(monkeypatch):
    monkeypatch.setenv("LLMFLEET_CACHE", "/tmp/llmfleet-cache-test")
    monkeypatch.delenv("LLMFLEET_REPORTS", raising=False)
    monkeypatch.setenv("PWD", "/tmp/site")
    lookup = controller_dir.LookupModule()
    assert lookup.run(["cache"]) == ["/tmp/llmfleet-cache-test"]
    assert lookup.run(["reports"]) == ["/tmp/site/reports"]
    assert lookup.run(["reports"], override="/x") == ["/x"]


@pytest.mark.parametrize("terms, kwargs, words", [
    (["logs"], {}, "takes 'cache' or 'reports', got 'logs'"),
    (["cache", "reports"], {}, "takes one term"),
    (["cache"], {"override": "/x"}, "override applies to reports only"),
    (["cache"], {"path": "/x"}, "unknown option(s) path"),
])
def test_bad_use_names_the_cause(terms, kwargs, words):
    with pytest.raises(AnsibleLookupError) as err:
        controller_dir.LookupModule().run(terms, **kwargs)
    assert words in str(err.value)
