# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Pure helpers of the llmfleet.cluster.wait_progress action: the poll schedule, the elapsed time
as people read it, and the one "meaningful" line picked out of a log tail (a journal, a build log)
to show beside the elapsed time. No I/O here, so every rule has a unit table."""

from __future__ import annotations

import re

# ANSI colour / cursor sequences (vLLM and uv colour their logs when they think a tty is there)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
# Log prefixes that carry no information in a progress line: the time is ours, the level is noise.
#   vLLM:   "INFO 11-24 22:10:01 [loader.py:123] ", "(EngineCore_0 pid=123) ", "(RayWorkerWrapper pid=7) "
#   SGLang: "[2026-11-24 22:10:01 TP0] ", "[2026-11-24 22:10:01] "
#   Python logging: "2026-11-24 22:10:01,123 - name - INFO - "
_PREFIXES = (
    re.compile(r"^\([A-Za-z_][\w.-]* pid=\d+\)\s*"),
    re.compile(r"^(DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)?\s+(\[[^\]]*\]\s*)?"),
    re.compile(r"^\[\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(\.\d+)?( [^\]]*)?\]\s*"),
    re.compile(r"^\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d([.,]\d+)?\s+-\s+\S+\s+-\s+[A-Z]+\s+-\s+"),
)
# Anything that looks like a credential is masked before a line is printed: the engine gets its
# key from an env file and should never log it, but a progress line must not be the place it leaks.
_SECRETS = (
    re.compile(r"(?i)(bearer\s+)[^'\"\s,}]+"),
    re.compile(r"(?i)((?:api[_-]?key|token|password|secret|authorization)['\"]?\s*[=:]\s*['\"]?)(?!(?i:bearer)\s)[^'\"\s,}]+"),
    re.compile(r"\b(hf_)[A-Za-z0-9]{8,}"),
)
# Lines that say nothing about where the step is: separators, bare traceback markers, empty braces.
_NOISE = re.compile(r"^[\W_]*$")


def clean_line(line: str) -> str:
    """One log line as shown in a progress line: the last carriage-return segment (tqdm redraws a
    bar in place), no ANSI codes, no time/level prefix, secrets masked, spaces squeezed."""
    text = _ANSI.sub("", line or "")
    segments = [s for s in text.split("\r") if s.strip()]
    text = segments[-1] if segments else ""
    text = text.strip()
    changed = True
    while changed:
        changed = False
        for prefix in _PREFIXES:
            new = prefix.sub("", text, count=1)
            if new != text:
                text, changed = new.strip(), True
    for secret in _SECRETS:
        text = secret.sub(r"\1***", text)
    return " ".join(text.split())


def meaningful_line(lines, width: int = 140) -> str:
    """The last line of a log tail that says something (not empty, not a separator), cleaned and
    cut to width characters; '' when there is none."""
    for raw in reversed(list(lines or [])):
        text = clean_line(raw)
        if text and not _NOISE.match(text):
            return text if len(text) <= width else text[: width - 3].rstrip() + "..."
    return ""


def format_elapsed(seconds: float) -> str:
    """45 s, 3 min 05 s, 1 h 02 min: what a person reads at a glance."""
    total = max(int(round(seconds)), 0)
    if total < 60:
        return f"{total} s"
    minutes, secs = divmod(total, 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def poll_delay(elapsed: float, poll: float, fast_poll: float = 0, fast_window: float = 0) -> float:
    """Seconds until the next poll: fast_poll during the first fast_window seconds (a small engine
    is ready in tens of seconds, and a 10 s poll would add up to 10 s to its start), poll after."""
    if fast_poll and fast_poll > 0 and elapsed < fast_window:
        return max(min(fast_poll, fast_window - elapsed), 0.5)
    return max(poll, 0.5)


def report_due(elapsed: float, last_report: float, every: float) -> bool:
    """Whether a progress line is due: every `every` seconds after the last one (the first after
    `every` seconds too: a step that ends sooner prints only its final line)."""
    return every > 0 and elapsed - last_report >= every


def progress_line(host: str, what: str, elapsed: float, detail: str = "", label: str = "log") -> str:
    """spark1: tiny-llama loading 45 s (engine log: Loading weights took 12.1 s)"""
    line = f"{host}: {what} {format_elapsed(elapsed)}"
    return f"{line} ({label}: {detail})" if detail else line


def final_line(host: str, what: str, elapsed: float, status: dict) -> str:
    """The line printed when the job ends: how long it took and whether it worked."""
    if status.get("failed") or (status.get("rc") not in (None, 0)):
        rc = status.get("rc")
        outcome = f"failed (rc {rc})" if rc not in (None, "") else "failed"
    else:
        outcome = "done"
    line = f"{host}: {what} {outcome} after {format_elapsed(elapsed)}"
    # a job that found nothing to do (an engine already up) says so: "loading done" would mislead
    return line + " (no change)" if outcome == "done" and status.get("changed") is False else line
