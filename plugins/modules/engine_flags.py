#!/usr/bin/python
# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

DOCUMENTATION = r"""
module: engine_flags
short_description: Check an engine command line against the installed engine build's own --help
version_added: 0.1.0
author: llmfleet maintainers (!UNKNOWN)
description:
  - Reads the version of the engine installed in O(venv) (C(importlib.metadata), with the venv's
    Python), then this build's C(--help) - from O(cache_dir)/C(<engine>-<version>-help.txt) when it
    is there, else by running O(help_command) once and caching its output in that file.
  - Checks O(argv) against it (C(plugins/module_utils/flagcheck.py)) - flags the build does not
    know, ambiguous abbreviations, missing values, values outside a closed choice list - and
    re-applies the profile's version O(gates). It runs in seconds, before a model load that takes
    minutes would fail on the same flag.
  - Fails, naming O(label), engine, version, profile and every refused flag, unless
    O(fail_on_error=false). Warnings (deprecated flags, abbreviations, values a plugin may
    register) are given as Ansible warnings.
options:
  argv:
    description:
      - The rendered engine command, launcher and executable included
        (C(vllm serve <model> --flag ...) or C(python -m sglang.launch_server --flag ...)).
    type: list
    elements: str
    required: true
  engine:
    description: The engine's distribution name, which its version is read from (C(vllm), C(sglang)).
    type: str
    required: true
  venv:
    description: The venv the engine is installed in; C(<venv>/bin/python) reads the version.
    type: path
    required: true
  help_command:
    description: The argv that prints every flag of the installed build (read-only; run only when not cached).
    type: list
    elements: str
    required: true
  help_environment:
    description: Extra environment of O(help_command).
    type: dict
    default: {}
  cache_dir:
    description: Directory of the cached help, one file per engine and version (created when missing, mode 0755).
    type: path
    default: /var/lib/llmfleet/cache
  profile_name:
    description: The profile that rendered O(argv), named in the failure message.
    type: str
    default: ''
  gates:
    description: "The profile's version gates, C({flag: {min_version, max_version, on_fail, reason}})."
    type: dict
    default: {}
  label:
    description: Names the host in the failure message (the inventory name); empty uses the node's hostname.
    type: str
    default: ''
  fail_on_error:
    description: Fail when the check finds errors; V(false) returns them in RV(errors) with RV(ok=false).
    type: bool
    default: true
  image:
    description:
      - Check the engine inside this container image (its ID, or a reference the node has) instead of
        on the node. The version read and O(help_command) run in a throw-away container of the image
        (C(--rm), the host's network as the engine unit has it, O(help_environment) passed by name, this process's open-files and
        process limits, podman's C(--cgroups disabled) as the engine unit has it), each with its first
        word as the entrypoint, so the image's own entrypoint script prints nothing into them.
      - The cache file then also names the image's short ID, C(<engine>-<version>-<id>-help.txt), as two
        images of one version may be built differently.
      - An image the node does not have yet, or a container engine it has not installed yet, is not
        checked in check mode (a run would install, pull or build first); outside check mode it fails.
    type: str
  container_engine:
    description: The container engine that runs O(image).
    type: str
    choices: [podman, docker]
    default: podman
  python:
    description:
      - The interpreter that reads the engine version; default C(<venv>/bin/python). With O(image),
        the interpreter inside the image (C(python3) on the PATH of most engine images).
    type: str
extends_documentation_fragment:
  - llmfleet.cluster.attributes.read_cached
  - llmfleet.cluster.attributes.read_only
notes:
  - Runs as the user that may write O(cache_dir) (root under become); the cache file is mode 0644.
  - With O(image) the engine's version and help are the image's, whatever the node's venv holds, so an
    image named by digest in the inventory is checked against its own build.
  - A cache file is never rewritten; a new engine version gets a new file.
"""

EXAMPLES = r"""
- name: Check the engine flags against this build
  llmfleet.cluster.engine_flags:
    argv: [/opt/llmfleet/venvs/current/bin/vllm, serve, /opt/llmfleet/models/tiny-llama, --max-model-len, "512"]
    engine: vllm
    venv: /opt/llmfleet/venvs/current
    help_command: [/opt/llmfleet/venvs/current/bin/vllm, serve, --help=all]
    help_environment: {VLLM_NO_USAGE_STATS: "1", HOME: /root}
    profile_name: sim-tiny-llama
    gates: {--swap-space: {max_version: "0.17", reason: removed in vLLM 0.18}}
    label: "{{ inventory_hostname }}"

- name: Only report (the caller decides)
  llmfleet.cluster.engine_flags:
    argv: [/opt/llmfleet/venvs/current/bin/python, -m, sglang.launch_server, --tp, "2"]
    engine: sglang
    venv: /opt/llmfleet/venvs/current
    help_command: [/opt/llmfleet/venvs/current/bin/python, -m, sglang.launch_server, --help]
    fail_on_error: false
  register: flags

- name: Check a pinned NGC image's own build (the engine on the image's PATH)
  llmfleet.cluster.engine_flags:
    argv: [vllm, serve, /opt/llmfleet/models/llama-70b, --tensor-parallel-size, "2"]
    engine: vllm
    venv: /opt/llmfleet/venvs/current
    image: sha256:1f0e5c4a9b2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f
    container_engine: docker
    python: python3
    help_command: [vllm, serve, --help=all]
"""

