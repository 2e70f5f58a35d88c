"""Build an offline wheelhouse for one engine variant (arch, release).

Usage:
  build_wheelhouse.py SPEC [--root DIR | --out DIR] [--force] [--verify] [--dry-run]
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
with ``--excludes`` (and names matching ``exclude_globs`` added to the excludes);
(3) ``pip download --no-deps --only-binary=:all:`` of exactly the resolved pins (pip's cache is
reused; wheels already in the old wheelhouse are hard-linked in first); (4) check one wheel per
pin, hash, write lock/SUMS/manifest; (5) swap the new directory in atomically.

Install on a node (no index, no network; roles/python_env/files/install_from_wheelhouse.sh):
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
    if data.get("build", "wheelhouse") != "wheelhouse":
        raise WheelhouseError(
            f"{path}: build={data.get('build')!r}: this variant is built from source on the "
            "node, not from a wheelhouse")
    return data


def spec_digest(spec: dict, extra_find_links: list[str]) -> str:
    build = {k: spec.get(k) for k in BUILD_KEYS}
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


def build_alias_wheel(name: str, version: str, requires: list[str], out_dir: Path,
                      summary: str | None = None) -> Path:
    """A pure, code-less wheel whose only content is metadata: ``Requires-Dist`` lines.

    Deterministic: fixed timestamps, fixed order, fixed permissions, so the same input gives
    the same bytes (and sha256) every time.
    """
    dist = re.sub(r"[-_.]+", "_", name)
    distinfo = f"{dist}-{version}.dist-info"
    summary = summary or (f"Alias distribution: {name} {version} is provided by "
                          + ", ".join(requires))
    metadata = [
        "Metadata-Version: 2.1",
        f"Name: {name}",
        f"Version: {version}",
        f"Summary: {summary}",
        "Requires-Python: >=3.8",
    ] + [f"Requires-Dist: {r}" for r in requires]
    files = {
        f"{distinfo}/METADATA": ("\n".join(metadata) + "\n").encode(),
        f"{distinfo}/WHEEL": ("Wheel-Version: 1.0\n"
                              "Generator: llmfleet-build-wheelhouse " + BUILDER_VERSION + "\n"
                              "Root-Is-Purelib: true\nTag: py3-none-any\n").encode(),
    }
    record_lines = [f"{p},{_record_hash(d)},{len(d)}" for p, d in files.items()]
    record_lines.append(f"{distinfo}/RECORD,,")
    files[f"{distinfo}/RECORD"] = ("\n".join(record_lines) + "\n").encode()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{dist}-{version}-py3-none-any.whl"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for arcname, data in files.items():  # RECORD last, as the spec recommends
            info = zipfile.ZipInfo(arcname, date_time=ZIP_EPOCH)
            info.external_attr = 0o100644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 3
            zf.writestr(info, data)
    path.write_bytes(buf.getvalue())
    return path


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
def resolve(spec: dict, work: Path, alias_dir: Path, find_links: list[str], uv: str,
            log: list[str]) -> tuple[list[tuple[str, str]], list[str]]:
    """One ``uv pip compile``; returns the pins and the effective excludes."""
    excludes = [canon(x) for x in spec.get("excludes", [])]
    globs = [g.lower() for g in spec.get("exclude_globs", [])]
    req_in = work / "requirements.in"
    req_in.write_text("\n".join(spec["packages"]) + "\n")
    for _attempt in range(4):
        ex = work / "excludes.txt"
        ex.write_text("".join(f"{x}\n" for x in sorted(set(excludes))))
        out = work / "resolved.txt"
        cmd = [uv, "pip", "compile", str(req_in), "-o", str(out), "--quiet",
               "--no-header", "--no-annotate", "--no-config",
               "--python-version", str(spec["python"]),
               "--python-platform", spec["python_platform"],
               "--index-url", spec.get("index_url", "https://pypi.org/simple"),
               "--index-strategy", spec.get("index_strategy", "first-index"),
               "--find-links", str(alias_dir), "--excludes", str(ex)]
        for url in spec.get("extra_index_urls", []):
            cmd += ["--extra-index-url", url]
        for fl in find_links:
            cmd += ["--find-links", fl]
        if spec.get("exclude_newer"):
            cmd += ["--exclude-newer", str(spec["exclude_newer"])]
        run(cmd, log)
        pins = [p for p in (parse_pin(l) for l in out.read_text().splitlines()) if p]
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
           "--index-url", spec.get("index_url", "https://pypi.org/simple")]
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


def build(spec_path: Path, out: Path | None, root: Path, force: bool, verify: bool,
          dry_run: bool) -> dict:
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
        # 1. alias wheels
        alias_files = []
        for al in spec.get("alias", []):
            alias_files.append(build_alias_wheel(al["name"], str(al["version"]),
                                                 list(al["requires"]), alias_dir))
        # 2. resolve once
        t_res = time.monotonic()
        pins, excludes = resolve(spec, work, alias_dir, find_links, uv, log)
        t_res = time.monotonic() - t_res
        alias_names = {canon(a["name"]) for a in spec.get("alias", [])}
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
        # 5. lock, sums, manifest
        lock = [f"# llmfleet wheelhouse lock: {spec['arch']}-{spec['release']}",
                f"# spec sha256: {digest}",
                "# install: uv pip sync --offline --no-index --require-hashes --find-links DIR "
                "DIR/lock.txt",
                "#      or: pip install --no-index --no-deps --require-hashes --find-links DIR "
                "-r DIR/lock.txt"]
        lock += [f"{e['name']}=={e['version']} --hash=sha256:{e['sha256']}" for e in entries]
        (stage / "lock.txt").write_text("\n".join(lock) + "\n")
        (stage / "SHA256SUMS").write_text(
            "".join(f"{e['sha256']}  {e['file']}\n" for e in sorted(entries, key=lambda e: e["file"])))
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("spec", nargs="?", type=Path, help="variant spec (YAML or JSON)")
    ap.add_argument("--root", type=Path, default=DEFAULT_ROOT,
                    help="parent of <arch>-<release>/ (default: %(default)s)")
    ap.add_argument("--out", type=Path, help="exact output directory")
    ap.add_argument("--force", action="store_true", help="rebuild even if the stamp matches")
    ap.add_argument("--verify", action="store_true", help="re-hash every wheel when up to date")
    ap.add_argument("--dry-run", action="store_true", help="only say whether a build is needed")
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
        result = build(args.spec, args.out, args.root, args.force, args.verify, args.dry_run)
    except WheelhouseError as exc:
        print(f"build_wheelhouse: {exc}", file=sys.stderr)
        return 1
    result.pop("wheels", None)
    print(json.dumps(result, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
