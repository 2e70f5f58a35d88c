# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Action plugin llmfleet.cluster.inventory_check: controller-side preflight of the inventory.

Runs entirely on the controller from ``hostvars`` and ``groups``: no module is executed and no
host is contacted. The checks themselves are pure functions in
``plugin_utils/inventory_checks.py``; this file only extracts plain data from Ansible's
variables, reads the serve profiles and writes the optional JSON report.
"""

from __future__ import annotations

import json
import os
import tempfile
import typing as t

from ansible.errors import AnsibleError
from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.action import ActionBase

from ansible_collections.llmfleet.cluster.plugins.filter.cluster_plan import plan_errors
from ansible_collections.llmfleet.cluster.plugins.plugin_utils.plain_data import plain
from ansible_collections.llmfleet.cluster.plugins.plugin_utils.profile_files import load_profile_dir
from ansible_collections.llmfleet.cluster.plugins.plugin_utils.inventory_checks import (
    ENGINES,
    KNOWN_GPU_ARCHS,
    ProfileError,
    Unevaluated,
    check_inventory,
    is_wanted_var,
)

try:
    import yaml
except ImportError:  # pragma: no cover - PyYAML ships with ansible-core
    yaml = None

COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROLES_DIR = os.path.join(COLLECTION_ROOT, "roles")
VARIANTS_DIR = os.path.join(ROLES_DIR, "python_env", "vars", "variants")
PATCHES_DIR = os.path.join(ROLES_DIR, "engine_patches", "files", "patches")
ENGINE_HELP_DIR = os.path.join(COLLECTION_ROOT, "engine_help")


def _plain(value: t.Any) -> t.Any:
    """Plain Python data from hostvars (anything unusual becomes its native string)."""
    return plain(value, to_native)


def load_yaml_dir(directory: str, member: str | None = None) -> dict[str, t.Any] | None:
    """name -> parsed YAML for each ``directory/NAME.yml`` (member None) or ``directory/NAME/member``.

    None without the directory. A file that does not parse becomes a :class:`ProfileError` naming why.
    """
    if not os.path.isdir(directory):
        return None
    out: dict[str, t.Any] = {}
    for entry in sorted(os.listdir(directory)):
        if member is None:
            name, ext = os.path.splitext(entry)
            path = os.path.join(directory, entry)
            if ext not in (".yml", ".yaml") or name.startswith(".") or name in out:
                continue
        else:
            name, path = entry, os.path.join(directory, entry, member)
            if not os.path.isfile(path):
                continue
        try:
            with open(path, encoding="utf-8") as f:
                # libyaml's safe loader where PyYAML has it: the same data, ~10x faster over the role specs
                out[name] = yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # nosec B506
        except (OSError, ValueError, getattr(yaml, "YAMLError", ValueError)) as exc:
            out[name] = ProfileError(name, to_native(exc).splitlines()[0])
    return out


def _mapping(data: t.Any) -> dict[str, t.Any]:
    return data if isinstance(data, dict) else {}


def load_role_specs(roles_dir: str) -> dict[str, dict[str, t.Any]]:
    """role -> the options of its meta/argument_specs.yml entry point ``main``."""
    return {role: _mapping(_mapping(_mapping(data).get("argument_specs")).get("main")).get("options") or {}
            for role, data in (load_yaml_dir(roles_dir, "meta/argument_specs.yml") or {}).items()}


def load_variants(variants_dir: str) -> dict[str, t.Any] | None:
    """variant name -> its python_env_variant mapping (None without the directory)."""
    found = load_yaml_dir(variants_dir)
    return None if found is None else {name: _mapping(data).get("python_env_variant") for name, data in found.items()}


def load_variant_dirs(hostvars: t.Mapping[str, t.Mapping[str, t.Any]]) -> dict[str, t.Any]:
    """llmfleet_variants_dir as the inventory sets it -> the variants read there (None without the dir)."""
    dirs = {v.get("llmfleet_variants_dir") for v in hostvars.values()}
    return {d: load_variants(os.path.expanduser(d)) for d in dirs if isinstance(d, str) and d}


def load_patches(patches_dir: str) -> dict[str, t.Any]:
    """patch id -> its patch.yml data (the engine_patches role's shipped patches)."""
    return {pid: data if isinstance(data, (dict, ProfileError)) else {}
            for pid, data in (load_yaml_dir(patches_dir, "patch.yml") or {}).items()}


def gate_inputs(role_specs: t.Mapping[str, t.Mapping[str, t.Any]]) -> set[str]:
    """The variables the gate reads besides ``llmfleet_*``: every role option, and every input of the
    cluster plan (some, such as gateway_host, are read by the plan only, for the role it feeds)."""
    from ansible_collections.llmfleet.cluster.plugins.module_utils import cluster_plan  # pure
    from ansible_collections.llmfleet.cluster.plugins.plugin_utils import gate_rules  # pure

    return {n for options in role_specs.values() for n in options} | set(cluster_plan.INPUTS) | set(gate_rules.RETIRED)


def extract_hostvars(hostvars: t.Any, hosts: t.Iterable[str],
                     also: t.Collection[str] = ()) -> dict[str, dict[str, t.Any]]:
    """host -> the variables the checks read (``llmfleet_*`` and version pins), templated.

    A variable whose template fails on the controller (it needs facts, or is undefined) becomes
    an :class:`Unevaluated` holding the raw template, which the checks report or compare raw.
    """
    out: dict[str, dict[str, t.Any]] = {}
    for host in hosts:
        hv = hostvars[host]
        raw: t.Mapping[str, t.Any] | None = None
        values: dict[str, t.Any] = {}
        for name in list(hv):
            if not (is_wanted_var(name) or name in also):
                continue
            try:
                values[name] = _plain(hv[name])
            except AnsibleError as exc:
                if raw is None:
                    raw = hostvars.raw_get(host) if hasattr(hostvars, "raw_get") else {}
                values[name] = Unevaluated(_plain((raw or {}).get(name)), to_native(exc).splitlines()[0])
        out[host] = values
    return out


def load_engine_help(directory: str) -> dict[str, str]:
    """'<engine>-<version>' -> the captured --help text of each directory/<engine>-<version>.txt."""
    out: dict[str, str] = {}
    if os.path.isdir(directory):
        for entry in sorted(os.listdir(directory)):
            if entry.endswith(".txt"):
                with open(os.path.join(directory, entry), encoding="utf-8") as handle:
                    out[entry[:-4]] = handle.read()
    return out


def write_report(path: str, report: dict[str, t.Any]) -> str:
    """Write the JSON report atomically; returns the absolute path."""
    path = os.path.abspath(os.path.expanduser(path))
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".preflight-", suffix=".json", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2, sort_keys=False)
            f.write("\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = False
    _requires_connection = False  # nothing here talks to a host

    argument_spec = {
        "report_json": {"type": "path"},
        "known_gpu_archs": {"type": "list", "elements": "str"},
        "engines": {"type": "list", "elements": "str"},
        "fail_on_problems": {"type": "bool", "default": True},
    }

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        task_vars = task_vars or {}
        _validation, args = self.validate_argument_spec(argument_spec=self.argument_spec)

        groups = {str(g): [str(h) for h in hs] for g, hs in (task_vars.get("groups") or {}).items()}
        hosts = list(dict.fromkeys(groups.get("all", [])))
        role_specs = load_role_specs(ROLES_DIR)
        hostvars = extract_hostvars(task_vars["hostvars"], hosts, gate_inputs(role_specs))

        # one source of profiles, the plan's: the collection's, and the inventory's own
        # (llmfleet_serve_profiles_extra, in hostvars), resolved alike
        report = check_inventory(
            hostvars, groups, profiles=load_profile_dir(), profiles_location="<collection>/profiles",
            known_gpu_archs=args["known_gpu_archs"] or KNOWN_GPU_ARCHS,
            engines=args["engines"] or ENGINES,
            role_specs=role_specs, variants=load_variants(VARIANTS_DIR), patches=load_patches(PATCHES_DIR),
            variant_dirs=load_variant_dirs(hostvars), engine_help=load_engine_help(ENGINE_HELP_DIR),
            # the gate ends by building the plan of every host, as the plan role will
            plan_errors=plan_errors(hosts, groups, task_vars["hostvars"]),
        )
        data = report.to_dict()
        lines = data["lines"]
        n = len(report.failures)
        result.update(changed=False, ok=report.ok, problems=n, lines=lines, checks=data["checks"])
        if args["report_json"]:
            data["hosts"] = hosts
            try:
                result["report_json"] = write_report(args["report_json"], data)
            except OSError as exc:
                result.update(failed=True, msg=f"cannot write the preflight report {args['report_json']}: {exc}")
                return result
        if report.ok:
            result["msg"] = f"inventory preflight: {len(report.checks)} checks passed"
        else:
            result["msg"] = (f"inventory preflight: {n} problem{'s' if n != 1 else ''} "
                             "(no host was contacted):\n" + "\n".join(lines))
            result["failed"] = args["fail_on_problems"]
        return result
