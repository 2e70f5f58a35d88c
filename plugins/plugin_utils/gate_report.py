# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""What the controller gate reports: findings, checks and the report, and how values are shown.

Pure, no I/O. Every check of the gate (plugin_utils/inventory_checks.py) and every rule of its rule
table (plugin_utils/gate_rules.py) returns :class:`Finding` objects; both import them from here, so
neither imports the other's internals.
"""

from __future__ import annotations

import dataclasses
import json
import typing as t

UNSET: t.Any = object()


class Unevaluated:
    """A variable whose template could not be evaluated on the controller (e.g. it needs facts).

    ``raw`` is the untemplated value: two hosts with the same raw template count as equal.
    """

    def __init__(self, raw: t.Any, error: str) -> None:
        self.raw = raw
        self.error = error

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Unevaluated) and _canon(self.raw) == _canon(other.raw)

    def __hash__(self) -> int:
        return hash(_canon(self.raw))

    def __repr__(self) -> str:
        return f"<unevaluated {self.raw!r}>"


# --------------------------------------------------------------------------- results
@dataclasses.dataclass
class Finding:
    subject: str  # "spark2", "spark1, spark2", "cluster 'lab2'"
    problem: str
    fix: str
    hosts: tuple[str, ...] = ()
    variable: str | None = None
    value: t.Any = None
    severity: str = "fail"

    @property
    def line(self) -> str:
        return f"{self.subject}: {self.problem}; {self.fix}"

    def to_dict(self) -> dict[str, t.Any]:
        return {
            "severity": self.severity,
            "hosts": list(self.hosts),
            "variable": self.variable,
            "value": _jsonable(self.value),
            "problem": self.problem,
            "fix": self.fix,
            "message": self.line,
        }


@dataclasses.dataclass
class CheckResult:
    key: str
    title: str
    findings: list[Finding] = dataclasses.field(default_factory=list)
    details: str = ""

    @property
    def ok(self) -> bool:
        return not any(f.severity == "fail" for f in self.findings)

    def merge_hosts(self) -> CheckResult:
        """One line for the same problem on several hosts (e.g. an engine typo in group_vars/all)."""
        merged: dict[tuple, Finding] = {}
        out: list[Finding] = []
        for f in self.findings:
            if len(f.hosts) != 1 or f.subject != f.hosts[0]:
                out.append(f)
                continue
            key = (f.problem, f.fix, f.variable, f.severity, _canon(f.value))
            if key in merged:
                first = merged[key]
                first.hosts += f.hosts
                first.subject = _names(first.hosts)
            else:
                merged[key] = f
                out.append(f)
        self.findings = out
        return self

    @property
    def summary(self) -> str:
        return f"{self.title} ({self.details})" if self.details else self.title

    def to_dict(self) -> dict[str, t.Any]:
        return {
            "name": self.key,
            "title": self.title,
            "ok": self.ok,
            "details": self.details,
            "findings": [f.to_dict() for f in self.findings],
        }


@dataclasses.dataclass
class Report:
    checks: list[CheckResult]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def failures(self) -> list[Finding]:
        return [f for c in self.checks for f in c.findings if f.severity == "fail"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for c in self.checks for f in c.findings if f.severity != "fail"]

    def lines(self) -> list[str]:
        """One line per failure (``FAIL``), per warning (``WARN``), then per passing check (``ok``)."""
        out = [f"FAIL {f.line}" for f in self.failures]
        out += [f"WARN {f.line}" for f in self.warnings]
        out += [f"ok   {c.summary}" for c in self.checks if c.ok]
        return out

    def to_dict(self) -> dict[str, t.Any]:
        return {
            "ok": self.ok,
            "failed": len(self.failures),
            "checks": [c.to_dict() for c in self.checks],
            "lines": self.lines(),
        }


# --------------------------------------------------------------------------- helpers
def _canon(value: t.Any) -> str:
    """A comparable rendering: '0.11' and 0.11 compare equal, dicts by content."""
    if isinstance(value, Unevaluated):
        return "<template> " + _canon(value.raw)
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    try:
        return json.dumps(value, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return str(value)


def _jsonable(value: t.Any) -> t.Any:
    if value is UNSET:
        return None
    if isinstance(value, Unevaluated):
        return {"unevaluated": _canon(value.raw), "error": value.error}
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    try:
        return json.loads(json.dumps(value, default=str))
    except (TypeError, ValueError):
        return str(value)


def _show(value: t.Any) -> str:
    """How a value appears in a message: quoted like the inventory would spell it."""
    if value is UNSET:
        return "<unset>"
    if isinstance(value, Unevaluated):
        return f"template {_canon(value.raw)!r}"
    if isinstance(value, str):
        return f"'{value}'"
    return _canon(value)


def _names(hosts: t.Iterable[str]) -> str:
    return ", ".join(hosts)
