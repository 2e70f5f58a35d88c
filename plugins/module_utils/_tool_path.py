# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Where a host tool is (private to the fact modules that run one: gpu_info, rdma_info)."""

import os


def find_tool(module, option, name, without, opt_dirs=None):
    """The executable a module runs: the path its ``option`` names (None and a warning when that is
    not an executable file: the module then reports ``without``, what it does instead), else
    ``name`` on PATH (and ``opt_dirs``), else None."""
    path = module.params[option]
    if path:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
        module.warn('%s %s does not exist or is not executable; %s' % (option, path, without))
        return None
    return module.get_bin_path(name, opt_dirs=opt_dirs or [])
