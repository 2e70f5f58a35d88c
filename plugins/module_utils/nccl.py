# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Pure NCCL logic shared by the nccl role and the nccl_check module (no I/O here).

- NCCL version codes <-> strings (``ncclGetVersion`` answers 22907 for 2.29.7).
- ``-gencode`` flags from an ``llmfleet_gpu_arch`` (``sm_121`` -> ``compute_121``/``sm_121``).
- Which ``libnccl`` an engine process would load, from the environment it runs with.
- Parsers for ``ldconfig -p``, ``cuobjdump --list-elf``, env files and ``/proc/<pid>/maps``.
"""

import os
import re

NCCL_SONAME = "libnccl.so.2"

# The variable each engine reads to dlopen NCCL by path; unset, both dlopen NCCL_SONAME.
ENGINE_SO_PATH_VARS = {
    "vllm": "VLLM_NCCL_SO_PATH",
    "sglang": "SGLANG_NCCL_SO_PATH",
    "none": None,
}

# Where pip wheels put libnccl, relative to a sys.path entry: nvidia-nccl-cu12/cu13 and
# torch builds that bundle it.
WHEEL_LIB_GLOBS = (
    "nvidia/nccl/lib/libnccl.so*",
    "nvidia/cu*/lib/libnccl.so*",
    "torch/lib/libnccl.so*",
)

# Directories the loader searches last when nothing else names libnccl (glibc, 64-bit).
DEFAULT_LIB_DIRS = ("/lib64", "/usr/lib64", "/lib", "/usr/lib")

# `ldconfig -p` ABI tags per `uname -m`.
LDCONFIG_ABI = {
    "x86_64": "x86-64",
    "aarch64": "AArch64",
}

_LIBNCCL_RE = re.compile(r"^libnccl\.so(\.\d+)*$")
_ARCH_RE = re.compile(r"^sm_(\d+[af]?)$")
_RELEASE_RE = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(?:-(\d+))?$")


# --------------------------------------------------------------------------- versions

def version_code_to_string(code):
    """22907 -> '2.29.7'; 2708 -> '2.7.8' (NCCL < 2.9 used X*1000 + Y*100 + Z)."""
    code = int(code)
    if code <= 0:
        raise ValueError("not an NCCL version code: %r" % code)
    if code >= 10000:
        major, rest = divmod(code, 10000)
        minor, patch = divmod(rest, 100)
    else:
        major, rest = divmod(code, 1000)
        minor, patch = divmod(rest, 100)
    return "%d.%d.%d" % (major, minor, patch)


def parse_release(release):
    """'2.29.7-1' / 'v2.29.7-1' / '2.29.7' -> (2, 29, 7, 1 or None)."""
    match = _RELEASE_RE.match(str(release).strip())
    if not match:
        raise ValueError("not an NCCL release: %r (expected X.Y.Z or X.Y.Z-R)" % (release,))
    major, minor, patch, rev = match.groups()
    return int(major), int(minor), int(patch), (int(rev) if rev is not None else None)


def version_string_to_code(release):
    """'2.29.7-1' -> 22907, the value ncclGetVersion reports (NCCL_VERSION_CODE)."""
    major, minor, patch, _rev = parse_release(release)
    if (major, minor) < (2, 9):
        return major * 1000 + minor * 100 + patch
    return major * 10000 + minor * 100 + patch


def release_to_version(release):
    """'2.29.7-1' -> '2.29.7' (drops the package revision)."""
    major, minor, patch, _rev = parse_release(release)
    return "%d.%d.%d" % (major, minor, patch)


# --------------------------------------------------------------------------- gencode

def gencode_for_arch(arch):
    """'sm_121' -> '-gencode=arch=compute_121,code=sm_121'.

    Accepts one arch or a list / comma- or space-separated string of them; suffixed
    archs keep their suffix ('sm_90a' -> compute_90a/sm_90a).
    """
    if isinstance(arch, (list, tuple)):
        archs = [str(a) for a in arch]
    else:
        archs = re.split(r"[\s,]+", str(arch).strip())
    archs = [a for a in archs if a]
    if not archs:
        raise ValueError("no GPU arch given")
    flags = []
    for one in archs:
        match = _ARCH_RE.match(one)
        if not match:
            raise ValueError("not a GPU arch: %r (expected sm_<digits>, e.g. sm_121)" % (one,))
        num = match.group(1)
        flag = "-gencode=arch=compute_%s,code=sm_%s" % (num, num)
        if flag not in flags:
            flags.append(flag)
    return " ".join(flags)


# --------------------------------------------------------------------------- parsers

def is_libnccl(path):
    """True for libnccl.so, libnccl.so.2, libnccl.so.2.29.7 (not libnccl-net.so, not .a)."""
    return bool(_LIBNCCL_RE.match(os.path.basename(str(path))))


def split_ld_library_path(value):
    """LD_LIBRARY_PATH -> dirs. glibc splits on ':' and ';'. Empty entries (which glibc
    reads as the working directory) are dropped: an engine's working directory is not
    known here."""
    if not value:
        return []
    return [part for part in re.split(r"[:;]", value) if part]


def split_preload(value):
    """LD_PRELOAD or /etc/ld.so.preload text -> entries (split on whitespace and ':')."""
    if not value:
        return []
    entries = []
    for line in str(value).splitlines():
        line = line.split("#", 1)[0]
        entries.extend(part for part in re.split(r"[\s:]+", line) if part)
    return entries


def parse_env_file(text):
    """KEY=VALUE lines (systemd EnvironmentFile / docker --env-file / sourced shell) -> dict.

    Handles comments, blank lines, a leading ``export``, and one level of single or double
    quotes. No variable expansion (systemd does none either)."""
    env = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export "):].lstrip()
        if "=" not in line:
            continue
        key, value = line.split("=", 1)
        key = key.strip()
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", key):
            continue
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in ("'", '"'):
            value = value[1:-1]
        env[key] = value
    return env


def parse_ldconfig_cache(text, machine=None):
    """`ldconfig -p` -> [(name, path)] in cache order, for libnccl entries of this ABI."""
    abi = LDCONFIG_ABI.get(machine or "")
    found = []
    for line in text.splitlines():
        match = re.match(r"^\s+(\S+)\s+\(([^)]*)\)\s+=>\s+(\S+)\s*$", line)
        if not match:
            continue
        name, flags, path = match.groups()
        if not is_libnccl(name):
            continue
        if abi and abi not in flags.split(","):
            continue
        found.append((name, path))
    return found


def libnccl_from_maps(text):
    """/proc/<pid>/maps -> libnccl files mapped into the process (address order)."""
    seen = []
    for line in text.splitlines():
        parts = line.split(None, 5)
        if len(parts) < 6:
            continue
        path = parts[5].strip()
        if path.endswith(" (deleted)"):
            path = path[: -len(" (deleted)")]
        if path.startswith("/") and is_libnccl(path) and path not in seen:
            seen.append(path)
    return seen


def parse_cuobjdump_list_elf(text):
    """`cuobjdump --list-elf` -> sorted unique SM archs of the embedded cubins.

    Lines look like ``ELF file    1: libnccl.so.1.sm_121.cubin``.
    """
    archs = set()
    for line in text.splitlines():
        if not line.lstrip().startswith("ELF file"):
            continue
        for match in re.finditer(r"\.(sm_\d+[af]?)\.cubin\b", line):
            archs.add(match.group(1))
    return sorted(archs, key=_arch_sort_key)


def _arch_sort_key(arch):
    match = re.match(r"^sm_(\d+)([af]?)$", arch)
    return (int(match.group(1)), match.group(2)) if match else (0, arch)


# --------------------------------------------------------------------------- resolution

def resolve_nccl(env, exists, ld_cache=(), system_preload=(), engine="vllm",
                 default_dirs=DEFAULT_LIB_DIRS):
    """Predict which libnccl an engine process started with ``env`` loads for its NCCL.

    ``exists(path) -> bool`` answers for files; ``ld_cache`` is ``parse_ldconfig_cache``
    output; ``system_preload`` the entries of /etc/ld.so.preload. Order (what vLLM's and
    SGLang's pynccl do, then what glibc's dlopen does with a bare soname):

    1. the engine's ``*_NCCL_SO_PATH`` (dlopen by path);
    2. a libnccl already mapped by LD_PRELOAD or /etc/ld.so.preload (soname match);
    3. LD_LIBRARY_PATH, in order;
    4. the ld.so cache, then the default directories.

    Returns ``{"path", "source", "preloaded": [{"path", "source"}], "searched": [...]}``.
    ``path`` is None when nothing would be found. A preloaded libnccl that is not ``path``
    is still mapped into the process (and interposes its exported symbols).
    """
    var = ENGINE_SO_PATH_VARS.get(engine)
    preloaded = []
    for source, entries in (("LD_PRELOAD", split_preload(env.get("LD_PRELOAD", ""))),
                            ("/etc/ld.so.preload", list(system_preload))):
        for entry in entries:
            if is_libnccl(entry) and "/" in entry:
                preloaded.append({"path": entry, "source": source})

    searched = []
    if var and env.get(var):
        return {"path": env[var], "source": var, "preloaded": preloaded, "searched": searched}
    if preloaded:
        first = preloaded[0]
        return {"path": first["path"], "source": first["source"], "preloaded": preloaded,
                "searched": searched}
    for directory in split_ld_library_path(env.get("LD_LIBRARY_PATH", "")):
        candidate = os.path.join(directory, NCCL_SONAME)
        searched.append(candidate)
        if exists(candidate):
            return {"path": candidate, "source": "LD_LIBRARY_PATH", "preloaded": preloaded,
                    "searched": searched}
    for name, path in ld_cache:
        if name == NCCL_SONAME:
            searched.append(path)
            if exists(path):
                return {"path": path, "source": "ld.so.cache", "preloaded": preloaded,
                        "searched": searched}
    for directory in default_dirs:
        candidate = os.path.join(directory, NCCL_SONAME)
        searched.append(candidate)
        if exists(candidate):
            return {"path": candidate, "source": "default library path", "preloaded": preloaded,
                    "searched": searched}
    return {"path": None, "source": None, "preloaded": preloaded, "searched": searched}


def load_problems(expected, path, bound_path=None, path_source=None, bound_source=None):
    """Why the engine would not use ``expected`` (all paths are real paths).

    ``path`` answered ncclGetVersion through the handle the engine's pynccl opens;
    ``bound_path`` is the libnccl the rest of the process (torch's own NCCL calls) binds to,
    or None when there is none. Returns messages; empty means all is well.
    """
    problems = []
    if path != expected:
        problems.append("the engine would load %s%s, not the expected %s"
                        % (path, _via(path_source), expected))
    if bound_path is not None and bound_path != expected:
        problems.append("torch's own NCCL calls in the engine process would bind to %s%s, "
                        "not the expected %s" % (bound_path, _via(bound_source), expected))
    return problems


def _via(source):
    return " (via %s)" % source if source else ""
