# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Controller-side inventory checks for preflight (issue #9): pure functions, no I/O.

``check_inventory()`` takes plain data (host -> variables, group -> hosts, the serve
profiles already read from disk) and returns a :class:`Report`: one :class:`CheckResult`
per check, each holding :class:`Finding` objects. A finding names the host(s), the
variable, its value and the fix, and renders as one line::

    spark2: llmfleet_fabric_ip '10.0.0.25' duplicates spark1's; give each host its own ...

The action plugin ``llmfleet.cluster.inventory_check`` feeds it from ``hostvars``/``groups``;
unit tests feed it plain dicts.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import re
import typing as t

from ansible_collections.llmfleet.cluster.plugins.module_utils import platforms as _platforms
from ansible_collections.llmfleet.cluster.plugins.module_utils import profiles as _profiles
from ansible_collections.llmfleet.cluster.plugins.module_utils import serve_groups as _serve_groups
from ansible_collections.llmfleet.cluster.plugins.module_utils import topology as _topology
from ansible_collections.llmfleet.cluster.plugins.module_utils.profiles import ProfileError
from ansible_collections.llmfleet.cluster.plugins.module_utils.topology import DEFAULT_CLUSTER
from ansible_collections.llmfleet.cluster.plugins.plugin_utils import gate_rules
from ansible_collections.llmfleet.cluster.plugins.plugin_utils.gate_report import (  # noqa: F401 (re-exported)
    UNSET,
    CheckResult,
    Finding,
    Report,
    Unevaluated,
    _canon,
    _jsonable,
    _names,
    _show,
)

KNOWN_GPU_ARCHS: tuple[str, ...] = ("sm_121", "sm_110", "sm_120", "sm_100", "sm_90", "sm_89", "sm_80")
ENGINES: tuple[str, ...] = _profiles.ENGINES
# Platform groups and the arch their hardware has (module_utils/platforms.py).
GROUP_ARCH: dict[str, str] = _platforms.group_arch()
GROUP_PLATFORM: dict[str, str] = {g: _platforms.PLATFORMS[g]["title"] for g in _platforms.GROUPS}

HEAD, WORKERS, SERVE = _topology.HEAD, _topology.WORKERS, _topology.SERVE
FABRIC_FIX = "give each host its own data-plane IPv4 (the QSFP address)"
PROFILE_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]*$")
EXTRAS_VAR = gate_rules.EXTRAS_VAR
GROUPS_VAR = "llmfleet_serve_groups"
# Variables the checks need as values: a template that cannot be evaluated on the controller is a
# finding of the check that owns the variable (and the variable counts as unset elsewhere).
CORE_VARS: dict[str, str] = {
    "llmfleet_cluster": "ray_head",
    "llmfleet_fabric_ip": "fabric_ip",
    "llmfleet_gpu_arch": "gpu_arch",
    "llmfleet_engine": "engine_profile",
    "llmfleet_serve_profile": "engine_profile",
    "llmfleet_tensor_parallel_size": "parallelism",
    "llmfleet_pipeline_parallel_size": "parallelism",
    "llmfleet_gpus_per_node": "parallelism",
}

# Title of each check, in report order (also the ``name`` in the JSON report).
CHECKS: dict[str, str] = {
    "ray_head": "one ray_head per cluster",
    "fabric_ip": "fabric IPs valid and unique",
    "gpu_arch": "GPU arch declared and known",
    "engine_profile": "engine and serve profile",
    "parallelism": "TP x PP matches the serving group's GPUs",
    "versions": "versions pinned identically across each serving group",
}
# The gate's last check: the cluster plan of every host, built as the plan role builds it.
PLAN_CHECK = ("plan", "the cluster plan builds")
PLAN_FIX = "fix the value it names: the cluster plan, which every role reads, refuses it"
_PLAN_VARIABLE = re.compile(r"^([a-z][a-z0-9]*(?:_[a-z0-9]+)+) ")


def is_pin_var(name: str) -> bool:
    """Variables that pin a version and must be identical across a serving group.

    ``llmfleet_release``, any ``*version*`` variable (``llmfleet_*version*``, ``*_version``,
    ``ray_node_version``, ``python_env_vllm_version``...), ``*_release`` and ``python_env_*pin*``.
    Ansible's own variables and facts (``ansible_*``) are never pins.
    """
    if name.startswith(("ansible_", "discovered_interpreter_", "facter_", "ohai_", "preflight_")):
        return False
    if name == "llmfleet_release" or name.endswith("_release") or "version" in name:
        return True
    return name.startswith("python_env_") and "pin" in name


def is_wanted_var(name: str) -> bool:
    """Variables the checks read (what the action plugin extracts from hostvars)."""
    return name.startswith("llmfleet_") or is_pin_var(name) or name in ("ansible_host", "ansible_connection")


