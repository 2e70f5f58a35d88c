"""The collection's packaging metadata agrees with its content and with what is tested."""
import os
import re
import subprocess

import pytest
import yaml
from packaging.requirements import Requirement

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CONTENT = ("playbooks", "roles", "plugins", "site.yml")
# collections that come with ansible-core or are this one
BUILTIN = {"ansible.builtin", "llmfleet.cluster"}


def _load(path):
    with open(os.path.join(ROOT, path)) as f:
        return yaml.safe_load(f)


def _requirements(path):
    reqs = {}
    for line in open(os.path.join(ROOT, path)):
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            req = Requirement(line)
            reqs[req.name.lower().replace("_", "-")] = req
    return reqs


def _collections_used():
    used = set()
    files = subprocess.run(["git", "ls-files", *CONTENT], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    for path in files:
        if not path.endswith((".yml", ".yaml")) or "/filter/" in path:
            continue
        for line in open(os.path.join(ROOT, path)):
            m = re.match(r"^\s*-?\s*([a-z_0-9]+\.[a-z_0-9]+)\.[a-z_0-9]+:\s*($|#)", line)
            if m:
                used.add(m.group(1))
    return used


def test_galaxy_dependencies_are_the_collections_the_content_uses():
    declared = set(_load("galaxy.yml").get("dependencies") or {})
    used = _collections_used() - BUILTIN
    assert used, "no task module of another collection found: the scan is broken"
    assert declared == used, "galaxy.yml dependencies %s, content uses %s" % (sorted(declared), sorted(used))


def test_requirements_yml_matches_galaxy_yml():
    deps = _load("galaxy.yml")["dependencies"]
    wanted = {c["name"]: c.get("version", "*") for c in _load("requirements.yml")["collections"]}
    assert wanted == deps


def test_requires_ansible_admits_the_tested_core():
    from ansible.release import __version__ as core
    from packaging.specifiers import SpecifierSet
    spec = SpecifierSet(_load("meta/runtime.yml")["requires_ansible"])
    assert core in spec, "ansible-core %s (the tested one) is outside requires_ansible %s" % (core, spec)
    tested = {re.match(r"ignore-(\d+\.\d+)\.txt", f).group(1)
              for f in os.listdir(os.path.join(ROOT, "tests/sanity")) if f.startswith("ignore-")}
    assert all(t + ".0" in spec for t in tested), (tested, spec)


def test_dev_venv_pins_satisfy_the_controller_requirements():
    """`make venv` installs requirements-dev.txt: it must give the controller what requirements.txt asks."""
    dev = _requirements("requirements-dev.txt")
    for name, req in _requirements("requirements.txt").items():
        if name == "huggingface-hub":  # deliberately absent in the test venv (see requirements-dev.txt)
            continue
        assert name in dev, "requirements.txt needs %s; requirements-dev.txt does not install it" % name
        pinned = str(dev[name].specifier).lstrip("=")
        assert pinned in req.specifier, "%s: dev pins %s, requirements.txt asks %s" % (name, pinned, req.specifier)


def test_license_matches_galaxy_and_headers_say_apache():
    assert _load("galaxy.yml")["license"] == ["Apache-2.0"]
    assert "Apache License" in open(os.path.join(ROOT, "LICENSE")).read(2000)
    files = subprocess.run(["git", "ls-files", "plugins/*.py", "roles/*.py", "roles/*.sh", "playbooks/*.py"],
                           cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    bad = [f for f in files if "SPDX-License-Identifier: Apache-2.0" not in open(os.path.join(ROOT, f)).read(600)]
    assert not bad, "files without the Apache-2.0 header: %s" % bad
    gpl = subprocess.run(["git", "grep", "-l", "General Public License", "--", "plugins", "roles", "playbooks"],
                         cwd=ROOT, capture_output=True, text=True, check=False).stdout.split()
    assert not gpl


@pytest.mark.parametrize("path", ["requirements.txt", "bindep.txt", "LICENSE", "playbooks/files/bench_serve_sweep.py"])
def test_runtime_files_are_not_build_ignored(path):
    ignored = _load("galaxy.yml")["build_ignore"]
    top = path.split("/")[0]
    assert top not in ignored and path not in ignored
