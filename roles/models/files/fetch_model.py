# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Fetch a model on this node (the models role's source node): the Hugging Face hub, URLs, or a
Hugging Face cache snapshot already here. Run by the models role as an async job:

    <engine venv>/bin/python fetch_model.py <spec.json>

spec: {mode: hf|url|hf_cache, local_dir, progress, marker, ...} (built and checked on the controller by
plugins/module_utils/model_node_fetch.py). While it runs it rewrites `progress` every 2 s with
{done, total, started, now}; the controller polls it. Ends with one JSON line on stdout:
{changed, bytes, seconds} or {failed, kind, msg}; the controller turns `kind` into host, cause and fix.
The hub token is read from spec["token_file"] (0600, written by the role, removed after); it is
never an argument or an environment variable of this process.
"""
import hashlib
import json
import os
import shutil
import sys
import tarfile
import threading
import time
import urllib.error
import urllib.request
import zipfile

CHUNK = 8 << 20


def out(**result):
    sys.stdout.write(json.dumps(result) + "\n")
    sys.exit(0 if not result.get("failed") else 2)


def tree_bytes(root):
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            try:
                total += os.stat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return total


class Progress(threading.Thread):
    """Writes bytes present under local_dir (partial files included) and the expected total."""

    def __init__(self, spec, base):
        super().__init__(daemon=True)
        self.spec, self.base, self.total, self.started = spec, base, None, time.time()
        self.stop = threading.Event()

    def write(self):
        data = {"done": max(tree_bytes(self.spec["local_dir"]) - self.base, 0), "total": self.total,
                "started": self.started, "now": time.time()}
        tmp = self.spec["progress"] + ".tmp"
        with open(tmp, "w") as handle:
            json.dump(data, handle)
        os.replace(tmp, self.spec["progress"])

    def run(self):
        while not self.stop.wait(2):
            self.write()


def want_of(spec):
    return {k: spec.get(k) for k in ("mode", "repo_id", "revision", "allow_patterns", "ignore_patterns", "urls")}


def done_before(spec):
    try:
        with open(os.path.join(spec["local_dir"], spec["marker"])) as handle:
            return json.load(handle) == want_of(spec)
    except (OSError, ValueError):
        return False


def check_space(spec, need):
    free = shutil.disk_usage(spec["local_dir"]).free
    reserve = int(spec.get("reserve_bytes") or 0)
    if need and free < need + reserve:
        out(failed=True, kind="space", need=need, free=free, reserve=reserve,
            msg=f"{need} bytes to fetch + {reserve} reserve, {free} free in {spec['local_dir']}")


# ---- the hub ------------------------------------------------------------------------------------
def fetch_hf(spec, progress):
    try:
        import huggingface_hub as hub
    except ImportError:
        out(failed=True, kind="no_hub_lib", msg=f"huggingface_hub is not installed for {sys.executable}")
    errors = hub.utils
    token = None
    if spec.get("token_file") and os.path.isfile(spec["token_file"]):
        with open(spec["token_file"]) as handle:
            token = handle.read().strip() or None
    repo, revision = spec["repo_id"], spec.get("revision") or None
    try:
        info = hub.HfApi(token=token).model_info(repo, revision=revision, files_metadata=True)
    except errors.GatedRepoError as exc:
        out(failed=True, kind="gated", token=bool(token), msg=str(exc).splitlines()[0])
    except errors.RevisionNotFoundError as exc:
        out(failed=True, kind="revision", msg=str(exc).splitlines()[0])
    except errors.RepositoryNotFoundError as exc:
        out(failed=True, kind="repo", token=bool(token), msg=str(exc).splitlines()[0])
    except (errors.HfHubHTTPError, OSError) as exc:
        out(failed=True, kind="network", msg=str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    if getattr(info, "gated", False) and not token:
        out(failed=True, kind="gated", token=False, msg=f"{repo} is gated ({info.gated})")
    names = list(errors.filter_repo_objects([s.rfilename for s in info.siblings],
                                            allow_patterns=spec.get("allow_patterns") or None,
                                            ignore_patterns=spec.get("ignore_patterns") or None))
    sizes = {s.rfilename: s.size or 0 for s in info.siblings}
    progress.total = sum(sizes[n] for n in names)
    present = sum(os.path.getsize(os.path.join(spec["local_dir"], n)) for n in names
                  if os.path.isfile(os.path.join(spec["local_dir"], n)))
    check_space(spec, progress.total - present)
    progress.start()
    try:
        # the resolved commit, so every file comes from the same revision; resumes .incomplete files
        hub.snapshot_download(repo_id=repo, revision=info.sha, local_dir=spec["local_dir"], token=token,
                              allow_patterns=spec.get("allow_patterns") or None,
                              ignore_patterns=spec.get("ignore_patterns") or None)
    except errors.GatedRepoError as exc:
        out(failed=True, kind="gated", token=bool(token), msg=str(exc).splitlines()[0])
    except (errors.HfHubHTTPError, OSError) as exc:
        out(failed=True, kind="network", msg=str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    return info.sha


# ---- URLs ---------------------------------------------------------------------------------------
def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def head_size(url):
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=60) as resp:
            return int(resp.headers.get("Content-Length") or 0)
    except (urllib.error.URLError, OSError, ValueError):
        return 0


def download(url, dest):
    """Download url to dest, resuming dest.part with a Range request when the server honours it."""
    part = dest + ".part"
    have = os.path.getsize(part) if os.path.exists(part) else 0
    request = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
    try:
        resp = urllib.request.urlopen(request, timeout=60)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and have:      # the part file is already complete
            os.replace(part, dest)
            return
        raise
    with resp, open(part, "ab" if have and resp.status == 206 else "wb") as handle:
        shutil.copyfileobj(resp, handle, CHUNK)
    os.replace(part, dest)


def unpack(archive, local_dir):
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as handle:
            handle.extractall(local_dir)
        return
    with tarfile.open(archive) as handle:
        if hasattr(tarfile, "data_filter"):
            handle.extractall(local_dir, filter="data")
        else:
            handle.extractall(local_dir)


def fetch_url(spec, progress):
    downloads = os.path.join(spec["local_dir"], ".llmfleet-downloads")
    os.makedirs(downloads, exist_ok=True)
    items = spec["urls"]
    targets = [os.path.join(downloads, i["download"]) if i["archive"] else os.path.join(spec["local_dir"], i["dest"])
               for i in items]
    todo = [(i, t) for i, t in zip(items, targets) if not (os.path.isfile(t) and sha256_of(t) == i["sha256"])]
    progress.total = sum(head_size(i["url"]) for i, _t in todo) or None
    check_space(spec, progress.total or 0)
    progress.start()
    for item, target in todo:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        try:
            download(item["url"], target)
        except (urllib.error.URLError, OSError) as exc:
            out(failed=True, kind="network", msg=f"{item['url']}: {exc}")
        digest = sha256_of(target)
        if digest != item["sha256"]:
            os.unlink(target)
            out(failed=True, kind="sha256", msg=f"{item['url']}: sha256 {digest}, expected {item['sha256']}")
    for item, target in zip(items, targets):
        if item["archive"]:
            unpack(target, spec["local_dir"])


# ---- a Hugging Face cache snapshot on this node -------------------------------------------------
def fetch_hf_cache(spec, progress):
    org_name = spec["repo_id"].replace("/", "--")
    repo_dir = os.path.join(spec["cache_dir"], f"models--{org_name}")
    revision = spec.get("revision") or "main"
    commit = revision
    ref = os.path.join(repo_dir, "refs", revision)
    if os.path.isfile(ref):
        with open(ref) as handle:
            commit = handle.read().strip()
    snapshot = os.path.join(repo_dir, "snapshots", commit)
    if not os.path.isdir(snapshot):
        have = sorted(os.listdir(os.path.join(repo_dir, "snapshots"))) if os.path.isdir(
            os.path.join(repo_dir, "snapshots")) else []
        out(failed=True, kind="revision", snapshot=snapshot, available=have,
            msg=f"no snapshot {snapshot}" + (f" (has: {', '.join(have)})" if have else f" ({repo_dir} missing)"))
    files = []
    for dirpath, _dirs, names in os.walk(snapshot):
        for name in names:
            full = os.path.join(dirpath, name)
            files.append((os.path.relpath(full, snapshot), os.path.realpath(full)))
    progress.total = sum(os.path.getsize(real) for _rel, real in files)
    progress.start()
    for rel, real in files:
        dest = os.path.join(spec["local_dir"], rel)
        if os.path.isfile(dest) and os.path.getsize(dest) == os.path.getsize(real):
            continue
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        if os.path.exists(dest):
            os.unlink(dest)
        try:
            os.link(real, dest)          # same filesystem: no second copy of the bytes
        except OSError:
            check_space(spec, os.path.getsize(real))
            shutil.copyfile(real, dest)
    return commit


def main():
    check_only = sys.argv[1] == "--done"     # exit 0: fetched before (same spec), 1: not yet
    with open(sys.argv[-1]) as handle:
        spec = json.load(handle)
    if check_only:
        sys.exit(0 if done_before(spec) else 1)
    os.makedirs(spec["local_dir"], exist_ok=True)
    if done_before(spec):
        out(changed=False, bytes=0, seconds=0)
    started, base = time.time(), tree_bytes(spec["local_dir"])
    progress = Progress(spec, base)
    resolved = {"hf": fetch_hf, "url": fetch_url, "hf_cache": fetch_hf_cache}[spec["mode"]](spec, progress)
    progress.stop.set()
    if progress.is_alive():
        progress.join()
    progress.write()
    with open(os.path.join(spec["local_dir"], spec["marker"]), "w") as handle:
        json.dump(want_of(spec), handle)
    out(changed=True, bytes=max(tree_bytes(spec["local_dir"]) - base, 0), seconds=round(time.time() - started, 1),
        revision=resolved)


if __name__ == "__main__":
    main()