def _int_value(value: t.Any) -> int | None:
    """A positive int from an int or a digit string (extra vars arrive as strings)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 1 else None
    if isinstance(value, str) and value.strip().isdigit():
        n = int(value.strip())
        return n if n >= 1 else None
    return None


class GateInventory(_topology.Inventory):
    """The inventory model (module_utils/topology.Inventory, the one the cluster plan places hosts with)
    read from the gate's values: a template the gate cannot evaluate counts as unset for placement (it is
    a finding of its own), and a value the plan cannot use is a finding here rather than a surprise on a
    host. It adds only what the gate reads besides membership: values, and serving groups labelled for
    messages."""

    def __init__(self, hostvars: t.Mapping[str, t.Mapping[str, t.Any]], groups: t.Mapping[str, t.Sequence[str]]):
        self.hostvars = hostvars
        placed = {h: {"llmfleet_cluster": v} for h in hostvars if (v := self.var(h, "llmfleet_cluster")) is not UNSET}
        # unit tests may hand in hostvars of hosts no group names (Ansible's `all` names every host)
        super().__init__(groups, placed, tuple(hostvars))
        self.cluster_findings = [f for f in map(self._bad_cluster, self.members) if f]
        self.group_findings: list[Finding] = []
        self._groups: dict[str, list[ServingGroup]] = {}

    def var(self, host: str, name: str) -> t.Any:
        value = (self.hostvars.get(host) or {}).get(name, UNSET)
        if name in CORE_VARS and isinstance(value, Unevaluated):
            return UNSET
        return value

    def unevaluated(self, host: str, name: str) -> bool:
        return isinstance((self.hostvars.get(host) or {}).get(name), Unevaluated)

    def _bad_cluster(self, host: str) -> Finding | None:
        value = self.var(host, "llmfleet_cluster")
        if value is UNSET or value is None or value == "":
            return None
        if isinstance(value, str) and re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]*$", value):
            return None
        return Finding(host, f"llmfleet_cluster {_show(value)} is not a cluster name",
                       "use a short name of letters, digits, '.', '_' or '-' (or leave it unset for 'default')",
                       (host,), "llmfleet_cluster", value)

    def serving_groups(self, cluster: str) -> list[ServingGroup]:
        """The cluster's serving groups, as the plan makes them (topology.Inventory.group_members): every
        group of llmfleet_serve_groups, else the one default group (serve_nodes of the cluster if any, else
        its Ray nodes). A spec the plan refuses is a finding (self.group_findings) and leaves the default
        group."""
        if cluster not in self._groups:
            self._groups[cluster] = self._plan_groups(cluster)
        return self._groups[cluster]

    def _plan_groups(self, cluster: str) -> list[ServingGroup]:
        hosts = self.in_cluster(self.members, cluster)
        default = self.serving_group(cluster)
        how = SERVE if self.in_cluster(self.serve, cluster) else f"{HEAD} + {WORKERS}"
        head = next(iter(self.in_cluster(self.head, cluster) or hosts), None)
        spec = self.var(head, GROUPS_VAR) if head else UNSET
        default_profile = self.var(head, "llmfleet_serve_profile") if head else UNSET
        if spec in (UNSET, None, {}, ""):
            return [ServingGroup(None, how, default, "llmfleet_serve_profile", default_profile)]
        try:
            members = self.group_members(cluster, spec)
        except _serve_groups.ServeGroupError as exc:
            self.group_findings.append(Finding(
                f"cluster '{cluster}'", f"{GROUPS_VAR} is refused by the plan: {exc}",
                "give each group hosts (a list) or group (an inventory group) of this cluster, each host in one group",
                tuple(hosts), GROUPS_VAR, spec))
            return [ServingGroup(None, how, default, "llmfleet_serve_profile", default_profile)]
        out = []
        for name, group_hosts in sorted(members.items()):
            key, entry, _replica, _replicas = _serve_groups.entry(spec, name)  # a replica reads its group's entry
            profile = entry.get("profile") or default_profile
            where = f"{GROUPS_VAR}.{key}.profile" if entry.get("profile") else "llmfleet_serve_profile"
            out.append(ServingGroup(name, f"{GROUPS_VAR}.{key}", group_hosts, where, profile, entry.get("release")))
        return out

    def management_addresses(self) -> dict[str, str]:
        """{ansible_host: host} of the hosts reached over SSH (the first host of an address)."""
        out: dict[str, str] = {}
        for host in self.sort(self.hostvars):
            value = self.var(host, "ansible_host")
            if isinstance(value, str) and self.var(host, "ansible_connection") != "local":
                out.setdefault(value.strip(), host)
        return out


@dataclasses.dataclass
class ServingGroup:
    """One serving group of a cluster as the gate checks it."""

    name: str | None  # the key in llmfleet_serve_groups; None for the single default group
    how: str  # how its hosts were chosen, for messages: serve_nodes, ray_head + ray_workers, llmfleet_serve_groups.x
    hosts: list[str]
    profile_var: str  # the variable that names its profile
    profile: t.Any  # the profile name (UNSET when none)
    release: t.Any = None  # the group's own release (llmfleet_serve_groups.<name>.release), if any

    def label(self, cluster: str) -> str:
        """'the serving group of cluster 'lab' (serve_nodes)' / 'serving group thors of cluster 'sim''."""
        if self.name is None:
            return f"the serving group of cluster '{cluster}' ({self.how})"
        return f"serving group {self.name} of cluster '{cluster}' ({self.how})"


# --------------------------------------------------------------------------- checks
def check_ray_head(inv: GateInventory) -> CheckResult:
    res = CheckResult("ray_head", CHECKS["ray_head"])
    res.findings += inv.cluster_findings
    if not inv.members:
        res.findings.append(Finding(
            "inventory", "no host in groups ray_head, ray_workers or serve_nodes",
            "put the head node of each cluster in group ray_head and the other nodes in ray_workers",
            variable=HEAD))
        return res
    workers = set(inv.workers)
    for host in inv.head:
        if host in workers:
            res.findings.append(Finding(
                host, "is in both ray_head and ray_workers",
                "a node is either the head or a worker: remove it from ray_workers", (host,), WORKERS))
    ray_nodes = set(inv.ray_nodes)
    for host in inv.serve:
        if host not in ray_nodes:
            res.findings.append(Finding(
                host, "is in serve_nodes but in neither ray_head nor ray_workers",
                f"serving runs over Ray: add {host} to ray_workers (cluster '{inv.cluster[host]}')",
                (host,), SERVE))
    details = []
    for cluster in inv.clusters:
        heads = inv.in_cluster(inv.head, cluster)
        others = inv.in_cluster(inv.members, cluster)
        if not heads:
            res.findings.append(Finding(
                f"cluster '{cluster}'", f"no host in group ray_head (cluster hosts: {_names(others)})",
                f"put exactly one of them in ray_head (hosts are split into clusters by llmfleet_cluster, "
                f"default '{DEFAULT_CLUSTER}')", tuple(others), HEAD, cluster))
        elif len(heads) > 1:
            res.findings.append(Finding(
                _names(heads),
                f"{len(heads)} hosts in group ray_head for cluster '{cluster}' (llmfleet_cluster)",
                "keep exactly one ray_head per cluster: move the others to ray_workers, "
                "or give each cluster its own llmfleet_cluster", tuple(heads), HEAD, cluster))
        else:
            details.append(f"{cluster}: {heads[0]}")
    res.details = "; ".join(details)
    return res


def _bad_ip_reason(text: str) -> tuple[str, str] | None:
    """(problem, fix) if ``text`` is not a usable data-plane IPv4, else None."""
    fix = "set it to the host's data-plane IPv4 (the QSFP address), e.g. 10.0.0.11"
    if "/" in text:
        try:
            ipaddress.ip_interface(text)
        except ValueError:
            return "is not an IPv4 address", fix
        return "has a prefix length", f"drop the '/{text.split('/', 1)[1]}': the address alone, e.g. '{text.split('/')[0]}'"
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return "is not an IPv4 address", fix
    if ip.version != 4:
        return "is IPv6", "the fabric (NCCL/Ray) uses IPv4: " + fix
    # Loopback is judged by the gate rule fabric_address (fine in a one-host cluster only);
    # link-local (169.254/16) is a valid direct-cable fabric (NVIDIA's two-Spark setup uses it).
    kinds = [("a multicast", ip.is_multicast), ("the unspecified", ip.is_unspecified),
             ("the broadcast", text == "255.255.255.255"), ("a reserved (240/4)", ip.is_reserved)]
    for kind, hit in kinds:
        if hit:
            return f"is {kind} address", "other nodes cannot reach it: " + fix
    return None


def check_fabric_ip(inv: GateInventory) -> CheckResult:
    res = CheckResult("fabric_ip", CHECKS["fabric_ip"])
    members = set(inv.members)
    seen: dict[str, str] = {}
    mgmt = inv.management_addresses()
    checked = 0
    for host in inv.sort(set(inv.hostvars) | members):
        value = inv.var(host, "llmfleet_fabric_ip")
        if value is UNSET or value is None or value == "":
            if host in members and not inv.unevaluated(host, "llmfleet_fabric_ip"):
                res.findings.append(Finding(
                    host, "llmfleet_fabric_ip is not set",
                    f"set it to {host}'s data-plane IPv4 (the QSFP address), e.g. in host_vars/{host}.yml",
                    (host,), "llmfleet_fabric_ip", None if value is UNSET else value))
            continue
        text = value.strip() if isinstance(value, str) else str(value)
        if not isinstance(value, str):
            bad: tuple[str, str] | None = ("is not a string", "quote the IPv4 address")
        elif text != value:
            bad = ("has spaces around it", f"write it as '{text}' (other roles use the value as is)")
        else:
            bad = _bad_ip_reason(text)
        if bad:
            res.findings.append(Finding(
                host, f"llmfleet_fabric_ip {_show(value)} {bad[0]}", bad[1], (host,), "llmfleet_fabric_ip", value))
            continue
        checked += 1
        owner = mgmt.get(text)
        if owner not in (None, host):
            # the cause, not the symptom (its subnet differs from the fabric's, or it duplicates owner's)
            res.findings.append(Finding(
                host, f"llmfleet_fabric_ip '{text}' is {owner}'s management address (ansible_host): the fabric "
                f"role would put {owner}'s address on {host}'s fabric NIC", f"set it to {host}'s own data-plane "
                "IPv4 (the QSFP address)", (host, owner), "llmfleet_fabric_ip", text))
            continue
        if text in seen:
            first = seen[text]
            res.findings.append(Finding(
                host, f"llmfleet_fabric_ip '{text}' duplicates {first}'s", FABRIC_FIX,
                (host, first), "llmfleet_fabric_ip", text))
        else:
            seen[text] = host
    res.details = f"{checked} host{'s' if checked != 1 else ''}"
    return res


def check_gpu_arch(inv: GateInventory, known: t.Sequence[str]) -> CheckResult:
    res = CheckResult("gpu_arch", CHECKS["gpu_arch"])
    platform_groups = {g: set(inv.groups.get(g) or []) for g in GROUP_ARCH}
    hosts = inv.sort(set(inv.members).union(*platform_groups.values()))
    by_arch: dict[str, list[str]] = {}
    known_list = ", ".join(known)
    for host in hosts:
        in_groups = [g for g, members in platform_groups.items() if host in members]
        if len(in_groups) > 1:
            res.findings.append(Finding(
                host, f"is in groups {' and '.join(in_groups)}",
                "a host is one platform: remove it from all but one of them", (host,), "group_names",
                in_groups))
        expected = GROUP_ARCH[in_groups[0]] if len(in_groups) == 1 else None
        value = inv.var(host, "llmfleet_gpu_arch")
        if inv.unevaluated(host, "llmfleet_gpu_arch"):
            continue
        if value is UNSET or value is None or value == "":
            where = f"group_vars/{in_groups[0]}.yml" if expected else f"host_vars/{host}.yml"
            fix = (f"set llmfleet_gpu_arch: {expected} ({where})" if expected
                   else f"set llmfleet_gpu_arch ({where}) to one of {known_list}")
            res.findings.append(Finding(host, "llmfleet_gpu_arch is not set", fix, (host,), "llmfleet_gpu_arch",
                                        None if value is UNSET else value))
            continue
        if not isinstance(value, str) or value not in known:
            hint = f" (did you mean '{value.strip().lower()}'?)" if (
                isinstance(value, str) and value.strip().lower() in known) else ""
            res.findings.append(Finding(
                host, f"llmfleet_gpu_arch {_show(value)} is not a known GPU arch{hint}",
                f"use one of {known_list} (sm_121 = GB10/DGX Spark, sm_110 = Jetson Thor)",
                (host,), "llmfleet_gpu_arch", value))
            continue
        if expected and value != expected:
            group = in_groups[0]
            res.findings.append(Finding(
                host, f"llmfleet_gpu_arch '{value}' contradicts group {group} ({GROUP_PLATFORM[group]} is {expected})",
                f"set llmfleet_gpu_arch: {expected} for {host}, or move it to the right platform group",
                (host,), "llmfleet_gpu_arch", value))
            continue
        by_arch.setdefault(value, []).append(host)
    res.details = "; ".join(f"{arch}: {_names(hs)}" for arch, hs in by_arch.items())
    return res


def _group_values(inv: GateInventory, hosts: t.Sequence[str], name: str) -> dict[str, t.Any]:
    return {h: inv.var(h, name) for h in hosts}


def _differs(values: t.Mapping[str, t.Any]) -> bool:
    return len({"\0unset" if v is UNSET else _canon(v) for v in values.values()}) > 1


def _render_values(values: t.Mapping[str, t.Any]) -> str:
    return ", ".join(f"{h}={_show(v)}" for h, v in values.items())


def _is_abstract(name: str, data: t.Any) -> bool:
    """Engine bases (``abstract: true``, by convention named ``_<engine>``) are not servable profiles."""
    return name.startswith("_") or (isinstance(data, t.Mapping) and data.get("abstract") is True)


def _shipped_mappings(profiles: t.Mapping[str, t.Any] | None) -> dict[str, t.Any]:
    return {k: dict(v, name=k) for k, v in (profiles or {}).items() if isinstance(v, t.Mapping)}


def resolve_extra(profiles: t.Mapping[str, t.Any] | None, extras: t.Mapping[str, t.Any],
                  name: str) -> tuple[t.Mapping[str, t.Any] | None, str]:
    """(resolved profile, '') for an inventory profile, read like a shipped one, or (None, why)."""
    try:
        catalogue = _profiles.merge_catalogues(_shipped_mappings(profiles), dict(extras))
        return _profiles.resolve_profile(catalogue, name), ""
    except _profiles.ProfileError as exc:
        return None, str(exc)
    except (TypeError, ValueError, KeyError, AttributeError) as exc:  # a malformed field the validator did not name
        return None, f"{type(exc).__name__}: {exc}"


def resolve_full(inv: GateInventory, host: str, profiles: t.Mapping[str, t.Any] | None) -> t.Mapping[str, t.Any] | None:
    """The host's serve profile flattened and validated as the serve role will (None if it does not)."""
    name = inv.var(host, "llmfleet_serve_profile")
    extras = inv.var(host, EXTRAS_VAR)
    if not isinstance(name, str) or profiles is None:
        return None
    data, _error = resolve_extra(profiles, extras if isinstance(extras, t.Mapping) else {}, name)
    return data


