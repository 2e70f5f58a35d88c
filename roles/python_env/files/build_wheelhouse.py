# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Build an offline wheelhouse for one engine variant (arch, release).

Usage:
  build_wheelhouse.py SPEC [--root DIR | --out DIR] [--force] [--verify] [--dry-run]
  build_wheelhouse.py SPEC [--root DIR | --out DIR] --source-status
  build_wheelhouse.py SPEC [--root DIR | --out DIR] --add-built WHEEL [--built-on HOST]
  build_wheelhouse.py --alias-only NAME VERSION REQ [REQ ...] --out DIR

SPEC is a variant file (YAML or JSON; a top-level ``python_env_variant`` key is unwrapped),
e.g. ``roles/python_env/vars/variants/cpu.yml``. The output directory, by default
``<repo>/.cache/wheelhouse/<arch>-<release>/``, receives:

  *.whl          every wheel of the resolved set (flat: usable as --find-links DIR)
  lock.txt       ``name==version --hash=sha256:...`` per wheel: a pip/uv requirements file
  SHA256SUMS     ``sha256sum -c`` format
  manifest.json  spec digest, target, counts, sizes, excludes, one entry per wheel
  .stamp         the spec digest; a re-run with the same spec and intact files is a no-op

Steps: (1) build the alias wheel(s) (tiny pure wheels made with zipfile, deterministic);
(2) resolve the full dependency set ONCE with ``uv pip compile`` for the target python/platform,
with ``--excludes`` (and names matching ``exclude_globs`` added to the excludes), constrained to
the lock committed for the release where ``--pinned-dir`` holds one;
(3) ``pip download --no-deps --only-binary=:all:`` of exactly the resolved pins (pip's cache is
reused; wheels already in the old wheelhouse are hard-linked in first); (4) check one wheel per
pin, hash, write lock/SUMS/manifest; (5) swap the new directory in atomically.

