# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The collection's module_utils, imported on first use: for the filter plugin files.

To find one filter by its FQCN, ansible-core's Jinja plugin loader imports every filter file of the
collection (Jinja2Loader.get_with_context walks the whole package), in each forked worker that
renders a template naming any of them, and the collection loader compiles each module it imports
from source there. With their module_utils imported at the top, every such worker compiled them all
(~250 KB: ~12 % of a no-op site.yml's controller CPU, py-spy); imported on first use, a worker
compiles only what the filters it calls need."""

import importlib

MODULE_UTILS = 'ansible_collections.llmfleet.cluster.plugins.module_utils.'


class LazyModule:
    """Stands for a module; imports it at the first attribute read."""

    def __init__(self, name):
        self.__dict__['_lazy_name'] = name
        self.__dict__['_lazy_module'] = None

    def _load(self):
        if self.__dict__['_lazy_module'] is None:
            self.__dict__['_lazy_module'] = importlib.import_module(self.__dict__['_lazy_name'])
        return self.__dict__['_lazy_module']

    def __getattr__(self, attr):
        return getattr(self._load(), attr)

    def __repr__(self):
        return '<lazy module %s>' % self.__dict__['_lazy_name']


def function(module, name):
    """`module`'s function `name` (module: a LazyModule), imported when first called: a filter file's
    FilterModule.filters() map, which the loader reads for every file, names it without importing."""
    def call(*args, **kwargs):
        return getattr(module, name)(*args, **kwargs)
    call.__name__ = name
    return call


def module_utils(name):
    """plugins/module_utils/<name>.py of this collection, imported when first used."""
    return LazyModule(MODULE_UTILS + name)