def _resolve_profile(inv: GateInventory, hosts: t.Sequence[str],
                     profiles: t.Mapping[str, t.Any] | None) -> tuple[str | None, t.Mapping[str, t.Any] | None]:
    """The serving group's profile name and data when it is consistent and loadable."""
    names = {inv.var(h, "llmfleet_serve_profile") for h in hosts} - {UNSET, None, ""}
    if len(names) != 1:
        return None, None
    name = next(iter(names))
    extras = inv.var(hosts[0], EXTRAS_VAR)
    if isinstance(name, str) and isinstance(extras, t.Mapping) and name in extras:
        return name, resolve_extra(profiles, extras, name)[0]
    if not isinstance(name, str) or profiles is None:
        return name if isinstance(name, str) else None, None
    data = profiles.get(name)
    if not isinstance(data, t.Mapping) or _is_abstract(name, data):
        return name, None
    # a shipped profile flattened like an inventory one (its extends chain and engine base), where it
    # resolves; as written where it does not (that is the engine_profile check's finding)
    return name, resolve_extra(profiles, {}, name)[0] or data


def check_engine_profile(inv: GateInventory, profiles: t.Mapping[str, t.Any] | None, profiles_location: str,
                         engines: t.Sequence[str]) -> CheckResult:
    res = CheckResult("engine_profile", CHECKS["engine_profile"])
    engine_list = ", ".join(engines)
    available = sorted(k for k, v in (profiles or {}).items() if not _is_abstract(k, v))
    unverifiable: dict[str, list[str]] = {}
    for host in inv.members:
        engine = inv.var(host, "llmfleet_engine")
        if engine is not UNSET and engine is not None and engine not in engines:
            hint = f" (did you mean '{engine.strip().lower()}'?)" if (
                isinstance(engine, str) and engine.strip().lower() in engines) else ""
            res.findings.append(Finding(
                host, f"llmfleet_engine {_show(engine)} is not a supported engine{hint}",
                f"use one of {engine_list}", (host,), "llmfleet_engine", engine))
        name = inv.var(host, "llmfleet_serve_profile")
        if name is UNSET or name is None or name == "":
            continue
        if not isinstance(name, str) or not PROFILE_NAME_RE.match(name):
            res.findings.append(Finding(
                host, f"llmfleet_serve_profile {_show(name)} is not a profile name",
                "use the file name of a profile under profiles/ without '.yml'", (host,), "llmfleet_serve_profile",
                name))
            continue
        extras = inv.var(host, EXTRAS_VAR)
        if isinstance(extras, t.Mapping) and name in extras:
            data, error = resolve_extra(profiles, extras, name)
            if error:
                res.findings.append(Finding(
                    host, f"{EXTRAS_VAR} profile '{name}' is not valid: {error}",
                    f"fix {EXTRAS_VAR}['{name}'] (the same fields as a file under profiles/)",
                    (host,), EXTRAS_VAR, name))
                continue
        elif profiles is None:
            unverifiable.setdefault(name, []).append(host)
            continue
        else:
            data = profiles.get(name)
        choose = f"use one of: {', '.join(available) or '(none defined)'}"
        fix_file = f"fix {profiles_location}/{name}.yml"
        if data is None:
            problem = (f" does not exist in {profiles_location}", choose)
        elif isinstance(data, ProfileError):
            problem = (f" cannot be read ({'; '.join(data.problems)})", fix_file)
        elif not isinstance(data, t.Mapping):
            problem = (": the profile file is not a mapping", fix_file)
        elif _is_abstract(name, data):
            problem = (" is an abstract engine base, it cannot be served", choose)
        else:
            problem = None
        if problem:
            res.findings.append(Finding(host, f"llmfleet_serve_profile '{name}'{problem[0]}", problem[1], (host,),
                                        "llmfleet_serve_profile", name))
        else:
            wanted = data.get("engine")
            allowed = [wanted] if isinstance(wanted, str) else list(wanted or []) if isinstance(wanted, list) else []
            if allowed and engine is not UNSET and engine is not None and engine not in allowed:
                res.findings.append(Finding(
                    host, f"llmfleet_engine {_show(engine)} but serve profile '{name}' is for {' or '.join(allowed)}",
                    f"set llmfleet_engine: {allowed[0]} or pick a profile for {engine}",
                    (host,), "llmfleet_engine", engine))
    for name, hosts in unverifiable.items():
        # The collection has no profiles at all (yet): cannot tell, so warn, do not fail.
        res.findings.append(Finding(
            _names(hosts), f"llmfleet_serve_profile '{name}' cannot be verified: there is no profiles directory "
            f"({profiles_location})", f"add {profiles_location}/{name}.yml, or unset llmfleet_serve_profile",
            tuple(hosts), "llmfleet_serve_profile", name, severity="warn"))
    details = []
    for cluster in inv.clusters:
        groups = inv.serving_groups(cluster)  # first: building them records the spec's findings
        res.findings += [f for f in inv.group_findings if f.subject == f"cluster '{cluster}'"]
        for group in groups:
            hosts = group.hosts
            if group.name is not None:
                res.findings += _check_group_profile(inv, cluster, group, profiles)
                details.append(f"{cluster}/{group.name}: profile '{group.profile}'")
                continue
            for name in ("llmfleet_engine", "llmfleet_serve_profile"):
                values = _group_values(inv, hosts, name)
                if _differs(values):
                    res.findings.append(Finding(
                        _names(hosts), f"{name} differs across {group.label(cluster)}: {_render_values(values)}",
                        "a serving group runs one engine and one profile: set it once for the group (group_vars)",
                        tuple(hosts), name, {h: _jsonable(v) for h, v in values.items()}))
            engines_set = {_canon(v) for v in _group_values(inv, hosts, "llmfleet_engine").values() if v is not UNSET}
            profile, _profile_data = _resolve_profile(inv, hosts, profiles)
            part = f"{cluster}: engine {next(iter(engines_set)) if len(engines_set) == 1 else 'not set'}"
            details.append(part + (f", profile '{profile}'" if profile else ", no profile"))
        res.findings += _check_group_plan(inv, cluster, profiles)
    res.details = "; ".join(details)
    return res


