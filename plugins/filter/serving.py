# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Serving filters: profiles, engine command, flag check (and, for tests, a profile's layout and memory fit).

Documentation of each filter lives beside this file in <filter_name>.yml (ansible-doc -t filter).
The computation is in plugins/module_utils/{profiles,planner,memfit,flagcheck}.py; this file only
reads the profile files (plugins/plugin_utils/profile_files.py) and adapts errors.
"""
from ansible.errors import AnsibleFilterError

from ansible_collections.llmfleet.cluster.plugins.plugin_utils.plain_data import plain
from ansible_collections.llmfleet.cluster.plugins.plugin_utils import lazy_import
from ansible_collections.llmfleet.cluster.plugins.plugin_utils.filter_errors import reraise_as_filter_error
from ansible_collections.llmfleet.cluster.plugins.plugin_utils.profile_files import PROFILES_DIR, load_profile_dir

_flagcheck = lazy_import.module_utils('flagcheck')
_memfit = lazy_import.module_utils('memfit')
_planner = lazy_import.module_utils('planner')
_profiles = lazy_import.module_utils('profiles')

_plain = plain  # Ansible hands in lazy/tagged containers; module_utils want plain Python


def load_shipped(profiles_dir=PROFILES_DIR):
    """{name: profile} from profiles_dir/*.yml (plugin_utils/profile_files.py, as the gate reads them);
    the first file that cannot be a profile stops here."""
    found = load_profile_dir(profiles_dir)
    if found is None:
        raise AnsibleFilterError(f"{profiles_dir}: no such profiles directory")
    for data in found.values():
        if isinstance(data, _profiles.ProfileError):
            raise AnsibleFilterError(str(data))
    return found


_catch = reraise_as_filter_error((_profiles, 'ProfileError'), (_planner, 'PlanError'), (_memfit, 'MemFitError'))


def _profile_arg(profile, extras=None):
    if isinstance(profile, str):
        return serve_profile(profile, extras)
    if not isinstance(profile, dict):
        raise AnsibleFilterError(f"expected a profile name or a resolved profile, got {type(profile).__name__}")
    return _plain(profile)


@_catch
def serve_profile(name, extras=None, profiles_dir=None):
    """Resolve profile `name` (shipped profiles merged with inventory extras), validated. Not a filter:
    the roles read the resolved profile from the cluster plan; the tests resolve shipped profiles
    through it."""
    catalogue = _profiles.merge_catalogues(load_shipped(profiles_dir or PROFILES_DIR), _plain(extras or {}))
    return _profiles.resolve_profile(catalogue, str(name))


@_catch
def serve_plan(profile, hosts, overrides=None, model_config=None, extras=None):
    """Parallel layout of `profile` (a name or a resolved profile) on the serving group `hosts` (rank 0
    first). Not a filter: the roles read the layout from the cluster plan (llmfleet_plan.serve.layout);
    the tests plan shipped profiles through it."""
    prof = _profile_arg(profile, extras)
    return _planner.plan(prof, _plain(hosts), _plain(overrides or {}), _plain(model_config) if model_config else None)


@_catch
def serve_command(profile, plan=None, node_rank=0, engine_version=None, overrides=None,
                  master_addr=None, port=None, host=None, api_key_env=None, master_port=None,
                  files_dir=None, executable=None, headless=None, extras=None, launcher=None):
    """argv list that starts `profile` on node `node_rank` of `plan` (port, host and files_dir: the
    profiles module's defaults when left out)."""
    prof = _profile_arg(profile, extras)
    port = _profiles.DEFAULT_PORT if port is None else port
    host = _profiles.DEFAULT_HOST if host is None else host
    files_dir = _profiles.DEFAULT_FILES_DIR if files_dir is None else files_dir
    plan = _plain(plan or {})
    merged = {k: plan[k] for k in _profiles.STRUCTURAL_OVERRIDES if plan.get(k) is not None}
    merged.update(_plain(overrides or {}))
    return _profiles.render_command(
        prof, engine_version=engine_version, overrides=merged, node_rank=int(node_rank),
        nnodes=int(plan.get("nnodes", 1)), master_addr=master_addr, headless=headless, port=port,
        host=host, api_key_env=api_key_env, master_port=master_port, files_dir=files_dir,
        executable=executable, launcher=launcher)


@_catch
def memory_fit(profile, plan=None, node_memory_gib=121.7, model_config=None, overrides=None,
               concurrency=1, extras=None, env=None, **knobs):
    """Memory estimate and verdict (fit | warn | refuse) for `profile` (a name or a resolved profile) split as
    `plan`. Not a filter: the serve role checks on the node with the module llmfleet.cluster.memory_fit and
    the gate on the controller; the tests estimate shipped profiles through it."""
    return _memfit.profile_fit(_profile_arg(profile, extras), _plain(plan or {}), node_memory_gib,
                               _plain(model_config) if model_config else None, _plain(overrides or {}),
                               concurrency, _plain(env or {}), **_plain(knobs))


@_catch
def flag_check(argv, help_text, engine, engine_version=None, profile=None, extras=None):
    """Check a rendered argv against the engine build's --help output. Not a filter: the serve role
    checks with the module llmfleet.cluster.engine_flags (help cached per release) and the gate on the
    controller; the tests check rendered commands through it."""
    prof = _profile_arg(profile, extras) if profile else None
    return _flagcheck.check([str(a) for a in _plain(argv)], str(help_text), str(engine),
                            str(engine_version) if engine_version else None, prof)


class FilterModule:
    """llmfleet.cluster serving filters."""

    def filters(self):
        return {
            "serve_command": serve_command,
        }
