# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Model distribution: where weights come from, what a copy must contain, what differs.

Pure Python, no I/O (the manifest walk lives in the model_manifest module). Used by the models
role: weights are fetched once on the controller (Hugging Face hub, URL, local path) or exist on
the first serving node (generate, path), then copied to every serving node at the same path and
verified by size and sha256 against the source's manifest.

The hub download runs HF_SCRIPT with the controller's Python (huggingface_hub's snapshot_download /
hf_hub_download); the token travels on that one process's stdin (a task's `environment:` would show
it in the connection's command line at -vvv), never in argv, a file or a log.
"""
import json
import posixpath
import re

ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.xz", ".txz", ".tar.bz2", ".tbz2", ".zip")
MARKER = ".llmfleet-fetched.json"
_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")
_REVISION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]*$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
HF_MISSING_RC = 3

# Runs on the controller as: python -c HF_SCRIPT '<spec json>'. Exit 3 = huggingface_hub missing.
HF_SCRIPT = r'''
import json, os, sys
spec = json.loads(sys.argv[1])
try:
    import huggingface_hub
except ImportError:
    sys.stderr.write("huggingface_hub is not installed for " + sys.executable + ": install it into the "
                     "controller venv (pip install 'huggingface_hub>=0.23') or set models_hf_python to a "
                     "Python that has it\n")
    sys.exit(3)
marker = os.path.join(spec["local_dir"], spec["marker"])
want = {k: spec.get(k) for k in ("repo_id", "revision", "allow_patterns", "filename")}
if os.path.isfile(marker):
    with open(marker) as handle:
        try:
            done = json.load(handle)
        except ValueError:
            done = None
    if done == want:
        print(json.dumps({"changed": False, "local_dir": spec["local_dir"]}))
        sys.exit(0)
os.makedirs(spec["local_dir"], exist_ok=True)
# the token: one line on stdin (the task's no_log stdin), else an HF_TOKEN the controller exported
token = (sys.stdin.readline().strip() if spec.get("token_stdin") else "") or os.environ.get("HF_TOKEN") or None
common = dict(repo_id=spec["repo_id"], revision=spec.get("revision"), local_dir=spec["local_dir"], token=token)
if spec.get("filename"):
    path = huggingface_hub.hf_hub_download(filename=spec["filename"], **common)
else:
    path = huggingface_hub.snapshot_download(allow_patterns=spec.get("allow_patterns") or None, **common)
with open(marker, "w") as handle:
    json.dump(want, handle)
print(json.dumps({"changed": True, "path": path, "local_dir": spec["local_dir"]}))
'''


class FetchError(ValueError):
    """A source is misdescribed; the message names the variable, the value and the fix."""


def hf_fetch_argv(python, repo_id, local_dir, revision=None, allow_patterns=None, filename=None):
    """argv that downloads a hub repository (or one file of it) into local_dir.

    revision: branch, tag or commit (empty/None = the repository's default branch). The token is
    not an argument: the caller passes it as the command's stdin (no_log).
    """
    problems = []
    if not python:
        problems.append("models_hf_python: empty; name the controller Python that has huggingface_hub")
    if not isinstance(repo_id, str) or not _REPO.match(repo_id):
        problems.append(f"models_hf_repo: '{repo_id}' is not a hub repository id (owner/name)")
    if revision and not _REVISION.match(str(revision)):
        problems.append(f"models_hf_revision: '{revision}' is not a branch, tag or commit")
    if not local_dir or not str(local_dir).startswith("/"):
        problems.append(f"local_dir: '{local_dir}' must be an absolute path on the controller")
    patterns = list(allow_patterns or [])
    if not all(isinstance(p, str) and p for p in patterns):
        problems.append(f"models_hf_allow_patterns: expected a list of glob strings, got {allow_patterns!r}")
    if filename is not None and (not isinstance(filename, str) or not filename or filename.startswith("/")):
        problems.append(f"hf_file: '{filename}' must be a path inside the repository")
    if problems:
        raise FetchError("; ".join(problems))
    spec = {"repo_id": repo_id, "revision": str(revision) if revision else None,
            "allow_patterns": patterns or None, "filename": filename,
            "local_dir": str(local_dir), "marker": MARKER, "token_stdin": True}
    return [str(python), "-c", HF_SCRIPT, json.dumps(spec, sort_keys=True)]


def is_archive(name):
    return str(name).lower().endswith(ARCHIVE_SUFFIXES)


def url_items(items):
    """Normalise models_urls: [{url, sha256, dest?, archive?}] -> with dest and archive filled in.

    Every item needs a sha256: a download that cannot be verified is refused.
    """
    if not isinstance(items, list) or not items:
        raise FetchError("models_urls: expected a non-empty list of {url, sha256[, dest][, archive]} "
                         "(models_source is url)")
    out, problems = [], []
    for i, item in enumerate(items):
        where = f"models_urls[{i}]"
        if not isinstance(item, dict):
            problems.append(f"{where}: expected a mapping with url and sha256")
            continue
        url = item.get("url")
        if not isinstance(url, str) or not re.match(r"^https?://[^/\s]+", url):
            problems.append(f"{where}.url: '{url}' is not an http(s) URL")
            continue
        sha = str(item.get("sha256") or "").lower()
        if sha.startswith("sha256:"):
            sha = sha[len("sha256:"):]
        if not _SHA256.match(sha):
            problems.append(f"{where}.sha256: '{item.get('sha256') or ''}' is not 64 hex digits; every download "
                            f"is verified (sha256sum <file>)")
            continue
        base = posixpath.basename(url.split("?", 1)[0].split("#", 1)[0])
        dest = item.get("dest") or base
        if not dest or dest.startswith("/") or ".." in dest.split("/"):
            problems.append(f"{where}.dest: '{dest}' must be a relative path inside the model directory")
            continue
        archive = item.get("archive")
        archive = is_archive(base) if archive is None else bool(archive)
        out.append({"url": url, "sha256": sha, "dest": dest, "archive": archive,
                    "download": f"{i:02d}-{base or 'download'}"})
    if problems:
        raise FetchError("; ".join(problems))
    return out


def model_path(model, models_dir):
    """Where a profile's model lives on every node: itself when a path, else models_dir/<hub id>."""
    if str(model).startswith("/"):
        return str(model).rstrip("/")
    return f"{str(models_dir).rstrip('/')}/{model}"


def file_path(dest, files_dir):
    """Node path of a profile file (the path serve_command renders into the file's flag)."""
    if str(dest).startswith("/"):
        return str(dest)
    return f"{str(files_dir).rstrip('/')}/{dest}"


def hidden(relpath):
    """True for paths with a dot-component (.cache/ of the hub, our marker): not part of a model."""
    return any(part.startswith(".") for part in str(relpath).split("/"))


def compare(expected, actual, hashes=True):
    """Files of `expected` ({rel: {size, sha256}}) that `actual` lacks or holds differently.

    Returns dict(bad=[rel...], problems=["rel: reason", ...], extra=[rel...]). With hashes=False
    only sizes are compared.
    """
    bad, problems = [], []
    for rel in sorted(expected):
        want, have = expected[rel], actual.get(rel)
        if have is None:
            bad.append(rel)
            problems.append(f"{rel}: missing")
        elif int(have["size"]) != int(want["size"]):
            bad.append(rel)
            problems.append(f"{rel}: {have['size']} bytes, expected {want['size']}")
        elif hashes and want.get("sha256") and have.get("sha256") != want["sha256"]:
            bad.append(rel)
            problems.append(f"{rel}: sha256 {str(have.get('sha256'))[:12]}..., expected {want['sha256'][:12]}...")
    extra = sorted(set(actual) - set(expected))
    return {"bad": bad, "problems": problems, "extra": extra}


def file_items(files, cache_dir, files_dir, python=None):
    """A profile's files (plugin files), each with where it is fetched and where it goes.

    Returns [{name, source: url|path|hf, url, sha256, controller_path, node_path, flag, hf_argv}]:
    controller_path is the copy fetched once on the controller (for source path: the path itself),
    node_path what serve_command renders into the file's flag on every serving node.
    """
    out = []
    for item in files or []:
        name, dest = item.get("name"), item.get("dest")
        if not name or not dest:
            raise FetchError(f"models_files: {item!r} needs name and dest (the profile's files schema)")
        base = f"{str(cache_dir).rstrip('/')}/files/{name}"
        entry = {"name": name, "url": None, "sha256": (item.get("sha256") or "").lower() or None,
                 "node_path": file_path(dest, files_dir), "flag": item.get("flag"), "hf_argv": None}
        if item.get("url"):
            entry.update(source="url", url=item["url"],
                         controller_path=f"{base}/{posixpath.basename(dest)}")
        elif item.get("path"):
            entry.update(source="path", controller_path=item["path"])
        elif item.get("hf_repo"):
            if not item.get("hf_file"):
                raise FetchError(f"models_files '{name}': hf_repo needs hf_file")
            entry.update(source="hf", controller_path=f"{base}/{item['hf_file']}",
                         hf_argv=hf_fetch_argv(python, item["hf_repo"], base, item.get("hf_revision"),
                                               filename=item["hf_file"]))
        else:
            raise FetchError(f"models_files '{name}': give url, path or hf_repo + hf_file")
        if entry["sha256"] and not _SHA256.match(entry["sha256"]):
            raise FetchError(f"models_files '{name}': sha256 '{item.get('sha256')}' is not 64 hex digits")
        out.append(entry)
    return out