def group_profile(inv: GateInventory, group: ServingGroup,
                  profiles: t.Mapping[str, t.Any] | None) -> tuple[str | None, t.Mapping[str, t.Any] | None]:
    """The group's profile name and its resolved data (None where it does not resolve): a group of
    llmfleet_serve_groups resolves its profile exactly like the default group's (shipped or inventory)."""
    if group.name is None:
        return _resolve_profile(inv, group.hosts, profiles)
    if not isinstance(group.profile, str) or profiles is None:
        return None, None
    extras = inv.var(group.hosts[0], EXTRAS_VAR)
    return group.profile, resolve_extra(profiles, extras if isinstance(extras, t.Mapping) else {}, group.profile)[0]


def _check_group_profile(inv: GateInventory, cluster: str, group: ServingGroup,
                         profiles: t.Mapping[str, t.Any] | None) -> list[Finding]:
    """A named group's profile: set, a name, and resolvable (shipped or llmfleet_serve_profiles_extra)."""
    hosts = tuple(group.hosts)
    if group.profile in (UNSET, None, ""):
        return [Finding(_names(hosts), f"{group.label(cluster)} has no profile",
                        f"set profile in {GROUPS_VAR}.{group.name}, or llmfleet_serve_profile", hosts,
                        group.profile_var, None)]
    if not isinstance(group.profile, str) or not PROFILE_NAME_RE.match(group.profile):
        return [Finding(_names(hosts), f"{group.profile_var} {_show(group.profile)} is not a profile name",
                        "use the file name of a profile under profiles/ without '.yml'", hosts,
                        group.profile_var, group.profile)]
    if profiles is None:
        return []
    extras = inv.var(group.hosts[0], EXTRAS_VAR)
    _data, error = resolve_extra(profiles, extras if isinstance(extras, t.Mapping) else {}, group.profile)
    if not error:
        return []
    return [Finding(_names(hosts), f"{group.profile_var} '{group.profile}' of {group.label(cluster)} does not "
                    f"resolve: {error}", f"name a profile under profiles/ or in {EXTRAS_VAR}, and fix its fields",
                    hosts, group.profile_var, group.profile)]


