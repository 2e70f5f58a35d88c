"""Every filter the collection ships is documented (its adjacent <name>.yml, or DOCUMENTATION in a
plugin file of its own name: where ansible-doc looks) and called by a role or playbook: a helper
only the tests use is a plain function, not a filter."""
import importlib
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[4]
FILTER_DIR = ROOT / "plugins" / "filter"


def _filters():
    out = {}
    for path in sorted(FILTER_DIR.glob("*.py")):
        if path.name == "__init__.py":
            continue
        module = importlib.import_module("ansible_collections.llmfleet.cluster.plugins.filter." + path.stem)
        for name in module.FilterModule().filters():
            out[name] = path.name
    return out


def _callers_text():
    parts = [(ROOT / "site.yml").read_text(encoding="utf-8")]
    for top in ("roles", "playbooks"):
        for path in sorted((ROOT / top).rglob("*")):
            # a role's meta/ (argument_specs) and README describe; tasks, vars, defaults, templates call
            if path.suffix in (".yml", ".yaml", ".j2") and path.is_file() and "meta" not in path.parts:
                parts.append(path.read_text(encoding="utf-8"))
    return "\n".join(parts)


def _documented():
    docs = {p.stem for p in FILTER_DIR.glob("*.yml")}
    docs |= {p.stem for p in FILTER_DIR.glob("*.py") if "\nDOCUMENTATION = " in p.read_text(encoding="utf-8")}
    return docs


FILTERS = _filters()
DOCUMENTED = _documented()
CALLERS = _callers_text()


def test_the_filter_modules_were_found():
    assert len(FILTERS) > 10, FILTERS


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_filter_is_documented_and_called(name):
    assert name in DOCUMENTED, (
        "%s (plugins/filter/%s) has no plugins/filter/%s.yml: ansible-doc -t filter fails" % (name, FILTERS[name], name))
    called = re.search(r"llmfleet\.cluster\.%s(?!\w)" % name, CALLERS) is not None
    assert called, ("no role or playbook calls llmfleet.cluster.%s: drop it from %s's FilterModule (a plain "
                    "function the tests may still import) or use it" % (name, FILTERS[name]))


def test_every_filter_doc_names_a_filter():
    assert DOCUMENTED == set(FILTERS), sorted(DOCUMENTED ^ set(FILTERS))
