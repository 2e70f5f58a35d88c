# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""What the file_set module decides, without I/O: whether a set of directories and files is well
formed, in which order the directories are made, whether a file's content must be written, and the
diff Ansible shows for it (the template module's before/after with the path as header)."""

import re

MODE_RE = re.compile(r'^0?[0-7]{3,4}$')


def spec_problems(directories, files):
    """Problems with the requested directories and files (empty when they are fine)."""
    problems = []
    seen = set()
    for kind, entries in (('directory', directories), ('file', files)):
        for entry in entries:
            path = entry.get('path') or ''
            if not path.startswith('/'):
                problems.append('%s %r: the path must be absolute' % (kind, path))
            if path.rstrip('/') in seen:
                problems.append('%s %r: named twice' % (kind, path))
            seen.add(path.rstrip('/'))
            if entry.get('validate') is not None and '%s' not in entry['validate']:
                problems.append('%s %r: validate %r must name the file as %%s' % (kind, path, entry['validate']))
            mode = entry.get('mode')
            # an unquoted YAML 0644 arrives as the integer 420: refuse it rather than guess
            if mode is not None and not (isinstance(mode, str) and MODE_RE.match(mode)):
                problems.append('%s %r: mode %r must be a quoted octal string such as "0644"' % (kind, path, mode))
    return problems


def directory_order(directories):
    """The directories, parents before children (then in the order given)."""
    indexed = list(enumerate(directories))
    indexed.sort(key=lambda pair: (pair[1]['path'].rstrip('/').count('/'), pair[0]))
    return [pair[1] for pair in indexed]


def needs_write(current, wanted):
    """Whether a file holding `current` (bytes; None when absent) must be rewritten to hold `wanted` (str)."""
    return current is None or current != wanted.encode('utf-8')


def content_diff(path, current, wanted):
    """The diff of one file's content, as the template module shows it (C(before) '' for a new file)."""
    return {
        'before_header': path,
        'after_header': path,
        'before': '' if current is None else current.decode('utf-8', 'replace'),
        'after': wanted,
    }