def _check_group_plan(inv: GateInventory, cluster: str, profiles: t.Mapping[str, t.Any] | None) -> list[Finding]:
    """The cluster's serving groups through the plan's own function (module_utils/serve_groups.plan):
    engine, port, unit and release of each group, once every group's profile resolves."""
    groups = inv.serving_groups(cluster)
    if all(g.name is None for g in groups) or profiles is None:
        return []
    resolved = {}
    for group in groups:
        name, data = group_profile(inv, group, profiles)
        if data is None:
            return []  # its profile is a finding of its own
        resolved[name] = data
    head = groups[0].hosts[0]
    defaults = {"profile": inv.var(head, "llmfleet_serve_profile"), "port": inv.var(head, "serve_port"),
                "release": inv.var(head, "llmfleet_release")}
    defaults = {k: (None if v is UNSET else v) for k, v in defaults.items()}
    try:
        _serve_groups.plan(inv.var(head, GROUPS_VAR), inv.cluster_hosts(cluster), inv.groups,
                           inv.serving_group(cluster), resolved, defaults)
    except _serve_groups.ServeGroupError as exc:
        hosts = tuple(h for g in groups for h in g.hosts)
        return [Finding(f"cluster '{cluster}'", f"{GROUPS_VAR} is refused by the plan: {exc}",
                        "fix the group's keys as the message says (docs/serving-groups.md)", hosts, GROUPS_VAR,
                        inv.var(head, GROUPS_VAR))]
    return []