Variants with ``build: source`` (a package compiled for the arch, e.g. vLLM for sm_110):
the plain build makes the wheelhouse of the binary part only: every wheel but ``source.name``,
locked in ``build-lock.txt`` (the build venv's set on the build node), with no ``lock.txt``, so a
node cannot install an incomplete set. ``source.resolve_deps`` (default true) resolves the
source requirement together with ``packages``, so its dependencies are locked too (its own pin is
dropped). The python_env role builds the wheel once on a build node of that arch
(``pip wheel --no-deps --no-build-isolation``), fetches it back, and ``--add-built WHEEL`` checks
it (name, version, python/platform tags, its Requires-Dist against the lock), copies it in and
writes ``lock.txt`` = build-lock + the built wheel, SHA256SUMS and the manifest's
``source_build`` (spec digest, sha256, build host). ``--source-status`` says (JSON) whether the
wheelhouse holds a built wheel for the current spec digest; a changed spec (packages, source,
build_env, ...) rebuilds the binary part and drops the old built wheel.

Install on a node (no index, no network; the python_env role, tasks/install_venv.yml):
  uv pip sync --offline --no-index --require-hashes --compile-bytecode --find-links DIR DIR/lock.txt
  pip install --no-index --no-deps --require-hashes --find-links DIR -r DIR/lock.txt
No dependency resolution on the node is deliberate (sync / --no-deps): the lock is the complete
set, and some hard dependencies of the engine (CUDA torchvision/torchaudio/torchcodec, triton)
are excluded on purpose, so `pip check` / `uv pip check` report them as missing.

Only the standard library is needed (PyYAML is used for YAML specs when importable; JSON
specs need nothing). uv is taken from $UV, then the repo's .venv/bin/uv, then PATH; pip is
``<python> -m pip`` with $WHEELHOUSE_PIP_PYTHON or this interpreter.
"""
from __future__ import annotations

import argparse
import base64
import email.parser
import fnmatch
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

BUILDER_VERSION = "1"
# this file lives in roles/python_env/files/ (tools/wheelhouse/ holds a link to it)
ROOT = Path(__file__).resolve().parents[3]
DEFAULT_ROOT = ROOT / ".cache" / "wheelhouse"
ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)
# Keys of the spec that change what ends up in the wheelhouse (others are data for roles).
BUILD_KEYS = (
    "arch", "release", "build", "python", "python_platform", "exclude_newer", "index_url",
    "extra_index_urls", "find_links", "index_strategy", "packages", "alias", "excludes",
    "exclude_globs",
)
# Keys added by later features: part of the digest only when a spec sets them, so that the
# digest (and the no-op) of a spec without them stays what it was.
OPTIONAL_BUILD_KEYS = ("no_index", "source", "build_env", "build_system_packages", "local")
SOURCE_KEYS_REQUIRED = ("name", "requirement")


class WheelhouseError(Exception):
    """A build step failed; the message says which and why."""


# --------------------------------------------------------------------------- names/versions
def canon(name: str) -> str:
    """PEP 503 normalized project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_name_version(filename: str) -> tuple[str, str]:
    """(canonical name, version) from a wheel filename."""
    if not filename.endswith(".whl"):
        raise WheelhouseError(f"not a wheel: {filename}")
    parts = filename[:-4].split("-")
    if len(parts) not in (5, 6):
        raise WheelhouseError(f"bad wheel filename: {filename}")
    return canon(parts[0]), parts[1]


def parse_pin(line: str) -> tuple[str, str] | None:
    """(canonical name, version) from ``name[extras]==version`` (comments stripped)."""
    line = line.split("#", 1)[0].strip()
    if not line or line.startswith("-"):
        return None
    m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*==\s*([^\s;]+)", line)
    if not m:
        raise WheelhouseError(f"not an exact pin: {line!r}")
    return canon(m.group(1)), m.group(3)


def version_matches(pinned: str, found: str) -> bool:
    """Wheel filename versions may be normalized differently (e.g. '_' vs '-')."""
    def norm(v: str) -> str:
        return v.lower().replace("_", "-")
    return norm(pinned) == norm(found)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# --------------------------------------------------------------------------- spec
def load_spec(path: Path) -> dict:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        data = json.loads(text)
    else:
        try:
            import yaml  # type: ignore
        except ImportError as exc:  # pragma: no cover - depends on the interpreter
            try:
                data = json.loads(text)
            except ValueError:
                raise WheelhouseError(
                    f"{path}: YAML spec needs PyYAML (run with the repo's .venv/bin/python) "
                    "or give a JSON spec") from exc
        else:
            data = yaml.safe_load(text)
    if isinstance(data, dict) and "python_env_variant" in data:
        data = data["python_env_variant"]
    if not isinstance(data, dict):
        raise WheelhouseError(f"{path}: spec must be a mapping")
    for key in ("arch", "release", "python", "python_platform", "packages"):
        if key not in data:
            raise WheelhouseError(f"{path}: spec lacks {key!r}")
    build = data.get("build", "wheelhouse")
    if build not in ("wheelhouse", "source"):
        raise WheelhouseError(f"{path}: build={build!r}: must be 'wheelhouse' or 'source'")
    if build == "source":
        src = data.get("source")
        if not isinstance(src, dict) or any(not src.get(k) for k in SOURCE_KEYS_REQUIRED):
            raise WheelhouseError(
                f"{path}: build='source' needs a 'source' mapping with "
                f"{', '.join(SOURCE_KEYS_REQUIRED)} (got {src!r})")
        env = data.get("build_env", {})
        if not isinstance(env, dict) or not all(isinstance(v, (str, int, float)) for v in env.values()):
            raise WheelhouseError(f"{path}: build_env must map names to strings (got {env!r})")
    load_local(data, path)
    return data


def load_local(spec: dict, path: Path) -> None:
    """Check spec ``local`` and key each entry by its files' digest (the digest then changes
    with the package's content, not with where the checkout lies)."""
    local = spec.get("local", [])
    if not isinstance(local, list):
        raise WheelhouseError(f"{path}: local must be a list of {{name, version, source}}")
    for entry in local:
        if not isinstance(entry, dict) or any(not entry.get(k) for k in ("name", "version", "source")):
            raise WheelhouseError(f"{path}: local entry {entry!r} needs name, version and source")
        src = (path.resolve().parent / str(entry["source"])).resolve()
        entry["_source_path"] = str(src)
        entry["tree_sha256"] = tree_digest(local_tree(src))


def is_source(spec: dict) -> bool:
    return spec.get("build", "wheelhouse") == "source"


def source_name(spec: dict) -> str:
    return canon(spec["source"]["name"])


def requirement_name(line: str) -> str | None:
    """Canonical project name of a requirement line (``name==v``, ``name @ url``, ``name[x]``)."""
    line = line.split("#", 1)[0].strip()
    if not line or line.startswith("-"):
        return None
    m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)", line)
    return canon(m.group(1)) if m else None


