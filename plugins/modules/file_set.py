#!/usr/bin/python
# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

DOCUMENTATION = r"""
module: file_set
short_description: Make several directories and write several files in one call
version_added: 0.1.0
author: llmfleet maintainers (!UNKNOWN)
description:
  - The directories (parents first) and files of one concern - a unit and its drop-ins, a service's settings -
    in one module call instead of a M(ansible.builtin.file) or M(ansible.builtin.template) task per item,
    which is what a re-run that changes nothing spends its time on.
  - A file is rewritten (atomically, through a temporary file in its directory) only when its content differs;
    owner, group and mode are then set where they differ, as M(ansible.builtin.copy) does.
  - Render templates on the controller into O(files[].content), for example with
    C(lookup('ansible.builtin.template', 'unit.j2')).
  - The checks and decisions are C(plugins/module_utils/file_set.py) (unit tables).
  - The task changes when any directory or file changes; RV(changed_paths) says which (to tell, for example,
    a new unit from a changed drop-in). Put C(no_log) on a task whose contents are secret - it hides the diff too.
options:
  directories:
    description: Directories to make (with missing parents) or correct, in any order.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: Absolute path.
        type: path
        required: true
      owner:
        description: Owner (name or uid); unset - left as it is.
        type: str
      group:
        description: Group (name or gid); unset - left as it is.
        type: str
      mode:
        description: Mode as a quoted octal string (V("0755")); unset - left as it is.
        type: raw
  files:
    description: Files to write, each after the directories.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: Absolute path; its directory must exist or be among O(directories).
        type: path
        required: true
      content:
        description: The whole content (UTF-8).
        type: str
        required: true
      owner:
        description: Owner (name or uid); unset - left as it is (root for a new file).
        type: str
      group:
        description: Group (name or gid); unset - left as it is.
        type: str
      mode:
        description: Mode as a quoted octal string (V("0644")); unset - left as it is (umask for a new file).
        type: raw
      validate:
        description:
          - A command that checks the new content before it replaces the file, C(%s) standing for a temporary
            copy (as M(ansible.builtin.template)'s C(validate)); a non-zero exit fails the task and leaves the
            file as it was. Not run in check mode or when the content is unchanged.
        type: str
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Reports what it would make, write or correct, and changes nothing.
  diff_mode:
    support: full
    details: Shows each changed file's content and each changed directory or attribute.
  platform:
    support: full
    platforms: posix
seealso:
  - module: ansible.builtin.template
  - module: ansible.builtin.file
"""

EXAMPLES = r"""
- name: Install a unit and its drop-in
  llmfleet.cluster.file_set:
    directories:
      - {path: /etc/systemd/system/demo.service.d, owner: root, group: root, mode: "0755"}
    files:
      - path: /etc/systemd/system/demo.service
        content: "{{ lookup('ansible.builtin.template', 'demo.service.j2') }}"
        owner: root
        group: root
        mode: "0644"
      - path: /etc/systemd/system/demo.service.d/50-limits.conf
        content: "[Service]\nMemoryMax=90%\n"
        owner: root
        group: root
        mode: "0644"
  register: demo_files
  notify: Reload systemd

- name: Say what changed
  ansible.builtin.debug:
    msg: "{{ demo_files.changed_paths }}"
"""

RETURN = r"""
changed_paths:
  description: The directories and files made, written or corrected (or that would be, in check mode), in that order.
  returned: always
  type: list
  elements: str
  sample: [/etc/systemd/system/demo.service.d, /etc/systemd/system/demo.service.d/50-limits.conf]
"""

import grp
import os
import pwd
import shlex
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.llmfleet.cluster.plugins.module_utils import file_set

ENTRY = dict(path=dict(type='path', required=True), owner=dict(type='str'), group=dict(type='str'),
             mode=dict(type='raw'))


def _unknown_names(entry):
    """The owner/group names of ``entry`` this host does not know (yet)."""
    unknown = {}
    for key, lookup in (('owner', pwd.getpwnam), ('group', grp.getgrnam)):
        name = entry.get(key)
        if name and not str(name).isdigit():
            try:
                lookup(name)
            except KeyError:
                unknown[key] = name
    return unknown