def check_parallelism(inv: GateInventory, profiles: t.Mapping[str, t.Any] | None) -> CheckResult:
    res = CheckResult("parallelism", CHECKS["parallelism"])
    details = []
    for cluster, group in ((c, g) for c in inv.clusters for g in inv.serving_groups(c)):
        how, hosts = group.how, group.hosts
        if not hosts:
            continue
        gpus, bad = 0, False
        for host in hosts:
            value = inv.var(host, "llmfleet_gpus_per_node")
            n = 1 if value is UNSET or value is None else _int_value(value)
            if n is None:
                bad = True
                res.findings.append(Finding(
                    host, f"llmfleet_gpus_per_node {_show(value)} is not a positive integer",
                    "set it to the number of GPUs the host serves with (default 1)", (host,),
                    "llmfleet_gpus_per_node", value))
            else:
                gpus += n
        profile_name, profile = group_profile(inv, group, profiles)
        sizes: dict[str, tuple[int, str]] = {}
        for short, var, key in (("TP", "llmfleet_tensor_parallel_size", "tensor_parallel_size"),
                                ("PP", "llmfleet_pipeline_parallel_size", "pipeline_parallel_size")):
            values = _group_values(inv, hosts, var)
            set_values = {h: v for h, v in values.items() if v is not UNSET and v is not None}
            if set_values:
                if _differs(values):
                    bad = True
                    res.findings.append(Finding(
                        _names(hosts), f"{var} differs across {group.label(cluster)}: "
                        f"{_render_values(values)}", "set it once for the serving group (group_vars)",
                        tuple(hosts), var, {h: _jsonable(v) for h, v in values.items()}))
                    continue
                raw = next(iter(set_values.values()))
                n = _int_value(raw)
                if n is None:
                    bad = True
                    res.findings.append(Finding(
                        _names(set_values), f"{var} {_show(raw)} is not a positive integer",
                        "set a positive integer", tuple(set_values), var, raw))
                    continue
                sizes[short] = (n, var)
            elif profile is not None and profile.get(key) is not None:
                n = _int_value(profile.get(key))
                if n is None:
                    bad = True
                    res.findings.append(Finding(
                        f"profile '{profile_name}'", f"{key} {_show(profile.get(key))} is not a positive integer",
                        f"fix profiles/{profile_name}.yml or set {var}", tuple(hosts), key, profile.get(key)))
                    continue
                sizes[short] = (n, f"profile '{profile_name}' {key}")
        if bad:
            continue
        where = cluster if group.name is None else f"{cluster}/{group.name}"
        if not sizes:
            details.append(f"{where}: no TP/PP declared, {gpus} GPU{'s' if gpus != 1 else ''}")
            continue
        tp, tp_src = sizes.get("TP", (1, "default"))
        pp, pp_src = sizes.get("PP", (1, "default"))
        if tp * pp != gpus:
            per_node = {h: inv.var(h, "llmfleet_gpus_per_node") for h in hosts}
            per_node_text = ("1 per node" if all(v is UNSET or v is None for v in per_node.values())
                             else "llmfleet_gpus_per_node " + _render_values(per_node))
            res.findings.append(Finding(
                f"cluster '{cluster}'" if group.name is None else f"cluster '{cluster}' group {group.name}",
                f"TP {tp} ({tp_src}) x PP {pp} ({pp_src}) = {tp * pp} GPU{'s' if tp * pp != 1 else ''}, but the "
                f"serving group ({how}: {_names(hosts)}) has {gpus} ({per_node_text})",
                f"make TP x PP = {gpus} (llmfleet_tensor_parallel_size / llmfleet_pipeline_parallel_size"
                f"{f' or profile {profile_name!r}' if profile_name else ''}), or resize the serving group "
                f"({SERVE} / llmfleet_gpus_per_node) to {tp * pp} GPUs",
                tuple(hosts), "llmfleet_tensor_parallel_size", {"tp": tp, "pp": pp, "gpus": gpus}))
        else:
            details.append(f"{where}: TP {tp} x PP {pp} = {gpus} GPU{'s' if gpus != 1 else ''} on {_names(hosts)}")
    res.details = "; ".join(details)
    return res


