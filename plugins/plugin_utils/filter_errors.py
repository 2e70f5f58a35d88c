# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Controller-side: the module_utils' own errors, raised in a filter, as AnsibleFilterError."""

from ansible.errors import AnsibleFilterError


def reraise_as_filter_error(*errors):
    """A decorator for filter functions: an exception named in ``errors`` becomes AnsibleFilterError
    with its message (Ansible then reports the message, not a traceback).

    ``errors`` are (module, class name) pairs, the module a lazy_import.module_utils one: the class is
    looked up only when an exception reaches the filter, so decorating imports nothing."""
    def decorate(func):
        def wrapper(*args, **kwargs):
            try:
                return func(*args, **kwargs)
            except Exception as exc:  # pylint: disable=broad-exception-caught
                # the classes are read only now (see above); any other exception goes on as it was
                if not isinstance(exc, tuple(getattr(module, name) for module, name in errors)):
                    raise
                raise AnsibleFilterError(str(exc)) from exc
        wrapper.__name__ = func.__name__
        wrapper.__doc__ = func.__doc__
        return wrapper
    return decorate
