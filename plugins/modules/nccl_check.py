#!/usr/bin/python
# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

DOCUMENTATION = r"""
---
module: nccl_check
short_description: Report which libnccl an engine process would load, and its ncclGetVersion
description:
  - Starts a Python subprocess with the environment the engine runs with (C(LD_LIBRARY_PATH),
    C(LD_PRELOAD), C(VLLM_NCCL_SO_PATH) / C(SGLANG_NCCL_SO_PATH), C(PYTHONPATH)), optionally
    imports C(torch) there first (as the engine does), then loads NCCL the way vLLM's and
    SGLang's pynccl do (by the C(*_NCCL_SO_PATH) path, else by the soname C(libnccl.so.2))
    through ctypes and calls C(ncclGetVersion).
  - Reports the file that answered (C(path)), the version it reported, the libnccl the rest
    of the process binds to (C(bound_path), what torch's own NCCL calls use, that is a libnccl in the
    global scope such as an C(LD_PRELOAD), else the one torch loaded under the soname), every
    libnccl mapped into the process (C(loaded)), and the C(nvidia-nccl-cu*) wheel libraries
    found on the interpreter's C(sys.path).
  - Also predicts the load from the environment alone (C(predicted)) to explain the result, in
    this order; C(*_NCCL_SO_PATH), then a libnccl from C(LD_PRELOAD) or C(/etc/ld.so.preload), then
    C(LD_LIBRARY_PATH), the ld.so cache and the default directories.
  - Read-only; needs no GPU. torch's own reported NCCL version is returned for information
    only, since it need not be the library that is loaded.
version_added: "0.1.0"
author: llmfleet maintainers (@llmfleet)
options:
  engine_env:
    description:
      - Variables of the engine's environment, laid over a minimal base (C(PATH), C(HOME),
        C(LANG)) unless O(inherit_environment) is set.
    type: dict
    default: {}
  env_files:
    description:
      - C(KEY=VALUE) files (systemd EnvironmentFile, docker --env-file, C(export) lines)
        read in order before O(engine_env), which wins.
    type: list
    elements: path
    default: []
  inherit_environment:
    description: Start from the module's own environment instead of the minimal base.
    type: bool
    default: false
  python:
    description:
      - Interpreter of the engine (its venv's C(bin/python)). Defaults to the interpreter
        running this module.
    type: path
  import_torch:
    description:
      - Import torch in the probe before loading NCCL, as the engines do; a torch that
        loads a wheel's libnccl then shows up in O(expected_path) checks. Skipped (and
        reported) when torch is not importable.
    type: bool
    default: true
  engine:
    description: Whose C(*_NCCL_SO_PATH) variable decides the load.
    type: str
    choices: [vllm, sglang, none]
    default: vllm
  expected_path:
    description:
      - Fail unless this library (compared by real path) answers for the engine (RV(path))
        and, where the rest of the process binds to a libnccl (RV(bound_path), torch's own
        NCCL calls), it is this one too.
    type: path
  expected_version:
    description: Fail unless ncclGetVersion reports this release (C(2.29.7) or C(2.29.7-1)).
    type: str
  cuobjdump:
    description:
      - Path to C(cuobjdump). When given, the SM archs of the library's cubins are listed
        with C(cuobjdump --list-elf) and returned as RV(elf_archs).
    type: path
  expected_arch:
    description: Fail unless the library holds a cubin for this arch (needs O(cuobjdump)).
    type: str
  timeout:
    description: Seconds the probe may take (importing torch is the slow part).
    type: int
    default: 120
extends_documentation_fragment:
  - llmfleet.cluster.attributes.read_only
notes:
  - Linux with glibc only (uses C(/proc/self/maps) and C(dladdr)).
"""

EXAMPLES = r"""
- name: Check that the engine would load the sm_121 build
  llmfleet.cluster.nccl_check:
    engine_env: "{{ nccl_env | combine({'LD_PRELOAD': engine_ld_preload | default('')}) }}"
    python: /opt/llmfleet/venv/bin/python
    expected_path: "{{ nccl_library }}"
    expected_version: "{{ nccl_version }}"

- name: Which NCCL does this env file give?
  llmfleet.cluster.nccl_check:
    env_files: [/etc/llmfleet/engine.env]
  register: nccl
"""