def check_versions(inv: GateInventory) -> CheckResult:
    res = CheckResult("versions", CHECKS["versions"])
    fix = "pin one value for the whole serving group (group_vars), not per host"
    details = []
    for cluster, group in ((c, g) for c in inv.clusters for g in inv.serving_groups(c)):
        hosts = group.hosts
        names = sorted({n for h in hosts for n in (inv.hostvars.get(h) or {}) if is_pin_var(n)})
        differing = 0
        for name in names:
            values = _group_values(inv, hosts, name)
            if not _differs(values):
                continue
            differing += 1
            by_value: dict[str, list[str]] = {}
            for h, v in values.items():
                by_value.setdefault("\0unset" if v is UNSET else _canon(v), []).append(h)
            ranked = sorted(by_value.values(), key=len, reverse=True)
            if len(ranked[0]) > len(ranked[1]):
                # A clear majority: name the odd hosts, one line per odd value.
                usual = values[ranked[0][0]]
                for odd in ranked[1:]:
                    res.findings.append(Finding(
                        _names(odd), f"{name} {_show(values[odd[0]])} differs from {_show(usual)} on the rest of "
                        f"{group.label(cluster)[:-1]}: {_names(ranked[0])})", fix,
                        tuple(odd), name, {h: _jsonable(values[h]) for h in hosts}))
            else:
                res.findings.append(Finding(
                    _names(hosts), f"{name} differs across {group.label(cluster)}: "
                    f"{_render_values(values)}", fix, tuple(hosts), name,
                    {h: _jsonable(v) for h, v in values.items()}))
        if not differing:
            where = cluster if group.name is None else f"{cluster}/{group.name}"
            details.append(f"{where}: {len(names)} pinned var{'s' if len(names) != 1 else ''} on {_names(hosts)}")
    res.details = "; ".join(details)
    return res


def planned_groups(inv: GateInventory, profiles: t.Mapping[str, t.Any] | None) -> list[tuple[str, ServingGroup, str, t.Any]]:
    """(cluster, group, profile name, resolved profile) of every serving group whose profile resolves."""
    out = []
    for cluster in inv.clusters:
        for group in inv.serving_groups(cluster):
            name, _raw = group_profile(inv, group, profiles)
            if not group.hosts or not isinstance(name, str) or profiles is None:
                continue
            # flattened and validated as the serve role reads it, shipped or inventory-defined alike
            extras = inv.var(group.hosts[0], EXTRAS_VAR)
            data = resolve_extra(profiles, extras if isinstance(extras, t.Mapping) else {}, name)[0]
            if isinstance(data, t.Mapping) and data.get("engine"):
                out.append((cluster, group, name, data))
    return out


