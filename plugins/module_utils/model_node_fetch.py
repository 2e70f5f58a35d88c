# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Fetching a model on a node (models_distribution fabric): the spec the node's fetch script runs,
the explanation of its failures, and the progress line the controller prints while it runs.

Pure Python, no I/O. The script is roles/models/files/fetch_model.py; it runs with the engine venv's
Python on the source node, as an async job, and reads the hub token from a 0600 file.
"""
import posixpath

from ansible_collections.llmfleet.cluster.plugins.module_utils import model_fetch

MODES = ("hf", "url", "hf_cache")
PROGRESS = ".llmfleet-progress.json"


def node_fetch_spec(mode, local_dir, repo_id=None, revision=None, allow_patterns=None, ignore_patterns=None,
                    urls=None, cache_dir=None, token_file=None, reserve_bytes=0):
    """The JSON spec of fetch_model.py; raises FetchError naming the variable, value and fix."""
    if mode not in MODES:
        raise model_fetch.FetchError(f"models_source: '{mode}' cannot be fetched on a node (one of {', '.join(MODES)})")
    if not str(local_dir or "").startswith("/"):
        raise model_fetch.FetchError(f"models_path: '{local_dir}' must be an absolute path on the node")
    spec = {"mode": mode, "local_dir": str(local_dir).rstrip("/"), "marker": model_fetch.MARKER,
            "progress": posixpath.join(str(local_dir), PROGRESS), "reserve_bytes": int(reserve_bytes),
            "repo_id": None, "revision": None, "allow_patterns": None, "ignore_patterns": None, "urls": None}
    if mode in ("hf", "hf_cache"):
        # the same checks as the controller download (repo id, revision, patterns)
        model_fetch.hf_fetch_argv("python", repo_id, local_dir, revision, allow_patterns)
        for pattern in ignore_patterns or []:
            if not isinstance(pattern, str) or not pattern:
                raise model_fetch.FetchError(f"models_hf_ignore_patterns: expected glob strings, got {ignore_patterns!r}")
        spec.update(repo_id=repo_id, revision=str(revision) if revision else None,
                    allow_patterns=list(allow_patterns or []) or None, ignore_patterns=list(ignore_patterns or []) or None)
    if mode == "hf":
        spec["token_file"] = token_file
    if mode == "hf_cache":
        if not str(cache_dir or "").startswith("/"):
            raise model_fetch.FetchError(f"models_hf_cache_dir: '{cache_dir}' must be an absolute path on the node "
                                         f"(the hub cache, e.g. /raid/hf-cache/hub)")
        spec["cache_dir"] = str(cache_dir).rstrip("/")
    if mode == "url":
        spec["urls"] = model_fetch.url_items(urls)
    return spec


def failure_message(host, result, spec):
    """Host, cause and fix of a failed node fetch (the script's {failed, kind, msg})."""
    kind, msg = result.get("kind"), result.get("msg", "")
    what = spec.get("repo_id") or "the URLs"
    rev = spec.get("revision")
    at = f"{what}{'@' + rev if rev else ''}"
    causes = {
        "gated": (f"{at} is gated and "
                  + ("the token may not read it" if result.get("token") else "no token was given"),
                  "accept the model's terms on huggingface.co with your account, then put a read token in "
                  "models_hf_token (vault-encrypted vars file) or HF_TOKEN on the controller"),
        "revision": (f"revision '{rev or 'main'}' of {what} does not exist"
                     + (f" ({msg})" if spec.get("mode") == "hf_cache" else ""),
                     "set models_hf_revision to an existing branch, tag or commit"
                     + (" (or download that revision into the cache)" if spec.get("mode") == "hf_cache" else "")),
        "repo": (f"{what} does not exist or is private" + ("" if result.get("token") else " (no token given)"),
                 "check models_hf_repo (owner/name) and the token (models_hf_token / HF_TOKEN)"),
        "network": (f"the download of {at} failed: {msg}",
                    f"check that {host} reaches the source (proxy, DNS); a re-run resumes the partial files"),
        "space": (f"not enough disk: {msg}",
                  f"free space under models_dir on {host} or point models_dir at a larger disk; nothing was fetched"),
        "sha256": (f"a download does not match its sha256: {msg}", "check models_urls' sha256 and URL"),
        "no_hub_lib": (msg, "use an engine venv with huggingface_hub (models_fetch_python), or models_source: url"),
    }
    cause, fix = causes.get(kind, (f"the fetch failed: {msg or result.get('stderr', '') or result.get('rc')}",
                                   "see the error; a re-run resumes"))
    return f"{host}: {cause}. Fix: {fix}."


def _human(num):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(num) < 1024 or unit == "TiB":
            return f"{num:.1f} {unit}" if unit != "B" else f"{int(num)} B"
        num /= 1024.0
    return f"{num:.1f} TiB"


def progress_line(host, progress):
    """'spark1: 3.2 GiB / 70.0 GiB (4.6%) at 410.2 MiB/s' from the script's progress file."""
    if not progress:
        return f"{host}: starting"
    done, total = int(progress.get("done") or 0), progress.get("total")
    elapsed = max(float(progress.get("now", 0)) - float(progress.get("started", 0)), 0.001)
    rate = done / elapsed
    line = f"{host}: {_human(done)}"
    if total:
        line += f" / {_human(int(total))} ({100.0 * done / int(total):.1f}%)"
    line += f" at {_human(rate)}/s"
    if total and rate > 0 and done < int(total):
        line += f", ~{int((int(total) - done) / rate)} s left"
    return line