RETURN = r"""
path:
  description: Real path of the library whose ncclGetVersion answered for the engine.
  returned: success
  type: str
  sample: /opt/llmfleet/nccl/2.29.7-1-sm_121/lib/libnccl.so.2.29.7
version:
  description: ncclGetVersion's value.
  returned: success
  type: int
  sample: 22907
version_string:
  description: RV(version) as X.Y.Z.
  returned: success
  type: str
  sample: 2.29.7
bound_path:
  description: >-
    Real path of the libnccl the rest of the engine process (torch's own NCCL calls) binds
    to: a libnccl in the global scope (LD_PRELOAD, RTLD_GLOBAL loads), else the one torch
    loaded under the soname libnccl.so.2. Null when neither exists (for instance no torch).
  returned: success
  type: str
bound_version_string:
  description: ncclGetVersion of RV(bound_path) as X.Y.Z.
  returned: when RV(bound_path) is not null
  type: str
loaded:
  description: >-
    Real paths of every libnccl mapped into the probe process. One that is neither RV(path)
    nor RV(bound_path) is mapped but unused, and only warned about.
  returned: success
  type: list
  elements: str
predicted:
  description: >-
    The load predicted from the environment alone: C(path), C(source) (which rule chose
    it), C(preloaded) (libnccl entries from LD_PRELOAD and /etc/ld.so.preload) and
    C(searched) (candidates tried).
  returned: always
  type: dict
load_name:
  description: What the probe handed to dlopen (the C(*_NCCL_SO_PATH) value or the soname).
  returned: always
  type: str
  sample: libnccl.so.2
wheel_libraries:
  description: libnccl files of pip wheels (nvidia-nccl-cu*, torch) on the interpreter's sys.path.
  returned: always
  type: list
  elements: str
torch_version:
  description: Version of the torch imported by the probe, or null.
  returned: always
  type: str
torch_reported_version:
  description: torch.cuda.nccl.version() as a string; not necessarily the loaded library.
  returned: when torch was imported and answered
  type: str
elf_archs:
  description: SM archs of the library's cubins (from cuobjdump --list-elf).
  returned: when O(cuobjdump) is given
  type: list
  elements: str
  sample: [sm_121]
engine_env:
  description: The load-relevant variables the probe ran with.
  returned: always
  type: dict
"""

import glob
import json
import os
import platform
import sys

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.llmfleet.cluster.plugins.module_utils import nccl as nccl_utils

# Runs in the engine's interpreter, which may lack Ansible: standard library only.
PROBE = r"""
import ctypes, ctypes.util, json, os, sys
out = {"sys_path": [p for p in sys.path if p]}
if sys.argv[2] == "1":
    try:
        import torch
        out["torch_version"] = str(getattr(torch, "__version__", "unknown"))
        try:
            v = torch.cuda.nccl.version()
            out["torch_reported_version"] = ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)
        except Exception as e:
            out["torch_reported_error"] = "%s: %s" % (type(e).__name__, e)
    except Exception as e:
        out["torch_error"] = "%s: %s" % (type(e).__name__, e)


class DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


try:
    dladdr = ctypes.CDLL(None).dladdr
except AttributeError:
    dladdr = ctypes.CDLL(ctypes.util.find_library("dl")).dladdr


def call(fn, key):
    code = ctypes.c_int(0)
    out[key + "rc"] = fn(ctypes.byref(code))
    out[key + "version"] = code.value
    info = DlInfo()
    if dladdr(ctypes.cast(fn, ctypes.c_void_p), ctypes.byref(info)) and info.dli_fname:
        out[key + "answered_by"] = info.dli_fname.decode()


# What the rest of the process (torch's own NCCL calls) binds to, looked up before this probe
# loads anything: a libnccl in the global scope (LD_PRELOAD, RTLD_GLOBAL) interposes on
# everyone; otherwise the object already loaded under the soname, i.e. torch's dependency.
try:
    call(ctypes.CDLL(None).ncclGetVersion, "bound_")
    out["bound_how"] = "global"
except AttributeError:
    try:
        call(ctypes.CDLL("libnccl.so.2", mode=os.RTLD_NOLOAD | os.RTLD_LAZY).ncclGetVersion, "bound_")
        out["bound_how"] = "soname"
    except (OSError, AttributeError):
        pass
# What the engine's pynccl does: dlopen the *_NCCL_SO_PATH or the soname, call through the handle.
try:
    call(ctypes.CDLL(sys.argv[1]).ncclGetVersion, "")
except (OSError, AttributeError) as e:
    out["error"] = "%s: %s" % (type(e).__name__, e)
with open("/proc/self/maps") as f:
    out["maps"] = f.read()
sys.stdout.write("\n@@NCCL_CHECK@@" + json.dumps(out) + "\n")
"""
MARKER = "@@NCCL_CHECK@@"
BOUND_HOW = {"global": "the global scope",
             "soname": "the libnccl.so.2 torch loaded as its dependency"}