def check_inventory(hostvars: t.Mapping[str, t.Mapping[str, t.Any]], groups: t.Mapping[str, t.Sequence[str]],
                    profiles: t.Mapping[str, t.Any] | None = None, profiles_location: str = "profiles",
                    known_gpu_archs: t.Sequence[str] = KNOWN_GPU_ARCHS,
                    engines: t.Sequence[str] = ENGINES,
                    role_specs: t.Mapping[str, t.Mapping[str, t.Any]] | None = None,
                    variants: t.Mapping[str, t.Any] | None = None,
                    patches: t.Mapping[str, t.Any] | None = None,
                    variant_dirs: t.Mapping[str, t.Any] | None = None,
                    engine_help: t.Mapping[str, str] | None = None,
                    plan_errors: t.Mapping[str, str] | None = None) -> Report:
    """Run every controller-side check; nothing here touches a host or the disk.

    ``hostvars``: host -> its (templated) variables; at least the ``llmfleet_*`` ones and the pins.
    ``groups``: group -> hosts, as Ansible's ``groups`` (``all`` gives the report order).
    ``profiles``: profile name -> profile mapping (or :class:`ProfileError`); None if there is no
    profiles directory at all. ``profiles_location`` names that directory in messages.
    ``engine_help``: '<engine>-<version>' -> that build's captured ``--help`` (engine_help/).
    ``plan_errors``: host -> why the cluster plan refuses it (see :func:`check_plan`).
    """
    inv = GateInventory(hostvars, groups)
    checks = [
        check_ray_head(inv),
        check_fabric_ip(inv),
        check_gpu_arch(inv, known_gpu_archs),
        check_engine_profile(inv, profiles, profiles_location, engines),
        check_parallelism(inv, profiles),
        check_versions(inv),
    ]
    # the rule table (plugin_utils/gate_rules.py): role specs and cross-host rules
    ctx = gate_rules.GateContext(inv, role_specs or {}, variants,
                                 {h: p for h in inv.members if (p := resolve_full(inv, h, profiles)) is not None},
                                 patches or {}, variant_dirs or {}, planned_groups(inv, profiles), engine_help)
    for rule in gate_rules.RULES:
        try:
            findings = list(rule.func(ctx))
        except Exception as exc:  # pylint: disable=broad-exception-caught
            # a value no rule foresaw must not hide the other rules' findings: this one fails, named
            findings = [Finding("inventory", f"the gate's rule {rule.key} could not run: {type(exc).__name__}: {exc}",
                                "report this with the inventory (plugin_utils/gate_rules.py); the other findings "
                                "stand", (), rule.key, None)]
        checks.append(CheckResult(rule.key, rule.title, findings))
    unevaluated: dict[str, list[Finding]] = {c.key: [] for c in checks}
    for host in inv.sort(hostvars):
        for name, key in CORE_VARS.items():
            value = (hostvars.get(host) or {}).get(name)
            if isinstance(value, Unevaluated):
                unevaluated[key].append(Finding(
                    host, f"{name} {_show(value)} cannot be evaluated before any host is contacted ({value.error})",
                    "set it literally in the inventory (facts are not gathered yet)", (host,), name, value))
    for check in checks:
        check.findings[:0] = unevaluated[check.key]
        check.merge_hosts()
    checks.append(check_plan(plan_errors, checks, hostvars).merge_hosts())
    return Report(checks)


def check_plan(errors: t.Mapping[str, str] | None, earlier: t.Sequence[CheckResult],
               hostvars: t.Mapping[str, t.Mapping[str, t.Any]]) -> CheckResult:
    """The plan's own refusals (``errors``: host -> the plan's message, plugins/filter/cluster_plan.py
    plan_errors) as findings, so that building the plan is part of the gate: what no check above
    foresaw still stops here, with the others, before any host is contacted. A refusal of a variable
    a check above already named (on any host: the plan refuses a cluster's value on each of its hosts,
    where a check names the host it acts on) is that finding's consequence and is left out; so is a
    refusal that names no variable, of a host a check above named. ``errors`` None: the plan was not
    built (the gate read profiles from another directory than the collection's, which the plan reads)."""
    if errors is None:
        return CheckResult(PLAN_CHECK[0], PLAN_CHECK[1], [], "not built: the gate read another profiles directory")
    failed = [f for c in earlier for f in c.findings if f.severity == "fail"]
    named_variables = {f.variable for f in failed if f.variable}
    named_hosts = {h for f in failed for h in f.hosts}
    findings = []
    for host, message in errors.items():
        text = message[len(host) + 2:] if message.startswith(host + ": ") else message
        match = _PLAN_VARIABLE.match(text)
        variable = match.group(1) if match else None
        if variable in named_variables or (variable is None and host in named_hosts):
            continue
        problem, _sep, fix = text.partition("; ")
        fix = fix[len("fix: "):] if fix.startswith("fix: ") else fix
        value = (hostvars.get(host) or {}).get(variable, UNSET) if variable else UNSET
        findings.append(Finding(host, problem, fix or PLAN_FIX, (host,), variable, None if value is UNSET else value))
    return CheckResult(PLAN_CHECK[0], PLAN_CHECK[1], findings, f"{len(hostvars)} hosts")