RETURN = r"""
ok:
  description: Whether the build accepts O(argv) and the gates pass.
  returned: always
  type: bool
  sample: true
errors:
  description: What the engine would refuse, each naming engine, version and flag.
  returned: always
  type: list
  elements: str
  sample: ["vllm 0.32.0: unknown flag --swap-space: this build's --help does not list it"]
flag_warnings:
  description: What the engine accepts but should not be relied on (also given as Ansible warnings).
  returned: always
  type: list
  elements: str
  sample: ["vllm 0.32.0: --max-model is an abbreviation of --max-model-len; spell it out (a new flag sharing the prefix breaks it)"]
flags:
  description: The canonical spelling of every flag in O(argv), in order.
  returned: always
  type: list
  elements: str
  sample: [--served-model-name, --tensor-parallel-size]
version:
  description: The installed engine version.
  returned: always
  type: str
  sample: 0.32.0+cpu
help_cache:
  description: The cache file of this build's help (empty when an image was not checked).
  returned: always
  type: str
  sample: /var/lib/llmfleet/cache/vllm-0.32.0+cpu-help.txt
checked:
  description: Whether the check ran (false only in check mode, for an image or container engine the node does not have yet).
  returned: always
  type: bool
  sample: true
cached:
  description: Whether the help came from the cache (false - O(help_command) ran).
  returned: always
  type: bool
  sample: true
msg:
  description: The failure message, or one line saying how many flags the build knows, and its warnings.
  returned: always
  type: str
  sample: 13 flags known to vllm 0.32.0+cpu
"""

import os
import re
import resource
import socket
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.llmfleet.cluster.plugins.module_utils import flagcheck

# The engine's name comes in as an argument, never as code.
_VERSION_CODE = "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))"


def _tail(text, lines=20):
    return "\n".join((text or "").strip().splitlines()[-lines:])


def _in_image(container, command, env_names=()):
    """``command`` in a throw-away container of the image: its first word as the entrypoint (an
    image's own entrypoint script may print a banner into stdout), env passed by name, the host's
    network as the engine unit has it (a node that runs in a container may not make a network namespace:
    crun cannot set a new one's sysctls on a read-only /proc/sys).
    The open-files and process limits are this process's own: the engine's defaults may be above a
    container host's hard limits, which its runtime may not raise to (crun's setrlimit EPERM); podman
    runs it in this process's cgroup, as the engine unit does (a node that cannot make cgroups)."""
    out = [container["engine"], "run", "--rm", "--network", "host"]
    if os.path.basename(container["engine"]).startswith("podman"):
        out += ["--cgroups", "disabled"]
    for name, limit in (("nofile", resource.RLIMIT_NOFILE), ("nproc", resource.RLIMIT_NPROC)):
        soft, hard = resource.getrlimit(limit)
        if resource.RLIM_INFINITY not in (soft, hard):
            out += ["--ulimit", "%s=%d:%d" % (name, soft, hard)]
    for name in env_names:
        out += ["--env", name]
    return out + ["--entrypoint", command[0], container["image"]] + list(command[1:])


def _image_id(module, container):
    """The image's full ID on this node, or None when the node does not have it."""
    rc, out, _err = module.run_command([container["engine"], "image", "inspect", "--format", "{{.Id}}",
                                        container["image"]])
    image_id = (out or "").strip().split("\n")[0].replace("sha256:", "")
    return image_id if rc == 0 and re.match(r"^[0-9a-f]{12,64}$", image_id) else None


def _read_version(module, label, python, engine, container=None):
    command = [python, "-c", _VERSION_CODE, engine]
    rc, out, err = module.run_command(_in_image(container, command) if container else command)
    version = (out or "").strip()
    if rc != 0 or not version:
        where = " in image %s" % container["image"] if container else ""
        module.fail_json(msg="%s: cannot read the installed %s version with %s%s (rc %d): %s"
                             % (label, engine, python, where, rc, _tail(err or out, 5)), rc=rc)
    return version


