# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Model distribution filters (the models role). Documentation beside this file in <name>.yml.

The computation is in plugins/module_utils/model_fetch.py; this file only adapts errors.
"""

from ansible_collections.llmfleet.cluster.plugins.plugin_utils import lazy_import
from ansible_collections.llmfleet.cluster.plugins.plugin_utils.filter_errors import reraise_as_filter_error
from ansible_collections.llmfleet.cluster.plugins.plugin_utils.plain_data import plain as _plain

_fetch = lazy_import.module_utils('model_fetch')
_node = lazy_import.module_utils('model_node_fetch')
_catch = reraise_as_filter_error((_fetch, 'FetchError'))


@_catch
def model_hf_argv(python, repo_id, local_dir, revision=None, allow_patterns=None, filename=None):
    """argv that downloads a hub repository (or one file) into local_dir; the token goes on its stdin."""
    return _fetch.hf_fetch_argv(python, repo_id, local_dir, revision or None,
                                _plain(allow_patterns) if allow_patterns else None, filename)


@_catch
def model_url_items(items):
    """models_urls normalised: dest, archive, download name; each needs a sha256."""
    return _fetch.url_items(_plain(items))


@_catch
def model_node_path(model, models_dir):
    """Node path of a profile's model: itself when a path, else models_dir/<hub id>."""
    return _fetch.model_path(model, models_dir)


@_catch
def model_file_items(files, cache_dir, files_dir, python=None):
    """A profile's files with their controller and node paths."""
    return _fetch.file_items(_plain(files), cache_dir, files_dir, python)


@_catch
def model_node_fetch_spec(mode, local_dir, repo_id=None, revision=None, allow_patterns=None, ignore_patterns=None,
                          urls=None, cache_dir=None, token_file=None, reserve_bytes=0):
    """The spec of the node-side fetch script (hf / url / hf_cache), checked."""
    return _node.node_fetch_spec(mode, local_dir, repo_id=repo_id, revision=revision or None,
                                 allow_patterns=_plain(allow_patterns) or None,
                                 ignore_patterns=_plain(ignore_patterns) or None,
                                 urls=_plain(urls) if mode == "url" else None, cache_dir=cache_dir,
                                 token_file=token_file, reserve_bytes=int(reserve_bytes or 0))


def model_node_fetch_failure(host, result, spec):
    """Host, cause and fix of a failed node-side fetch."""
    return _node.failure_message(host, _plain(result), _plain(spec))


class FilterModule:
    """llmfleet.cluster model distribution filters."""

    def filters(self):
        return {
            "model_hf_argv": model_hf_argv,
            "model_url_items": model_url_items,
            "model_node_path": model_node_path,
            "model_file_items": model_file_items,
            "model_node_fetch_spec": model_node_fetch_spec,
            "model_node_fetch_failure": model_node_fetch_failure,
        }
