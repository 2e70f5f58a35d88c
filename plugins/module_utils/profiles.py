# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Serving profiles: merge, validate, gate by engine version, render engine command lines.

Pure Python, no I/O: callers hand in already-parsed YAML (the filter plugin reads ``profiles/``).
The schema is documented in ``profiles/README.md``.
"""
import copy
import json
import re

ENGINES = ("vllm", "sglang")
BACKENDS = {"vllm": ("ray", "mp"), "sglang": ("ray", "native")}
DEVICES = ("gpu", "cpu")
ON_FAIL = ("error", "drop", "fallback")
DEFAULT_FILES_DIR = "/opt/llmfleet/files"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
DEFAULT_SGLANG_DIST_PORT = 20000
VLLM_API_KEY_ENV = "VLLM_API_KEY"
# SGLang takes its key only as --api-key: the serve role's launcher (roles/serve/files/
# llmfleet_sglang_launch.py) reads it from this variable and adds the flag in-process.
SGLANG_API_KEY_ENV = "LLMFLEET_API_KEY"
SGLANG_LAUNCHER = "llmfleet_sglang_launch.py"

FIELDS = {
    "name", "description", "source", "abstract", "extends", "engine", "model", "served_model_name",
    "tensor_parallel_size", "pipeline_parallel_size", "backend", "device", "args", "env",
    "required_env", "files", "gates", "model_facts", "smoke",
}
# Dict-valued fields merge key by key (a key set to null is removed); everything else replaces.
MERGED_FIELDS = ("args", "env", "gates", "model_facts")
GATE_FIELDS = {"min_version", "max_version", "values", "on_fail", "fallback", "reason"}
RULE_FIELDS = {"min_version", "max_version", "allowed", "denied"}
FILE_FIELDS = {"name", "url", "path", "hf_repo", "hf_file", "hf_revision", "dest", "flag", "sha256"}
# The smoke check's question and the text its answer must contain (a model that means something: a
# broken tokenizer or chat template answers, but not this).
SMOKE_FIELDS = {"prompt", "expect"}
# Where a profile's file comes from (exactly one; the models role fetches it on the controller).
FILE_SOURCES = ("url", "path", "hf_repo")
FACT_FIELDS = {
    "params", "weight_bits", "embedding_params", "dtype", "layers", "attention_layers",
    "kv_heads", "head_dim", "recurrent_state_mib", "max_position_embeddings", "weights_gib",
}

# Flags that the structured fields or render_command() own: a profile's args may not set them.
RESERVED_FLAGS = {
    "vllm": {
        "--model", "--served-model-name", "--tensor-parallel-size", "-tp",
        "--pipeline-parallel-size", "-pp", "--distributed-executor-backend", "--host", "--port",
        "--nnodes", "-n", "--node-rank", "-r", "--master-addr", "--master-port", "--headless",
        "--api-key", "--hf-token",
    },
    "sglang": {
        "--model-path", "--model", "--served-model-name", "--tp-size", "--tensor-parallel-size",
        "--tp", "--pp-size", "--pipeline-parallel-size", "--pp", "--nnodes", "--node-rank",
        "--dist-init-addr", "--nccl-init-addr", "--use-ray", "--host", "--port", "--api-key",
        "--admin-api-key",
    },
}
# Serving knobs other code (memory fit) reads out of args, per engine.
SERVING_FLAGS = {
    "vllm": {
        "max_model_len": "--max-model-len", "max_num_seqs": "--max-num-seqs",
        "gpu_memory_utilization": "--gpu-memory-utilization", "kv_cache_dtype": "--kv-cache-dtype",
        "mamba_ssm_cache_dtype": "--mamba-ssm-cache-dtype",
        "kv_cache_memory_bytes": "--kv-cache-memory-bytes",
    },
    "sglang": {
        "max_model_len": "--context-length", "max_num_seqs": "--max-running-requests",
        "gpu_memory_utilization": "--mem-fraction-static", "kv_cache_dtype": "--kv-cache-dtype",
        "mamba_ssm_cache_dtype": "--mamba-ssm-dtype",
    },
}
STRUCTURAL_OVERRIDES = (
    "model", "served_model_name", "tensor_parallel_size", "pipeline_parallel_size", "backend",
)
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SECRET_NAME = re.compile(r"(API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD)", re.I)
_FLAG = re.compile(r"^--?[A-Za-z0-9][A-Za-z0-9_.-]*$")
_VERSION = re.compile(r"^\s*v?(\d+(?:\.\d+)*)(?:[.-]?(a|b|rc|dev|post)\.?(\d*))?")


class ProfileError(ValueError):
    """A profile is malformed or cannot be rendered; the message names profile and field."""

    def __init__(self, profile, problems):
        self.profile = profile
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        lines = [f"profile '{profile}': {p}" for p in self.problems]
        super().__init__("\n".join(lines))


# ---------------------------------------------------------------------------------------------
# versions
# ---------------------------------------------------------------------------------------------
def parse_version(text):
    """'0.11.0+582e4e37.nv25.11' -> (0, 11, 0); '0.12.0rc1' -> (0, 12, 0, -1). None if unparsable.

    A pre-release (a/b/rc/dev) sorts just below its release; a local '+...' suffix is ignored.
    """
    if text is None:
        return None
    m = _VERSION.match(str(text))
    if not m:
        return None
    release = tuple(int(p) for p in m.group(1).split("."))
    if m.group(2) in ("a", "b", "rc", "dev"):
        return release + (-1,)
    return release


def _cmp_prefix(version, bound):
    """Compare version with bound at the bound's precision: -1, 0, 1."""
    n = len(bound)
    head = tuple(version[:n]) + (0,) * max(0, n - len(version))
    head = tuple(max(x, 0) for x in head)
    return (head > bound) - (head < bound)