LOAD_VARS = ("LD_LIBRARY_PATH", "LD_PRELOAD", "VLLM_NCCL_SO_PATH", "SGLANG_NCCL_SO_PATH",
             "PYTHONPATH", "CUDA_VISIBLE_DEVICES")


def build_env(module):
    p = module.params
    if p["inherit_environment"]:
        env = dict(os.environ)
    else:
        env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG") if k in os.environ}
        env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    for path in p["env_files"]:
        try:
            with open(path) as f:
                env.update(nccl_utils.parse_env_file(f.read()))
        except OSError as e:
            module.fail_json(msg="cannot read env file %s: %s" % (path, e))
    for key, value in p["engine_env"].items():
        if value is None:
            env.pop(key, None)
        else:
            env[str(key)] = str(value)
    return env


def read_text(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def ld_cache(module):
    ldconfig = module.get_bin_path("ldconfig", opt_dirs=["/sbin", "/usr/sbin"])
    if not ldconfig:
        return []
    rc, out, _err = module.run_command([ldconfig, "-p"], environ_update={"LC_ALL": "C"})
    return nccl_utils.parse_ldconfig_cache(out, platform.machine()) if rc == 0 else []


def wheel_libraries(sys_path):
    found = []
    for entry in sys_path:
        if not os.path.isdir(entry):
            continue
        for pattern in nccl_utils.WHEEL_LIB_GLOBS:
            for hit in sorted(glob.glob(os.path.join(entry, pattern))):
                real = os.path.realpath(hit)
                if os.path.isfile(real) and real not in found:
                    found.append(real)
    return found


def run_probe(module, python, load_name, env):
    """Run PROBE in ``python`` with exactly ``env`` (env -i), under coreutils' timeout."""
    timeout = module.params["timeout"]
    cmd = ([module.get_bin_path("timeout", required=True), str(timeout),
            module.get_bin_path("env", required=True), "-i"]
           + ["%s=%s" % kv for kv in sorted(env.items())]
           + [python, "-c", PROBE, load_name, "1" if module.params["import_torch"] else "0"])
    rc, stdout, stderr = module.run_command(cmd)
    if rc == 124:
        module.fail_json(msg="the probe did not finish in %d s" % timeout)
    if MARKER not in stdout:
        module.fail_json(msg="the probe in %s failed (rc=%d) before it could report" % (python, rc),
                         stdout=stdout[-4000:], stderr=stderr[-4000:])
    return json.loads(stdout.rsplit(MARKER, 1)[1].strip().splitlines()[0]), stderr


def main():
    module = AnsibleModule(
        argument_spec=dict(
            engine_env=dict(type="dict", default={}),
            env_files=dict(type="list", elements="path", default=[]),
            inherit_environment=dict(type="bool", default=False),
            python=dict(type="path"),
            import_torch=dict(type="bool", default=True),
            engine=dict(type="str", default="vllm", choices=["vllm", "sglang", "none"]),
            expected_path=dict(type="path"),
            expected_version=dict(type="str"),
            cuobjdump=dict(type="path"),
            expected_arch=dict(type="str"),
            timeout=dict(type="int", default=120),
        ),
        required_by={"expected_arch": ["cuobjdump"]},
        supports_check_mode=True,
    )
    p = module.params
    env = build_env(module)
    python = p["python"] or sys.executable

    so_var = nccl_utils.ENGINE_SO_PATH_VARS[p["engine"]]
    load_name = env.get(so_var) if so_var and env.get(so_var) else nccl_utils.NCCL_SONAME
    predicted = nccl_utils.resolve_nccl(
        env, os.path.isfile, ld_cache=ld_cache(module),
        system_preload=nccl_utils.split_preload(read_text("/etc/ld.so.preload")),
        engine=p["engine"])

    probe, stderr = run_probe(module, python, load_name, env)
    wheels = wheel_libraries(probe.get("sys_path", []))
    result = dict(
        changed=False,
        load_name=load_name,
        predicted=predicted,
        wheel_libraries=wheels,
        torch_version=probe.get("torch_version"),
        engine_env={k: env[k] for k in LOAD_VARS if k in env},
    )
    if "torch_reported_version" in probe:
        result["torch_reported_version"] = probe["torch_reported_version"]
    if probe.get("torch_error") and p["import_torch"]:
        result["torch_error"] = probe["torch_error"]

    if "error" in probe:
        module.fail_json(msg="could not load NCCL as the engine would (dlopen %s): %s"
                         % (load_name, probe["error"]), stderr=stderr[-4000:], **result)

    answered = probe.get("answered_by") or predicted.get("path") or load_name
    path = os.path.realpath(answered)
    bound_path = (os.path.realpath(probe["bound_answered_by"])
                  if probe.get("bound_answered_by") else None)
    loaded = [os.path.realpath(m) for m in nccl_utils.libnccl_from_maps(probe.get("maps", ""))]
    loaded = list(dict.fromkeys(loaded))
    result.update(path=path, loaded=loaded, version=probe.get("version"), bound_path=bound_path)
    if probe.get("rc") != 0:
        module.fail_json(msg="ncclGetVersion in %s returned error %s" % (path, probe.get("rc")),
                         **result)
    result["version_string"] = nccl_utils.version_code_to_string(probe["version"])
    if bound_path and probe.get("bound_rc") == 0:
        result["bound_version_string"] = nccl_utils.version_code_to_string(
            probe["bound_version"])

    if predicted.get("path") and os.path.realpath(predicted["path"]) != path:
        module.warn("the environment predicts %s (%s) but %s answered"
                    % (predicted["path"], predicted["source"], path))
    for other in loaded:
        if other not in (path, bound_path):
            module.warn("%s is mapped into the engine process but nothing binds to it" % other)
    for wheel in wheels:
        if wheel not in loaded:
            module.warn("a wheel's libnccl is on the engine's sys.path: %s; torch loads it "
                        "unless the engine's environment preloads another" % wheel)

    problems = []
    if p["cuobjdump"]:
        rc, out, err = module.run_command([p["cuobjdump"], "--list-elf", path])
        if rc != 0:
            module.fail_json(msg="cuobjdump --list-elf %s failed: %s" % (path, err.strip()),
                             **result)
        result["elf_archs"] = nccl_utils.parse_cuobjdump_list_elf(out)
        if p["expected_arch"] and p["expected_arch"] not in result["elf_archs"]:
            problems.append("%s holds no %s code (cubins: %s)" % (
                path, p["expected_arch"], ", ".join(result["elf_archs"]) or "none"))
    if p["expected_version"]:
        want = nccl_utils.version_string_to_code(p["expected_version"])
        if probe["version"] != want:
            problems.append("%s reports NCCL %s, expected %s" % (
                path, result["version_string"], nccl_utils.version_code_to_string(want)))
    if p["expected_path"]:
        problems.extend(nccl_utils.load_problems(
            os.path.realpath(p["expected_path"]), path, bound_path,
            path_source=explain(path, predicted, wheels),
            bound_source=explain(bound_path, predicted, wheels) or BOUND_HOW.get(
                probe.get("bound_how"))))
    if problems:
        module.fail_json(msg="; ".join(problems), problems=problems, **result)
    result["msg"] = "NCCL %s from %s" % (result["version_string"], path)
    module.exit_json(**result)


def explain(path, predicted, wheels):
    """Which rule put ``path`` (a real path) into the engine process, as far as known."""
    if path is None:
        return None
    for entry in predicted.get("preloaded", []):
        if os.path.realpath(entry["path"]) == path:
            return entry["source"]
    if predicted.get("path") and os.path.realpath(predicted["path"]) == path:
        return predicted.get("source")
    if path in wheels:
        return "a pip wheel loaded by torch"
    return None


if __name__ == "__main__":
    main()