def spec_digest(spec: dict, extra_find_links: list[str]) -> str:
    build = {k: spec.get(k) for k in BUILD_KEYS}
    build.update({k: spec[k] for k in OPTIONAL_BUILD_KEYS if k in spec})
    if "local" in build:
        build["local"] = [{k: v for k, v in e.items() if not k.startswith("_")} for e in build["local"]]
    build["_extra_find_links"] = extra_find_links
    build["_builder"] = BUILDER_VERSION
    blob = json.dumps(build, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()


def pip_platforms(python_platform: str) -> list[str]:
    """uv platform (x86_64-manylinux_2_36) -> pip --platform tags, newest first."""
    m = re.match(r"^(x86_64|aarch64)-manylinux_2_(\d+)$", python_platform)
    if not m:
        m2 = re.match(r"^(x86_64|aarch64)-manylinux2014$", python_platform)
        if not m2:
            raise WheelhouseError(f"unsupported python_platform {python_platform!r}")
        arch, minor = m2.group(1), 17
    else:
        arch, minor = m.group(1), int(m.group(2))
    tags = [f"manylinux_2_{i}_{arch}" for i in range(minor, 16, -1)]
    tags.append(f"manylinux2014_{arch}")
    if arch == "x86_64":
        tags += [f"manylinux_2_{i}_{arch}" for i in range(16, 4, -1)]
        tags += [f"manylinux2010_{arch}", f"manylinux1_{arch}"]
    tags.append("linux_" + arch)  # local builds (e.g. torch+cpu) may carry a plain linux tag
    return tags


# --------------------------------------------------------------------------- alias wheel
def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def _write_wheel(name: str, version: str, summary: str, requires: list[str],
                 payload: dict[str, tuple[bytes, int]], out_dir: Path) -> Path:
    """A pure py3-none-any wheel of `payload` ({arcname: (bytes, mode)}) plus its dist-info.

    Deterministic: fixed timestamps, fixed order, fixed permissions, so the same input gives
    the same bytes (and sha256) every time.
    """
    dist = re.sub(r"[-_.]+", "_", name)
    distinfo = f"{dist}-{version}.dist-info"
    metadata = [
        "Metadata-Version: 2.1",
        f"Name: {name}",
        f"Version: {version}",
        f"Summary: {summary}",
        "Requires-Python: >=3.8",
    ] + [f"Requires-Dist: {r}" for r in requires]
    files = {arc: payload[arc] for arc in sorted(payload)}
    files[f"{distinfo}/METADATA"] = (("\n".join(metadata) + "\n").encode(), 0o644)
    files[f"{distinfo}/WHEEL"] = (("Wheel-Version: 1.0\n"
                                   "Generator: llmfleet-build-wheelhouse " + BUILDER_VERSION + "\n"
                                   "Root-Is-Purelib: true\nTag: py3-none-any\n").encode(), 0o644)
    record_lines = [f"{p},{_record_hash(d)},{len(d)}" for p, (d, _mode) in files.items()]
    record_lines.append(f"{distinfo}/RECORD,,")
    files[f"{distinfo}/RECORD"] = (("\n".join(record_lines) + "\n").encode(), 0o644)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{dist}-{version}-py3-none-any.whl"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for arcname, (data, mode) in files.items():  # RECORD last, as the spec recommends
            info = zipfile.ZipInfo(arcname, date_time=ZIP_EPOCH)
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 3
            zf.writestr(info, data)
    path.write_bytes(buf.getvalue())
    return path


def build_alias_wheel(name: str, version: str, requires: list[str], out_dir: Path,
                      summary: str | None = None) -> Path:
    """A pure, code-less wheel whose only content is metadata: ``Requires-Dist`` lines."""
    summary = summary or (f"Alias distribution: {name} {version} is provided by "
                          + ", ".join(requires))
    return _write_wheel(name, version, summary, requires, {}, out_dir)


def local_tree(src: Path) -> dict[str, tuple[bytes, int]]:
    """{arcname: (bytes, mode)} of the files under `src` (bytecode caches left out)."""
    if not src.is_dir():
        raise WheelhouseError(f"local package source {src} is not a directory")
    tree = {}
    for path in sorted(src.rglob("*")):
        if path.is_dir() or "__pycache__" in path.parts or path.suffix == ".pyc":
            continue
        mode = 0o755 if os.access(path, os.X_OK) else 0o644
        tree[path.relative_to(src).as_posix()] = (path.read_bytes(), mode)
    if not tree:
        raise WheelhouseError(f"local package source {src} holds no files")
    return tree


def tree_digest(tree: dict[str, tuple[bytes, int]]) -> str:
    h = hashlib.sha256()
    for arc, (data, mode) in sorted(tree.items()):
        h.update(f"{arc}\0{mode:o}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


def build_local_wheel(entry: dict, out_dir: Path) -> Path:
    """A wheel of a package kept in the repository (spec ``local``: name, version, source dir)."""
    tree = local_tree(Path(entry["_source_path"]))
    return _write_wheel(entry["name"], str(entry["version"]),
                        entry.get("summary") or f"{entry['name']}: built from the llmfleet repository",
                        [str(r) for r in entry.get("requires", [])], tree, out_dir)


# --------------------------------------------------------------------------- tools
def find_uv() -> str:
    for cand in (os.environ.get("UV"), str(ROOT / ".venv" / "bin" / "uv"), shutil.which("uv")):
        if cand and os.access(cand, os.X_OK):
            return cand
    raise WheelhouseError("uv not found: set $UV or run `make venv`")


def run(cmd: list[str], log: list[str], **kw) -> subprocess.CompletedProcess:
    log.append("$ " + " ".join(cmd))
    proc = subprocess.run(cmd, text=True, capture_output=True, check=False, **kw)
    log.append(proc.stdout[-4000:] + proc.stderr[-4000:])
    if proc.returncode != 0:
        raise WheelhouseError(
            f"command failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-3000:]}")
    return proc


# --------------------------------------------------------------------------- resolve
def index_args(spec: dict) -> list[str]:
    """``--no-index`` (spec ``no_index: true``: find_links only) or ``--index-url URL``."""
    if spec.get("no_index"):
        return ["--no-index"]
    return ["--index-url", spec.get("index_url") or "https://pypi.org/simple"]


def resolve_inputs(spec: dict) -> list[str]:
    """What ``uv pip compile`` resolves: the packages, plus (source variants with
    ``source.resolve_deps``, the default) the source requirement, whose own pin is then dropped:
    its dependencies end up in the lock, the package itself is built on the build node."""
    reqs = [str(p) for p in spec["packages"]]
    if is_source(spec):
        name = source_name(spec)
        clash = [r for r in reqs if requirement_name(r) == name]
        if clash:
            raise WheelhouseError(
                f"{name} is built from source (source.name) and must not be in packages: {clash}")
        if spec["source"].get("resolve_deps", True):
            reqs.append(str(spec["source"]["requirement"]))
    return reqs


def resolve(spec: dict, work: Path, alias_dir: Path, find_links: list[str], uv: str,
            log: list[str], pinned: dict | None = None) -> tuple[list[tuple[str, str]], list[str]]:
    """One ``uv pip compile``; returns the pins and the effective excludes. ``pinned`` (the lock
    committed for this release, {name: (version, sha256)}) constrains the resolution: an index that
    gained newer releases since the lock was made still resolves the locked versions (``exclude_newer``
    alone does not hold on an index that publishes no upload times), and a spec the lock cannot
    satisfy fails here, naming the conflict."""
    excludes = [canon(x) for x in spec.get("excludes", [])]
    globs = [g.lower() for g in spec.get("exclude_globs", [])]
    req_in = work / "requirements.in"
    req_in.write_text("\n".join(resolve_inputs(spec)) + "\n")
    drop = source_name(spec) if is_source(spec) else None
    for _attempt in range(4):
        ex = work / "excludes.txt"
        ex.write_text("".join(f"{x}\n" for x in sorted(set(excludes))))
        out = work / "resolved.txt"
        cmd = [uv, "pip", "compile", str(req_in), "-o", str(out), "--quiet",
               "--no-header", "--no-annotate", "--no-config",
               "--python-version", str(spec["python"]),
               "--python-platform", spec["python_platform"],
               *index_args(spec),
               "--index-strategy", spec.get("index_strategy", "first-index"),
               "--find-links", str(alias_dir), "--excludes", str(ex)]
        for url in spec.get("extra_index_urls", []):
            cmd += ["--extra-index-url", url]
        for fl in find_links:
            cmd += ["--find-links", fl]
        if pinned:
            constraints = work / "constraints.txt"
            constraints.write_text("".join(f"{n}=={v}\n" for n, (v, _sha) in sorted(pinned.items())))
            cmd += ["--constraint", str(constraints)]
        if spec.get("exclude_newer"):
            cmd += ["--exclude-newer", str(spec["exclude_newer"])]
        run(cmd, log)
        lines = [l for l in out.read_text().splitlines() if drop is None or requirement_name(l) != drop]
        pins = [p for p in (parse_pin(l) for l in lines) if p]
        caught = [n for n, _version in pins if any(fnmatch.fnmatch(n, g) for g in globs)]
        if not caught:
            return sorted(pins), sorted(set(excludes))
        log.append(f"excluding by glob and resolving again: {caught}")
        excludes += caught
    raise WheelhouseError(f"resolution keeps pulling excluded names: {caught}")


# --------------------------------------------------------------------------- download
def download(spec: dict, pins: list[tuple[str, str]], wheels: Path, work: Path,
             find_links: list[str], log: list[str]) -> None:
    req = work / "download.txt"
    req.write_text("".join(f"{n}=={v}\n" for n, v in pins))
    py = os.environ.get("WHEELHOUSE_PIP_PYTHON", sys.executable)
    pyver = str(spec["python"]).replace(".", "")
    cmd = [py, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--progress-bar",
           "off", "--disable-pip-version-check", "-d", str(wheels), "-r", str(req),
           "--python-version", pyver, "--implementation", "cp", "--abi", f"cp{pyver}",
           *index_args(spec)]
    for tag in pip_platforms(spec["python_platform"]):
        cmd += ["--platform", tag]
    for url in spec.get("extra_index_urls", []):
        cmd += ["--extra-index-url", url]
    for fl in find_links:
        cmd += ["--find-links", fl]
    run(cmd, log)


# --------------------------------------------------------------------------- build
def read_stamp(out: Path) -> str | None:
    try:
        return (out / ".stamp").read_text().strip()
    except OSError:
        return None


def verify_dir(out: Path, full: bool) -> list[str]:
    """Problems with a built wheelhouse (empty list: intact)."""
    problems = []
    sums = out / "SHA256SUMS"
    if not sums.is_file():
        return ["SHA256SUMS missing"]
    listed = {}
    for line in sums.read_text().splitlines():
        digest, _sep, fname = line.partition("  ")
        listed[fname] = digest
    present = {p.name for p in out.glob("*.whl")}
    for fname in sorted(set(listed) - present):
        problems.append(f"missing: {fname}")
    for fname in sorted(present - set(listed)):
        problems.append(f"not listed: {fname}")
    if full:
        for fname in sorted(set(listed) & present):
            if sha256_file(out / fname) != listed[fname]:
                problems.append(f"hash mismatch: {fname}")
    return problems


def lock_text(spec: dict, digest: str, entries: list[dict]) -> str:
    lock = [f"# llmfleet wheelhouse lock: {spec['arch']}-{spec['release']}",
            f"# spec sha256: {digest}",
            "# install: uv pip sync --offline --no-index --require-hashes --find-links DIR "
            "DIR/lock.txt",
            "#      or: pip install --no-index --no-deps --require-hashes --find-links DIR "
            "-r DIR/lock.txt"]
    lock += [f"{e['name']}=={e['version']} --hash=sha256:{e['sha256']}" for e in entries]
    return "\n".join(lock) + "\n"


def sums_text(entries: list[dict]) -> str:
    return "".join(f"{e['sha256']}  {e['file']}\n" for e in sorted(entries, key=lambda e: e["file"]))


def build(spec_path: Path, out: Path | None, root: Path, force: bool, verify: bool,
          dry_run: bool, pinned_dir: Path | None = None) -> dict:
    spec = load_spec(spec_path)
    extra_fl = [p for p in os.environ.get("LLMFLEET_WHEEL_FIND_LINKS", "").split(os.pathsep) if p]
    find_links = [str(x) for x in spec.get("find_links", [])] + extra_fl
    digest = spec_digest(spec, extra_fl)
    out = out or root / f"{spec['arch']}-{spec['release']}"
    if not force and read_stamp(out) == digest:
        problems = verify_dir(out, full=verify)
        if not problems:
            manifest = json.loads((out / "manifest.json").read_text())
            manifest["status"] = "up-to-date"
            return manifest
        print(f"wheelhouse {out} is stale: {problems[:5]}", file=sys.stderr)
    if dry_run:
        return {"status": "would-build", "out": str(out), "spec_digest": digest}

    t0 = time.monotonic()
    uv = find_uv()
    log: list[str] = []
    out.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        work = stage / ".work"
        wheels = stage
        alias_dir = work / "alias"
        work.mkdir()
        alias_dir.mkdir()  # a --find-links dir even without aliases (uv refuses a missing one)
        # 1. alias wheels
        alias_files = []
        for al in spec.get("alias", []):
            alias_files.append(build_alias_wheel(al["name"], str(al["version"]),
                                                 list(al["requires"]), alias_dir))
        for entry in spec.get("local", []):
            alias_files.append(build_local_wheel(entry, alias_dir))
        # 2. resolve once
        t_res = time.monotonic()
        pin_file = pin_path(pinned_dir, spec) if pinned_dir else None
        pinned = lock_entries(pin_file.read_text()) if pin_file and pin_file.is_file() else None
        pins, excludes = resolve(spec, work, alias_dir, find_links, uv, log, pinned)
        t_res = time.monotonic() - t_res
        alias_names = {canon(a["name"]) for a in spec.get("alias", []) + spec.get("local", [])}
        to_download = [(n, v) for n, v in pins if n not in alias_names]
        leaked = [n for n, _version in pins if n in excludes]
        if leaked:
            raise WheelhouseError(f"excluded packages in the resolution: {leaked}")
        # 3. seed from the previous wheelhouse, then download exactly the pins
        wanted = dict(to_download)
        if out.is_dir():
            for old in out.glob("*.whl"):
                n, v = wheel_name_version(old.name)
                if n in wanted and version_matches(wanted[n], v):
                    try:
                        os.link(old, wheels / old.name)
                    except OSError:
                        shutil.copy2(old, wheels / old.name)
        have = set()
        for whl in wheels.glob("*.whl"):
            n, v = wheel_name_version(whl.name)
            have.add((n, v.lower().replace("_", "-")))
        missing = [(n, v) for n, v in to_download if (n, v.lower().replace("_", "-")) not in have]
        t_dl = time.monotonic()
        if missing:
            download(spec, missing, wheels, work, find_links, log)
        t_dl = time.monotonic() - t_dl
        for af in alias_files:
            shutil.copy2(af, wheels / af.name)
        # 4. one wheel per pin, nothing else
        by_name: dict[str, list[Path]] = {}
        for whl in wheels.glob("*.whl"):
            n, v = wheel_name_version(whl.name)
            by_name.setdefault(n, []).append(whl)
        entries = []
        for n, v in pins:
            cands = [w for w in by_name.pop(n, []) if version_matches(v, wheel_name_version(w.name)[1])]
            if len(cands) != 1:
                raise WheelhouseError(f"{n}=={v}: expected one wheel, found {[c.name for c in cands]}")
            whl = cands[0]
            entries.append({"name": n, "version": v, "file": whl.name,
                            "sha256": sha256_file(whl), "size": whl.stat().st_size})
        for n, files in by_name.items():  # stray wheels (e.g. other versions seeded in)
            for f in files:
                f.unlink()
        # 5. lock, sums, manifest (a source variant: build-lock.txt, its lock.txt comes with
        #    the built wheel: --add-built)
        lock_file = "build-lock.txt" if is_source(spec) else "lock.txt"
        (stage / lock_file).write_text(lock_text(spec, digest, entries))
        (stage / "SHA256SUMS").write_text(sums_text(entries))
        manifest = {
            "variant": spec.get("name", spec["arch"]),
            "engine": spec.get("engine"),
            "arch": spec["arch"],
            "release": spec["release"],
            "python": str(spec["python"]),
            "python_platform": spec["python_platform"],
            "spec_digest": digest,
            "builder_version": BUILDER_VERSION,
            "packages": len(entries),
            "total_bytes": sum(e["size"] for e in entries),
            "excludes": excludes,
            "aliases": sorted(alias_names),
            "wheels": entries,
        }
        if is_source(spec):
            manifest.update({"build": "source", "complete": False, "source": spec["source"],
                             "build_env": spec.get("build_env", {}), "source_build": None,
                             "binary_packages": len(entries)})
        (stage / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
        (stage / ".stamp").write_text(digest + "\n")
        (work / "build.log").write_text("\n".join(log) + "\n")
        shutil.move(str(work / "build.log"), str(stage / ".build.log"))
        shutil.rmtree(work)
        # 6. swap in
        if out.exists():
            old = out.with_name(f".{out.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            out.rename(old)
            stage.rename(out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            stage.rename(out)
        os.chmod(out, 0o755)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    manifest["status"] = "built"
    manifest["timing_s"] = {"resolve": round(t_res, 1), "download": round(t_dl, 1),
                            "total": round(time.monotonic() - t0, 1)}
    manifest["downloaded"] = len(missing)
    return manifest


# --------------------------------------------------------------------------- source builds
def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".tmp.{path.name}")
    tmp.write_text(text)
    os.replace(tmp, path)


def target_of(spec: dict, out: Path | None, root: Path) -> tuple[dict, str, Path]:
    extra_fl = [p for p in os.environ.get("LLMFLEET_WHEEL_FIND_LINKS", "").split(os.pathsep) if p]
    return spec, spec_digest(spec, extra_fl), out or root / f"{spec['arch']}-{spec['release']}"


def wheel_info(path: Path) -> dict:
    """Name, version, tags and Requires-Dist of a wheel file (from its filename and METADATA)."""
    name, version = wheel_name_version(path.name)
    parts = path.name[:-4].split("-")
    pytags, abitags, plats = (parts[-3].split("."), parts[-2].split("."), parts[-1].split("."))
    try:
        with zipfile.ZipFile(path) as zf:
            metas = [n for n in zf.namelist()
                     if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
            if len(metas) != 1:
                raise WheelhouseError(f"{path.name}: expected one *.dist-info/METADATA, found {metas}")
            meta = email.parser.Parser().parsestr(zf.read(metas[0]).decode("utf-8"))
    except zipfile.BadZipFile as exc:
        raise WheelhouseError(f"{path.name}: not a zip file: {exc}") from exc
    if canon(meta.get("Name", "")) != name or not version_matches(meta.get("Version", ""), version):
        raise WheelhouseError(f"{path.name}: METADATA says {meta.get('Name')} {meta.get('Version')}")
    return {"name": name, "version": meta["Version"], "python_tags": pytags, "abi_tags": abitags,
            "platform_tags": plats, "requires": meta.get_all("Requires-Dist") or []}


def check_tags(info: dict, spec: dict) -> list[str]:
    """Problems with a wheel's tags for the spec's python and platform (empty: it fits)."""
    problems = []
    arch = spec["python_platform"].split("-", 1)[0]
    plats = info["platform_tags"]
    if not all(t == "any" or t.endswith("_" + arch) for t in plats):
        problems.append(f"platform tag {'.'.join(plats)} is not for {arch} "
                        f"(python_platform {spec['python_platform']})")
    major, minor = (int(x) for x in str(spec["python"]).split(".")[:2])
    cp = f"cp{major}{minor}"
    abi3 = "abi3" in info["abi_tags"]

    def fits(tag: str) -> bool:
        if tag.startswith(f"py{major}") or tag == cp:
            return True
        m = re.match(rf"^cp{major}(\d+)$", tag)
        return bool(abi3 and m and int(m.group(1)) <= minor)
    if not any(fits(t) for t in info["python_tags"]):
        problems.append(f"python tag {'.'.join(info['python_tags'])} does not run on python "
                        f"{spec['python']}")
    return problems


def expected_version(spec: dict) -> str | None:
    """The version the built wheel must carry (``source.version``, or the requirement's ``==``)."""
    src = spec["source"]
    if src.get("version"):
        return str(src["version"])
    m = re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[^\]]*\])?\s*==\s*([^\s;]+)\s*$",
                 str(src["requirement"]))
    return m.group(2) if m else None


def unmet_requires(requires: list[str], locked: dict[str, str], excluded: set[str],
                   spec: dict) -> list[str]:
    """Requires-Dist entries of a wheel that the lock does not satisfy (markers evaluated for
    the spec's python and platform; extras ignored). Needs ``packaging``; without it: ``[]``."""
    try:
        from packaging.requirements import InvalidRequirement, Requirement
    except ImportError:  # pragma: no cover - ansible-core depends on packaging
        return []
    arch = spec["python_platform"].split("-", 1)[0]
    env = {"python_version": ".".join(str(spec["python"]).split(".")[:2]),
           "python_full_version": str(spec["python"]) + (".0" if str(spec["python"]).count(".") == 1 else ""),
           "platform_machine": arch, "sys_platform": "linux", "platform_system": "Linux",
           "os_name": "posix", "implementation_name": "cpython",
           "platform_python_implementation": "CPython", "extra": ""}
    problems = []
    for text in requires:
        try:
            req = Requirement(text)
        except InvalidRequirement as exc:
            problems.append(f"{text!r}: {exc}")
            continue
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        name = canon(req.name)
        if name in excluded:
            continue
        if name not in locked:
            problems.append(f"{text} (not in the lock)")
        elif req.specifier and not req.specifier.contains(locked[name], prereleases=True):
            problems.append(f"{text} (locked {locked[name]})")
    return problems


def source_status(spec_path: Path, out: Path | None, root: Path) -> dict:
    """Whether the wheelhouse holds the built source wheel for the current spec digest."""
    spec, digest, out = target_of(load_spec(spec_path), out, root)
    if not is_source(spec):
        return {"build": "wheelhouse", "built": True, "needed": False, "wheelhouse": str(out),
                "spec_digest": digest}
    status = {"build": "source", "name": source_name(spec),
              "requirement": str(spec["source"]["requirement"]), "spec_digest": digest,
              "wheelhouse": str(out), "binary_ready": False, "built": False, "file": None,
              "sha256": None, "built_on": None}
    if read_stamp(out) == digest and (out / "build-lock.txt").is_file():
        status["binary_ready"] = True
        try:
            built = json.loads((out / "manifest.json").read_text()).get("source_build") or {}
        except (OSError, ValueError):
            built = {}
        whl = out / str(built.get("file", "-"))
        if (built.get("spec_digest") == digest and whl.is_file() and (out / "lock.txt").is_file()
                and sha256_file(whl) == built.get("sha256")):
            status.update(built=True, file=built["file"], sha256=built["sha256"],
                          built_on=built.get("built_on"), version=built.get("version"))
    status["needed"] = not status["built"]
    return status


def add_built(spec_path: Path, out: Path | None, root: Path, wheel: Path, built_on: str | None) -> dict:
    """Check a wheel built on a build node and lock it into the wheelhouse (lock.txt, SUMS,
    manifest). Idempotent: the same bytes again change nothing."""
    spec, digest, out = target_of(load_spec(spec_path), out, root)
    if not is_source(spec):
        raise WheelhouseError(f"{spec_path}: build={spec.get('build', 'wheelhouse')!r}: only a "
                              "build='source' variant takes a built wheel")
    if read_stamp(out) != digest or not (out / "build-lock.txt").is_file():
        raise WheelhouseError(f"{out}: no binary wheelhouse for this spec (digest {digest[:12]}); "
                              f"build it first: build_wheelhouse.py {spec_path}")
    name = source_name(spec)
    info = wheel_info(wheel)
    problems = []
    if info["name"] != name:
        problems.append(f"it is {info['name']}, not source.name {name}")
    want = expected_version(spec)
    if want and not version_matches(want, info["version"].split("+")[0]) \
            and not version_matches(want, info["version"]):
        problems.append(f"version {info['version']} is not the required {want}")
    problems += check_tags(info, spec)
    manifest = json.loads((out / "manifest.json").read_text())
    binary = [e for e in manifest["wheels"] if e["name"] != name]
    locked = {e["name"]: e["version"] for e in binary}
    locked[name] = info["version"]
    excluded = ({canon(x) for x in manifest.get("excludes", [])}
                | {canon(x) for x in spec.get("excludes", [])})
    unmet = unmet_requires(info["requires"], locked, excluded, spec)
    if unmet:
        problems.append("the lock does not satisfy its dependencies: " + "; ".join(unmet)
                        + " (add them to the variant's packages or excludes)")
    if problems:
        raise WheelhouseError(f"built wheel {wheel.name}: " + "; ".join(problems))
    sha = sha256_file(wheel)
    old = manifest.get("source_build") or {}
    if (old.get("sha256") == sha and old.get("spec_digest") == digest
            and (out / old["file"]).is_file() and (out / "lock.txt").is_file()
            and sha256_file(out / old["file"]) == sha):
        return {**manifest, "status": "unchanged"}
    dest = out / wheel.name
    tmp = out / f".tmp.{wheel.name}"
    shutil.copyfile(wheel, tmp)
    os.chmod(tmp, 0o644)
    os.replace(tmp, dest)
    for other in out.glob("*.whl"):
        if other != dest and wheel_name_version(other.name)[0] == name:
            other.unlink()
    entry = {"name": name, "version": info["version"], "file": dest.name, "sha256": sha,
             "size": dest.stat().st_size}
    entries = sorted(binary + [entry], key=lambda e: e["name"])
    _atomic_write(out / "SHA256SUMS", sums_text(entries))
    manifest.update({
        "wheels": entries, "packages": len(entries),
        "total_bytes": sum(e["size"] for e in entries), "complete": True,
        "source_build": {**entry, "spec_digest": digest, "built_on": built_on,
                         "build_env": spec.get("build_env", {}),
                         "requirement": str(spec["source"]["requirement"]),
                         "added_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}})
    _atomic_write(out / "manifest.json", json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    _atomic_write(out / "lock.txt", lock_text(spec, digest, entries))  # last: the install gate
    return {**manifest, "status": "added"}


# --------------------------------------------------------------------------- committed pins
def lock_entries(text: str) -> dict[str, tuple[str, str]]:
    """``name==version --hash=sha256:H`` lines of a lock -> {canonical name: (version, H)}."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "==" not in line:
            continue
        req, _sep, rest = line.partition(" ")
        name, _sep, version = req.partition("==")
        digest = rest.split("--hash=sha256:", 1)[1].split()[0] if "--hash=sha256:" in rest else ""
        out[canon(name)] = (version, digest)
    return out


def pin_problems(pinned: dict, actual: dict) -> list[str]:
    """How a wheelhouse's lock differs from the committed one, one entry per package."""
    problems = []
    for name in sorted(set(pinned) | set(actual)):
        if name not in actual:
            problems.append(f"{name}: pinned {pinned[name][0]} but not in the wheelhouse")
        elif name not in pinned:
            problems.append(f"{name} {actual[name][0]}: in the wheelhouse but not pinned")
        elif pinned[name][0] != actual[name][0]:
            problems.append(f"{name}: version {actual[name][0]}, pinned {pinned[name][0]}")
        elif pinned[name][1] != actual[name][1]:
            problems.append(f"{name} {actual[name][0]}: sha256 {actual[name][1][:16]}..., pinned {pinned[name][1][:16]}...")
    return problems


def pin_path(pinned_dir: Path, spec: dict) -> Path:
    """The lock committed for the spec's release: ``<pinned_dir>/<arch>-<release>.txt``."""
    return pinned_dir / f"{spec['arch']}-{spec['release']}.txt"


def check_pinned(spec_path: Path, out: Path | None, root: Path, pinned_dir: Path) -> str:
    """Compare the wheelhouse's lock with ``<pinned_dir>/<arch>-<release>.txt`` (committed per
    release). Raise naming every package that differs; no pin file: 'unpinned'."""
    spec, _digest, out = target_of(load_spec(spec_path), out, root)
    pin = pin_path(pinned_dir, spec)
    if not pin.is_file():
        return "unpinned"
    lock = out / ("build-lock.txt" if is_source(spec) else "lock.txt")
    problems = pin_problems(lock_entries(pin.read_text()), lock_entries(lock.read_text()))
    if problems:
        raise WheelhouseError(
            f"the wheelhouse {out} differs from the lock committed for this release ({pin}): "
            + "; ".join(problems) + ". A rebuild resolved or downloaded other wheels than the release was"
            " tested with. Fix: find out why (a replaced file on the index? a changed spec?); if the new set"
            f" is intended, make it a new release, or copy {lock} over {pin} and commit it.")
    return "pinned"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("spec", nargs="?", type=Path, help="variant spec (YAML or JSON)")
    ap.add_argument("--root", type=Path, default=DEFAULT_ROOT,
                    help="parent of <arch>-<release>/ (default: %(default)s)")
    ap.add_argument("--out", type=Path, help="exact output directory")
    ap.add_argument("--force", action="store_true", help="rebuild even if the stamp matches")
    ap.add_argument("--verify", action="store_true", help="re-hash every wheel when up to date")
    ap.add_argument("--dry-run", action="store_true", help="only say whether a build is needed")
    ap.add_argument("--source-status", action="store_true",
                    help="JSON: does the wheelhouse hold the built source wheel for this spec?")
    ap.add_argument("--add-built", type=Path, metavar="WHEEL",
                    help="check a wheel built on a build node and lock it into the wheelhouse")
    ap.add_argument("--built-on", metavar="HOST", help="build host recorded with --add-built")
    ap.add_argument("--pinned-dir", type=Path, metavar="DIR",
                    help="resolve within DIR/<arch>-<release>.txt (the lock committed per release), and"
                         " after a build compare the wheelhouse's lock with it")
    ap.add_argument("--alias-only", nargs="+", metavar="ARG",
                    help="NAME VERSION REQ...: only build an alias wheel into --out")
    args = ap.parse_args(argv)
    try:
        if args.alias_only:
            if len(args.alias_only) < 3 or not args.out:
                ap.error("--alias-only NAME VERSION REQ [REQ ...] --out DIR")
            name, version, *reqs = args.alias_only
            print(build_alias_wheel(name, version, reqs, args.out))
            return 0
        if not args.spec:
            ap.error("a spec file is required")
        if args.source_status:
            print(json.dumps(source_status(args.spec, args.out, args.root), sort_keys=True))
            return 0
        if args.add_built:
            result = add_built(args.spec, args.out, args.root, args.add_built, args.built_on)
        else:
            result = build(args.spec, args.out, args.root, args.force, args.verify, args.dry_run, args.pinned_dir)
            if args.pinned_dir and not args.dry_run:
                result["pin"] = check_pinned(args.spec, args.out, args.root, args.pinned_dir)
    except WheelhouseError as exc:
        print(f"build_wheelhouse: {exc}", file=sys.stderr)
        return 1
    result.pop("wheels", None)
    print(json.dumps(result, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