def version_in_range(version, min_version=None, max_version=None):
    """Both bounds inclusive at their own precision: max '0.17' admits 0.17.9, min '0.12' 0.12.0rc1."""
    v = parse_version(version) if isinstance(version, str) else version
    if v is None:
        return True
    if min_version is not None and _cmp_prefix(v, parse_version(str(min_version))) < 0:
        return False
    if max_version is not None and _cmp_prefix(v, parse_version(str(max_version))) > 0:
        return False
    return True


def _range_text(min_version, max_version):
    if min_version and max_version:
        return f"{min_version} .. {max_version}"
    if min_version:
        return f">= {min_version}"
    if max_version:
        return f"<= {max_version}"
    return "any version"


# ---------------------------------------------------------------------------------------------
# merge
# ---------------------------------------------------------------------------------------------
def _merge_dict(base, over):
    out = dict(base or {})
    for key, value in (over or {}).items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge_dict(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def merge_profile(base, over):
    """Merge profile `over` onto `base`: dict fields key by key (null removes), others replace."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        if key in MERGED_FIELDS and (isinstance(value, dict) or value is None):
            out[key] = _merge_dict(out.get(key) or {}, value or {})
        else:
            out[key] = copy.deepcopy(value)
    return out


def merge_catalogues(shipped, extras=None):
    """Inventory extras over shipped profiles: same name merges over the shipped one."""
    catalogue = {name: copy.deepcopy(p) for name, p in (shipped or {}).items()}
    for name, prof in (extras or {}).items():
        if not isinstance(prof, dict):
            raise ProfileError(name, f"llmfleet_serve_profiles_extra: expected a mapping, got {type(prof).__name__}")
        if prof.get("name") not in (None, name):
            raise ProfileError(name, f"field 'name': '{prof['name']}' does not match its key '{name}'")
        catalogue[name] = merge_profile(catalogue[name], prof) if name in catalogue else copy.deepcopy(prof)
    for name, prof in catalogue.items():
        prof["name"] = name
    return catalogue


def resolve_profile(catalogue, name, allow_abstract=False):
    """Flatten `name`: engine base (_vllm/_sglang) <- extends chain <- the profile; then validate."""
    if name not in catalogue:
        known = ", ".join(sorted(n for n, p in catalogue.items() if not p.get("abstract")))
        raise ProfileError(name, f"no such profile (known: {known})")
    chain, seen, cur = [], [], name
    while cur is not None:
        if cur in seen:
            raise ProfileError(name, f"field 'extends': cycle {' -> '.join(seen + [cur])}")
        if cur not in catalogue:
            raise ProfileError(seen[-1], f"field 'extends': no such profile '{cur}'")
        seen.append(cur)
        chain.append(catalogue[cur])
        cur = catalogue[cur].get("extends")
    engine = next((p.get("engine") for p in chain if p.get("engine")), None)
    base_name = f"_{engine}"
    merged = {}
    if base_name in catalogue and base_name not in seen:
        chain.append(catalogue[base_name])
    for prof in reversed(chain):
        merged = merge_profile(merged, prof)
    merged["name"] = name
    merged.pop("extends", None)
    merged["abstract"] = bool(catalogue[name].get("abstract", False))
    if merged["abstract"] and not allow_abstract:
        raise ProfileError(name, "is abstract (a base for other profiles) and cannot be served")
    return validate_profile(merged)


# ---------------------------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------------------------
def _is_pos_int(value):
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _known_mapping(item, known, where, problems):
    """Whether ``item`` is a mapping; a problem for it when not, and one per key outside ``known``."""
    if not isinstance(item, dict):
        problems.append(f"{where}: expected a mapping")
        return False
    for key in sorted(set(item) - known):
        problems.append(f"{where}: unknown key '{key}' (known: {', '.join(sorted(known))})")
    return True


def _mapping_field(prof, field, entries, problems):
    """``prof[field]``, which must be a mapping of ``entries`` (args, env); a problem and {} when not,
    so the checks that follow read it as empty."""
    value = prof.get(field)
    if isinstance(value, dict):
        return value
    problems.append(f"field '{field}': expected a mapping of {entries}, got {type(value).__name__}")
    return {}


def _check_versions(item, where, problems):
    """A problem for each of ``item``'s version bounds that does not parse."""
    for key in ("min_version", "max_version"):
        if key in item and parse_version(str(item[key])) is None:
            problems.append(f"{where}.{key}: '{item[key]}' is not a version")


def _validate_gates(gates, problems):
    if not isinstance(gates, dict):
        problems.append(f"field 'gates': expected a mapping of flag -> gate, got {type(gates).__name__}")
        return
    for flag, gate in gates.items():
        where = f"field 'gates.{flag}'"
        if not isinstance(flag, str) or not _FLAG.match(flag):
            problems.append(f"{where}: key must be a flag such as --swap-space")
        if not _known_mapping(gate, GATE_FIELDS, where, problems):
            continue
        _check_versions(gate, where, problems)
        on_fail = gate.get("on_fail", "error")
        if on_fail not in ON_FAIL:
            problems.append(f"{where}.on_fail: '{on_fail}' is not one of {', '.join(ON_FAIL)}")
        if on_fail == "fallback" and "fallback" not in gate:
            problems.append(f"{where}: on_fail fallback needs a 'fallback' value")
        rules = gate.get("values", [])
        if not isinstance(rules, list):
            problems.append(f"{where}.values: expected a list of rules")
            continue
        for i, rule in enumerate(rules):
            rwhere = f"{where}.values[{i}]"
            if not _known_mapping(rule, RULE_FIELDS, rwhere, problems):
                continue
            for key in ("allowed", "denied"):
                if key in rule and not isinstance(rule[key], list):
                    problems.append(f"{rwhere}.{key}: expected a list")
            _check_versions(rule, rwhere, problems)


def validate_profile(profile):
    """Check a flattened profile; return it normalised (defaults filled). Raise ProfileError."""
    name = profile.get("name", "?")
    problems = []
    for key in sorted(set(profile) - FIELDS):
        problems.append(f"unknown field '{key}' (known: {', '.join(sorted(FIELDS))})")
    prof = dict(profile)
    prof.setdefault("args", {})
    prof.setdefault("env", {})
    prof.setdefault("required_env", [])
    prof.setdefault("files", [])
    prof.setdefault("gates", {})
    prof.setdefault("model_facts", {})
    prof.setdefault("device", "gpu")
    prof.setdefault("served_model_name", None)
    prof.setdefault("pipeline_parallel_size", None)
    prof.setdefault("tensor_parallel_size", None)
    engine = prof.get("engine")
    if engine not in ENGINES:
        problems.append(f"field 'engine': '{engine}' is not one of {', '.join(ENGINES)}")
    abstract = prof.get("abstract", False)
    if not abstract:
        if not isinstance(prof.get("model"), str) or not prof.get("model"):
            problems.append("field 'model': required (a Hugging Face id or a local directory)")
        backend = prof.get("backend")
        if engine in BACKENDS and backend not in BACKENDS[engine]:
            problems.append(f"field 'backend': '{backend}' is not one of {', '.join(BACKENDS[engine])} for {engine}")
    smn = prof.get("served_model_name")
    if smn is not None and (not isinstance(smn, str) or not smn):
        problems.append("field 'served_model_name': expected a non-empty string or null")
    for key in ("tensor_parallel_size", "pipeline_parallel_size"):
        value = prof.get(key)
        if value is not None and not _is_pos_int(value):
            problems.append(f"field '{key}': expected a positive integer or null (planner decides), got {value!r}")
    if prof.get("device") not in DEVICES:
        problems.append(f"field 'device': '{prof.get('device')}' is not one of {', '.join(DEVICES)}")

    args = _mapping_field(prof, "args", "flag -> value", problems)
    for flag, value in args.items():
        where = f"field 'args.{flag}'"
        if not isinstance(flag, str) or not _FLAG.match(flag):
            problems.append(f"{where}: key must be a flag such as --max-model-len")
            continue
        if engine in RESERVED_FLAGS and flag in RESERVED_FLAGS[engine]:
            problems.append(f"{where}: set by llmfleet (structured field or the serve role), not in args")
        if value is not None and not isinstance(value, (str, int, float, bool, list, dict)):
            problems.append(f"{where}: unsupported value type {type(value).__name__}")

    env = _mapping_field(prof, "env", "NAME -> value", problems)
    for var, value in env.items():
        if not isinstance(var, str) or not _ENV_NAME.match(var):
            problems.append(f"field 'env.{var}': not a valid environment variable name")
        elif _SECRET_NAME.search(var):
            problems.append(f"field 'env.{var}': looks like a secret; secrets do not belong in profiles")
        if isinstance(value, (dict, list)) or value is None:
            problems.append(f"field 'env.{var}': expected a scalar value")
    prof["env"] = {k: _env_str(v) for k, v in env.items() if not isinstance(v, (dict, list)) and v is not None}

    smoke = prof.get("smoke")
    if smoke is not None:
        if not _known_mapping(smoke, SMOKE_FIELDS, "field 'smoke'", problems):
            smoke = {}
        for key in sorted(SMOKE_FIELDS & set(smoke)):
            if not isinstance(smoke[key], str) or not smoke[key].strip():
                problems.append(f"field 'smoke.{key}': expected a non-empty string")
        if "expect" in smoke and "prompt" not in smoke:
            problems.append("field 'smoke.expect': needs field 'smoke.prompt' (the question it answers)")

    required = prof.get("required_env")
    if not isinstance(required, list) or not all(isinstance(v, str) for v in required):
        problems.append("field 'required_env': expected a list of variable names")
    else:
        for var in required:
            if var not in env:
                problems.append(f"field 'required_env': '{var}' has no value in field 'env'")

    files = prof.get("files")
    if not isinstance(files, list):
        problems.append("field 'files': expected a list")
        files = []
    seen = set()
    for i, item in enumerate(files):
        where = f"field 'files[{i}]'"
        if not _known_mapping(item, FILE_FIELDS, where, problems):
            continue
        for key in ("name", "dest"):
            if not isinstance(item.get(key), str) or not item.get(key):
                problems.append(f"{where}.{key}: required")
        sources = [key for key in FILE_SOURCES if item.get(key) is not None]
        if len(sources) != 1:
            problems.append(f"{where}: give exactly one source of url, path, hf_repo (+ hf_file), got "
                            f"{', '.join(sources) or 'none'}")
        for key in ("url", "path", "hf_repo", "hf_file", "hf_revision", "sha256"):
            if item.get(key) is not None and (not isinstance(item[key], str) or not item[key]):
                problems.append(f"{where}.{key}: expected a non-empty string")
        if item.get("name") in seen:
            problems.append(f"{where}.name: '{item['name']}' is listed twice")
        seen.add(item.get("name"))
        url = item.get("url")
        if isinstance(url, str) and not re.match(r"^https?://", url):
            problems.append(f"{where}.url: expected an http(s) URL")
        if isinstance(item.get("path"), str) and not item["path"].startswith("/"):
            problems.append(f"{where}.path: expected an absolute path on the controller")
        if isinstance(item.get("hf_repo"), str) and not item.get("hf_file"):
            problems.append(f"{where}.hf_file: required with hf_repo (the file's path in the repository)")
        if (item.get("hf_file") or item.get("hf_revision")) and not item.get("hf_repo"):
            problems.append(f"{where}: hf_file/hf_revision need hf_repo")
        sha = item.get("sha256")
        if isinstance(sha, str) and not re.match(r"^[0-9a-f]{64}$", sha):
            problems.append(f"{where}.sha256: expected 64 lowercase hex digits")
        dest = item.get("dest")
        if isinstance(dest, str) and ".." in dest.split("/"):
            problems.append(f"{where}.dest: '..' is not allowed")
        flag = item.get("flag")
        if flag is not None and (not isinstance(flag, str) or not _FLAG.match(flag)):
            problems.append(f"{where}.flag: expected a flag such as --reasoning-parser-plugin")
        if flag is not None and flag in args:
            problems.append(f"{where}.flag: {flag} is also set in args")

    _validate_gates(prof.get("gates"), problems)
    facts = prof.get("model_facts")
    if not isinstance(facts, dict):
        problems.append("field 'model_facts': expected a mapping")
    else:
        for key in sorted(set(facts) - FACT_FIELDS):
            problems.append(f"field 'model_facts.{key}': unknown (known: {', '.join(sorted(FACT_FIELDS))})")
        for key, value in facts.items():
            if key != "dtype" and value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                problems.append(f"field 'model_facts.{key}': expected a number, got {value!r}")
    if problems:
        raise ProfileError(name, problems)
    return prof


def _env_str(value):
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


# ---------------------------------------------------------------------------------------------
# gates
# ---------------------------------------------------------------------------------------------
def _value_text(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def check_gate(flag, value, gate, engine, engine_version):
    """None if `flag value` passes `gate` at `engine_version`, else the reason (a sentence)."""
    if engine_version is None or parse_version(str(engine_version)) is None:
        return None
    lo, hi = gate.get("min_version"), gate.get("max_version")
    why = f" ({gate['reason']})" if gate.get("reason") else ""
    if not version_in_range(str(engine_version), lo, hi):
        return f"{flag} is not available in {engine} {engine_version}: needs {_range_text(lo, hi)}{why}"
    if value is None or isinstance(value, bool):
        return None
    values = value if isinstance(value, list) else [value]
    for rule in gate.get("values", []):
        if not version_in_range(str(engine_version), rule.get("min_version"), rule.get("max_version")):
            continue
        for v in values:
            text = _value_text(v)
            allowed = [_value_text(a) for a in rule.get("allowed", [])] if "allowed" in rule else None
            denied = [_value_text(d) for d in rule.get("denied", [])]
            if (allowed is not None and text not in allowed) or text in denied:
                accepted = f"; accepted: {', '.join(allowed)}" if allowed is not None else ""
                return f"{flag} {text} is not accepted by {engine} {engine_version}{accepted}{why}"
    return None


def resolve_args(profile, engine_version=None, overrides=None, files_dir=DEFAULT_FILES_DIR):
    """Profile args + overrides + file flags, gated for `engine_version`.

    Returns dict(args=ordered dict flag->value, dropped=[...], replaced=[...], errors=[...],
    files=[files still needed]). Gates with on_fail 'error' land in errors; 'drop' removes the
    flag (and the file feeding it); 'fallback' swaps in the gate's fallback value.
    """
    args = {}
    for flag, value in _merge_dict(profile.get("args") or {}, _arg_overrides(overrides)).items():
        if value is False:
            continue
        args[flag] = value
    files = []
    for item in profile.get("files") or []:
        if item.get("flag"):
            args[item["flag"]] = _file_path(item["dest"], files_dir)
        files.append(item)
    result = {"args": {}, "dropped": [], "replaced": [], "errors": [], "files": []}
    gates = profile.get("gates") or {}
    engine = profile.get("engine")
    dropped_flags = set()
    for flag, value in args.items():
        gate = gates.get(flag)
        problem = check_gate(flag, value, gate, engine, engine_version) if gate else None
        if problem is None:
            result["args"][flag] = value
            continue
        on_fail = gate.get("on_fail", "error")
        if on_fail == "drop":
            result["dropped"].append(problem)
            dropped_flags.add(flag)
        elif on_fail == "fallback":
            fallback = gate["fallback"]
            again = check_gate(flag, fallback, gate, engine, engine_version)
            if again is None:
                result["args"][flag] = fallback
                result["replaced"].append(f"{problem}: using {flag} {_value_text(fallback)}")
            else:
                result["errors"].append(again)
        else:
            result["errors"].append(problem)
    for item in files:
        if item.get("flag") in dropped_flags:
            continue
        result["files"].append(dict(item, path=_file_path(item["dest"], files_dir)))
    return result


def _arg_overrides(overrides):
    return {k: v for k, v in (overrides or {}).items() if isinstance(k, str) and k.startswith("-")}


def _file_path(dest, files_dir):
    if dest.startswith("/"):
        return dest
    return f"{files_dir.rstrip('/')}/{dest}"


def serving_params(profile, overrides=None):
    """The knobs memory fit needs, read from args under the engine's own flag names."""
    args = _merge_dict(profile.get("args") or {}, _arg_overrides(overrides))
    names = SERVING_FLAGS.get(profile.get("engine"), {})
    return {key: args.get(flag) for key, flag in names.items()}


# ---------------------------------------------------------------------------------------------
# rendering
# ---------------------------------------------------------------------------------------------
def _flag_values(flag, value):
    if value is True:
        return [flag]
    if value is None or value is False:
        return []
    if isinstance(value, list):
        return [flag] + [_scalar(v) for v in value]
    if isinstance(value, dict):
        return [flag, json.dumps(value, sort_keys=True, separators=(",", ":"))]
    return [flag, _scalar(value)]


def _scalar(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def effective_profile(profile, overrides=None):
    """Apply structural overrides (tensor_parallel_size, backend, ...) to a validated profile."""
    prof = dict(profile)
    for key in STRUCTURAL_OVERRIDES:
        if overrides and key in overrides and overrides[key] is not None:
            prof[key] = overrides[key]
    return validate_profile(prof)


def render_command(profile, engine_version=None, overrides=None, node_rank=0, nnodes=1,
                   master_addr=None, headless=None, port=DEFAULT_PORT, host=DEFAULT_HOST,
                   api_key_env=None, master_port=None, files_dir=DEFAULT_FILES_DIR,
                   executable=None, launcher=None):
    """The argv that starts `profile` on node `node_rank` of `nnodes`. Never contains a secret.

    overrides: flag -> value (merged over args; null/false removes a flag) and/or structural
      keys (tensor_parallel_size, pipeline_parallel_size, backend, model, served_model_name),
      e.g. a plan from planner.plan().
    vLLM: `vllm serve MODEL ...`; backend ray runs on the head only; backend mp with nnodes > 1 is
      vLLM's native multi-node (`--nnodes --node-rank --master-addr`, `--headless` off rank 0).
      The API key is read by vLLM from VLLM_API_KEY in its environment: api_key_env must be that.
    SGLang: `python3 -m sglang.launch_server --model-path MODEL ...`, or with `launcher` (the
      path of llmfleet_sglang_launch.py on the node) `python3 LAUNCHER --model-path MODEL ...`;
      backend ray adds `--use-ray` (and `--nnodes N` across nodes) on the head only, native adds
      `--nnodes --node-rank --dist-init-addr` on every node. SGLang only takes the key as `--api-key`: api_key_env must be
      LLMFLEET_API_KEY and needs the launcher, which adds the flag in-process, so the key is in no
      argv, unit or log.
    """
    prof = effective_profile(profile, overrides)
    name, engine = prof["name"], prof["engine"]
    if prof.get("abstract"):
        raise ProfileError(name, "is abstract and cannot be rendered")
    tp, pp = prof.get("tensor_parallel_size"), prof.get("pipeline_parallel_size")
    problems = []
    for key, value in (("tensor_parallel_size", tp), ("pipeline_parallel_size", pp)):
        if value is None:
            problems.append(f"field '{key}' is open: run the planner (serve_plan) and pass its plan")
    if not _is_pos_int(nnodes):
        problems.append(f"nnodes: expected a positive integer, got {nnodes!r}")
    elif not isinstance(node_rank, int) or not 0 <= node_rank < nnodes:
        problems.append(f"node_rank: {node_rank!r} is outside 0..{nnodes - 1}")
    if api_key_env is not None and not _ENV_NAME.match(str(api_key_env)):
        problems.append(f"api_key_env: '{api_key_env}' is not a variable name")
    if engine == "sglang" and api_key_env is not None and isinstance(node_rank, int) \
            and not headless_rank(node_rank, headless):
        if api_key_env != SGLANG_API_KEY_ENV:
            problems.append(f"api_key_env: the SGLang launcher reads the key only from {SGLANG_API_KEY_ENV}, not {api_key_env}")
        if not launcher:
            problems.append("api_key_env: SGLang takes its key only on its command line; pass launcher "
                            f"(the node's path of {SGLANG_LAUNCHER}), which adds it in-process")
    if problems:
        raise ProfileError(name, problems)
    backend = prof["backend"]
    multi = nnodes > 1
    if backend == "ray" and node_rank != 0:
        raise ProfileError(name, f"backend ray: only node rank 0 starts the server (got node_rank {node_rank}); the others join Ray")
    if multi and backend in ("mp", "native") and not master_addr:
        raise ProfileError(name, f"backend {backend} across {nnodes} nodes needs master_addr (rank 0's fabric address)")
    if headless is None:
        headless = node_rank > 0
    if headless and node_rank == 0:
        raise ProfileError(name, "node rank 0 serves the API and cannot be headless")

    structural = []
    if engine == "vllm":
        exe = [executable or "vllm", "serve", prof["model"]]
        if prof.get("served_model_name"):
            structural += ["--served-model-name", prof["served_model_name"]]
        structural += ["--tensor-parallel-size", str(tp), "--pipeline-parallel-size", str(pp),
                       "--distributed-executor-backend", backend]
        if multi and backend == "mp":
            structural += ["--nnodes", str(nnodes), "--node-rank", str(node_rank),
                           "--master-addr", str(master_addr)]
            if master_port:
                structural += ["--master-port", str(master_port)]
        if headless:
            structural += ["--headless"]
        if api_key_env is not None and api_key_env != VLLM_API_KEY_ENV:
            raise ProfileError(name, f"api_key_env: vLLM reads its key only from {VLLM_API_KEY_ENV}, not {api_key_env}")
    else:
        runner = [str(launcher)] if launcher else ["-m", "sglang.launch_server"]
        exe = [executable or "python3"] + runner + ["--model-path", prof["model"]]
        if prof.get("served_model_name"):
            structural += ["--served-model-name", prof["served_model_name"]]
        structural += ["--tp-size", str(tp), "--pp-size", str(pp)]
        if multi:
            structural += ["--nnodes", str(nnodes)]
        if backend == "ray":
            # the scheduler runs as an actor of the cluster RAY_ADDRESS names, on one node too
            structural += ["--use-ray"]
        elif multi:
            dist_port = master_port or DEFAULT_SGLANG_DIST_PORT
            structural += ["--node-rank", str(node_rank), "--dist-init-addr", f"{master_addr}:{dist_port}"]
    if not headless:
        structural += ["--host", str(host), "--port", str(port)]

    # Structural flags are gated too (e.g. --use-ray, --nnodes); a failure there is always an error.
    gates = prof.get("gates") or {}
    errors = []
    for flag in (t for t in structural if t.startswith("--")):
        if flag in gates:
            problem = check_gate(flag, None, gates[flag], engine, engine_version)
            if problem:
                errors.append(problem)
    resolved = resolve_args(prof, engine_version, overrides, files_dir)
    errors += resolved["errors"]
    if errors:
        raise ProfileError(name, errors)
    argv = exe + structural
    for flag, value in resolved["args"].items():
        argv += _flag_values(flag, value)
    return argv


def headless_rank(node_rank, headless=None):
    """Whether a rank runs without the API (headless None: every rank but 0)."""
    return node_rank > 0 if headless is None else bool(headless)


def strip_launcher(argv, engine):
    """Split a rendered argv into (launcher prefix, engine arguments).

    The SGLang launcher (llmfleet_sglang_launch.py) counts as the launcher prefix.
    """
    argv = list(argv)
    if engine == "vllm":
        if "serve" in argv:
            i = argv.index("serve") + 1
            if i < len(argv) and not argv[i].startswith("-"):
                i += 1
            return argv[:i], argv[i:]
        return [], argv
    for i, arg in enumerate(argv):
        if arg in ("sglang.launch_server", "serve") or arg.endswith("/" + SGLANG_LAUNCHER) or arg == SGLANG_LAUNCHER:
            return argv[:i + 1], argv[i + 1:]
    return [], argv
