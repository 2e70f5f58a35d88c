# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Check an engine command line against that engine build's own `--help`, in seconds.

Pure Python, no I/O. parse_help() reads argparse help as printed by `vllm serve --help=all`
(vLLM 0.x: `--flag, --no-flag` / `--enable-x, --disable-x` pairs, `{a,b}` and `['a', 'b']`
choices, `{a,b} or name registered in --x-plugin` open choices, `-tp` short aliases) and by
`python -m sglang.launch_server --help`. check_argv() then finds, before a model load that takes
minutes, the flags this build does not know, ambiguous abbreviations, missing values and values
outside a closed choice list; and re-applies the profile's version gates.
"""
import re

from ansible_collections.llmfleet.cluster.plugins.module_utils import profiles as _profiles

_INVOCATION = re.compile(r"^( {1,8})(-\S.*)$")
_ITEM_SPLIT = re.compile(r", (?=-)")
_DESC_GAP = re.compile(r"\s{2,}")
_FLAG_TOKEN = re.compile(r"^(--?[A-Za-z0-9][A-Za-z0-9_.-]*)(?:[ =](.*))?$")
_NUMBER = re.compile(r"^-\d")
# Numeric flags whose --help names no range but the engine refuses (or misbehaves) outside one:
# engine -> flag -> (lowest, excluded; highest, included; what the value is).
VALUE_RANGES = {
    "vllm": {"--gpu-memory-utilization": (0.0, 1.0, "the share of each GPU's memory the engine may take")},
    "sglang": {"--mem-fraction-static": (0.0, 1.0, "the share of each GPU's memory for weights and KV cache")},
}


def _split_choices(text):
    text = text.strip()
    if text.startswith("{"):
        end = text.find("}")
        return [c.strip() for c in text[1:end].split(",") if c.strip()]
    if text.startswith("['") or text.startswith('["'):
        end = text.find("]")
        return [c.strip().strip("'\"") for c in text[1:end].split(",") if c.strip()]
    return None


def _parse_metavar(meta):
    """-> (takes_value, nargs, choices, open_choices)."""
    meta = (meta or "").strip()
    if not meta:
        return False, 0, None, False
    open_choices = " or " in meta and ("registered" in meta or "plugin" in meta)
    choices = _split_choices(meta)
    if meta.startswith("[") and not meta.startswith("['") and not meta.startswith('["'):
        nargs = "?"
        choices = _split_choices(meta[1:-1]) if meta.endswith("]") else None
    elif "..." in meta:
        nargs = "*" if meta.startswith("[") else "+"
    else:
        nargs = None
    return True, nargs, choices, open_choices


def _split_invocation(line):
    """'--a A, -x A   help text' -> ('--a A, -x A', 'help text')."""
    # choices lists contain single spaces only, so the first run of 2+ spaces ends the invocation
    m = _DESC_GAP.search(line)
    if m:
        return line[:m.start()], line[m.end():]
    return line, ""


def parse_help(text):
    """Parse argparse help into {'flags': {name: spec}, 'prog': str}.

    spec: names (all spellings), takes_value, nargs (None = one value, '?', '+', '*'),
    choices (list or None), open_choices, deprecated, help.
    """
    lines = text.splitlines()
    # skip any provenance header and the usage block: start after the first blank line that
    # follows 'usage:'
    start, prog = 0, ""
    for i, line in enumerate(lines):
        if line.startswith("usage:"):
            prog = line[len("usage:"):].strip().split(" [")[0]
            j = i + 1
            while j < len(lines) and lines[j].strip():
                j += 1
            start = j
            break
    flags = {}
    current = None
    for line in lines[start:]:
        m = _INVOCATION.match(line)
        if m:
            invocation, desc = _split_invocation(m.group(2))
            names, takes, nargs, choices, open_choices = [], False, 0, None, False
            for item in _ITEM_SPLIT.split(invocation):
                fm = _FLAG_TOKEN.match(item.strip())
                if not fm:
                    continue
                names.append(fm.group(1))
                if fm.group(2):
                    takes, nargs, choices, open_choices = _parse_metavar(fm.group(2))
            if not names:
                current = None
                continue
            current = {"names": names, "takes_value": takes, "nargs": nargs if takes else 0,
                       "choices": choices, "open_choices": open_choices, "help": desc.strip()}
            for n in names:
                flags[n] = current
            continue
        if current is not None and line.startswith(" " * 10) and line.strip():
            current["help"] = (current["help"] + " " + line.strip()).strip()
        elif not line.strip() or not line.startswith(" "):
            current = None
    for spec in flags.values():
        h = spec["help"]
        spec["deprecated"] = bool(re.search(r"\[DEPRECATED\]|^Deprecated\b|\bis deprecated\b", h, re.I))
    return {"flags": flags, "prog": prog}


def _lookup(flag, flags, engine):
    """-> (spec, canonical spelling, note) ; spec None if unknown/ambiguous (note says which)."""
    if flag in flags:
        return flags[flag], flag, None
    if engine == "vllm" and "_" in flag:            # vLLM's parser maps --max_model_len to dashes
        dashed = flag.replace("_", "-")
        if dashed in flags:
            return flags[dashed], dashed, None
    if engine == "vllm" and "." in flag:            # --compilation-config.level 3 (JSON sub-keys)
        base = flag.split(".", 1)[0]
        if base in flags:
            return flags[base], base, None
    if flag.startswith("--"):                       # argparse allow_abbrev
        matches = sorted({n for n in flags if n.startswith(flag) and n.startswith("--")})
        owners = {id(flags[n]) for n in matches}
        if len(owners) == 1:
            return flags[matches[0]], matches[0], f"abbreviation of {matches[0]}"
        if len(owners) > 1:
            return None, None, f"ambiguous abbreviation: could be {', '.join(matches)}"
    return None, None, None


def check_argv(argv, help_index, engine, engine_version=None, profile=None):
    """Check `argv` (a rendered command, launcher included) against one build's parsed help.

    Returns {'ok': bool, 'errors': [...], 'warnings': [...], 'flags': [canonical flags seen]}.
    Every error names the flag and the engine version.
    """
    flags = help_index["flags"]
    build = f"{engine} {engine_version}" if engine_version else engine
    args = _profiles.strip_launcher(argv, engine)[1]
    errors, warnings, seen = [], [], []
    gates = (profile or {}).get("gates") or {}
    i = 0
    while i < len(args):
        token = args[i]
        i += 1
        if not token.startswith("-") or _NUMBER.match(token) or token == "-":
            errors.append(f"{build}: unexpected argument '{token}'")
            continue
        flag, sep, inline = token.partition("=")
        inline = inline if sep else None
        spec, canonical, note = _lookup(flag, flags, engine)
        if spec is None:
            gate = gates.get(flag)
            hint = ""
            if gate:
                why = _profiles.check_gate(flag, None, gate, engine, engine_version)
                hint = f" ({why})" if why else ""
            if note:
                errors.append(f"{build}: {flag} is an {note}")
            else:
                errors.append(f"{build}: unknown flag {flag}: this build's --help does not list it{hint}")
            # skip its value(s), if any
            while i < len(args) and not args[i].startswith("-"):
                i += 1
            continue
        if note:
            warnings.append(f"{build}: {flag} is an {note}; spell it out (a new flag sharing the prefix breaks it)")
        if spec["deprecated"]:
            warnings.append(f"{build}: {canonical} is deprecated: {spec['help']}")
        seen.append(canonical)
        values = []
        if inline is not None:
            values = [inline]
            if not spec["takes_value"]:
                errors.append(f"{build}: {canonical} takes no value (got '{inline}')")
        elif spec["takes_value"]:
            if spec["nargs"] in ("+", "*"):
                while i < len(args) and not (args[i].startswith("-") and not _NUMBER.match(args[i])):
                    values.append(args[i])
                    i += 1
                if spec["nargs"] == "+" and not values:
                    errors.append(f"{build}: {canonical} expects at least one value")
            elif spec["nargs"] == "?":
                if i < len(args) and not args[i].startswith("--"):
                    values.append(args[i])
                    i += 1
            else:
                if i < len(args) and (not args[i].startswith("-") or _NUMBER.match(args[i])):
                    values.append(args[i])
                    i += 1
                else:
                    errors.append(f"{build}: {canonical} expects a value")
        if spec["choices"]:
            for v in values:
                if v not in spec["choices"]:
                    text = (f"{build}: {canonical} {v} is not one of "
                            f"{', '.join(spec['choices'])}")
                    if spec["open_choices"]:
                        warnings.append(text + " (a plugin may register it)")
                    else:
                        errors.append(text)
        errors += _range_errors(build, canonical, values, VALUE_RANGES.get(engine, {}).get(canonical))
        gate = gates.get(canonical) or gates.get(flag)
        if gate:
            value = values[0] if len(values) == 1 else (values or None)
            why = _profiles.check_gate(canonical, value, gate, engine, engine_version)
            if why:
                errors.append(f"{build}: {why}")
    return {"ok": not errors, "errors": errors, "warnings": warnings, "flags": seen}


def _range_errors(build, flag, values, bounds):
    """The values of a flag outside its range (VALUE_RANGES), one error each."""
    if not bounds:
        return []
    low, high, what = bounds
    out = []
    for value in values:
        try:
            number = float(value)
        except (TypeError, ValueError):
            out.append(f"{build}: {flag} {value} is not a number ({what})")
            continue
        if not low < number <= high:
            out.append(f"{build}: {flag} {value} is outside {low:g} < x <= {high:g} ({what})")
    return out


def check(argv, help_text, engine, engine_version=None, profile=None):
    """parse_help() + check_argv() in one call."""
    return check_argv(argv, parse_help(help_text), engine, engine_version, profile)


# The cache file name holds the version: it must stay one plain path component.
_VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.+_-]*$")


def help_cache_name(engine, engine_version, image_id=None):
    """'<engine>-<version>-help.txt': one cached `--help` per engine build (the serve role's format);
    '<engine>-<version>-<image short ID>-help.txt' for the build inside a container image."""
    for what, value in (("engine", engine), ("engine version", engine_version)):
        if not _VERSION.match(str(value or "")):
            raise ValueError(f"{what} {value!r} cannot name a help cache file")
    if image_id is None:
        return f"{engine}-{engine_version}-help.txt"
    short = str(image_id).replace("sha256:", "")[:12]
    if not re.match(r"^[0-9a-f]{12}$", short):
        raise ValueError(f"image ID {image_id!r} cannot name a help cache file")
    return f"{engine}-{engine_version}-{short}-help.txt"


def cache_text(help_stdout):
    """What the cache holds: the help's stdout without trailing newlines, plus one."""
    return help_stdout.rstrip("\r\n") + "\n"


def refusal_message(host, engine, engine_version, profile_name, errors):
    """The failure message of a refused command line (tests and docs grep its wording)."""
    return (f"{host}: {engine} {engine_version} would refuse profile {profile_name}: {'; '.join(errors)}. "
            "Nothing was stopped or started. Fix the profile's args/gates (or llmfleet_serve_profiles_extra), "
            "or install an engine release that has these flags.")


def summary_message(engine, engine_version, result):
    """One line for a passed check: how many flags the build knows, and its warnings."""
    text = f"{len(result['flags'])} flags known to {engine} {engine_version}"
    if result["warnings"]:
        text += "; warnings: " + "; ".join(result["warnings"])
    return text
