"""validate_report / validate_markdown filters: plain data in, report and Markdown out."""
import importlib.util
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.llmfleet.cluster.plugins.filter.validate import FilterModule

_SPEC = importlib.util.spec_from_file_location(
    "vr_cases", Path(__file__).resolve().parents[1] / "module_utils" / "test_validate_report.py")
CASES = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(CASES)
FILTERS = FilterModule().filters()


def test_report_and_markdown_through_the_filters():
    rep = FILTERS["validate_report"](CASES.base())
    assert rep["ok"] and rep["lines"][0].startswith("PASS spark1: ray service: ")
    md = FILTERS["validate_markdown"](rep)
    assert "```mermaid" in md and "## Checks" in md


@pytest.mark.parametrize("name,value", [("validate_report", []), ("validate_markdown", "text")])
def test_wrong_input(name, value):
    with pytest.raises(AnsibleFilterError):
        FILTERS[name](value)
