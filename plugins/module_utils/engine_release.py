# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""A release is what it installs: which python_env variant file a release selects.

The engine and device of the profile a node serves and the node's GPU arch name a variant *family*
(module_utils/serve_groups.variant_name: ``cpu``, ``sm_121``, ``sglang_cpu``); the release name
names the engine's version (``sim-vllm-0.31.0-cpu`` -> vLLM 0.31.0). Each family has a default
file, ``<family>.yml``, and may have one file per further engine version,
``<family>-<engine>-<version>.yml`` (e.g. ``cpu-vllm-0.31.0.yml``); a file's own ``release`` key
(``vllm-0.31.0``) says which version it installs, so the wheelhouse, lock and venv archive of each
(``<arch>-<release>``) stay apart.

Pure functions, no I/O: the engine_variant filter and the controller gate hand in the variant
files they read.
"""

from __future__ import annotations

import re

from ansible_collections.llmfleet.cluster.plugins.module_utils.serve_groups import variant_name

# A version after ``<engine>-`` in a release name: digits and dots, an optional pre/post/dev part,
# ended by the end of the name or a separator (``-``, ``_``, ``+``).
_VERSION = r'(\d+(?:\.\d+)*(?:(?:a|b|rc|\.post|\.dev)\d+)?)(?=$|[-_+])'


class ReleaseError(ValueError):
    """The release names an engine version that no variant file provides. ``problem`` names the
    variable, its value and the versions available, ``fix`` the way out; str() is both."""

    def __init__(self, problem, fix):
        super().__init__('%s; fix: %s' % (problem, fix))
        self.problem = problem
        self.fix = fix


def family_of(variant_file):
    """The family of a variant file stem: ``cpu-vllm-0.31.0`` -> ``cpu`` (family names hold no '-')."""
    return str(variant_file).split('-', 1)[0]


def release_version(release, engine):
    """The version of ``engine`` that a release name names (``sim-vllm-0.31.0-cpu``, ``vllm`` ->
    ``0.31.0``; ``vllm-0.32.0`` -> ``0.32.0``), or None when it names none of that engine."""
    if not isinstance(release, str) or not isinstance(engine, str) or not engine:
        return None
    match = re.search(r'(?:^|[-_.])%s-%s' % (re.escape(engine), _VERSION), release)
    return match.group(1) if match else None


def _variant_release(data):
    """A variant's ``release`` (its file data, or the release string itself)."""
    if isinstance(data, dict):
        return data.get('release')
    return data if isinstance(data, str) else None


def version_key(version):
    """Sort key of a version string: its numbers (``0.9.0`` before ``0.10.0``)."""
    return tuple(int(n) for n in re.findall(r'\d+', str(version)))


def versions_of(family, engine, variants):
    """{engine version: [variant file stems]} of one family's files (files naming no version are left out)."""
    out = {}
    for name in sorted(variants):
        if family_of(name) == family:
            version = release_version(_variant_release(variants[name]), engine)
            if version:
                out.setdefault(version, []).append(name)
    return out


def select_variant(engine, device, gpu_arch, release, variants, release_var='llmfleet_release'):
    """The variant file stem (under roles/python_env/vars/variants/) a node installs.

    engine, device, gpu_arch: the node's serving engine, its profile's device (cpu/gpu) and
    llmfleet_gpu_arch. release: the node's release name ('' or None: none set). variants:
    {file stem: the file's python_env_variant mapping (or just its release string)} of every
    variant file available. release_var names the variable the release came from, for the message.

    A release naming a version of the engine selects the family's file of that version; a release
    naming none (or no release) selects the family's default file, ``<family>``. A family with no
    file at all gives ``<family>`` (the caller reports the missing file). Raises ReleaseError when
    the release names a version that no file of the family provides, or two files do.
    """
    family = variant_name(engine, device, gpu_arch)
    if not any(family_of(name) == family for name in variants):
        return family
    by_version = versions_of(family, engine, variants)
    ordered = sorted(by_version, key=version_key)
    available = ', '.join('%s %s (%s)' % (engine, v, ', '.join(n + '.yml' for n in by_version[v])) for v in ordered)
    wanted = release_version(release, engine)
    if wanted is None:
        if family in variants:
            return family
        raise ReleaseError('%s %r names no %s version and the %s variants have no default file %s.yml (available: %s)'
                           % (release_var, release or '', engine, family, family, available or 'none'),
                           'set %s to a name holding one of these versions, e.g. site-%s-%s'
                           % (release_var, engine, ordered[-1] if ordered else '<version>'))
    names = by_version.get(wanted, [])
    if len(names) == 1:
        return names[0]
    if names:
        raise ReleaseError('%s %r names %s %s, which several %s variant files provide (%s)'
                           % (release_var, release, engine, wanted, family, ', '.join(names)),
                           'keep one file per engine version in the variants directory')
    example = release.replace('%s-%s' % (engine, wanted), '%s-%s' % (engine, ordered[-1]), 1) if ordered else ''
    raise ReleaseError('%s %r names %s %s, which no python_env variant for %s provides (available: %s)'
                       % (release_var, release, engine, wanted, family, available or 'none'),
                       'set %s to a release of an available version%s, or add the variant file %s-%s-%s.yml '
                       '(docs/upgrades.md)' % (release_var, ' (e.g. %s)' % example if example else '', family,
                                               engine, wanted))