def _run_help(module, label, command, environment, container=None):
    if container:
        command = _in_image(container, command, sorted(environment))
    rc, out, err = module.run_command(command, environ_update=environment)
    if rc != 0:
        module.fail_json(msg="%s: `%s` failed (rc %d): %s" % (label, " ".join(command), rc, _tail(err or out)),
                         rc=rc)
    return out


def _write_cache(module, path, text):
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
        os.chmod(directory, 0o755)  # makedirs' mode is filtered by the umask
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
    except Exception:
        os.unlink(tmp)
        raise
    module.atomic_move(tmp, path)
    os.chmod(path, 0o644)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            argv=dict(type="list", elements="str", required=True),
            engine=dict(type="str", required=True),
            venv=dict(type="path", required=True),
            help_command=dict(type="list", elements="str", required=True),
            help_environment=dict(type="dict", default={}),
            cache_dir=dict(type="path", default="/var/lib/llmfleet/cache"),
            profile_name=dict(type="str", default=""),
            gates=dict(type="dict", default={}),
            label=dict(type="str", default=""),
            fail_on_error=dict(type="bool", default=True),
            image=dict(type="str"),
            container_engine=dict(type="str", choices=["podman", "docker"], default="podman"),
            python=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    label = p["label"] or socket.gethostname()
    engine = p["engine"]
    python = p["python"] or os.path.join(p["venv"], "bin", "python")

    container, image_id = None, None
    if p["image"]:
        container = {"engine": p["container_engine"], "image": p["image"]}
        if not module.get_bin_path(p["container_engine"]):
            # in check mode the role's install of the engine only reported it would install it
            if module.check_mode:
                module.exit_json(changed=False, checked=False, ok=True, errors=[], flag_warnings=[], flags=[],
                                 version="", help_cache="", cached=False,
                                 msg="%s: %s is not installed yet: image %s is checked once a run has installed "
                                     "it and pulled or built the image" % (label, p["container_engine"], p["image"]))
            module.fail_json(msg="%s: %s is not installed: install it before the flag check of image %s"
                                 % (label, p["container_engine"], p["image"]), checked=False)
        image_id = _image_id(module, container)
        if image_id is None:
            if module.check_mode:
                module.exit_json(changed=False, checked=False, ok=True, errors=[], flag_warnings=[], flags=[],
                                 version="", help_cache="", cached=False,
                                 msg="%s: image %s is not on this node yet: its flags are checked once a run "
                                     "has pulled or built it" % (label, p["image"]))
            module.fail_json(msg="%s: image %s is not on this node (%s image inspect): pull or build it before "
                                 "the flag check" % (label, p["image"], p["container_engine"]), checked=False)
        container["image"] = image_id

    version = _read_version(module, label, python, engine, container)
    try:
        path = os.path.join(p["cache_dir"], flagcheck.help_cache_name(engine, version, image_id))
    except ValueError as exc:
        module.fail_json(msg="%s: %s" % (label, to_native(exc)), version=version)
    result = dict(changed=False, checked=True, version=version, help_cache=path, cached=os.path.isfile(path))

    if result["cached"]:
        with open(path, encoding="utf-8", errors="replace") as handle:
            help_text = handle.read()
    else:
        help_text = flagcheck.cache_text(_run_help(module, label, p["help_command"],
                                                   {k: str(v) for k, v in p["help_environment"].items()},
                                                   container))
        result["changed"] = True
        if module._diff:
            result["diff"] = dict(before={"path": path, "state": "absent"}, after={"path": path, "state": "file"})
        if not module.check_mode:
            try:
                _write_cache(module, path, help_text)
            except OSError as exc:
                module.fail_json(msg="%s: cannot cache the help of %s %s in %s: %s"
                                     % (label, engine, version, path, to_native(exc)), **result)

    check = flagcheck.check(p["argv"], help_text, engine, version, {"gates": p["gates"]})
    # "warnings" is Ansible's own result key (exit_json(warnings=...) is deprecated in ansible-core
    # 2.19): the engine's warnings are returned as flag_warnings and given through module.warn()
    result.update({("flag_warnings" if k == "warnings" else k): v for k, v in check.items()})
    for warning in check["warnings"]:
        module.warn(warning)
    if not check["ok"]:
        result["msg"] = flagcheck.refusal_message(label, engine, version, p["profile_name"], check["errors"])
        if p["fail_on_error"]:
            module.fail_json(**result)
    else:
        result["msg"] = flagcheck.summary_message(engine, version, check)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