def _attributes(module, entry, diffs):
    """Set owner/group/mode where they differ; whether anything did (or would, in check mode)."""
    unknown = _unknown_names(entry) if module.check_mode else {}
    if unknown:
        # check mode on a fresh host: the service user the run's earlier task would create does not
        # exist yet, so there is nothing to compare with; this path would change (it would get them)
        diffs.append({'before_header': entry['path'], 'after_header': entry['path'],
                      'before': {}, 'after': dict(unknown)})
        return True
    args = {'path': entry['path'], 'owner': entry.get('owner'), 'group': entry.get('group'),
            'mode': entry.get('mode'), 'secontext': [None, None, None], 'attributes': None}
    diff = {'before': {}, 'after': {}}
    changed = module.set_fs_attributes_if_different(args, False, diff, expand=False)
    if changed:
        diffs.append({'before_header': entry['path'], 'after_header': entry['path'],
                      'before': diff['before'], 'after': diff['after']})
    return changed


def _directory(module, entry, diffs):
    path = entry['path']
    if os.path.isdir(path):
        return _attributes(module, entry, diffs)
    if os.path.lexists(path):
        module.fail_json(msg='%s exists and is not a directory' % path)
    diffs.append({'before': {'path': path, 'state': 'absent'}, 'after': {'path': path, 'state': 'directory'}})
    if not module.check_mode:
        os.makedirs(path)
        _attributes(module, entry, [])
    return True


def _read(path):
    try:
        with open(path, 'rb') as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def _file(module, entry, diffs):
    path = entry['path']
    if os.path.isdir(path):
        module.fail_json(msg='%s is a directory, not a file' % path)
    current = _read(path)
    changed = False
    if file_set.needs_write(current, entry['content']):
        diffs.append(file_set.content_diff(path, current, entry['content']))
        changed = True
        if module.check_mode:
            # a new file's attributes come with it; an existing one's are still worth a diff
            return True if current is None else (_attributes(module, entry, diffs) or True)
        fd, tmp = tempfile.mkstemp(prefix='.file_set.', dir=os.path.dirname(path))
        try:
            with os.fdopen(fd, 'wb') as handle:
                handle.write(entry['content'].encode('utf-8'))
            if entry.get('validate'):
                argv = [arg.replace('%s', tmp) for arg in shlex.split(entry['validate'])]
                rc, out, err = module.run_command(argv)
                if rc != 0:
                    module.fail_json(msg='%s: validate %r failed (rc=%s): %s' % (path, entry['validate'], rc, (err or out)[-2000:]))
            module.atomic_move(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        _attributes(module, entry, [])
        return True
    return _attributes(module, entry, diffs) or changed


def main():
    module = AnsibleModule(
        argument_spec=dict(
            directories=dict(type='list', elements='dict', default=[], options=ENTRY),
            files=dict(type='list', elements='dict', default=[],
                       options=dict(ENTRY, content=dict(type='str', required=True), validate=dict(type='str'))),
        ),
        supports_check_mode=True,
    )
    directories, files = module.params['directories'], module.params['files']
    problems = file_set.spec_problems(directories, files)
    if problems:
        module.fail_json(msg='; '.join(problems))
    changed_paths, diffs = [], []
    try:
        for entry in file_set.directory_order(directories):
            if _directory(module, entry, diffs):
                changed_paths.append(entry['path'])
        for entry in files:
            parent = os.path.dirname(entry['path'])
            if not os.path.isdir(parent) and not (module.check_mode and parent in changed_paths):
                module.fail_json(msg='%s: its directory %s does not exist (add it to directories)' % (entry['path'], parent))
            if module.check_mode and parent in changed_paths and not os.path.isdir(parent):
                diffs.append(file_set.content_diff(entry['path'], None, entry['content']))
                changed_paths.append(entry['path'])
                continue
            if _file(module, entry, diffs):
                changed_paths.append(entry['path'])
    except OSError as exc:
        module.fail_json(msg=to_native(exc), changed_paths=changed_paths)
    result = dict(changed=bool(changed_paths), changed_paths=changed_paths)
    if module._diff:
        result['diff'] = diffs
    module.exit_json(**result)


if __name__ == '__main__':
    main()
