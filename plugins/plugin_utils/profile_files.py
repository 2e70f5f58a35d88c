# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The profile files of a directory (the collection's profiles/ by default), read one way for the gate
(plugins/action/inventory_check.py, which lists every bad file) and for the plan (the serve_profile
helper of plugins/filter/serving.py, which stops at the first): a gate that read them differently
would pass a file the plan then refuses on the hosts' first play."""
import os

import yaml

from ansible_collections.llmfleet.cluster.plugins.plugin_utils import lazy_import

_profiles = lazy_import.module_utils('profiles')

PROFILES_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "profiles")
_CACHE = {}


def _load_one(path, stem):
    try:
        with open(path, encoding="utf-8") as handle:
            # libyaml's safe loader where PyYAML has it: the same data, faster
            data = yaml.load(handle, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # nosec B506
    except (OSError, ValueError, yaml.YAMLError) as exc:
        return _profiles.ProfileError(stem, f"{path}: not valid YAML: {str(exc).splitlines()[0]}")
    if not isinstance(data, dict):
        return _profiles.ProfileError(stem, f"{path}: expected a mapping (one profile per file)")
    if data.get("name", stem) != stem:
        return _profiles.ProfileError(stem, f"{path}: name '{data.get('name')}' does not match the file name '{stem}'")
    return dict(data, name=stem)


def load_profile_dir(directory=PROFILES_DIR):
    """{name: profile} of directory/*.yml|*.yaml, a file that cannot be a profile as a ProfileError
    naming file and cause; None without the directory. Read again only when a file changes."""
    if not os.path.isdir(directory):
        return None
    entries = sorted(f for f in os.listdir(directory)
                     if f.endswith((".yml", ".yaml")) and not f.startswith("."))
    key = (directory, tuple((f, os.stat(os.path.join(directory, f)).st_mtime_ns) for f in entries))
    if key not in _CACHE:
        found = {}
        for fname in entries:
            stem = fname.rsplit(".", 1)[0]
            if stem not in found:  # a.yml before a.yaml, as listed
                found[stem] = _load_one(os.path.join(directory, fname), stem)
        _CACHE.clear()
        _CACHE[key] = found
    return _CACHE[key]
